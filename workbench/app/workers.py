"""Background work on a QThreadPool with progress, partial results and cooperative cancel.

A work function takes a `TaskState` (workbench.services.progress) and returns a result;
its progress, status text and partial results, its result, failure or cancellation come
back to the GUI thread as signals. `Workers` keeps each running worker alive and lists
them, so the status bar can show and cancel them; `in_order` gives Workers that run one at
a time, in the order submitted (a demonstration's steps, a screen's reads of the store).
"""

from __future__ import annotations

import logging
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from PyQt6.QtCore import QObject, QRunnable, QThreadPool, pyqtSignal

from workbench.services.progress import Cancelled, TaskState

log = logging.getLogger(__name__)


class WorkerSignals(QObject):
    progress = pyqtSignal(int, int)  # done, total
    status = pyqtSignal(str)
    partial = pyqtSignal(object)
    done = pyqtSignal(object)  # the result
    failed = pyqtSignal(str)  # the error, for a person
    cancelled = pyqtSignal()
    ended = pyqtSignal()  # after done, failed or cancelled


class Worker(QRunnable):
    def __init__(self, title: str, work: Callable[[TaskState], Any]) -> None:
        super().__init__()
        self.setAutoDelete(False)  # Workers holds the reference until it ends
        self.title = title
        self.ended = False  # set on the GUI thread once every signal of the work arrived
        self.signals = WorkerSignals()
        self.state = TaskState(on_progress=self.signals.progress.emit,
                               on_status=self.signals.status.emit,
                               on_partial=self.signals.partial.emit)
        self._work = work

    def cancel(self) -> None:
        self.state.cancel()

    def run(self) -> None:
        try:
            result = self._work(self.state)
        except Cancelled:
            self.signals.cancelled.emit()
        except Exception as exc:  # reported to the person, never lost
            log.warning("%s failed:\n%s", self.title, traceback.format_exc())
            self.signals.failed.emit(f"{self.title}: {exc}")
        else:
            self.signals.done.emit(result)
        self.signals.ended.emit()


class Workers(QObject):
    """The app's background work: submit, list, cancel."""

    started = pyqtSignal(object)  # a Worker
    ended = pyqtSignal(object)  # a Worker
    failed = pyqtSignal(str)  # any worker's failure message

    def __init__(self, pool: QThreadPool | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pool = pool if pool is not None else QThreadPool.globalInstance() or QThreadPool()
        self.active: list[Worker] = []
        # Ended workers stay referenced a while: dropping the last reference inside the
        # delivery of their own `ended` signal let the garbage collector free the signals
        # object mid-delivery (a segfault seen in the app's tests).
        self._retired: deque[Worker] = deque(maxlen=64)
        self._by_signals: dict[int, Worker] = {}

    def submit(self, title: str, work: Callable[[TaskState], Any], *,
               on_done: Callable[[Any], None] | None = None,
               on_partial: Callable[[Any], None] | None = None,
               on_failed: Callable[[str], None] | None = None,
               on_cancelled: Callable[[], None] | None = None) -> Worker:
        worker = Worker(title, work)
        if on_done is not None:
            worker.signals.done.connect(on_done)
        if on_partial is not None:
            worker.signals.partial.connect(on_partial)
        worker.signals.failed.connect(on_failed if on_failed is not None
                                      else self.failed.emit)
        if on_cancelled is not None:
            worker.signals.cancelled.connect(on_cancelled)
        # A bound method, not a lambda holding the worker: no reference cycle through
        # the connection, and Qt drops the connection if this object goes first.
        self._by_signals[id(worker.signals)] = worker
        worker.signals.ended.connect(self._signals_ended)
        self.active.append(worker)
        self.started.emit(worker)
        self.pool.start(worker)
        return worker

    def _signals_ended(self) -> None:
        worker = self._by_signals.pop(id(self.sender()), None)
        if worker is not None:
            self._ended(worker)

    def _ended(self, worker: Worker) -> None:
        worker.ended = True
        self._retired.append(worker)
        if worker in self.active:
            self.active.remove(worker)
        self.ended.emit(worker)

    def cancel_all(self) -> None:
        for worker in list(self.active):
            worker.cancel()

    def wait(self, msecs: int = 10_000) -> bool:
        """Wait for every worker of the pool to finish (closing the window)."""
        return self.pool.waitForDone(msecs)


def in_order(owner: QObject) -> Workers:
    """Workers that run one at a time, in the order submitted, on a thread pool of
    `owner`'s (deleting `owner` waits for the work under way)."""
    pool = QThreadPool(owner)
    pool.setMaxThreadCount(1)
    return Workers(pool)
