"""One update's data, step by step and with no run state of its own: finished episodes
curated into task groups (pre-collected successes, replay), the groups into training
samples with their advantages, and the figures the update logs about its episodes.

`UpdateStep` chains them with the learner's optimisation; the loop (trainer/loop.py)
calls it once per update, whatever source the episodes came from.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.trajectory import SETUP_FAILED_INFO, Episode
from trainer.config import RunConfig
from trainer.curation import (
    Group,
    GroupMember,
    ReplayBuffer,
    SuccessSource,
    TaskStatistics,
    apply_precollected,
    inject_replay,
    trainable_steps,
)
from trainer.rollouts import EpisodeOutcome
from trainer.samples import Sample, SampleBuilder, SampleError, episode_reward, step_mean_entropies
from trainer.store import Store

if TYPE_CHECKING:
    from trainer.learner import Learner

log = logging.getLogger(__name__)


def untrained_reason(episodes: Sequence[Episode], groups: Sequence[Group]) -> str:
    """Why an update gave no sample to train on, as a metric name's last part."""
    if not any(e.status == "done" for e in episodes):
        return "no_finished_episode"
    if not groups:
        return "every_group_dropped"  # curation: no success to pre-collect for any task
    scores = [[m.score for m in g.members] for g in groups]
    if all(len(set(group)) <= 1 for group in scores):
        return "equal_rewards_in_every_group"  # e.g. every response unparseable
    return "no_sample_built"


def groups_with_signal(groups: Sequence[Group]) -> int:
    """How many groups carry an advantage: not every member got the same reward."""
    return sum(len({m.score for m in g.members}) > 1 for g in groups)


def curate(episodes: Sequence[Episode], *, store: Store, config: RunConfig,
           replay: ReplayBuffer, rng: random.Random
           ) -> tuple[list[Group], dict[str, float]]:
    """The finished `episodes` as task groups after curation (pre-collected successes,
    replay injection; `replay` then takes the batch's successes), and the counts of what
    curation did."""
    curation = config.curation
    finished = [e for e in episodes if e.status == "done"]
    summaries = {s.id: s for s in store.queries.summaries([e.id for e in finished])}
    by_task: dict[str, list[GroupMember]] = {}
    for episode in finished:
        member = GroupMember.from_summary(summaries[episode.id])
        # the reward (with its format term) sets the advantage; success is the
        # evaluator's score (curation.apply_precollected)
        member.score = episode_reward(episode, config.rollout.format_coef)
        member.evaluator_score = float(episode.score or 0.0)
        by_task.setdefault(episode.task_id, []).append(member)
    counts: Counter[str] = Counter()
    groups = []
    source = SuccessSource(store, curation.success_threshold) if curation.precollected \
        else None
    for task_id, members in by_task.items():
        group: Group | None = Group(task_id, members, [])
        if source is not None and group is not None:
            group = apply_precollected(group, source)
            if group is None:
                counts["tasks_without_success"] += 1
                continue
        if curation.replay and group is not None:
            group = inject_replay(group, replay, rng, std_below=curation.replay_std_below,
                                  mean_below=curation.replay_mean_below)
        assert group is not None
        counts["replayed"] += sum(m.origin == "replay" for m in group.members)
        counts["precollected"] += sum(m.origin == "precollected" for m in group.members)
        groups.append(group)
    if curation.replay:  # after injection: a batch never replays its own successes
        for members in by_task.values():
            replay.add(members)
    return groups, {k: float(v) for k, v in counts.items()}


def build_samples(groups: Sequence[Group], *, store: Store, config: RunConfig,
                  builder: SampleBuilder, run_id: str | None) -> list[Sample]:
    """Training samples of `groups`' members, each with its group advantage (members
    without one are left out at beta = 0), on the steps curation keeps (high-entropy
    steps, the dynamic step budget)."""
    from trainer.grpo import group_advantages, select_high_entropy_steps

    members = [m for g in groups for m in g.members]
    if not members:
        return []
    advantages = group_advantages([m.score for m in members], [m.task_id for m in members],
                                  config.grpo.scale_rewards)
    samples: list[Sample] = []
    stats = None
    for member, advantage in zip(members, advantages, strict=True):
        if advantage == 0.0 and config.grpo.beta == 0.0:
            continue  # no gradient from it
        episode = store.episodes.load(member.episode_id)
        steps = list(range(len(episode.steps)))
        if config.grpo.step_entropy_ratio < 1.0:
            entropies = step_mean_entropies(episode)
            chosen = set(select_high_entropy_steps(entropies, config.grpo.step_entropy_ratio))
            steps = [s for s in steps if s in chosen]
        if config.curation.dynamic_step_budget:
            if stats is None:
                stats = TaskStatistics.from_store(
                    store, window=config.curation.stats_window,
                    success_threshold=config.curation.success_threshold, run_id=run_id)
            keep = set(trainable_steps(
                len(episode.steps), (episode.score or 0.0) >= config.curation.success_threshold,
                stats.mean_success_length(episode.task_id)))
            steps = [s for s in steps if s in keep]
        try:
            built = (builder.trajectory_samples(episode, steps)
                     if config.training.sample_level == "trajectory"
                     else builder.step_samples(episode, steps))
        except SampleError as exc:
            log.warning("skipped %s", exc)
            continue
        for sample in built:
            sample.advantage = advantage
            sample.origin = member.origin
        samples += built
    return samples


