"""The batcher both local backends put their generate calls through: calls from several
threads gather into one batch, each caller gets its own result, and a failed or
interrupted batch reaches every caller in it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agents.backends.base import BackendError
from agents.backends.batching import Batcher
from tests.conftest_x11 import wait_until


def _callers(batcher: Batcher[int, Any], requests: Sequence[int]) -> dict[int, Any]:
    """Submit `requests` from one thread each while the queue is paused, so that they all
    wait; then let them go. Each request's result, or the exception its caller got."""
    outcomes: dict[int, Any] = {}

    def call(request: int) -> None:
        try:
            outcomes[request] = batcher.submit(request)
        except BaseException as exc:  # what each caller got, checked by the test
            outcomes[request] = exc

    threads = [threading.Thread(target=call, args=(r,)) for r in requests]
    with batcher.paused():
        for thread in threads:
            thread.start()
        wait_until(lambda: batcher.waiting == len(requests), message="every call to queue")
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    return outcomes


def _recording(run: Callable[[list[int]], list[Any]]) -> tuple[list[list[int]],
                                                              Callable[[list[int]], list[Any]]]:
    batches: list[list[int]] = []

    def record(requests: list[int]) -> list[Any]:
        batches.append(list(requests))
        return run(requests)

    return batches, record


def test_calls_from_several_threads_run_as_one_batch_each_with_its_own_result() -> None:
    batches, run = _recording(lambda requests: [r * 10 for r in requests])
    batcher: Batcher[int, Any] = Batcher(run, what="test generate")
    assert _callers(batcher, [1, 2, 3, 4]) == {1: 10, 2: 20, 3: 30, 4: 40}
    assert len(batches) == batcher.batches == 1 and sorted(batches[0]) == [1, 2, 3, 4]
    assert batcher.submit(5) == 50  # a call that finds the queue free goes at once
    assert batches[-1] == [5]


def test_select_leaves_the_others_for_the_next_batch() -> None:
    batches, run = _recording(lambda requests: [-r for r in requests])

    def same_parity(waiting: Sequence[int]) -> list[int]:
        return [i for i, r in enumerate(waiting) if r % 2 == waiting[0] % 2]

    batcher: Batcher[int, Any] = Batcher(run, what="test generate", select=same_parity)
    assert _callers(batcher, [1, 2, 3, 4]) == {1: -1, 2: -2, 3: -3, 4: -4}
    assert sorted(sorted(b) for b in batches) == [[1, 3], [2, 4]]


def test_an_error_reaches_every_caller_of_the_batch_and_the_next_calls_go_on() -> None:
    failing = {"on": True}

    def run(requests: list[int]) -> list[int]:
        if failing["on"]:
            raise ValueError("out of memory")
        return list(requests)

    batcher: Batcher[int, Any] = Batcher(run, what="test generate", errors=(ValueError,))
    outcomes = _callers(batcher, [1, 2, 3])
    assert batcher.batches == 1
    for error in outcomes.values():
        assert isinstance(error, BackendError)
        assert str(error) == "test generate failed: out of memory"
        assert isinstance(error.__cause__, ValueError)
    failing["on"] = False
    assert batcher.submit(7) == 7 and not batcher.busy and not batcher.waiting


def test_an_error_outside_errors_is_not_caught_as_a_failure() -> None:
    def run(requests: list[int]) -> list[int]:
        raise KeyError("a bug")

    batcher: Batcher[int, Any] = Batcher(run, what="test generate", errors=(ValueError,))
    with pytest.raises(KeyError):
        batcher.submit(1)
    assert not batcher.busy


class _Interrupt(BaseException):
    """Stands for a KeyboardInterrupt in the thread running the batch."""


def test_an_interrupted_batch_gives_its_other_callers_an_error() -> None:
    def run(requests: list[int]) -> list[int]:
        raise _Interrupt

    batcher: Batcher[int, Any] = Batcher(run, what="test generate")
    outcomes = _callers(batcher, [1, 2, 3])
    interrupts = [e for e in outcomes.values() if isinstance(e, _Interrupt)]
    errors = [e for e in outcomes.values() if isinstance(e, BackendError)]
    assert len(interrupts) == 1 and len(errors) == 2  # the running thread, the two others
    assert all(str(e) == "test generate was interrupted" for e in errors)
    assert not batcher.busy and not batcher.waiting
