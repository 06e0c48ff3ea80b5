"""Many episodes at once on a pool of environments, each streamed into the store as it
runs: the rollout half of a training update (and of `workbench rollout`).

Every job leases an environment, opens an episode writer, runs one `agents.rollout`
episode and gives the environment back; a desktop that dies ends its episode "error"
and the others go on. Ctrl-C (or `cancel()`) stops every running episode as "aborted".
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from agents.policies.base import Policy
from agents.rollout import Rollout, RolloutConfig
from agents.trajectory import Episode
from trainer.store import Store
from vm.pool import EnvPool

CANCELLED = "cancelled"  # the error of a job that never started because of cancel()


@dataclass(frozen=True)
class EpisodeJob:
    task: Any  # vm.tasks.Task
    rollout: int = 0  # which of the task's rollouts this is
    max_steps: int | None = None  # overrides the rollout config (a dynamic step budget)
    info: dict[str, Any] = field(default_factory=dict)  # recorded on the episode
    tags: tuple[str, ...] = ()  # on the episode, beside the runner's tags


@dataclass
class EpisodeOutcome:
    job: EpisodeJob
    episode: Episode | None  # None when the episode never started (cancelled, no desktop)
    error: str | None = None

    @property
    def status(self) -> str:
        if self.episode is not None:
            return self.episode.status
        return "aborted" if self.error == CANCELLED else "error"


class RolloutRunner:
    """Runs EpisodeJobs on `pool`, `pool.size` at a time, writing episodes to `store`.
    `make_policy(job)` gives each episode a fresh policy (a VLM policy keeps the
    episode's history)."""

    def __init__(self, store: Store, pool: EnvPool,
                 make_policy: Callable[[EpisodeJob], Policy],
                 config: RolloutConfig, *, run_id: str | None = None,
                 tags: Sequence[str] = (), info: dict[str, Any] | None = None) -> None:
        self.store = store
        self.pool = pool
        self.make_policy = make_policy
        self.config = config
        self.run_id = run_id
        self.tags = list(tags)
        self.info = dict(info or {})
        self._stopping = threading.Event()
        self._running: set[Rollout] = set()
        self._lock = threading.Lock()
        self._begin_lock = threading.Lock()  # the store's writer-lock set-up is not reentrant

    def cancel(self) -> None:
        self._stopping.set()
        with self._lock:
            for rollout in self._running:
                rollout.cancel()

    def run_one(self, job: EpisodeJob) -> EpisodeOutcome:
        if self._stopping.is_set():
            return EpisodeOutcome(job, None, CANCELLED)
        policy = self.make_policy(job)
        config = self.config if job.max_steps is None else replace(self.config,
                                                                   max_steps=job.max_steps)
        with self.pool.lease() as env:
            if self._stopping.is_set():
                return EpisodeOutcome(job, None, CANCELLED)
            with self._begin_lock:
                writer = self.store.episodes.begin(
                    job.task.id, environment=config.environment,
                    policy_version=policy.policy_version, run_id=self.run_id,
                    source=policy.source, instruction=job.task.instruction,
                    tags=[*self.tags, *job.tags],
                    info={**self.info, **job.info, "rollout": job.rollout,
                          "sandbox": env.name})  # the desktop it runs on (Live screen)
            with writer:
                rollout = Rollout(env, policy, writer, config)
                with self._lock:
                    self._running.add(rollout)
                    # cancel() sets _stopping before it takes the lock to cancel the
                    # running ones: a rollout added after its sweep is cancelled here
                    if self._stopping.is_set():
                        rollout.cancel()
                try:
                    episode = rollout.run(job.task, episode_id=writer.episode_id).episode
                finally:
                    with self._lock:
                        self._running.discard(rollout)
        return EpisodeOutcome(job, episode, episode.error)

    def run(self, jobs: Sequence[EpisodeJob],
            on_outcome: Callable[[EpisodeOutcome], None] | None = None
            ) -> list[EpisodeOutcome]:
        """Run every job; outcomes in completion order, each also given to `on_outcome`.
        KeyboardInterrupt cancels the running episodes, waits for them to end "aborted"
        (reporting them too), and is raised again."""
        outcomes: list[EpisodeOutcome] = []
        self._stopping.clear()

        def report(future: Future[EpisodeOutcome]) -> None:
            try:
                outcome = future.result()
            except Exception as exc:  # the pool or the store failed
                outcome = EpisodeOutcome(futures[future], None, f"{type(exc).__name__}: {exc}")
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)

        with ThreadPoolExecutor(self.pool.size, thread_name_prefix="rollout") as executor:
            futures: dict[Future[EpisodeOutcome], EpisodeJob] = {
                executor.submit(self.run_one, job): job for job in jobs}
            unreported = set(futures)
            try:
                while unreported:
                    done, _ = wait(unreported, timeout=0.5, return_when=FIRST_COMPLETED)
                    for future in done:
                        unreported.discard(future)
                        report(future)
            except KeyboardInterrupt:
                self.cancel()
                executor.shutdown(wait=True, cancel_futures=True)
                for future in futures:  # in job order: those that ran end "aborted"
                    if future in unreported and not future.cancelled():
                        unreported.discard(future)
                        report(future)
                raise
        return outcomes
