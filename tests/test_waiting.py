"""The shared polling loop (vm.waiting.poll_until): what it returns, how often it asks,
and that a check's exception ends the wait."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vm.waiting import poll_until


def counter(true_from: int) -> tuple[list[int], Callable[[], int | None]]:
    calls: list[int] = []

    def check() -> int | None:
        calls.append(len(calls) + 1)
        return len(calls) if len(calls) >= true_from else None

    return calls, check


def test_returns_the_first_true_value_without_asking_again() -> None:
    calls, check = counter(3)
    assert poll_until(check, timeout=60.0, interval=0.001) == 3
    assert calls == [1, 2, 3]


def test_a_condition_already_met_is_asked_once() -> None:
    calls, check = counter(1)
    assert poll_until(check, timeout=0.0, interval=60.0) == 1
    assert calls == [1]


def test_at_the_deadline_returns_the_last_false_value() -> None:
    assert poll_until(lambda: None, timeout=0.0, interval=0.001) is None
    assert poll_until(lambda: False, timeout=0.0, interval=0.001) is False
    assert poll_until(lambda: [], timeout=0.003, interval=0.001) == []


def test_a_condition_never_met_is_asked_again_until_the_deadline() -> None:
    calls, check = counter(10**9)
    assert poll_until(check, timeout=0.01, interval=0.001) is None
    assert len(calls) >= 2  # once at the start, once more at least when the deadline passed


def test_the_pause_grows_by_backoff_up_to_longest(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr("vm.waiting.time.sleep", pauses.append)
    _, check = counter(6)
    assert poll_until(check, timeout=60.0, interval=0.1, backoff=2.0,
                      longest=0.5) == 6
    assert pauses == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])


def test_an_exception_from_the_check_ends_the_wait() -> None:
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the process died")
        return False

    with pytest.raises(RuntimeError, match="the process died"):
        poll_until(check, timeout=60.0, interval=0.001)
    assert len(calls) == 2
