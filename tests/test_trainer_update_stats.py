"""An update's logged statistics (trainer/update_stats.py) against hand computations: the
first pass's batch as token means, the last pass's loss statistics as token means over the
whole batch, and that pass's IS-ratio extremes."""

from __future__ import annotations

import pytest

from trainer.update_stats import UpdateStats


def test_first_pass_batch_and_last_pass_loss_statistics_are_token_means() -> None:
    stats = UpdateStats()
    # pass 1: micro-batches of 10 and 30 tokens
    stats.start_pass()
    stats.add_rollout_batch(10.0, entropy_sum=5.0, logprob_sum=-20.0)
    stats.add_loss({"loss": 1.0, "kl": 0.0, "is_ratio_min": 1.0, "is_ratio_max": 1.0,
                    "tokens": 10.0, "selected_tokens": 8.0}, 10.0)
    stats.add_rollout_batch(30.0, entropy_sum=3.0, logprob_sum=-30.0)
    stats.add_loss({"loss": 3.0, "kl": 0.0, "is_ratio_min": 1.0, "is_ratio_max": 1.0},
                   30.0)
    stats.end_pass()
    # pass 2 (the last run): only its loss statistics count
    stats.start_pass()
    stats.add_loss({"loss": 2.0, "kl": 0.4, "is_ratio_min": 0.9, "is_ratio_max": 1.1}, 10.0)
    stats.add_loss({"loss": 4.0, "kl": 0.0, "is_ratio_min": 0.95, "is_ratio_max": 1.3},
                   30.0)
    stats.end_pass()
    metrics = stats.metrics(40)
    assert metrics == pytest.approx({
        "tokens": 40.0,
        "entropy": (5.0 + 3.0) / 40,
        "logprob_mean": (-20.0 - 30.0) / 40,
        "loss": (2.0 * 10 + 4.0 * 30) / 40,
        "kl": 0.4 * 10 / 40,
        "is_ratio_min": 0.9,
        "is_ratio_max": 1.3,
    })


def test_a_pass_without_is_weights_logs_no_extremes() -> None:
    stats = UpdateStats()
    stats.start_pass()
    stats.add_rollout_batch(4.0, entropy_sum=2.0, logprob_sum=-4.0)
    stats.add_loss({"loss": 0.5}, 4.0)
    stats.end_pass()
    assert stats.metrics(4) == pytest.approx(
        {"tokens": 4.0, "entropy": 0.5, "logprob_mean": -1.0, "loss": 0.5})
