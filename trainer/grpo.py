"""The multi-turn GRPO objective as tensor math: group advantages, the clipped surrogate with
clip-higher and dual clip, truncated importance sampling against rollout log-probs, k3 KL and
entropy-based token and step selection. No models, no store: the training loop feeds tensors.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:  # torch is imported where the math runs: the config stays light
    from torch import Tensor


ScaleRewards = Literal["group", "batch", "none"]
LossType = Literal["grpo", "bnpo", "dapo", "dr_grpo"]
ISLevel = Literal["token", "sequence", "geometric"]
ISMode = Literal["truncate", "mask"]

# verl clamps log-ratios here: exp(20) is still finite in float32 and far past any clip bound.
LOG_RATIO_CLAMP = 20.0


@dataclass(frozen=True)
class GRPOConfig:
    """The knobs of the GRPO loss; names follow TRL's GRPOConfig where the meaning is the same."""

    num_generations: int = field(
        default=8, metadata={"help": "G: rollouts per task in a group"})
    scale_rewards: ScaleRewards = field(
        default="group",
        metadata={"help": "divide advantages by the std of the group, of the batch, or not at all"})
    epsilon: float = field(
        default=0.2, metadata={"help": "lower clip of the ratio (1 - epsilon)"})
    epsilon_high: float = field(
        default=0.28, metadata={"help": "upper clip of the ratio (1 + epsilon_high); clip-higher"})
    dual_clip: float | None = field(
        default=3.0,
        metadata={"help": "dual-clip bound c for negative advantages (ARPO 3.0, DART 10.0); "
                          "None: off"})
    loss_type: LossType = field(
        default="dapo",
        metadata={"help": "grpo: mean per sequence then over sequences; bnpo: token mean of the "
                          "micro-batch; dapo: token mean of the accumulated batch; dr_grpo: "
                          "token sum / (sequences * max_completion_length)"})
    max_completion_length: int = field(
        default=512, metadata={"help": "response tokens per sequence in dr_grpo's normaliser"})
    beta: float = field(
        default=0.0, metadata={"help": "KL (k3) coefficient; 0 computes no reference. The "
                                        "reference: the warmed-up policy after a "
                                        "training.warmup, else the base model"})
    importance_sampling_level: ISLevel = field(
        default="token",
        metadata={"help": "truncated IS against rollout log-probs: token (one weight per "
                          "token), sequence (exp of the sum of the sequence's token "
                          "log-ratios, TRL/verl) or geometric (exp of their mean, verl)"})
    importance_sampling_mode: ISMode = field(
        default="truncate",
        metadata={"help": "truncate: min(w, cap); mask: drop tokens/sequences with w outside "
                          "[1/cap, cap]"})
    importance_sampling_cap: float | None = field(
        default=2.0, metadata={"help": "C, at least 1; None turns the correction off"})
    top_entropy_quantile: float = field(
        default=1.0,
        metadata={"help": "rho: policy term only on tokens with entropy at or above the "
                          "(1 - rho) quantile of the batch; 1.0 keeps all"})
    step_entropy_ratio: float = field(
        default=1.0,
        metadata={"help": "train on the top ratio of steps per episode by mean token entropy "
                          "(DART); steps with no entropy (demonstrations) are always kept; "
                          "1.0 keeps all"})

    def __post_init__(self) -> None:
        _check_int("num_generations", self.num_generations, minimum=2)
        _check_choice("scale_rewards", self.scale_rewards, ScaleRewards)
        _check_number("epsilon", self.epsilon, at_least=0.0, below=1.0)
        _check_number("epsilon_high", self.epsilon_high, at_least=0.0)
        if self.dual_clip is not None:
            # c <= 1 would bound the loss of tokens the policy has not moved at all.
            _check_number("dual_clip", self.dual_clip, above=1.0)
        _check_choice("loss_type", self.loss_type, LossType)
        _check_int("max_completion_length", self.max_completion_length, minimum=1)
        _check_number("beta", self.beta, at_least=0.0)
        _check_choice("importance_sampling_level", self.importance_sampling_level, ISLevel)
        _check_choice("importance_sampling_mode", self.importance_sampling_mode, ISMode)
        if self.importance_sampling_cap is not None:
            # Below 1 even on-policy tokens (w = 1) would be cut, and mask mode's range is empty.
            _check_number("importance_sampling_cap", self.importance_sampling_cap,
                          at_least=1.0)
        _check_number("top_entropy_quantile", self.top_entropy_quantile, above=0.0,
                      at_most=1.0)
        _check_number("step_entropy_ratio", self.step_entropy_ratio, above=0.0, at_most=1.0)

    @classmethod
    def help(cls) -> dict[str, str]:
        """One line per field, for config files and forms."""
        return {f.name: f.metadata["help"] for f in fields(cls)}


