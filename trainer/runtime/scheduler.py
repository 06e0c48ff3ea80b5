"""Rollout-wise scheduling: one queue of (task, rollout) jobs that every environment takes
from as soon as it finishes an episode, so no environment waits for a batch.

The queue is refilled with whole task groups by a planner (in a training run: the task
filter, dynamic rollout count and step budget of curation) whenever fewer jobs are queued
than `low_water`; `may_plan` holds planning back while enough groups are outstanding
(groups the trainer has not taken yet would only go stale).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from trainer.rollouts import EpisodeJob
from trainer.runtime.data import GROUP_KEY, GROUP_SIZE_KEY
from trainer.runtime.roles import GroupTicket


class EpisodeScheduler:
    """The episode queue. Thread-safe; `next_job` is called by every environment."""

    def __init__(self, plan: Callable[[], Sequence[EpisodeJob]], *, low_water: int = 1,
                 may_plan: Callable[[], bool] | None = None,
                 on_planned: Callable[[list[GroupTicket]], None] | None = None) -> None:
        self._plan = plan
        self.low_water = max(1, low_water)
        self._may_plan = may_plan or (lambda: True)
        self._on_planned = on_planned
        self._queue: deque[EpisodeJob] = deque()
        self._cond = threading.Condition()
        self._closed = False
        # group ids stay unique across the processes of a resumed run
        self._prefix = uuid.uuid4().hex[:8]
        self.planned_groups = 0

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    def next_job(self, timeout: float | None = None) -> EpisodeJob | None:
        """The next job, planning more groups when the queue runs low; None when closed
        or when nothing could be planned within `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                if len(self._queue) < self.low_water and self._may_plan():
                    self._refill()
                if self._queue:
                    return self._queue.popleft()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                # `may_plan` changes without telling us: look again now and then
                self._cond.wait(0.25 if left is None else min(0.25, left))
        return None

    def wake(self) -> None:
        """Something `may_plan` depends on changed (the trainer took groups)."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()

    def _refill(self) -> None:
        jobs = list(self._plan())
        by_task: dict[str, list[EpisodeJob]] = {}
        for job in jobs:
            by_task.setdefault(job.task.id, []).append(job)
        tickets: list[GroupTicket] = []
        grouped: list[EpisodeJob] = []
        for task_id, members in by_task.items():
            ticket = GroupTicket(f"{self._prefix}-{self.planned_groups}", task_id,
                                 len(members))
            self.planned_groups += 1
            tickets.append(ticket)
            grouped += [replace(job, info={**job.info, GROUP_KEY: ticket.group_id,
                                           GROUP_SIZE_KEY: ticket.size}) for job in members]
        if self._on_planned is not None and tickets:
            self._on_planned(tickets)  # before any of its episodes can finish
        self._queue.extend(grouped)
        self._cond.notify_all()
