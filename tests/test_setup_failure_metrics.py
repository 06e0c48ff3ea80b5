"""A training run counts the episodes it scored after a setup command failed: the
update's `setup_failed_rate` (a line of the Training screen's Error rates plot), and the
update's line in `workbench train` says so when any did."""

from __future__ import annotations

from types import SimpleNamespace

from agents.trajectory import FAILED_COMMANDS_INFO, SETUP_FAILED_INFO, Episode
from tests.run_configs import tiny_run_config
from trainer.config import parse_run_config
from trainer.update import episode_metrics
from workbench.cli.train import update_line
from workbench.services.training_runs import PLOTS


def _episode(n: int, setup_failed: int | None) -> Episode:
    info = {} if setup_failed is None else {
        FAILED_COMMANDS_INFO: [{"part": "config", "index": 0, "command": "ls /x",
                                "returncode": 2, "stderr": "", "expected": ""}],
        SETUP_FAILED_INFO: setup_failed}
    return Episode(id=f"e{n}", task_id="t", status="done", score=0.0, info=info)


def test_the_update_counts_episodes_scored_after_a_failed_setup() -> None:
    config = parse_run_config(tiny_run_config(updates=1))
    # one unexcused failure, one only marked (0 counted), two clean
    episodes = [_episode(0, 1), _episode(1, 0), _episode(2, None), _episode(3, None)]
    outcomes = [SimpleNamespace(status="done") for _ in episodes]
    metrics = episode_metrics(episodes, outcomes, [], {}, config)  # type: ignore[arg-type]
    assert metrics["setup_failed_rate"] == 0.25
    line = update_line(SimpleNamespace(update=1, policy_version=1, metrics=metrics), 10)
    assert "setup failed 25%" in line
    clean = episode_metrics(episodes[1:], outcomes[1:], [], {}, config)  # type: ignore[arg-type]
    assert clean["setup_failed_rate"] == 0.0
    assert "setup failed" not in update_line(
        SimpleNamespace(update=1, policy_version=1, metrics=clean), 10)
    [errors] = [p for p in PLOTS if p.title == "Error rates"]
    assert "setup_failed_rate" in errors.names