def _fail(name: str, expected: str, value: object) -> ValueError:
    return ValueError(f"grpo.{name}: expected {expected}, got {value!r}")


def _check_choice(name: str, value: object, choices: object) -> None:
    allowed = get_args(choices)
    if value not in allowed:
        raise _fail(name, "one of " + ", ".join(repr(a) for a in allowed), value)


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(name, "an integer", value)
    if value < minimum:
        raise _fail(name, f">= {minimum}", value)


def _check_number(name: str, value: object, *, at_least: float | None = None,
                  above: float | None = None, at_most: float | None = None,
                  below: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise _fail(name, "a number", value)
    if at_least is not None and value < at_least:
        raise _fail(name, f">= {at_least:g}", value)
    if above is not None and value <= above:
        raise _fail(name, f"> {above:g}", value)
    if at_most is not None and value > at_most:
        raise _fail(name, f"<= {at_most:g}", value)
    if below is not None and value >= below:
        raise _fail(name, f"< {below:g}", value)


def group_advantages(rewards: Sequence[float], groups: Sequence[Hashable],
                     scale: ScaleRewards = "group", eps: float = 1e-6) -> list[float]:
    """A = (r - mean of its group) / (std + eps), in input order.

    The std is the unbiased (n - 1) one, of the reward's group for "group", of the whole batch
    for "batch"; "none" does not divide. A group of one member gets 0: it has nothing to be
    compared with; so does a group whose rewards are all equal, exactly 0 (the formula
    gives +-1e-11 where the mean of rewards such as 0.1 rounds, and the loop and the trust
    region tell the samples with no signal by an advantage of 0).
    """
    if len(rewards) != len(groups):
        raise ValueError(f"group_advantages: {len(rewards)} rewards but {len(groups)} groups")
    _check_choice("scale_rewards", scale, ScaleRewards)
    members: dict[Hashable, list[int]] = {}
    for index, group in enumerate(groups):
        members.setdefault(group, []).append(index)
    batch_std = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    advantages = [0.0] * len(rewards)
    for indices in members.values():
        values = [float(rewards[i]) for i in indices]
        if len(indices) < 2 or min(values) == max(values):
            continue
        mean = statistics.fmean(values)
        if scale == "group":
            divisor = statistics.stdev(values) + eps
        elif scale == "batch":
            divisor = batch_std + eps
        else:
            divisor = 1.0
        for i, value in zip(indices, values, strict=True):
            advantages[i] = (value - mean) / divisor
    return advantages


def truncated_is_weights(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, *,
                         level: ISLevel, mode: ISMode, cap: float,
                         log_clamp: float = LOG_RATIO_CLAMP) -> tuple[Tensor, dict[str, float]]:
    """Importance weights correcting for the rollout engine's (or an older policy's) log-probs.

    Tensors are (batch, tokens); ``mask`` is 1 on response tokens that count. The log ratio
    ``old_logp - rollout_logp`` is clamped to ±log_clamp per token. The levels, named for
    what they compute (as verl's rollout correction names them):

    - "token": w = exp(log ratio) per token;
    - "sequence": w = exp(sum of the sequence's masked log ratios), the probability ratio of
      the whole sequence (TRL's and verl's sequence level), shared by all its tokens; the sum
      is clamped to ±log_clamp again;
    - "geometric": w = exp(mean of them), the length-normalised ratio (GSPO; verl's
      "geometric"). Run configuration files written before config_format 2 called this
      "sequence" (trainer/config.py refuses that old spelling with a message).

    "truncate" gives min(w, cap); "mask" keeps w inside [1/cap, cap] and gives 0 outside, which
    drops the token (or the whole sequence) from the policy term.

    A NaN in ``rollout_logp`` marks a token whose rollout log-prob is unknown (e.g. an imported
    demonstration): it gets weight 1, takes no part in its sequence's sum or mean and is
    left out of the stats. Padding also gets weight 1. The weights carry no gradient.

    Stats over masked tokens with known log-probs: "is_ratio_min/mean/max" (w before
    truncation), "is_truncated_fraction" (weight changed by truncation or masking) and
    "logprob_gap_mean" (mean |old - rollout|); neutral values (1, 0) when there are none.
    """
    import torch

    _check_choice("importance_sampling_level", level, ISLevel)
    _check_choice("importance_sampling_mode", mode, ISMode)
    _check_number("importance_sampling_cap", cap, at_least=1.0)
    old_logp = old_logp.detach().float()
    rollout_logp = rollout_logp.detach().float()
    known = (mask > 0) & ~torch.isnan(rollout_logp)
    # Zero the log ratio outside the known tokens so that NaN never reaches a sum.
    log_ratio = torch.where(known, old_logp - rollout_logp, torch.zeros_like(old_logp))
    log_ratio = log_ratio.clamp(-log_clamp, log_clamp)
    if level == "sequence":
        total = log_ratio.sum(dim=-1, keepdim=True).clamp(-log_clamp, log_clamp)
        log_ratio = total.expand_as(log_ratio)
    elif level == "geometric":
        counts = known.sum(dim=-1, keepdim=True).clamp(min=1)
        log_ratio = (log_ratio.sum(dim=-1, keepdim=True) / counts).expand_as(log_ratio)
    ratio = torch.exp(log_ratio)
    if mode == "truncate":
        changed = ratio > cap
        weights = ratio.clamp(max=cap)
    else:
        changed = (ratio > cap) | (ratio < 1.0 / cap)
        weights = torch.where(changed, torch.zeros_like(ratio), ratio)
    weights = torch.where(known, weights, torch.ones_like(weights))

    count = known.sum()
    if int(count) == 0:
        stats = {"is_ratio_min": 1.0, "is_ratio_mean": 1.0, "is_ratio_max": 1.0,
                 "is_truncated_fraction": 0.0, "logprob_gap_mean": 0.0}
        return weights, stats
    known_ratio = ratio[known]
    gap = (old_logp - rollout_logp)[known].abs()
    values = torch.stack([known_ratio.min(), known_ratio.mean(), known_ratio.max(),
                          changed[known].float().mean(), gap.mean()]).tolist()
    names = ["is_ratio_min", "is_ratio_mean", "is_ratio_max", "is_truncated_fraction",
             "logprob_gap_mean"]
    return weights, dict(zip(names, values, strict=True))


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(policy || reference): exp(d) - d - 1 with d = ref - logp.

    Unbiased for the KL under samples from the policy and never negative. d is clamped to
    ±20 so that a token the reference finds impossible cannot overflow.
    """
    import torch

    delta = (ref_logp - logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(delta) - delta - 1.0


def entropy_token_mask(entropies: Tensor, mask: Tensor, quantile: float) -> Tensor:
    """A 0/1 float mask of the masked tokens whose entropy is at or above the (1 - quantile)
    quantile of all masked tokens in ``entropies`` (linear interpolation, torch.quantile).

    ``quantile`` is rho in (0, 1]: the fraction of high-entropy "forking" tokens to train on;
    1.0 returns ``mask`` unchanged.
    """
    import torch

    _check_number("top_entropy_quantile", quantile, above=0.0, at_most=1.0)
    mask = mask.float()
    if quantile >= 1.0:
        return mask
    selected = mask > 0
    if not bool(selected.any()):
        return mask
    values = entropies.detach().float()
    threshold = torch.quantile(values[selected], 1.0 - quantile)
    return (selected & (values >= threshold)).float()


def select_high_entropy_steps(step_entropies: Sequence[float], ratio: float) -> list[int]:
    """Indices, ascending, of the steps to train on: every step whose entropy is unknown
    (NaN: a demonstration, an import or a step with no response tokens, which no entropy
    can rank), and of the others the top k = max(1, int(ratio * known)) by mean token
    entropy, ties to the earlier step. ratio 1.0 keeps every step; no steps give [].

    Why unknown steps are kept: ranking them last (as a missing value) dropped the final
    steps of every demonstration whatever they held; they carry no rollout entropy because
    the policy did not sample them, not because they are uninformative.
    """
    _check_number("step_entropy_ratio", ratio, above=0.0, at_most=1.0)
    unknown = [i for i, entropy in enumerate(step_entropies) if math.isnan(float(entropy))]
    known = [i for i in range(len(step_entropies)) if i not in set(unknown)]
    if not known:
        return unknown
    keep = max(1, int(ratio * len(known)))
    ranked = sorted(known, key=lambda index: (-float(step_entropies[index]), index))
    return sorted(unknown + ranked[:keep])


@dataclass(frozen=True)
class LossOutput:
    """The scalar to call backward on, and what to log about it."""

    loss: Tensor
    stats: dict[str, float]


def policy_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
                config: GRPOConfig, *, rollout_logp: Tensor | None = None,
                entropies: Tensor | None = None, ref_logp: Tensor | None = None,
                token_normaliser: float | None = None) -> LossOutput:
    """The GRPO loss of one micro-batch.

    ``logp`` (batch, tokens) is the current policy's log-prob of each response token and
    carries the gradient; ``old_logp`` the trainer's log-prob before this update; ``advantages``
    is (batch,) per sequence or (batch, tokens); ``mask`` is 1 on response tokens that count.

    Per token: the clipped surrogate -min(r A, clip(r, 1 - eps, 1 + eps_high) A), bounded by
    -c A where A < 0 (dual clip), times the truncated IS weight when ``rollout_logp`` is given
    and the cap is set, on the tokens ``entropies`` select; plus beta * k3 KL on all masked
    tokens when beta > 0 and ``ref_logp`` is given. IS-masked and unselected tokens still count
    in the normalisers, as in TRL.

    With gradient accumulation, "dapo" expects ``token_normaliser`` = the masked tokens of the
    whole accumulated batch and the caller sums the micro-batch losses; "grpo", "bnpo" and
    "dr_grpo" are per-micro-batch means, and the caller averages them.
    """
    import torch

    if logp.dim() != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"policy_loss: logp, old_logp and mask must share one (batch, tokens) "
                         f"shape, got {tuple(logp.shape)}, {tuple(old_logp.shape)}, "
                         f"{tuple(mask.shape)}")
    if advantages.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(f"policy_loss: advantages must be (batch,) or (batch, tokens), got "
                         f"{tuple(advantages.shape)} for logp {tuple(logp.shape)}")
    if token_normaliser is not None and token_normaliser < 0:
        raise ValueError(f"policy_loss: token_normaliser must be >= 0, got {token_normaliser}")

    mask = mask.float()
    valid = mask > 0
    zeros = torch.zeros_like(mask)
    # Padding may hold any value (even -inf); keep it out of exp() so that neither the loss
    # nor its gradient can turn NaN through a 0 * inf.
    logp = torch.where(valid, logp.float(), zeros)
    old_logp = torch.where(valid, old_logp.detach().float(), zeros)
    advantage = advantages.detach().float()
    if advantage.dim() == 1:
        advantage = advantage.unsqueeze(-1)
    advantage = advantage.expand_as(mask)

    log_ratio = (logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    low, high = 1.0 - config.epsilon, 1.0 + config.epsilon_high
    surrogate = torch.maximum(-ratio * advantage, -ratio.clamp(low, high) * advantage)
    negative = advantage < 0
    if config.dual_clip is not None:
        bound = -config.dual_clip * advantage
        dual_clipped = negative & (surrogate > bound)
        per_token = torch.where(dual_clipped, bound, surrogate)
    else:
        dual_clipped = torch.zeros_like(valid)
        per_token = surrogate

    is_stats: dict[str, float] = {}
    if rollout_logp is not None and config.importance_sampling_cap is not None:
        weights, is_stats = truncated_is_weights(
            old_logp, rollout_logp, mask, level=config.importance_sampling_level,
            mode=config.importance_sampling_mode, cap=config.importance_sampling_cap)
        per_token = per_token * weights

    policy_mask = mask
    if entropies is not None and config.top_entropy_quantile < 1.0:
        policy_mask = entropy_token_mask(entropies, mask, config.top_entropy_quantile)
    policy_per_token = per_token * policy_mask

    use_kl = config.beta > 0 and ref_logp is not None
    if ref_logp is not None and use_kl:
        kl = kl_k3(logp, torch.where(valid, ref_logp.detach().float(), zeros)) * mask
        total_per_token = policy_per_token + config.beta * kl
    else:
        kl = zeros
        total_per_token = policy_per_token

    tokens = mask.sum()
    loss = _aggregate(total_per_token, mask, config, token_normaliser)
    policy_term = _aggregate(policy_per_token, mask, config, token_normaliser)

    denominator = tokens.clamp(min=1.0)
    clipped_low = valid & negative & (ratio < low)
    clipped_high = valid & (advantage > 0) & (ratio > high)
    names = ["loss", "policy_loss", "kl", "clip_fraction", "clip_fraction_low",
             "clip_fraction_high", "dual_clip_fraction", "ratio_mean", "tokens",
             "selected_tokens"]
    values = torch.stack([
        loss.detach(),
        policy_term.detach(),
        kl.detach().sum() / denominator,
        (clipped_low | clipped_high).float().sum() / denominator,
        clipped_low.float().sum() / denominator,
        clipped_high.float().sum() / denominator,
        (valid & dual_clipped).float().sum() / denominator,
        (ratio.detach() * mask).sum() / denominator,
        tokens,
        policy_mask.sum(),
    ]).tolist()
    stats = dict(zip(names, values, strict=True))
    stats.update(is_stats)
    return LossOutput(loss=loss, stats=stats)


def accumulated_loss(loss: Tensor, config: GRPOConfig, batch_samples: int,
                     total_samples: int) -> Tensor:
    """A micro-batch's loss as its share of the accumulated batch's (see policy_loss):
    "dapo" losses are summed as they are, the per-micro-batch means are weighted by the
    micro-batch's share of the samples."""
    if config.loss_type == "dapo":
        return loss
    return loss * (batch_samples / total_samples)


def clip_gradients(parameters: Sequence[Tensor], max_norm: float) -> float:
    """Clip the gradients' total norm to `max_norm` (0: no clipping); the norm before."""
    import torch

    return float(torch.nn.utils.clip_grad_norm_(
        list(parameters), max_norm if max_norm > 0 else float("inf")))


def _aggregate(per_token: Tensor, mask: Tensor, config: GRPOConfig,
               token_normaliser: float | None) -> Tensor:
    """Reduce masked per-token losses to a scalar the way ``config.loss_type`` says."""
    if config.loss_type == "grpo":
        per_sequence = per_token.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)
        # An empty batch has no sequences to average: keep the graph with a zero sum.
        return per_sequence.mean() if per_sequence.numel() else per_sequence.sum()
    total = per_token.sum()
    if config.loss_type == "bnpo":
        return total / mask.sum().clamp(min=1.0)
    if config.loss_type == "dapo":
        normaliser = float(mask.sum()) if token_normaliser is None else token_normaliser
        # No token anywhere in the accumulated batch: the sum is 0 already.
        return total / normaliser if normaliser > 0 else total
    return total / max(per_token.shape[0] * config.max_completion_length, 1)
