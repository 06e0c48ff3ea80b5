"""The GRPO loss pieces against values worked out by hand: advantages, clipping, dual clip,
loss normalisers, truncated importance sampling, k3 KL, entropy-based token and step selection.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import pytest
import torch
from torch.testing import assert_close

from trainer.grpo import (
    GRPOConfig,
    ISMode,
    LossType,
    entropy_token_mask,
    group_advantages,
    kl_k3,
    policy_loss,
    select_high_entropy_steps,
    truncated_is_weights,
)

NAN = float("nan")
# One config whose extras are off, so each test turns on only what it checks.
PLAIN = GRPOConfig(dual_clip=None, loss_type="bnpo", importance_sampling_cap=None)


def log_ratios(ratios: list[list[float]]) -> torch.Tensor:
    """Current log-probs that give these ratios against old log-probs of 0, with a gradient."""
    return torch.tensor(ratios).log().requires_grad_(True)


def grad_of(loss: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    (grad,) = torch.autograd.grad(loss, logp)
    return grad


# --- advantages -------------------------------------------------------------------------


def test_group_advantages_divide_by_the_unbiased_group_std() -> None:
    # mean 0.5; std = sqrt(4 * 0.25 / 3) = 0.57735; 0.5 / 0.57735 = 0.866025
    advantages = group_advantages([1, 0, 0, 1], ["t"] * 4)
    assert advantages == pytest.approx([0.866025, -0.866025, -0.866025, 0.866025], rel=1e-5)


def test_group_advantages_keep_input_order_across_interleaved_groups() -> None:
    # group a: [1, 0], mean 0.5, std sqrt(0.5) = 0.707107 -> +-0.707107; group b all equal -> 0
    advantages = group_advantages([1, 5, 0, 5], ["a", "b", "a", "b"])
    assert advantages == pytest.approx([0.707107, 0.0, -0.707107, 0.0], rel=1e-5, abs=1e-9)


def test_batch_scaling_uses_the_std_of_the_whole_batch_and_the_group_mean() -> None:
    # batch [1, 0, 1, 1]: mean 0.75, squared deviations 0.0625 + 0.5625 + 0.0625 + 0.0625
    # = 0.75, / 3 = 0.25, std 0.5. Group a (mean 0.5): +-0.5 / 0.5 = +-1; group b: 0.
    advantages = group_advantages([1, 0, 1, 1], ["a", "a", "b", "b"], scale="batch")
    assert advantages == pytest.approx([1.0, -1.0, 0.0, 0.0], rel=1e-5, abs=1e-9)


def test_no_scaling_subtracts_the_group_mean_only() -> None:
    advantages = group_advantages([1, 0, 0, 1], ["t"] * 4, scale="none")
    assert advantages == pytest.approx([0.5, -0.5, -0.5, 0.5])


def test_a_group_of_one_has_advantage_zero() -> None:
    # x alone -> 0; y: [1, 0] -> +-0.707107
    advantages = group_advantages([3, 1, 0], ["x", "y", "y"])
    assert advantages == pytest.approx([0.0, 0.707107, -0.707107], rel=1e-5)
    assert group_advantages([1.0], ["only"], scale="batch") == [0.0]
    assert group_advantages([], []) == []


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_a_group_of_equal_rewards_has_advantages_of_exactly_zero(scale: str) -> None:
    # the mean of three 0.1s is 0.10000000000000002: (r - mean) / (0 + 1e-6) gave -1.4e-11
    rewards = [0.1, 0.1, 0.1, 0.7, 0.7, 0.7, 1.0, 0.0]
    groups = ["a", "a", "a", "b", "b", "b", "c", "c"]
    advantages = group_advantages(rewards, groups, scale=scale)  # type: ignore[arg-type]
    assert advantages[:6] == [0.0] * 6  # exactly: the loop drops them with beta = 0
    assert advantages[6] > 0 > advantages[7]


def test_group_advantages_reject_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="3 rewards but 2 groups"):
        group_advantages([1, 0, 1], ["a", "a"])


# --- clipped surrogate --------------------------------------------------------------------


def test_clip_is_active_only_where_it_stops_the_gradient() -> None:
    # Four tokens of one sequence, per-token advantages, bnpo normaliser 4, clip [0.8, 1.28].
    # ratio 1.5, A=+1: -min(1.5, 1.28) = -1.28, clipped high, no gradient
    # ratio 0.5, A=-1: -min(-0.5, -0.8) = 0.8,   clipped low, no gradient
    # ratio 0.5, A=+1: -min(0.5, 0.8) = -0.5,    unclipped, d/dlogp = -r*A / 4 = -0.125
    # ratio 1.5, A=-1: -min(-1.5, -1.28) = 1.5,  unclipped, d/dlogp = -r*A / 4 = 0.375
    logp = log_ratios([[1.5, 0.5, 0.5, 1.5]])
    advantages = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    out = policy_loss(logp, torch.zeros(1, 4), advantages, torch.ones(1, 4), PLAIN)
    assert out.loss.item() == pytest.approx((-1.28 + 0.8 - 0.5 + 1.5) / 4, rel=1e-5)
    assert_close(grad_of(out.loss, logp), torch.tensor([[0.0, 0.0, -0.125, 0.375]]))
    assert out.stats["clip_fraction"] == pytest.approx(0.5)
    assert out.stats["clip_fraction_low"] == pytest.approx(0.25)
    assert out.stats["clip_fraction_high"] == pytest.approx(0.25)
    assert out.stats["ratio_mean"] == pytest.approx(1.0, rel=1e-5)
    assert out.stats["tokens"] == 4


def test_unclipped_token_gradient_is_minus_ratio_times_advantage() -> None:
    # ratio 1.1, A = 2: loss -2.2 and d(-r*A)/dlogp = -r*A = -2.2 for a single token
    logp = log_ratios([[1.1]])
    out = policy_loss(logp, torch.zeros(1, 1), torch.tensor([2.0]), torch.ones(1, 1), PLAIN)
    assert out.loss.item() == pytest.approx(-2.2, rel=1e-5)
    assert grad_of(out.loss, logp).item() == pytest.approx(-2.2, rel=1e-5)


def test_dual_clip_bounds_the_loss_of_a_negative_advantage() -> None:
    # ratio 5, A = -1: the clipped surrogate is -min(-5, -1.28) = 5; dual clip c = 3 bounds it
    # at -c*A = 3 with no gradient. Without dual clip it stays 5 with gradient r = 5.
    mask, old = torch.ones(1, 1), torch.zeros(1, 1)
    logp = log_ratios([[5.0]])
    bounded = policy_loss(logp, old, torch.tensor([-1.0]), mask, replace(PLAIN, dual_clip=3.0))
    assert bounded.loss.item() == pytest.approx(3.0)
    assert grad_of(bounded.loss, logp).item() == 0.0
    assert bounded.stats["dual_clip_fraction"] == 1.0

    free = policy_loss(logp, old, torch.tensor([-1.0]), mask, PLAIN)
    assert free.loss.item() == pytest.approx(5.0, rel=1e-5)
    assert grad_of(free.loss, logp).item() == pytest.approx(5.0, rel=1e-5)
    assert free.stats["dual_clip_fraction"] == 0.0

    # A = -2: min(2 * 5, 3 * 2) = 6; c = 10 (DART) leaves 10 alone; positive A is untouched.
    doubled = policy_loss(logp, old, torch.tensor([-2.0]), mask, replace(PLAIN, dual_clip=3.0))
    assert doubled.loss.item() == pytest.approx(6.0)
    loose = policy_loss(logp, old, torch.tensor([-2.0]), mask, replace(PLAIN, dual_clip=10.0))
    assert loose.loss.item() == pytest.approx(10.0, rel=1e-5)
    positive = policy_loss(logp, old, torch.tensor([1.0]), mask, replace(PLAIN, dual_clip=3.0))
    assert positive.loss.item() == pytest.approx(-1.28)


# --- loss aggregation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loss_type", "normaliser", "expected_loss", "expected_grad"),
    [
        # sequence means -1 and -2, then their mean; token (0, 0): -1 / 3 tokens / 2 seqs
        ("grpo", None, -1.5, -1 / 6),
        # (-1 - 1 - 1 - 2) / 4 tokens
        ("bnpo", None, -1.25, -1 / 4),
        # -5 / 10 tokens in the accumulated batch
        ("dapo", 10.0, -0.5, -1 / 10),
        # without a normaliser: this micro-batch's 4 tokens
        ("dapo", None, -1.25, -1 / 4),
        # -5 / (2 sequences * max_completion_length 4)
        ("dr_grpo", None, -0.625, -1 / 8),
    ],
)
def test_each_loss_type_uses_its_own_normaliser(loss_type: LossType, normaliser: float | None,
                                                 expected_loss: float,
                                                 expected_grad: float) -> None:
    # Two sequences of 3 and 1 tokens, ratio 1 everywhere, A = 1 and 2: per-token losses
    # -1, -1, -1 and -2. Padding holds values that would overflow exp() if they leaked in.
    logp = torch.tensor([[0.0, 0.0, 0.0], [0.0, 80.0, NAN]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    config = replace(PLAIN, loss_type=loss_type, max_completion_length=4)
    out = policy_loss(logp, torch.zeros(2, 3), torch.tensor([1.0, 2.0]), mask, config,
                      token_normaliser=normaliser)
    assert out.loss.item() == pytest.approx(expected_loss)
    grad = grad_of(out.loss, logp)
    assert grad[0, 0].item() == pytest.approx(expected_grad)
    assert grad[1, 1].item() == 0.0 and grad[1, 2].item() == 0.0


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo", "dr_grpo"])
def test_a_batch_without_tokens_gives_zero_loss_with_a_gradient(loss_type: LossType) -> None:
    logp = torch.zeros(2, 3, requires_grad=True)
    config = replace(PLAIN, loss_type=loss_type)
    out = policy_loss(logp, torch.zeros(2, 3), torch.tensor([1.0, -1.0]), torch.zeros(2, 3),
                      config, token_normaliser=0.0 if loss_type == "dapo" else None)
    assert out.loss.item() == 0.0
    assert out.loss.requires_grad
    assert_close(grad_of(out.loss, logp), torch.zeros(2, 3))
    assert out.stats["tokens"] == 0.0


def test_policy_loss_rejects_advantages_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3),
                    PLAIN)


# --- truncated importance sampling ---------------------------------------------------------

# Ratios exp(old - rollout) per token; NaN: rollout log-prob unknown; the last two tokens of
# the second sequence are padding, with a rollout value that must be ignored.
RATIOS = [[3.0, 0.25, 1.5, 1.0], [4.0, 4.0, 1.0, 1.0]]
ROLLOUT = torch.tensor([[-1.0, -1.0, -1.0, NAN], [-1.0, -1.0, 100.0, 100.0]])
OLD = torch.tensor([[-1.0 + math.log(r) for r in row] for row in RATIOS])
MASK = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
# |old - rollout| over the five known tokens
GAP = (math.log(3) + math.log(4) + math.log(1.5) + 2 * math.log(4)) / 5


def test_token_level_truncation_caps_each_token() -> None:
    weights, stats = truncated_is_weights(OLD, ROLLOUT, MASK, level="token", mode="truncate",
                                          cap=2.0)
    assert_close(weights, torch.tensor([[2.0, 0.25, 1.5, 1.0], [2.0, 2.0, 1.0, 1.0]]))
    assert stats["is_ratio_min"] == pytest.approx(0.25, rel=1e-5)
    assert stats["is_ratio_max"] == pytest.approx(4.0, rel=1e-5)
    assert stats["is_ratio_mean"] == pytest.approx((3 + 0.25 + 1.5 + 4 + 4) / 5, rel=1e-5)
    assert stats["is_truncated_fraction"] == pytest.approx(3 / 5)  # 3, 4 and 4
    assert stats["logprob_gap_mean"] == pytest.approx(GAP, rel=1e-5)


def test_token_level_masking_drops_tokens_outside_the_range() -> None:
    # kept range [1/2, 2]: 3, 0.25, 4, 4 are dropped; 1.5 stays; unknown and padding weigh 1
    weights, stats = truncated_is_weights(OLD, ROLLOUT, MASK, level="token", mode="mask",
                                          cap=2.0)
    assert_close(weights, torch.tensor([[0.0, 0.0, 1.5, 1.0], [0.0, 0.0, 1.0, 1.0]]))
    assert stats["is_truncated_fraction"] == pytest.approx(4 / 5)


def test_sequence_level_uses_the_summed_log_ratio_of_known_tokens() -> None:
    # TRL's and verl's sequence level: the product of the token ratios.
    # seq 0: exp(log 3 + log 0.25 + log 1.5) = 1.125, inside [0.5, 2]
    # seq 1: exp(log 4 + log 4) = 16: capped to 2, or masked to 0
    truncated, stats = truncated_is_weights(OLD, ROLLOUT, MASK, level="sequence",
                                            mode="truncate", cap=2.0)
    assert_close(truncated, torch.tensor([[1.125, 1.125, 1.125, 1.0], [2.0, 2.0, 1.0, 1.0]]))
    assert stats["is_ratio_min"] == pytest.approx(1.125, rel=1e-5)
    assert stats["is_ratio_max"] == pytest.approx(16.0, rel=1e-5)
    assert stats["is_ratio_mean"] == pytest.approx((3 * 1.125 + 2 * 16) / 5, rel=1e-5)
    assert stats["is_truncated_fraction"] == pytest.approx(2 / 5)
    masked, _ = truncated_is_weights(OLD, ROLLOUT, MASK, level="sequence", mode="mask", cap=2.0)
    assert_close(masked, torch.tensor([[1.125, 1.125, 1.125, 1.0], [0.0, 0.0, 1.0, 1.0]]))
    # 100 tokens at +0.02 each (the example): e^2, not the geometric 1.02
    weights, _ = truncated_is_weights(torch.full((1, 100), 0.02), torch.zeros(1, 100),
                                      torch.ones(1, 100), level="sequence", mode="truncate",
                                      cap=100.0)
    assert weights[0, 0].item() == pytest.approx(math.exp(2.0), rel=1e-5)
    # the summed log ratio is clamped like a token's
    clamped, _ = truncated_is_weights(torch.full((1, 3), 1.0), torch.zeros(1, 3),
                                      torch.ones(1, 3), level="sequence", mode="truncate",
                                      cap=100.0, log_clamp=2.0)
    assert clamped[0, 0].item() == pytest.approx(math.exp(2.0), rel=1e-5)


def test_geometric_level_uses_the_mean_log_ratio_of_known_tokens() -> None:
    # seq 0: exp(mean(log 3, log 0.25, log 1.5)) = 1.125 ** (1/3) = 1.040042, inside [0.5, 2]
    # seq 1: exp(mean(log 4, log 4)) = 4: capped to 2, or masked to 0
    seq0 = 1.125 ** (1 / 3)
    truncated, stats = truncated_is_weights(OLD, ROLLOUT, MASK, level="geometric",
                                            mode="truncate", cap=2.0)
    assert_close(truncated, torch.tensor([[seq0, seq0, seq0, 1.0], [2.0, 2.0, 1.0, 1.0]]))
    assert stats["is_ratio_min"] == pytest.approx(seq0, rel=1e-5)
    assert stats["is_ratio_max"] == pytest.approx(4.0, rel=1e-5)
    assert stats["is_ratio_mean"] == pytest.approx((3 * seq0 + 2 * 4) / 5, rel=1e-5)
    assert stats["is_truncated_fraction"] == pytest.approx(2 / 5)
    assert stats["logprob_gap_mean"] == pytest.approx(GAP, rel=1e-5)

    masked, _ = truncated_is_weights(OLD, ROLLOUT, MASK, level="geometric", mode="mask",
                                     cap=2.0)
    assert_close(masked, torch.tensor([[seq0, seq0, seq0, 1.0], [0.0, 0.0, 1.0, 1.0]]))


def test_is_weights_are_detached_and_log_ratios_clamped() -> None:
    old = torch.tensor([[30.0, 0.0]], requires_grad=True)
    rollout = torch.tensor([[0.0, NAN]])
    weights, stats = truncated_is_weights(old, rollout, torch.ones(1, 2), level="token",
                                          mode="truncate", cap=2.0, log_clamp=1.0)
    assert not weights.requires_grad
    # log ratio 30 clamped to 1: ratio e; the unknown token is not in the stats
    assert stats["is_ratio_max"] == pytest.approx(math.e, rel=1e-5)
    assert stats["is_ratio_mean"] == pytest.approx(math.e, rel=1e-5)
    assert stats["logprob_gap_mean"] == pytest.approx(30.0)


def test_all_unknown_rollout_log_probs_give_weight_one_and_neutral_stats() -> None:
    weights, stats = truncated_is_weights(torch.zeros(1, 2), torch.full((1, 2), NAN),
                                          torch.ones(1, 2), level="sequence", mode="mask",
                                          cap=2.0)
    assert_close(weights, torch.ones(1, 2))
    assert stats["is_truncated_fraction"] == 0.0
    assert stats["is_ratio_mean"] == 1.0


@pytest.mark.parametrize(
    ("mode", "rollout", "expected"),
    [
        ("truncate", -math.log(3), -2.0),  # w = 3 capped at 2: loss -w*r*A = -2, gradient -2
        ("mask", -math.log(3), 0.0),  # w = 3 outside [1/2, 2]: the token is dropped
        ("mask", NAN, -1.0),  # unknown rollout log-prob: weight 1
    ],
)
def test_policy_loss_weights_the_policy_term_by_the_is_weight(mode: ISMode, rollout: float,
                                                               expected: float) -> None:
    logp = torch.zeros(1, 1, requires_grad=True)  # ratio 1 against old 0, A = 1
    config = replace(PLAIN, importance_sampling_cap=2.0, importance_sampling_mode=mode)
    out = policy_loss(logp, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1), config,
                      rollout_logp=torch.tensor([[rollout]]))
    assert out.loss.item() == pytest.approx(expected, rel=1e-5)
    assert grad_of(out.loss, logp).item() == pytest.approx(expected, rel=1e-5)
    assert "is_ratio_mean" in out.stats


def test_no_cap_turns_the_correction_off() -> None:
    logp = torch.zeros(1, 1, requires_grad=True)
    out = policy_loss(logp, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1), PLAIN,
                      rollout_logp=torch.tensor([[-math.log(3)]]))
    assert out.loss.item() == pytest.approx(-1.0)
    assert "is_ratio_mean" not in out.stats


# --- KL -------------------------------------------------------------------------------------


def test_k3_values() -> None:
    # d = ref - logp: exp(d) - d - 1
    # logp 0, ref log 0.5: 0.5 + 0.693147 - 1 = 0.193147
    # logp log 0.5, ref 0: 2 - 0.693147 - 1 = 0.306853
    logp = torch.tensor([0.0, math.log(0.5), -0.3])
    ref = torch.tensor([math.log(0.5), 0.0, -0.3])
    assert_close(kl_k3(logp, ref), torch.tensor([0.193147, 0.306853, 0.0]))


def test_kl_term_adds_beta_times_k3_and_its_gradient() -> None:
    # A = 0, so only KL: 0.1 * 0.193147; d k3 / d logp = 1 - exp(ref - logp) = 0.5, * 0.1
    logp = torch.zeros(1, 1, requires_grad=True)
    ref = torch.tensor([[math.log(0.5)]])
    config = replace(PLAIN, beta=0.1)
    out = policy_loss(logp, torch.zeros(1, 1), torch.tensor([0.0]), torch.ones(1, 1), config,
                      ref_logp=ref)
    assert out.loss.item() == pytest.approx(0.0193147, rel=1e-5)
    assert grad_of(out.loss, logp).item() == pytest.approx(0.05, rel=1e-5)
    assert out.stats["kl"] == pytest.approx(0.193147, rel=1e-5)

    off = policy_loss(logp, torch.zeros(1, 1), torch.tensor([0.0]), torch.ones(1, 1), PLAIN,
                      ref_logp=ref)
    assert off.loss.item() == 0.0
    assert off.stats["kl"] == 0.0


# --- entropy selection ----------------------------------------------------------------------

ENTROPIES = torch.tensor([[0.1, 0.5, 0.9], [0.3, 7.0, 0.0]])
ENTROPY_MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])


def test_entropy_mask_keeps_tokens_at_or_above_the_quantile() -> None:
    # masked entropies sorted: 0.1, 0.3, 0.5, 0.9 (the padding's 7.0 does not count)
    # rho 0.5: 0.5 quantile at position 1.5 -> 0.3 + 0.5 * 0.2 = 0.4: keep 0.5 and 0.9
    assert_close(entropy_token_mask(ENTROPIES, ENTROPY_MASK, 0.5),
                 torch.tensor([[0.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    # rho 0.25: 0.75 quantile at position 2.25 -> 0.5 + 0.25 * 0.4 = 0.6: keep 0.9
    assert_close(entropy_token_mask(ENTROPIES, ENTROPY_MASK, 0.25),
                 torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    assert_close(entropy_token_mask(ENTROPIES, ENTROPY_MASK, 1.0), ENTROPY_MASK)
    with pytest.raises(ValueError, match="top_entropy_quantile"):
        entropy_token_mask(ENTROPIES, ENTROPY_MASK, 0.0)


def test_entropy_selection_limits_the_policy_term_but_not_kl() -> None:
    # rho 0.5 keeps tokens (0, 1) and (0, 2); ratio 1, A = 1: policy -1 on each, over the
    # 4 masked tokens (bnpo) = -0.5. KL 0.193147 on all 4 tokens, beta 0.1: + 0.0193147.
    # Gradient: unselected token KL only, 0.1 * 0.5 / 4 = 0.0125; selected -1/4 + 0.0125.
    logp = torch.zeros(2, 3, requires_grad=True)
    config = replace(PLAIN, top_entropy_quantile=0.5, beta=0.1)
    out = policy_loss(logp, torch.zeros(2, 3), torch.tensor([1.0, 1.0]), ENTROPY_MASK, config,
                      entropies=ENTROPIES, ref_logp=torch.full((2, 3), math.log(0.5)))
    assert out.loss.item() == pytest.approx(-0.5 + 0.0193147, rel=1e-5)
    assert_close(grad_of(out.loss, logp),
                 torch.tensor([[0.0125, -0.2375, -0.2375], [0.0125, 0.0, 0.0]]))
    assert out.stats["tokens"] == 4
    assert out.stats["selected_tokens"] == 2
    assert out.stats["policy_loss"] == pytest.approx(-0.5)


def test_step_selection_takes_the_highest_entropy_steps_with_ties_to_the_earlier() -> None:
    steps = [0.5, 0.9, 0.9, 0.1, 0.5]
    assert select_high_entropy_steps(steps, 0.4) == [1, 2]  # k = int(0.4 * 5) = 2
    assert select_high_entropy_steps(steps, 0.6) == [0, 1, 2]  # k = 3: 0.5 tie -> index 0
    assert select_high_entropy_steps(steps, 0.1) == [1]  # k = max(1, 0) = 1: tie -> index 1
    assert select_high_entropy_steps(steps, 1.0) == [0, 1, 2, 3, 4]
    # a step with no entropy (a demonstration's) is always kept; k counts the known ones
    assert select_high_entropy_steps([NAN, 0.2, 0.1], 0.5) == [0, 1]  # k = max(1, 1)
    assert select_high_entropy_steps([0.3, NAN, NAN], 0.8) == [0, 1, 2]
    assert select_high_entropy_steps([NAN, NAN, NAN], 0.8) == [0, 1, 2]  # a demonstration
    assert select_high_entropy_steps([], 0.5) == []
    with pytest.raises(ValueError, match="step_entropy_ratio"):
        select_high_entropy_steps(steps, 0.0)


# --- configuration --------------------------------------------------------------------------


def test_default_config_is_valid_and_every_field_has_help() -> None:
    config = GRPOConfig()
    assert config.loss_type == "dapo" and config.num_generations == 8
    assert all(f.metadata.get("help") for f in fields(GRPOConfig))
    assert set(GRPOConfig.help()) == {f.name for f in fields(GRPOConfig)}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"epsilon": -1}, "grpo.epsilon: expected >= 0, got -1"),
        ({"epsilon_high": -0.1}, "grpo.epsilon_high: expected >= 0"),
        ({"num_generations": 1}, "grpo.num_generations: expected >= 2, got 1"),
        ({"num_generations": 8.0}, "grpo.num_generations: expected an integer"),
        ({"scale_rewards": "std"}, "grpo.scale_rewards: expected one of"),
        ({"loss_type": "ppo"}, "grpo.loss_type: expected one of"),
        ({"dual_clip": 1.0}, "grpo.dual_clip: expected > 1"),
        ({"max_completion_length": 0}, "grpo.max_completion_length: expected >= 1"),
        ({"beta": -0.1}, "grpo.beta: expected >= 0"),
        ({"importance_sampling_level": "step"}, "grpo.importance_sampling_level"),
        ({"importance_sampling_mode": "clip"}, "grpo.importance_sampling_mode"),
        ({"importance_sampling_cap": 0.5}, "grpo.importance_sampling_cap: expected >= 1"),
        ({"top_entropy_quantile": 0.0}, "grpo.top_entropy_quantile: expected > 0"),
        ({"top_entropy_quantile": 1.5}, "grpo.top_entropy_quantile: expected <= 1"),
        ({"step_entropy_ratio": 0.0}, "grpo.step_entropy_ratio: expected > 0"),
        ({"beta": "0.1"}, "grpo.beta: expected a number"),
    ],
)
def test_config_validation_names_the_field(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        GRPOConfig(**overrides)  # type: ignore[arg-type]
