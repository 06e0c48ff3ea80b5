"""How far an update moves the policy from the one that sampled its batch, and keeping that
within limits (training.target_kl, target_kl_no_signal, max_logprob_drop).

PPO's target KL (Stable-Baselines3 `target_kl`) ends the passes once the policy has moved
that far; here a step that goes past a limit is also shrunk back (halved, TRPO's
backtracking line search) so that the update ends within it, because one step alone can
move a small policy ten times the target.

Moves are k3 KL(old || current) per sampled token: exp(d) - d - 1 with d = current - old
log-prob (samples from the old policy), computed in float64 (for small d it cancels in
float32). Three measures, one per limit:
- `mean`: the token mean over the whole batch (PPO's approx KL);
- `no_signal_max`: the largest sum over one sample's tokens among the samples that carry
  no advantage (their group's rewards were equal: solved, or failed alike). The update has
  no reason to change what those samples do, and a mean over thousands of tokens hides a
  decision (two coordinate tokens of one step) flipped on a solved task;
- `drop_max`: the largest fall of one sample's log-prob (summed over its tokens, old minus
  current) among the samples with an advantage of 0 or more: the update pushes none of
  them down, so a fall is what it did to them on the way to other samples.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

# halvings of a step that overshot before it is taken back whole: 1/32 of a step that moved
# the policy more than 32^2 x the target (k3 grows about as the square of a small step)
HALVINGS = 5


@dataclass(frozen=True)
class Drift:
    """How far the policy has moved from the sampling one (module docstring)."""

    mean: float = 0.0
    no_signal_max: float = 0.0
    drop_max: float = 0.0


@dataclass(frozen=True)
class Limits:
    """The largest moves allowed, one per Drift field; 0 turns a limit off."""

    mean: float = 0.0
    no_signal_max: float = 0.0
    drop_max: float = 0.0

    @property
    def active(self) -> bool:
        return self.mean > 0 or self.no_signal_max > 0 or self.drop_max > 0

    def allow(self, drift: Drift) -> bool:
        return all(limit <= 0 or moved <= limit for limit, moved in (
            (self.mean, drift.mean), (self.no_signal_max, drift.no_signal_max),
            (self.drop_max, drift.drop_max)))


class DriftMeter:
    """Adds up a batch's moves micro-batch by micro-batch."""

    def __init__(self) -> None:
        self.total = 0.0
        self.no_signal_max = 0.0
        self.drop_max = 0.0

    def add(self, old_logp: Tensor, logp: Tensor, mask: Tensor, advantages: Tensor) -> None:
        """`old_logp`, `logp`, `mask`: (samples, length); `advantages`: (samples,)."""
        from trainer.grpo import kl_k3

        old, new = old_logp.detach().double(), logp.detach().double()
        per_token = kl_k3(old, new) * mask
        self.total += float(per_token.sum().item())
        per_sample = per_token.sum(dim=1)[advantages == 0]
        if per_sample.numel():
            self.no_signal_max = max(self.no_signal_max, float(per_sample.max().item()))
        drops = ((old - new) * mask).sum(dim=1)[advantages >= 0]
        if drops.numel():
            self.drop_max = max(self.drop_max, float(drops.max().item()))

    def drift(self, tokens: int) -> Drift:
        return Drift(self.total / max(tokens, 1), self.no_signal_max, self.drop_max)


@dataclass(frozen=True)
class Backtrack:
    """What shrink_step did: the drift it ended at and the share of the step it kept
    (1: kept whole; 0: taken back)."""

    drift: Drift
    kept: float


def snapshot(parameters: Sequence[Tensor]) -> list[Tensor]:
    """Copies of the parameters before a step (on their device)."""
    return [p.detach().clone() for p in parameters]


def shrink_step(parameters: Sequence[Tensor], before: Sequence[Tensor],
                measure: Callable[[], Drift], limits: Limits, drift_before: Drift,
                halvings: int = HALVINGS) -> Backtrack:
    """The step from `before` to `parameters` moved the policy past `limits` (as
    `measure` says): move the parameters back to half the step, then a quarter, ... until
    `measure()` is within them; after `halvings` tries, back to `before`, whose drift was
    `drift_before`. `parameters` are changed in place."""
    import torch

    kept = 1.0
    with torch.no_grad():
        for _ in range(halvings):
            kept /= 2
            for parameter, start in zip(parameters, before, strict=True):
                # it holds start + 2 * kept * step: halve its distance from start
                parameter.sub_(start).mul_(0.5).add_(start)
            drift = measure()
            if limits.allow(drift):
                return Backtrack(drift, kept)
        for parameter, start in zip(parameters, before, strict=True):
            parameter.copy_(start)
    return Backtrack(drift_before, 0.0)


class StepGuard:
    """The optimizer steps of one update under `limits`: counts the steps that stand,
    keeps the parameters from before each step while a limit is set, and takes a step that
    went past the limits back to within them (`shrink_step`, measuring with `measure`)."""

    def __init__(self, parameters: Sequence[Tensor], limits: Limits,
                 measure: Callable[[], Drift], optimizer: Any = None) -> None:
        self.parameters, self.limits, self.measure = parameters, limits, measure
        # its state (Adam's moments and step count) goes back with a step taken back
        self.optimizer = optimizer
        self.steps = 0  # steps that stand
        self.drift = Drift()  # how far the steps so far moved the policy, when last measured
        self.kept = 1.0  # the share of the last step kept
        self._before: list[Tensor] = []
        self._optimizer_before: dict[str, Any] | None = None
        self._drift_before = Drift()

    def before_step(self) -> None:
        """Called just before each optimizer step."""
        if self.limits.active:
            self._before, self._drift_before = snapshot(self.parameters), self.drift
            if self.optimizer is not None:
                self._optimizer_before = copy.deepcopy(self.optimizer.state_dict())

    def stepped(self) -> None:
        self.steps += 1

    def within_limits(self, drift: Drift) -> bool:
        """Record where the steps so far left the policy; False when past a limit."""
        self.drift = drift
        return self.limits.allow(drift)

    def back_within_limits(self) -> None:
        """Shrink the last step until the policy is within the limits (or take it back)."""
        result = shrink_step(self.parameters, self._before, self.measure, self.limits,
                             self._drift_before)
        self.drift, self.kept = result.drift, result.kept
        if self.kept == 0:
            self.steps -= 1
            if self._optimizer_before is not None:  # as if the step had never been taken
                assert self.optimizer is not None
                self.optimizer.load_state_dict(self._optimizer_before)

    def release(self) -> None:
        """Drop the copies of the parameters and the optimizer's state (the update is
        over)."""
        self._before = []
        self._optimizer_before = None
