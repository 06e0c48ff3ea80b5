"""How far an update moves the policy from the one that sampled its batch, and keeping that
within training.target_kl: PPO's target KL (Stable-Baselines3 `target_kl`, Spinning Up)
ends the passes once the policy has moved that far; here a step that goes past the target
is also shrunk back (halved, TRPO's backtracking line search) so that the update ends
within it, because one step alone can move a small policy ten times the target.

The drift is the token mean of k3 KL(old || current) over the batch's response tokens:
exp(d) - d - 1 with d = current - old log-prob of each sampled token (samples from the
old policy), computed in float64 (for small d it cancels in float32).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

# halvings of a step that overshot before it is taken back whole: 1/32 of a step that moved
# the policy more than 32^2 x the target (k3 grows about as the square of a small step)
HALVINGS = 5


def drift_sum(old_logp: Tensor, logp: Tensor, mask: Tensor) -> float:
    """Sum over the masked tokens of k3 KL(old || current), in float64."""
    from trainer.grpo import kl_k3

    per_token = kl_k3(old_logp.detach().double(), logp.detach().double())
    return float((per_token * mask).sum().item())


@dataclass(frozen=True)
class Backtrack:
    """What shrink_step did: the drift it ended at and the share of the step it kept
    (1: kept whole; 0: taken back)."""

    drift: float
    kept: float


def snapshot(parameters: Sequence[Tensor]) -> list[Tensor]:
    """Copies of the parameters before a step (on their device)."""
    return [p.detach().clone() for p in parameters]


def shrink_step(parameters: Sequence[Tensor], before: Sequence[Tensor],
                measure: Callable[[], float], target: float, drift_before: float,
                halvings: int = HALVINGS) -> Backtrack:
    """The step from `before` to `parameters` moved the policy past `target` (as
    `measure` says): move the parameters back to half the step, then a quarter, ... until
    `measure()` is within the target; after `halvings` tries, back to `before`, whose
    drift was `drift_before`. `parameters` are changed in place."""
    import torch

    kept = 1.0
    with torch.no_grad():
        for _ in range(halvings):
            kept /= 2
            for parameter, start in zip(parameters, before, strict=True):
                # it holds start + 2 * kept * step: halve its distance from start
                parameter.sub_(start).mul_(0.5).add_(start)
            drift = measure()
            if drift <= target:
                return Backtrack(drift, kept)
        for parameter, start in zip(parameters, before, strict=True):
            parameter.copy_(start)
    return Backtrack(drift_before, 0.0)
