"""What the two decoupled sources share (DART's roles, trainer/runtime/roles.py): the
rollout service that follows the published versions, the data manager that hands out
task groups within [version - runtime.max_version_lag, version], the scheduler that
plans groups as environments free up (rollout-wise scheduling), and held-out episodes
handed to the environments between their training episodes.

`EmbeddedSource` runs the roles as threads of this process, `RaySource` as Ray actors;
each says how its environments run a job and how its roles are made.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from trainer.published import PublishedVersions
from trainer.rollouts import EpisodeJob, EpisodeOutcome, EverySetupFailed, every_setup_failed
from trainer.runtime.roles import (
    DataManagerRole,
    Publication,
    RolloutServiceRole,
    TrainingBatch,
)
from trainer.runtime.scheduler import EpisodeScheduler
from trainer.sources import RolloutBatch, RunContext

log = logging.getLogger(__name__)


class RunDataManager(DataManagerRole, Protocol):
    """The data manager as a run uses it: the role, recovery and running totals."""

    def recover(self, policy_version: int) -> int: ...

    @property
    def finished_episodes(self) -> int: ...

    @property
    def generated_tokens(self) -> int: ...


class RunRolloutService(RolloutServiceRole, Protocol):
    """The rollout service as a run uses it: the role, and whether a publication needs
    an adapter folder."""

    @property
    def needs_adapter_folder(self) -> bool: ...


@dataclass
class _Figures:
    """Running totals at the end of the previous update (rates are over the interval)."""

    at: float
    busy: float
    idle: float
    finished: int
    tokens: int


class HeldOut:
    """A held-out evaluation handed to the environments: its jobs, taken one at a time
    between training episodes, and their outcomes as they come back."""

    def __init__(self, jobs: Sequence[EpisodeJob]) -> None:
        self._jobs = list(jobs)
        self._expected = len(self._jobs)
        self.outcomes: list[EpisodeOutcome] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        if not self._jobs:
            self._done.set()

    def take(self) -> EpisodeJob | None:
        with self._lock:
            return self._jobs.pop(0) if self._jobs else None

    def add(self, outcome: EpisodeOutcome) -> None:
        with self._lock:
            self.outcomes.append(outcome)
            if len(self.outcomes) >= self._expected:
                self._done.set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)


class DecoupledSource(ABC):
    """Episodes from environments that keep rolling out while the learner trains."""

    pool: Any  # the environments: an EnvPool, or the Ray environment actors

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self.pool = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._worker_errors: list[str] = []
        self._skipped: dict[str, str] = {}
        self._figures_mark: _Figures | None = None
        self._publication: Publication | None = None  # the update's, until its metrics
        self._held_out: HeldOut | None = None
        self.publications: list[Publication] = []
        self.published: PublishedVersions | None = None  # set when workers load folders

    # -- what each decoupled source says --------------------------------------------

    @abstractmethod
    def open(self) -> None: ...

    @abstractmethod
    def oracle_outcomes(self, jobs: Sequence[EpisodeJob], tags: Sequence[str]
                        ) -> list[EpisodeOutcome]: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _rollout_service(self) -> RunRolloutService: ...

    @abstractmethod
    def _data_manager(self) -> RunDataManager: ...

    @abstractmethod
    def _start_environments(self) -> None:
        """Threads that run `_scheduled_jobs()` on the environments until the stop."""

    @abstractmethod
    def _cancel_episodes(self) -> None:
        """Make every running episode end "aborted" after its current step."""

    # -- start and stop --------------------------------------------------------------

    def start(self) -> None:
        """The rollout service at the version training starts from, the data manager
        (with what a stopped process left still to train), the scheduler, and the
        environments' threads (after the warm-up, which ran on the same environments)."""
        context = self.context
        config = context.config
        self.service = self._rollout_service()
        if self.service.needs_adapter_folder:
            self.published = PublishedVersions(
                context.store.layout.run_dir(context.run_id) / "published")
        self.publish()  # the version training starts from
        if self.published is not None:  # what a stopped or crashed process left
            self.published.sweep(keep={context.policy_version()})
        self._publication = None
        lag = config.runtime.max_version_lag
        self.data = self._data_manager()
        if context.resume:
            recovered = self.data.recover(context.policy_version())
            if recovered:
                log.info("run %s: %d task groups of the stopped process still to train",
                         context.run_id, recovered)
        # more groups outstanding than the version window can train would only go stale
        limit = config.training.tasks_per_update * (lag + 1)
        self.scheduler = EpisodeScheduler(
            self._plan_groups, low_water=self.pool.size, on_planned=self.data.expect,
            may_plan=lambda: self.data.open_groups() < limit)
        self._figures_mark = self._figures()
        self._stopping.clear()
        self._start_environments()

    def stop(self) -> None:
        """Stop the environment loops (running episodes end "aborted") and the workers."""
        if not hasattr(self, "service"):
            return
        self._stopping.set()
        if hasattr(self, "scheduler"):
            self.scheduler.close()
        self._cancel_episodes()
        self.service.close()  # a generation in progress ends now, not at its timeout
        deadline = time.monotonic() + self.context.config.environments.call_timeout + 30
        for thread in self._threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:
            log.warning("run %s: %s did not stop in time", self.context.run_id,
                        ", ".join(stuck))
        if self.published is not None and self.publications:
            # The workers are closed: no rollout can load an older folder any more, even
            # one a call left behind at its timeout still held. The newest stays.
            self.published.sweep(keep={self.publications[-1].version})

    # -- batches and versions --------------------------------------------------------

    def next_batch(self) -> RolloutBatch:
        """Wait for training.tasks_per_update complete task groups in the version window
        (the data manager marks them consumed as it hands them out)."""
        started = time.perf_counter()
        groups = self.context.config.training.tasks_per_update
        while True:
            taken = self.data.take(groups, self.context.policy_version(), timeout=0.5)
            if taken is not None:
                self.scheduler.wake()  # fewer groups outstanding: planning may go on
                break
            self._check_workers()
        tasks = self.context.planner.tasks_by_id
        outcomes = [EpisodeOutcome(EpisodeJob(tasks.get(e.task_id)), e)
                    for e in taken.episodes]
        return RolloutBatch(list(taken.episodes), outcomes, taken.episode_ids, started,
                            figures={"wait_seconds": time.perf_counter() - started},
                            taken=taken)

    def _check_workers(self) -> None:
        if not any(thread.is_alive() for thread in self._threads):
            reasons = "; ".join(self._worker_errors) or "no reason recorded"
            raise RuntimeError(f"every environment worker stopped: {reasons}")

    def publication(self) -> Publication:
        """The current version as the rollout workers load it: a CPU snapshot of the
        adapter (or weights), plus an adapter folder when a worker loads files."""
        started = time.perf_counter()
        policy = self.context.learner.policy
        version = self.context.policy_version()
        state = policy.state_for_rollout()
        adapter_path = None
        if self.published is not None:
            adapter_path = self.published.write(policy.model, version)
        return Publication(version, state, adapter_path,
                           snapshot_seconds=time.perf_counter() - started)

    def publish(self) -> dict[str, float]:
        """The new version to the rollout workers (copied in place; its sync_seconds go
        into the update's metrics)."""
        publication = self.service.publish(self.publication())
        self.publications.append(publication)
        self._publication = publication
        return {}

    def _retired(self, version: int) -> None:
        """The rollout service retired `version`: no rollout can need its folder."""
        if self.published is not None:
            self.published.remove(version)

    # -- the environments' jobs ------------------------------------------------------

    def _plan_groups(self) -> list[EpisodeJob]:
        """The next task groups, curated on the newest statistics (scheduler's planner)."""
        planner = self.context.planner
        jobs, self._skipped = planner.plan(planner.statistics(), self.context.next_update())
        return jobs

    def _scheduled_jobs(self) -> Iterator[tuple[EpisodeJob, HeldOut | None]]:
        """The jobs for this environment thread until the run stops: a held-out episode
        when an evaluation waits for one (with its evaluation), else the scheduler's. A
        planner that fails (the store, a task) is recorded and ends the thread's work."""
        name = threading.current_thread().name
        while not self._stopping.is_set():
            held_out = self._held_out
            job = held_out.take() if held_out is not None else None
            if job is not None:
                yield job, held_out
                continue
            try:
                job = self.scheduler.next_job(timeout=0.5)
            except Exception as exc:
                self._worker_errors.append(f"{name}: planning: {type(exc).__name__}: {exc}")
                log.error("%s stops: planning failed: %s", name, exc)
                return
            if job is not None:
                yield job, None

    def _deliver(self, outcome: EpisodeOutcome, held_out: HeldOut | None) -> None:
        """A finished job's outcome: to its evaluation, or to the data manager."""
        if held_out is not None:
            held_out.add(outcome)
        else:
            self.data.record(outcome)

    def evaluate(self, jobs: Sequence[EpisodeJob]) -> list[EpisodeOutcome]:
        """Held-out episodes, each run by the next environment to finish its episode, at
        the newest version; the other environments go on rolling out meanwhile."""
        held_out = HeldOut(jobs)
        self._held_out = held_out
        try:
            while not held_out.wait(0.5):
                self._check_workers()
        finally:
            self._held_out = None
        if every_setup_failed(held_out.outcomes):  # as the lock-step rollouts end
            raise EverySetupFailed(held_out.outcomes)
        return held_out.outcomes

    # -- metrics ---------------------------------------------------------------------

    def _figures(self) -> _Figures:
        usage = self.pool.usage()
        return _Figures(time.perf_counter(), sum(u.busy_seconds for u in usage),
                        sum(u.idle_seconds for u in usage), self.data.finished_episodes,
                        self.data.generated_tokens)

    def update_metrics(self, batch: RolloutBatch, train_seconds: float) -> dict[str, float]:
        taken: TrainingBatch | None = batch.taken
        assert taken is not None
        publication, self._publication = self._publication, None
        waited = batch.figures["wait_seconds"]
        now = self._figures()
        mark = self._figures_mark or now
        self._figures_mark = now
        interval = max(1e-9, now.at - mark.at)
        busy, idle = now.busy - mark.busy, now.idle - mark.idle
        lags = taken.version_lags()
        return {
            "env_utilisation": busy / (busy + idle) if busy + idle > 0 else 0.0,
            "trainer_idle_fraction": min(1.0, waited / interval),
            "episodes_per_minute": (now.finished - mark.finished) * 60.0 / interval,
            "rollout_tokens_per_second": (now.tokens - mark.tokens) / interval,
            "sync_seconds": publication.sync_seconds if publication is not None else 0.0,
            "version_lag_mean": sum(lags) / len(lags) if lags else 0.0,
            "stale_episodes": float(taken.stale_episodes),
            "skipped_tasks": float(len(self._skipped)),
            "wait_seconds": waited,
            "train_seconds": train_seconds,
            "update_seconds": interval,
            "env_restarts": float(sum(u.restarts for u in self.pool.usage())),
            "policy_version": float(self.context.policy_version()),
        }

    def progress_postfix(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"reward": f"{metrics.get('reward_mean', 0):.2f}",
                "lag": f"{metrics.get('version_lag_mean', 0):.1f}"}
