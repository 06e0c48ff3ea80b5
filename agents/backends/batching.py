"""Calls from several threads gathered into batches: the queue both local backends
(transformers, vLLM) put their generate calls through.

While one batch runs, arriving calls wait in the queue; when it ends, the next waiting
call to wake takes a batch of the queue (`select`: by default all of it) and runs it for
every caller in it, in its own thread. Nobody waits for a batch to fill: a call that finds
the model free goes at once. A batch that raises one of `errors` gives each of its callers
a BackendError naming the failure (its cause attached); one stopped by anything else (a
KeyboardInterrupt in the thread running it) gives the other callers a BackendError saying
it was interrupted, and the exception goes on up the running thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from agents.backends.base import BackendError

Request = TypeVar("Request")
Result = TypeVar("Result")


@dataclass
class _Call(Generic[Request, Result]):
    """One caller's request, waiting for a batch to take it."""

    request: Request
    result: Result | None = None
    error: BaseException | None = None
    answered: bool = False  # result or error set by the batch
    done: bool = False  # the batch that took it has ended


def take_all(requests: Sequence[object]) -> int:
    """The default batch: every waiting call."""
    return len(requests)


class Batcher(Generic[Request, Result]):
    """`submit(request)` from any thread; `run(requests)` runs one batch (one result per
    request, in order), one batch at a time. `select(waiting)` picks which waiting
    requests form the next batch: the indices it returns (a list), or how many from the
    front (an int); the first waiting request is always taken. `what` names the work in
    errors ("vLLM generate")."""

    def __init__(self, run: Callable[[list[Request]], Sequence[Result]], *, what: str,
                 select: Callable[[Sequence[Request]], int | list[int]] = take_all,
                 errors: tuple[type[Exception], ...] = (Exception,)) -> None:
        self._run = run
        self._select = select
        self._errors = errors
        self.what = what
        self._queue: list[_Call[Request, Result]] = []
        self._changed = threading.Condition()
        self._busy = False  # a batch is running (or the queue is paused)
        self.batches = 0  # batches run (fewer than submitted calls when calls gather)

    @property
    def busy(self) -> bool:
        """Whether a batch is running (or the queue is paused)."""
        with self._changed:
            return self._busy

    @property
    def waiting(self) -> int:
        """Calls in the queue, not yet taken by a batch."""
        with self._changed:
            return len(self._queue)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No batch starts inside this block (one running goes on to its end): calls made
        meanwhile wait, and the first batch after it takes them together."""
        with self._changed:
            while self._busy:
                self._changed.wait()
            self._busy = True
        try:
            yield
        finally:
            with self._changed:
                self._busy = False
                self._changed.notify_all()

    def submit(self, request: Request) -> Result:
        """`request`'s result, from a batch with whatever other calls are waiting."""
        mine: _Call[Request, Result] = _Call(request)
        with self._changed:
            self._queue.append(mine)
        while True:
            with self._changed:
                while self._busy and not mine.done:
                    self._changed.wait()
                if mine.done:
                    break
                batch = self._take()
                self._busy = True
            try:
                self._run_batch(batch)
            finally:
                with self._changed:
                    for call in batch:
                        if not call.answered:
                            call.error = BackendError(f"{self.what} was interrupted")
                        call.done = True
                    self._busy = False
                    self._changed.notify_all()
        if mine.error is not None:
            raise mine.error
        return mine.result  # type: ignore[return-value]  # set with done, no error

    def _take(self) -> list[_Call[Request, Result]]:
        """The next batch, out of the queue (under the condition's lock)."""
        chosen = self._select([call.request for call in self._queue])
        indices = list(range(chosen)) if isinstance(chosen, int) else list(chosen)
        taken = sorted(set(indices) | {0})
        batch = [self._queue[i] for i in taken]
        self._queue = [call for i, call in enumerate(self._queue) if i not in set(taken)]
        return batch

    def _run_batch(self, batch: list[_Call[Request, Result]]) -> None:
        self.batches += 1
        try:
            results = list(self._run([call.request for call in batch]))
            if len(results) != len(batch):
                raise ValueError(f"{len(results)} results for {len(batch)} requests")
        except self._errors as exc:
            for call in batch:
                call.error = BackendError(f"{self.what} failed: {exc}")
                call.error.__cause__ = exc
                call.answered = True
            return
        for call, result in zip(batch, results, strict=True):
            call.result = result
            call.answered = True
