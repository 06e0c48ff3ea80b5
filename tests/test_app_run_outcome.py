"""A training run whose every episode ended in an error (say each OSWorld task's setup
raised) is not reported as simply "finished": the Training screen's message says so,
with the first reason."""

from __future__ import annotations

from pathlib import Path

from agents.trajectory import Episode, EpisodeStatus
from trainer.store import Store
from workbench.services.training_runs import episodes_outcome


def _episode(run_id: str, n: int, status: EpisodeStatus, error: str | None = None) -> Episode:
    return Episode(id=f"{run_id}-{n}", task_id="osworld-task", instruction="do it",
                   environment="sandbox", source="rollout", status=status, run_id=run_id,
                   error=error, created_at=float(n), steps=[])


def test_a_run_whose_episodes_all_failed_says_so(tmp_path: Path) -> None:
    with Store.open(tmp_path / "ws", create=True) as store:
        reason = "setup: NameError: name 'SCREEN_WIDTH_HALF' is not defined"
        for n in range(3):
            store.episodes.save(_episode("all-failed", n, "error", reason))
        store.episodes.save(_episode("mixed", 0, "error", reason))
        store.episodes.save(_episode("mixed", 1, "done"))
        outcome = episodes_outcome(store, "all-failed")
        assert "every one of its 3 episode(s) ended in an error" in outcome
        assert "SCREEN_WIDTH_HALF" in outcome
        assert episodes_outcome(store, "mixed") == ""  # some succeeded: a finished run
        assert episodes_outcome(store, "no-episodes") == ""
