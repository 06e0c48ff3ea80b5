"""What may keep a learning run from collapsing once most of its groups are solved:
training.scale_step_by_signal scales an update's learning rate by the share of its groups
whose rewards differ (the solved ones carry no advantage), so an update left with one
group of four moves a quarter as far; DAPO's dynamic sampling
(curation.dynamic_sampling_groups) rolls out more groups while too few have a signal.
bench/learning.py --stability measures what they do to the learning proofs."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tests.run_configs import tiny_run_config
from trainer.config import parse_run_config
from trainer.curation import Group, GroupMember
from trainer.loop import TrainingRun, groups_with_signal
from trainer.trust_region import (
    Backtrack,
    Drift,
    DriftMeter,
    Limits,
    StepGuard,
    shrink_step,
    snapshot,
)


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


def test_drift_is_k3_from_the_sampling_policy_over_the_batch_and_its_no_signal_samples(
        ) -> None:
    # two samples of three token positions; the second carries no advantage
    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -0.3, -0.4]], dtype=torch.float64)
    new = torch.tensor([[-1.1, -2.0, -9.0], [-0.5, -0.3, -0.1]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # one position is not trained
    meter = DriftMeter()
    meter.add(old, new, mask, torch.tensor([0.7, 0.0]))

    def k3(d: float) -> float:
        return math.exp(d) - d - 1

    second = k3(-0.3) + k3(0.0) + k3(0.3)
    drift = meter.drift(tokens=5)
    assert drift.mean == pytest.approx((k3(-0.1) + second) / 5, rel=1e-12)
    assert drift.no_signal_max == pytest.approx(second, rel=1e-12)
    # log-prob lost by the samples with an advantage >= 0: 0.1 by the first (one token
    # from -1.0 to -1.1); the second gained 0.3 on one token and lost 0.3 on another
    assert drift.drop_max == pytest.approx(0.1, rel=1e-9)
    assert not Limits(drop_max=0.05).allow(drift) and Limits(drop_max=0.2).allow(drift)
    meter.add(old, old, mask, torch.tensor([0.0, 0.0]))  # unmoved: the max stays
    assert meter.drift(tokens=10).no_signal_max == pytest.approx(second, rel=1e-12)
    assert Limits(mean=0.1).allow(drift) and not Limits(no_signal_max=0.05).allow(drift)
    assert not Limits().active and Limits(no_signal_max=0.05).active


def test_a_step_past_the_limit_is_halved_until_within_it_or_taken_back() -> None:
    # a drift that grows as the square of the step, as k3 does for small steps
    parameter = torch.tensor([4.0])
    before = snapshot([parameter])
    parameter_before = torch.tensor([0.0])

    def measure() -> Drift:
        return Drift(mean=float(parameter.item()) ** 2)

    result = shrink_step([parameter], [parameter_before], measure, Limits(mean=1.0),
                         drift_before=Drift())
    # half the step: 2.0, drift 4 > 1; a quarter: 1.0, drift 1 <= 1
    assert result == Backtrack(Drift(mean=1.0), kept=0.25) and parameter.item() == 1.0
    assert before[0].item() == 4.0  # the snapshot is a copy

    parameter.fill_(4.0)
    result = shrink_step([parameter], [parameter_before], measure, Limits(mean=1e-6),
                         drift_before=Drift(mean=0.5))
    # 4 / 32 = 0.125 after five halvings, drift 0.016 > 1e-6: taken back
    assert result == Backtrack(Drift(mean=0.5), kept=0.0) and parameter.item() == 0.0


def test_a_step_taken_back_takes_adams_state_back_too() -> None:
    """A step the guard takes back leaves the parameters and Adam's moments and step count
    as they were before it: the next step is the one that would have come without it; a
    step kept in part keeps the optimizer's state as it stepped."""
    parameter = torch.nn.Parameter(torch.tensor([0.0, 0.0]))
    optimizer = torch.optim.Adam([parameter], lr=0.5)

    def step(gradient: list[float]) -> None:
        optimizer.zero_grad()
        parameter.grad = torch.tensor(gradient)
        guard.before_step()
        optimizer.step()
        guard.stepped()

    def measure() -> Drift:
        return Drift(mean=float(parameter.detach().abs().sum()))

    guard = StepGuard([parameter], Limits(mean=10.0), measure, optimizer)
    step([1.0, -1.0])  # within the limit: stands
    assert guard.within_limits(measure())
    state = {key: value.clone() for key, value in optimizer.state[parameter].items()}
    kept_parameter = parameter.detach().clone()
    guard.limits = Limits(mean=1e-9)  # no share of the next step stays within it
    step([3.0, 2.0])
    assert not guard.within_limits(measure())
    guard.back_within_limits()
    assert guard.kept == 0 and guard.steps == 1
    assert torch.equal(parameter.detach(), kept_parameter)
    after = optimizer.state[parameter]
    assert set(after) == set(state)
    for key, value in state.items():
        assert torch.equal(after[key], value), key

    # without the optimizer given (older callers), the moments keep the step taken back
    guard = StepGuard([parameter], Limits(mean=1e-9), measure)
    step([3.0, 2.0])
    guard.within_limits(measure())
    guard.back_within_limits()
    assert not torch.equal(optimizer.state[parameter]["exp_avg"], state["exp_avg"])
    guard.release()


def test_the_no_signal_limit_needs_a_kl_term() -> None:
    text = tiny_run_config(updates=1, extra="")
    text = text.replace("beta = 0.05", "beta = 0.0").replace(
        "[training]\n", "[training]\ntarget_kl_no_signal = 0.05\n")
    with pytest.raises(ValueError, match=r"training\.target_kl_no_signal: needs grpo\.beta"):
        parse_run_config(text)


@pytest.mark.x11
@pytest.mark.slow
@pytest.mark.parametrize("target_kl", [0.0, 10.0, 1e-12])
def test_target_kl_keeps_an_update_within_it(tmp_path: Path, target_kl: float) -> None:
    # Three passes per update. Without a target every pass steps, and the drift measured
    # before the last one (k3 KL of the sampling policy to the current one, token mean over
    # the batch) is above zero. A target far above any drift here lets every pass step and
    # measures where the last step left the policy. A target below any real drift takes
    # the first step back (halving it five times does not bring the policy within it):
    # no step stands and no version is published. The oracle's pre-collected success put
    # into each group that found none gives every group a signal, so a step moves the
    # policy.
    text = tiny_run_config(updates=1, max_steps=1,
                           extra="[curation]\nprecollected = true\nprecollect_oracle = 1\n")
    config = parse_run_config(text)
    config = replace(config, training=replace(config.training, num_iterations=3,
                                              target_kl=target_kl))
    summary = TrainingRun(config, text, tmp_path / "ws", progress=False).run()
    assert summary.status == "done"
    metrics = summary.history[0].metrics
    if target_kl == 1e-12:
        assert summary.policy_version == 0 and metrics["gradient_step"] == 0
        assert metrics["no_gradient_step/first_step_past_kl_limit"] == 1
        assert metrics["optimizer_steps"] == 0 and metrics["last_step_kept"] == 0
        assert metrics["policy_kl"] == 0
        return
    assert summary.policy_version == 1 and metrics["gradient_step"] == 1
    assert metrics["optimizer_steps"] == 3
    assert 0 < metrics["policy_kl"] <= (target_kl or math.inf)
    assert metrics.get("last_step_kept", 1.0) == 1.0
