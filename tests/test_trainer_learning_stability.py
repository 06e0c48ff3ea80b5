"""What may keep a learning run from collapsing once most of its groups are solved:
training.scale_step_by_signal scales an update's learning rate by the share of its groups
whose rewards differ (the solved ones carry no advantage), so an update left with one
group of four moves a quarter as far; DAPO's dynamic sampling
(curation.dynamic_sampling_groups) rolls out more groups while too few have a signal.
bench/learning.py --stability measures what they do to the learning proofs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.run_configs import tiny_run_config
from trainer.config import parse_run_config
from trainer.curation import Group, GroupMember
from trainer.loop import TrainingRun, groups_with_signal


def _group(task_id: str, rewards: list[float]) -> Group:
    return Group(task_id, [GroupMember(f"{task_id}-{i}", task_id, reward, float(i), 0,
                                       "rollout") for i, reward in enumerate(rewards)])


def test_a_group_carries_a_signal_when_its_rewards_differ() -> None:
    groups = [_group("solved", [1.0] * 8), _group("failed", [0.0] * 8),
              _group("unparseable", [-0.5] * 4), _group("mixed", [1.0, 0.0, 0.0]),
              _group("format", [0.0, -0.5])]
    assert groups_with_signal(groups) == 2
    assert groups_with_signal([]) == 0


@pytest.mark.x11
@pytest.mark.slow
def test_an_update_without_a_signal_samples_again_and_then_makes_no_step(
        tmp_path: Path) -> None:
    # One new token cannot be an action: every response is unparseable, every group's
    # rewards are equal. Dynamic sampling rolls out its two extra rounds (two tasks of two
    # rollouts each), finds no signal either, and the step scaled by a signal share of 0
    # is no step, although a KL term (beta > 0) would otherwise train on such groups.
    text = tiny_run_config(updates=1, max_steps=1)
    config = parse_run_config(text)
    assert config.grpo.beta > 0 and config.grpo.num_generations == 2
    config = replace(config, rollout=replace(config.rollout, max_new_tokens=1),
                     curation=replace(config.curation, dynamic_sampling_groups=1,
                                      dynamic_sampling_rounds=2),
                     training=replace(config.training, scale_step_by_signal=True))
    summary = TrainingRun(config, text, tmp_path / "ws", progress=False).run()
    assert summary.status == "done" and summary.policy_version == 0
    metrics = summary.history[0].metrics
    assert metrics["episodes"] == 12 and metrics["extra_rollouts"] == 8
    assert len(summary.history[0].episode_ids) == 12
    # a task rolled out again adds to its group: two groups of six
    assert metrics["groups"] == 2 and metrics["groups_with_signal"] == 0
    assert metrics["step_scale"] == 0 and metrics["gradient_step"] == 0
    assert metrics["no_gradient_step/equal_rewards_in_every_group"] == 1


@pytest.mark.x11
@pytest.mark.slow
@pytest.mark.parametrize("target_kl", [0.0, 1e-12])
def test_target_kl_ends_the_passes_once_the_policy_has_moved_that_far(
        tmp_path: Path, target_kl: float) -> None:
    # Three passes per update. Without a target every pass steps, and the drift measured
    # before the last one (k3 KL of the sampling policy to the current one, token mean over
    # the batch) is above zero. A target below any real drift lets the first pass step
    # and stops the second before its step: one step per update, the drift that stopped it
    # above the target. The oracle's pre-collected success put into each group that found
    # none gives every group a signal, so the first step moves the policy.
    text = tiny_run_config(updates=1, max_steps=1,
                           extra="[curation]\nprecollected = true\nprecollect_oracle = 1\n")
    config = parse_run_config(text)
    config = replace(config, training=replace(config.training, num_iterations=3,
                                              target_kl=target_kl))
    summary = TrainingRun(config, text, tmp_path / "ws", progress=False).run()
    assert summary.status == "done" and summary.policy_version == 1
    metrics = summary.history[0].metrics
    assert metrics["gradient_step"] == 1
    assert metrics["optimizer_steps"] == (3 if target_kl == 0 else 1)
    assert metrics["policy_kl"] > target_kl
