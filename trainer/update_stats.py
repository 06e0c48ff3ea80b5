"""The statistics one GRPO update logs (trainer/learner.py `Learner.optimise`).

Two kinds, weighted by tokens:
- the batch as the rollout policy left it, from the first pass: `tokens`, `entropy` and
  `logprob_mean` (token means);
- the loss statistics (trainer/grpo.py `policy_loss`) of the last pass run, as token means
  over the whole batch, and the importance-sampling ratio's extremes of that pass (clipping
  only shows after a first step).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

EXTREMES = ("is_ratio_min", "is_ratio_max")
NOT_MEANS = ("tokens", "selected_tokens")  # loss statistics that are counts, not logged


class UpdateStats:
    """Accumulates one update's statistics, micro-batch by micro-batch, pass by pass."""

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self._weights: dict[str, float] = {}
        self._last: dict[str, float] = {}  # the loss statistics of the last pass run
        self._last_extremes: dict[str, float] = {}
        self._pass: dict[str, float] = {}
        self._pass_extremes: dict[str, float] = {}

    def _add(self, name: str, value: float, weight: float) -> None:
        self._sums[name] = self._sums.get(name, 0.0) + value
        self._weights[name] = self._weights.get(name, 0.0) + weight

    def add_rollout_batch(self, tokens: float, entropy_sum: float, logprob_sum: float
                          ) -> None:
        """One micro-batch of the first pass: its tokens, and its entropies and log-probs
        summed over them."""
        self._add("tokens", tokens, 1.0)
        self._add("entropy", entropy_sum, tokens)
        self._add("logprob_mean", logprob_sum, tokens)

    def start_pass(self) -> None:
        self._pass = {}
        self._pass_extremes = {"is_ratio_min": math.inf, "is_ratio_max": -math.inf}

    def add_loss(self, stats: Mapping[str, float], tokens: float) -> None:
        """One micro-batch's loss statistics (token means over its `tokens`)."""
        for name, value in stats.items():
            if name in EXTREMES:
                pick = min if name.endswith("min") else max
                self._pass_extremes[name] = pick(self._pass_extremes[name], value)
            elif name not in NOT_MEANS:
                self._pass[name] = self._pass.get(name, 0.0) + value * tokens

    def end_pass(self) -> None:
        self._last, self._last_extremes = self._pass, self._pass_extremes

    def metrics(self, total_tokens: int) -> dict[str, float]:
        """Token means (of the first pass's batch, and of the last pass's loss
        statistics), the token count and the last pass's finite IS-ratio extremes."""
        sums, weights = dict(self._sums), dict(self._weights)
        for name, value in self._last.items():
            sums[name] = sums.get(name, 0.0) + value
            weights[name] = weights.get(name, 0.0) + float(total_tokens)
        metrics = {name: sums[name] / weights[name] for name in sums
                   if weights[name] and name != "tokens"}
        metrics["tokens"] = sums.get("tokens", 0.0)
        metrics.update({k: v for k, v in self._last_extremes.items() if math.isfinite(v)})
        return metrics
