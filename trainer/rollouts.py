"""Many episodes at once on a pool of environments, each streamed into the store as it
runs: the rollout half of a training update (and of `workbench rollout`).

Every job leases an environment, opens an episode writer, runs one `agents.rollout`
episode and gives the environment back; a desktop that dies ends its episode "error"
and the others go on. Ctrl-C (or `cancel()`) stops every running episode as "aborted".
When every episode of a `run` failed at its setup (nothing was scored), the run raises
EverySetupFailed with the reasons: training, evaluation and rollouts end failed, never with
an update or a report built on nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from agents.policies.base import Policy
from agents.rollout import RESET_ERROR, Rollout, RolloutConfig
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

    @property
    def setup_error(self) -> str | None:
        """Why the episode never started, when its desktop's reset or its task's setup
        failed (or no desktop could be had); None for an episode that started, or that was
        cancelled."""
        if self.episode is None:
            return None if self.error in (None, CANCELLED) else self.error
        error = self.episode.error or ""
        if self.episode.status == "error" and error.startswith(RESET_ERROR):
            return error[len(RESET_ERROR):]
        return None


class EverySetupFailed(RuntimeError):
    """Every episode of a run failed at its setup: the message gives the count and the
    distinct reasons (task by task, the first few); `outcomes` are all of them."""

    def __init__(self, outcomes: Sequence[EpisodeOutcome]) -> None:
        self.outcomes = list(outcomes)
        reasons: dict[str, str] = {}
        for outcome in self.outcomes:
            reasons.setdefault(str(outcome.setup_error), getattr(outcome.job.task, "id", "?"))
        shown = "; ".join(f"{task_id}: {reason}" for reason, task_id in
                          list(reasons.items())[:3])
        more = f" (and {len(reasons) - 3} other reasons)" if len(reasons) > 3 else ""
        super().__init__(f"every one of the {len(self.outcomes)} episodes failed at its setup "
                         f"(nothing was scored): {shown}{more}")


def every_setup_failed(outcomes: Sequence[EpisodeOutcome]) -> bool:
    """True when there were episodes and each of them failed at its setup."""
    return bool(outcomes) and all(o.setup_error is not None for o in outcomes)


class RolloutRunner:
    """Runs EpisodeJobs on `pool`, `pool.size` at a time, writing episodes to `store`.
    `make_policy(job)` gives each episode a fresh policy (a VLM policy keeps the
    episode's history)."""

    def __init__(self, store: Store, pool: EnvPool,
                 make_policy: Callable[[EpisodeJob], Policy],
                 config: RolloutConfig, *, run_id: str | None = None,
                 tags: Sequence[str] = (), info: dict[str, Any] | None = None,
                 fail_if_every_setup_fails: bool = True) -> None:
        self.store = store
        self.pool = pool
        self.make_policy = make_policy
        self.config = config
        self.run_id = run_id
        self.tags = list(tags)
        self.info = dict(info or {})
        self.fail_if_every_setup_fails = fail_if_every_setup_fails
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
        (reporting them too), and is raised again. When every episode failed at its setup,
        EverySetupFailed (unless the runner was made with fail_if_every_setup_fails=False)."""
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
        if self.fail_if_every_setup_fails and not self._stopping.is_set() \
                and every_setup_failed(outcomes):
            raise EverySetupFailed(outcomes)
        return outcomes
