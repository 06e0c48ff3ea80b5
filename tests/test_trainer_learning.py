"""Proof that the trainer learns: the documented run of `bench/learning.py`
(assets/configs/learn-buttons.toml) on real sandboxes with a tiny random Qwen2.5-VL.

After the oracle warm-up the policy clicks one of the four cells about at random (chance
is a quarter). GRPO (with pre-collected oracle successes for groups that found none)
then makes the click depend on the instruction, and the run must show it:
- it starts low: the first update, the warmed-up policy before any GRPO step, succeeds
  in at most 60% of its 32 episodes. The warmed-up policy sits a little above chance
  (a quarter): its first updates were 0.22-0.44 in 8 runs, 0.32 on average, at which
  the bar fails about once in 2,700 runs (20 or more successes of 32 at p = 0.32; the
  earlier bar of half, 17 or more, failed about once in 100 there). GRPO acts from the
  second update on, so later updates are not the start (0.38-0.59 at updates 3-4 in
  recorded runs);
- it reaches 80% and holds it: the run stops (training.stop_at_success) once the median
  success rate of its last 20 updates is at least 0.80, and must do so within the
  config's cap of 120 updates. Medians, not means: a sharp policy can dip for an update
  (0.34 between 0.69 and 0.97 in one recorded run).
With the KL term to the warmed-up policy (grpo.beta = 0.1) six recorded runs reached
that median at update 20, the earliest it can (20-34 without it, where the policy could
also collapse once most groups succeeded); the curves:
bench/results/kl-reference-2026-11-27.json."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.run_configs import train_documented_run

pytestmark = [pytest.mark.x11, pytest.mark.slow, pytest.mark.timeout(2400)]

CONFIG = Path(__file__).resolve().parents[1] / "assets" / "configs" / "learn-buttons.toml"
START_BAR = 0.6  # the first update's success rate, at most (chance: 0.25)


def test_grpo_raises_the_success_rate_of_the_tiny_model(tmp_path: Path) -> None:
    config, _, rates = train_documented_run(CONFIG, tmp_path)
    target, window = config.training.stop_at_success, config.training.stop_window
    assert (target, window) == (0.8, 20) and config.rollout.max_steps == 1
    curve = " ".join(f"{r:.2f}" for r in rates)
    assert rates[0] <= START_BAR, curve
    # it stopped because it reached 80%, not because the updates ran out
    assert len(rates) < config.training.updates, f"never reached {target}: {curve}"
    assert statistics.median(rates[-window:]) >= target, curve