def episode_metrics(episodes: Sequence[Episode], outcomes: Sequence[EpisodeOutcome],
                    groups: Sequence[Group], train: dict[str, float], config: RunConfig
                    ) -> dict[str, float]:
    """`train`'s metrics plus the update's episode figures: rewards, success rates (also
    per task), error rates (episodes, replies, setups), lengths, groups."""
    threshold = config.curation.success_threshold
    finished = [e for e in episodes if e.status == "done"]
    rewards = [episode_reward(e, config.rollout.format_coef) for e in finished]
    metrics: dict[str, float] = dict(train)
    metrics["episodes"] = float(len(outcomes))
    metrics["error_rate"] = sum(o.status != "done" for o in outcomes) / max(1, len(outcomes))
    metrics["format_error_rate"] = sum(
        any(s.parse_error is not None for s in e.steps) for e in finished) / max(
            1, len(finished))
    # scored, but after a setup command failed unexcused: not from the task's state
    metrics["setup_failed_rate"] = sum(
        bool(e.info.get(SETUP_FAILED_INFO)) for e in finished) / max(1, len(finished))
    if rewards:
        mean = sum(rewards) / len(rewards)
        metrics["reward_mean"] = mean
        metrics["reward_std"] = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
        metrics["success_rate"] = sum((e.score or 0.0) >= threshold
                                      for e in finished) / len(finished)
        metrics["steps_mean"] = sum(len(e.steps) for e in finished) / len(finished)
    per_task: dict[str, list[bool]] = {}
    for e in finished:
        per_task.setdefault(e.task_id, []).append((e.score or 0.0) >= threshold)
    for task_id, results in per_task.items():
        metrics[f"success_rate/{task_id}"] = sum(results) / len(results)
    metrics["groups"] = float(len(groups))
    return metrics


@dataclass
class TrainedUpdate:
    """What one update step made of its episodes."""

    groups: list[Group]
    curation_counts: dict[str, float]
    samples: list[Sample]
    metrics: dict[str, float]  # the optimisation's, plus gradient_step and its reason
    seconds: float  # sample building and optimisation
    gradient_step: bool  # the weights changed: a new policy version
    reason: str = ""  # why not, when they did not


@dataclass
class UpdateStep:
    """Episodes in, one optimisation out: curation, samples, the learner's update."""

    config: RunConfig
    store: Store
    builder: SampleBuilder
    learner: Learner
    replay: ReplayBuffer
    rng: random.Random
    run_id: str | None = None

    def __call__(self, episodes: Sequence[Episode]) -> TrainedUpdate:
        groups, counts = curate(episodes, store=self.store, config=self.config,
                                replay=self.replay, rng=self.rng)
        started = time.perf_counter()
        signal = groups_with_signal(groups)
        scale = 1.0
        if self.config.training.scale_step_by_signal and groups:
            scale = signal / len(groups)
        # no group with a signal and a step scaled to 0: nothing to train (not even the
        # KL term of beta > 0, which has no step to pull back)
        samples = build_samples(groups, store=self.store, config=self.config,
                                builder=self.builder, run_id=self.run_id) if scale > 0 else []
        metrics = self.learner.optimise(samples, step_scale=scale) if samples else {}
        metrics.update(groups_with_signal=float(signal), step_scale=scale)
        seconds = time.perf_counter() - started
        if samples and metrics.get("optimizer_steps", 1.0) > 0:
            metrics["gradient_step"] = 1.0
            return TrainedUpdate(groups, counts, samples, metrics, seconds, True)
        # the weights are unchanged: no new version, no new checkpoint
        # (training.target_kl takes back a first step it cannot shrink within it)
        reason = untrained_reason(episodes, groups) if not samples \
            else "first_step_past_kl_limit"
        metrics.update({"gradient_step": 0.0, f"no_gradient_step/{reason}": 1.0})
        return TrainedUpdate(groups, counts, samples, metrics, seconds, False, reason)
