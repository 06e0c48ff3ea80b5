"""Proof that multi-turn GRPO learns: the documented run of `bench/learning.py --config
assets/configs/learn-tabs.toml` on real sandboxes with a tiny random Qwen2.5-VL.

Each episode needs three dependent clicks in order: open the named tab, click the named
button on the page that tab opened, click Confirm. The episode's score (1 only for exactly
that order) is every step's reward, so credit reaches the first click only through the
episode's outcome. The four training instances pair each tab cell with each button cell
once, with distinct colour names, so the policy must read the tab word at step one and
the button word at step two. After the oracle warm-up on other instances it clicks about
at random: its first three updates succeed in at most 45% of episodes on average (recorded
runs: 0.04-0.39 over 24 runs of bench/learning.py --stability; the mean of the first five
reached 0.40, as learning has often begun by update 4-5). The run must then reach 80%:
it stops (training.stop_at_success) once the median success rate of its last 10 updates
is at least 0.80, and must do so within the config's cap on updates. A median
of 0.80 over the four instances cannot come from a policy that ignores one of them (that
caps at 0.75).

Trajectory-level samples (one per episode, its steps' tokens together: ARPO); bench
prints the step-level run beside it. Recorded curves are in the config's comments."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.run_configs import train_documented_run
from trainer.store import Store

pytestmark = [pytest.mark.x11, pytest.mark.slow, pytest.mark.timeout(2400)]

CONFIG = Path(__file__).resolve().parents[1] / "assets" / "configs" / "learn-tabs.toml"
START = 3  # updates at the start of the curve (their mean, before learning shows)


def test_multi_turn_grpo_learns_three_dependent_clicks(tmp_path: Path) -> None:
    config, summary, rates = train_documented_run(CONFIG, tmp_path)
    assert config.rollout.max_steps == 3 and config.training.sample_level == "trajectory"
    target, window = config.training.stop_at_success, config.training.stop_window
    assert (target, window) == (0.8, 10)
    curve = " ".join(f"{r:.2f}" for r in rates)
    assert statistics.fmean(rates[:START]) <= 0.45, curve
    # it stopped because it reached 80%, not because the updates ran out
    assert len(rates) < config.training.updates, f"never reached {target}: {curve}"
    assert statistics.median(rates[-window:]) >= target, curve
    with Store.open(tmp_path / "ws") as store:
        # the policy's successes in the last update are three clicks each, as asked
        last = [store.episodes.load(e) for e in summary.history[-1].episode_ids]
        successes = [e for e in last if e.source == "rollout" and (e.score or 0) >= 0.5]
        assert successes and all(len(e.steps) == 3 for e in successes)
