"""The embedded decoupled source: DART's roles as threads of this one process.

- EnvCluster: the run's `EnvPool`; one thread per environment takes the next (task,
  rollout) from the `EpisodeScheduler` as soon as its episode ends (rollout-wise
  scheduling), opens a session at the newest policy version and rolls the episode out
  into the store with that version.
- RolloutService: transformers workers, each with its own copy of the policy (the base
  weights plus the current adapter or weights), so generation never touches the module
  being trained; or, with rollout.backend = "vllm", one vLLM engine that loads each
  version's adapter folder (trainer/vllm_rollouts.py). A version's folder is removed
  when the service retires it (not the newest, no episode or call holds it), and what a
  stopped process left is swept once the run has published its first version
  (trainer/published.py).
- DataManager: task groups of finished episodes within [version - runtime.max_version_lag,
  version], marked consumed as they are handed out.

The learner trains while the environments keep rolling out; the warm-up's and the
pre-collection's oracle episodes run lock-step on the same pool before that.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.backends.base import Backend
from trainer.rollouts import EpisodeJob, EpisodeOutcome, RolloutRunner
from trainer.runtime.data import DataManager
from trainer.runtime.policy_copies import rollout_copy
from trainer.runtime.service import (
    PolicyWorker,
    RolloutService,
    TransformersWorker,
    VLLMWorker,
)
from trainer.sources import (
    RunContext,
    heldout_info,
    heldout_tags,
    policy_config,
    rollout_config,
)
from trainer.sources.decoupled import DecoupledSource, RunDataManager, RunRolloutService
from trainer.sources.synchronous import LocalDesktops

if TYPE_CHECKING:
    from agents.policies.vlm import VLMPolicy, VLMPolicyConfig
    from trainer.model import PolicyModel

log = logging.getLogger(__name__)

MakeWorkers = Callable[["PolicyModel"], Sequence[PolicyWorker | Backend]]


@dataclass(frozen=True)
class EmbeddedSettings:
    """Knobs of the embedded runtime beyond the run configuration."""

    rollout_workers: int = 1  # policy copies generating for the environments
    request_timeout: float = 600.0  # seconds before a generation is retried elsewhere
    unhealthy_seconds: float = 30.0  # how long a failed worker gets no requests

    def __post_init__(self) -> None:
        if self.rollout_workers < 1:
            raise ValueError(f"rollout_workers: expected >= 1, got {self.rollout_workers}")
        if self.request_timeout <= 0 or self.unhealthy_seconds < 0:
            raise ValueError("request_timeout must be > 0 and unhealthy_seconds >= 0")


class EmbeddedSource(LocalDesktops, DecoupledSource):
    """Rollouts by threads of this process on the run's pool (see the module docstring)."""

    def __init__(self, context: RunContext, settings: EmbeddedSettings | None = None,
                 make_workers: MakeWorkers | None = None) -> None:
        super().__init__(context)
        self.settings = settings or EmbeddedSettings()
        self.make_workers = make_workers
        self._local = threading.local()

    # -- the roles -------------------------------------------------------------------

    def _rollout_service(self) -> RunRolloutService:
        """The rollout service: `make_workers`' workers, the vLLM engine (rollout.backend =
        vllm: one engine batching every environment's calls, each version's adapter
        folder loaded beside the older ones), or transformers copies."""
        settings, config = self.settings, self.context.config
        policy = self.context.learner.policy
        workers: Sequence[PolicyWorker | Backend]
        if self.make_workers is not None:
            workers = self.make_workers(policy)
        elif config.rollout.backend == "vllm":
            from trainer.vllm_rollouts import start_engine

            workers = [VLLMWorker(start_engine(config, policy.base_path), "vllm")]
        else:
            workers = [TransformersWorker(rollout_copy(policy), f"transformers-{i}")
                       for i in range(settings.rollout_workers)]
        return RolloutService(workers, request_timeout=settings.request_timeout,
                              unhealthy_seconds=settings.unhealthy_seconds,
                              on_retired=self._retired)

    def _data_manager(self) -> RunDataManager:
        context = self.context
        return DataManager(context.store, context.run_id,
                           max_version_lag=context.config.runtime.max_version_lag)

    # -- the environments ------------------------------------------------------------

    def _start_environments(self) -> None:
        """One thread per environment of the pool, each rolling out the scheduler's jobs
        (and held-out ones when an evaluation asks)."""
        context = self.context
        self._policy_config = policy_config(context.config, context.prompt)
        self._heldout_config = policy_config(context.config, context.prompt, held_out=True)
        self.runner = RolloutRunner(context.store, self.pool, self._session_policy,
                                    rollout_config(context.config), run_id=context.run_id,
                                    info={"policy": "vlm:train"})
        self.heldout_runner = RolloutRunner(
            context.store, self.pool, self._heldout_policy, rollout_config(context.config),
            tags=heldout_tags(context.run_id), info=heldout_info(context.run_id))
        for index in range(self.pool.size):
            thread = threading.Thread(target=self._environment_loop,
                                      name=f"environment-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _cancel_episodes(self) -> None:
        for name in ("runner", "heldout_runner"):
            runner = getattr(self, name, None)
            if runner is not None:
                runner.cancel()

    def _session_policy(self, job: EpisodeJob) -> VLMPolicy:
        """The policy of the episode this environment thread starts now: a session at
        the newest published version, closed when the episode ends."""
        return self._policy_at_newest(self._policy_config)

    def _heldout_policy(self, job: EpisodeJob) -> VLMPolicy:
        return self._policy_at_newest(self._heldout_config)

    def _policy_at_newest(self, config: VLMPolicyConfig) -> VLMPolicy:
        from agents.policies.vlm import VLMPolicy

        session = self.service.session()
        self._local.session = session
        return VLMPolicy(session, config, policy_version=session.version)

    def _environment_loop(self) -> None:
        from vm.pool import PoolClosed

        name = threading.current_thread().name
        for job, held_out in self._scheduled_jobs():
            runner = self.runner if held_out is None else self.heldout_runner
            try:
                outcome = runner.run_one(job)
            except PoolClosed as exc:  # every desktop is dead and out of restarts
                self._deliver(EpisodeOutcome(job, None, str(exc)), held_out)
                self._worker_errors.append(f"{name}: {exc}")
                return
            except Exception as exc:  # the store failed to open the episode
                log.error("%s: episode of %s lost: %s", name, job.task.id, exc)
                outcome = EpisodeOutcome(job, None, f"{type(exc).__name__}: {exc}")
            finally:
                session = getattr(self._local, "session", None)
                if session is not None:
                    session.close()
                    self._local.session = None
            self._deliver(outcome, held_out)
