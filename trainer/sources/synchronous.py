"""Lock-step rollouts (ARPO's way): each update plans its task groups, rolls all of them
out on the run's pool of desktops with the policy being trained (or, with
rollout.backend = "vllm", the run's vLLM engine following each version) and waits for
every episode before training them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from trainer.rollouts import EpisodeJob, EpisodeOutcome, RolloutRunner
from trainer.sources import (
    RolloutBatch,
    RunContext,
    heldout_info,
    heldout_tags,
    policy_config,
    rollout_config,
)
from trainer.vllm_rollouts import VLLMVersions, start_engine


def start_pool(context: RunContext, hold: Any) -> Any:
    """The run's pool of desktops (environments.count), started; `hold(pool)` is called
    before it starts, so that an interrupted start still closes it."""
    from trainer.environments import make_environment, run_desktop_name
    from vm.pool import EnvPool

    config, run_id = context.config, context.run_id

    def make_env(index: int) -> Any:
        return make_environment(config.environments, index, run_desktop_name(run_id, index),
                                context.workspace)

    pool = EnvPool(make_env, config.environments.count)
    hold(pool)
    return pool.start_some("environment")


def oracle_outcomes_on(pool: Any, context: RunContext, jobs: Sequence[EpisodeJob],
                       tags: Sequence[str]) -> list[EpisodeOutcome]:
    """Run `jobs` with the tasks' scripted oracles on `pool`."""
    from agents.policies.oracle import OraclePolicy

    runner = RolloutRunner(context.store, pool, lambda job: OraclePolicy(),
                           rollout_config(context.config), run_id=context.run_id,
                           tags=tags, info={"policy": "oracle"})
    return runner.run(jobs)


class LocalDesktops:
    """The run's desktops on this machine (an EnvPool): started at open, the oracle's
    demonstrations played on them, closed at close (the synchronous and embedded sources
    share it)."""

    context: RunContext
    pool: Any

    def _hold(self, pool: Any) -> None:
        self.pool = pool

    def open(self) -> None:
        self.pool = start_pool(self.context, self._hold)

    def oracle_outcomes(self, jobs: Sequence[EpisodeJob], tags: Sequence[str]
                        ) -> list[EpisodeOutcome]:
        return oracle_outcomes_on(self.pool, self.context, jobs, tags)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


class SynchronousSource(LocalDesktops):
    """Lock-step rollouts on the run's pool (see the module docstring)."""

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self.pool: Any = None
        self.sampler: Any = context.learner.backend  # rollout.backend = vllm: the engine
        self.vllm_versions: VLLMVersions | None = None

    def start(self) -> None:
        """With rollout.backend = vllm: the engine, at the version training starts from."""
        context = self.context
        if context.config.rollout.backend == "vllm":
            policy = context.learner.policy
            engine = start_engine(context.config, policy.base_path)
            self.vllm_versions = VLLMVersions(
                engine, context.store.layout.run_dir(context.run_id) / "published")
            self.sampler = engine
            self.vllm_versions.publish(policy.model, context.policy_version())

    def next_batch(self) -> RolloutBatch:
        """Plan the update's groups, roll them out (and more rounds, with dynamic
        sampling), then claim every episode for the update."""
        context = self.context
        started = time.perf_counter()
        planner = context.planner
        update = context.next_update()
        stats = planner.statistics()
        jobs, skipped = planner.plan(stats, update)
        rollout_started = time.perf_counter()
        outcomes = self._roll_out(jobs)
        extra = planner.dynamic_sampling(outcomes, stats, update, self._roll_out)
        outcomes += extra
        rollout_seconds = time.perf_counter() - rollout_started
        episodes = [o.episode for o in outcomes if o.episode is not None]
        claimed = context.store.runs.consume(context.run_id, [e.id for e in episodes],
                                             context.policy_version())
        generated = sum(len(s.token_ids or []) for e in episodes for s in e.steps)
        return RolloutBatch(episodes, outcomes, claimed, started, figures={
            "skipped_tasks": float(len(skipped)), "extra_rollouts": float(len(extra)),
            "rollout_seconds": rollout_seconds, "generated_tokens": float(generated)})

    def _roll_out(self, jobs: Sequence[EpisodeJob], *, held_out: bool = False
                  ) -> list[EpisodeOutcome]:
        """Episodes of the current policy: the run's own (trained on), or held-out ones
        (greedy unless eval_temperature, tagged, with no run so never trained on)."""
        from agents.policies.vlm import VLMPolicy

        context = self.context
        config = policy_config(context.config, context.prompt, held_out=held_out)
        version = context.policy_version()
        sampler = self.sampler

        def make_policy(job: EpisodeJob) -> Any:
            return VLMPolicy(sampler, config, policy_version=version)

        context.learner.policy.model.eval()
        if held_out:
            runner = RolloutRunner(context.store, self.pool, make_policy,
                                   rollout_config(context.config),
                                   tags=heldout_tags(context.run_id),
                                   info=heldout_info(context.run_id))
        else:
            runner = RolloutRunner(context.store, self.pool, make_policy,
                                   rollout_config(context.config), run_id=context.run_id,
                                   info={"policy": "vlm:train"})
        return runner.run(jobs)

    def publish(self) -> dict[str, float]:
        if self.vllm_versions is None:
            return {}
        learner = self.context.learner
        return {"sync_seconds": self.vllm_versions.publish(learner.policy.model,
                                                           self.context.policy_version())}

    def evaluate(self, jobs: Sequence[EpisodeJob]) -> list[EpisodeOutcome]:
        return self._roll_out(jobs, held_out=True)

    def update_metrics(self, batch: RolloutBatch, train_seconds: float) -> dict[str, float]:
        figures = batch.figures
        rollout_seconds = figures["rollout_seconds"]
        return {
            "skipped_tasks": figures["skipped_tasks"],
            "extra_rollouts": figures["extra_rollouts"],
            "rollout_seconds": rollout_seconds,
            "train_seconds": train_seconds,
            "update_seconds": time.perf_counter() - batch.started,
            "rollout_time_fraction": rollout_seconds / max(1e-9,
                                                           rollout_seconds + train_seconds),
            "rollout_tokens_per_second": figures["generated_tokens"] / max(1e-9,
                                                                           rollout_seconds),
            "policy_version": float(self.context.policy_version())}

    def progress_postfix(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"reward": f"{metrics.get('reward_mean', 0):.2f}",
                "success": f"{metrics.get('success_rate', 0):.2f}"}

    def stop(self) -> None:
        if self.vllm_versions is not None:
            self.vllm_versions.close()
            self.vllm_versions = None
            self.sampler = self.context.learner.backend
