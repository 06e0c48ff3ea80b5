"""The statistics of an evaluation: how sure a success rate is, how much a task's outcome
changes between seeds, and whether one policy beats another on the same tasks and seeds.

- `wilson_interval`: the Wilson score interval of one rate (k successes of n), which keeps
  inside [0, 1] and stays honest at 0/n and n/n, where the normal interval collapses.
- `bootstrap_mean_interval`: the percentile interval of the mean of per-task rates,
  resampling tasks (the unit that varies between benchmarks) with replacement.
- `flip_rate`: the share of pairs of seeds of one task whose outcomes differ; 0 for a task
  that always or never succeeds, 2/3 for one success in three seeds.
- `mcnemar_exact`: the exact two-sided McNemar test on paired outcomes (same task, same
  seed): only discordant pairs count, and under "no difference" each goes either way with
  probability 1/2.
- `paired_bootstrap`: the percentile interval of the mean per-task difference of two
  policies, resampling tasks, and the share of resamples on the other side of zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a value between 0 and 1, got {confidence}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of `successes` out of `n`; (0, 1) when n is 0."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes: expected 0..{n}, got {successes}")
    if n == 0:
        return 0.0, 1.0
    z = _z(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _resampled_means(values: Sequence[float], confidence: float, resamples: int,
                     seed: int) -> tuple[np.ndarray, tuple[float, float]]:
    """The means of `resamples` resamples of `values` with replacement, and their
    percentile interval at `confidence`."""
    _z(confidence)
    if not values:
        raise ValueError("bootstrap: no values")
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return means, (float(low), float(high))


def bootstrap_mean_interval(values: Sequence[float], confidence: float = 0.95,
                            resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `values` (one per task)."""
    return _resampled_means(values, confidence, resamples, seed)[1]


def flip_rate(outcomes: Sequence[bool]) -> float | None:
    """The share of pairs of runs (seeds) of one task with different outcomes; None with
    fewer than two runs."""
    n = len(outcomes)
    if n < 2:
        return None
    successes = sum(bool(o) for o in outcomes)
    return successes * (n - successes) / (n * (n - 1) / 2)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts: pairs only policy A
    solved and pairs only policy B solved."""
    if a_only < 0 or b_only < 0:
        raise ValueError("mcnemar: counts must be >= 0")
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class PairedDifference:
    mean: float  # mean over tasks of (rate of A - rate of B)
    interval: tuple[float, float]
    p_value: float  # two-sided: twice the share of resamples on the far side of zero


def paired_bootstrap(differences: Sequence[float], confidence: float = 0.95,
                     resamples: int = 10_000, seed: int = 0) -> PairedDifference:
    """Bootstrap over tasks of the per-task differences of two policies' success rates."""
    means, interval = _resampled_means(differences, confidence, resamples, seed)
    observed = sum(differences) / len(differences)
    if observed == 0:
        return PairedDifference(0.0, interval, 1.0)
    far_side = float((means <= 0).mean() if observed > 0 else (means >= 0).mean())
    return PairedDifference(observed, interval, min(1.0, 2 * far_side))
