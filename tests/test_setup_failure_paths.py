"""A setup failure is an error, never a score, in every path (issue 33, item 4): the episode
ends "error" with the reason and no score; a training run, an evaluation or a rollout in
which every episode failed at its setup ends failed with the reason (a training run, the
synchronous loop or the asynchronous runtime, after the first batch). Task files of our own
in OSWorld's layout whose setup fails on a real sandbox (a check that never holds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.rollout import RESET_ERROR
from agents.trajectory import Episode
from tests.run_configs import tiny_run_config
from trainer.config import parse_run_config
from trainer.loop import TrainingRun
from trainer.rollouts import (
    CANCELLED,
    EpisodeJob,
    EpisodeOutcome,
    EverySetupFailed,
    every_setup_failed,
)
from trainer.store import EpisodeFilter, Store
from vm.tasks import Task

ROOT = Path(__file__).resolve().parents[1]
CHECK_FAILS = {"type": "execute", "parameters": {
    "command": "exit 3", "shell": True, "until": {"returncode": 0}, "max_wait": 1}}


def _write_tasks(folder: Path) -> Path:
    """An evaluation_examples tree of two tasks whose setup fails; the second also names a
    start page on a host that never resolves (.invalid): it needs the web."""
    tasks = {
        "os/wb-setup-fails": [CHECK_FAILS],
        "chrome/wb-setup-fails-web": [
            {"type": "execute", "parameters": {"shell": True, "command":
                "echo '{\"startup_urls\": [\"https://shop.invalid/\"]}' > ~/prefs.json"}},
            CHECK_FAILS],
    }
    root = folder / "evaluation_examples"
    for name, config in tasks.items():
        file = root / "examples" / f"{name}.json"
        file.parent.mkdir(parents=True, exist_ok=True)
        task_id = name.split("/")[1]
        file.write_text(json.dumps({
            "id": task_id, "snapshot": "os", "source": "workbench tests",
            "instruction": f"{task_id}: nothing to do.", "config": config,
            "related_apps": ["os"],
            "evaluator": {"func": "exact_match",
                          "result": {"type": "vm_command_line", "command": "echo hi"},
                          "expected": {"type": "rule", "rules": {"expected": "hi\n"}}}}))
    return root


def _outcome(task_id: str, status: str, error: str | None,
             score: float | None = None) -> EpisodeOutcome:
    task = Task.from_dict({"id": task_id, "instruction": "x", "config": [],
                           "evaluator": {"func": "infeasible"}})
    episode = Episode(id=f"e-{task_id}", task_id=task_id, status=status,  # type: ignore[arg-type]
                      error=error, score=score)
    return EpisodeOutcome(EpisodeJob(task), episode, error)


def test_only_episodes_that_never_started_count_as_setup_failures() -> None:
    failed = _outcome("a", "error", f"{RESET_ERROR}TaskSetupError: setup of task a failed")
    stepped = _outcome("b", "error", "step 0: RuntimeError: the desktop died")
    scored = _outcome("c", "done", "warning: no window matching 'Terminal'", 0.0)
    no_desktop = EpisodeOutcome(EpisodeJob(failed.job.task), None, "PoolClosed: closed")
    cancelled = EpisodeOutcome(EpisodeJob(failed.job.task), None, CANCELLED)
    assert failed.setup_error == "TaskSetupError: setup of task a failed"
    assert no_desktop.setup_error == "PoolClosed: closed"
    assert stepped.setup_error is None and scored.setup_error is None
    assert cancelled.setup_error is None
    assert every_setup_failed([failed, no_desktop])
    assert not every_setup_failed([failed, stepped])
    assert not every_setup_failed([failed, scored])
    assert not every_setup_failed([])
    message = str(EverySetupFailed([failed, failed, no_desktop]))
    assert message == ("every one of the 3 episodes failed at its setup (nothing was "
                       "scored): a: TaskSetupError: setup of task a failed; a: PoolClosed: "
                       "closed")


@pytest.mark.x11
@pytest.mark.slow
def test_an_evaluation_whose_every_setup_failed_ends_failed_with_the_reason(
        tmp_path: Path, workspace: Path) -> None:
    root = _write_tasks(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "--workspace", str(workspace), "eval", "broken",
         "--policy", "random", "--tasks", str(root / "examples"), "--seeds", "1",
         "--envs", "2", "--max-steps", "2", "--keep-going"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "TQDM_DISABLE": "1"})
    assert result.returncode == 1, result.stderr[-3000:]
    assert "evaluation broken failed: every one of the 2 episodes failed at its setup" \
        in result.stderr
    assert "condition {'returncode': 0} not met" in result.stderr  # the reason itself
    with Store.open(workspace, create=False) as store:
        ids = store.queries.ids(EpisodeFilter(tags=["eval:broken"]))
        episodes = [store.episodes.load(i) for i in ids]
    assert sorted(e.task_id for e in episodes) == ["wb-setup-fails", "wb-setup-fails-web"]
    for episode in episodes:  # an error with its reason, never a score
        assert (episode.status, episode.score, episode.steps) == ("error", None, [])
        assert episode.error is not None and episode.error.startswith(
            f"{RESET_ERROR}TaskSetupError: setup of task {episode.task_id} failed")
    # the report is still written: no success, two errors; run offline, the task that
    # needs the web is marked
    report = (workspace / "evaluations" / "broken" / "report.txt").read_text()
    policy_row = next(line for line in report.splitlines() if line.startswith("random"))
    assert policy_row.split()[-3:] == ["0", "2", "0"]  # scored episodes, errors, setup failed
    assert "wb-setup-fails-web [web]" in report
    assert "[web] needs the web (opens or reads external URLs)" in report
    data = json.loads((workspace / "evaluations" / "broken" / "report.json").read_text())
    assert data["offline_web"] == {"wb-setup-fails-web": ["https://shop.invalid/"]}


@pytest.mark.x11
@pytest.mark.slow
@pytest.mark.parametrize("asynchronous", [False, True], ids=["synchronous", "asynchronous"])
def test_a_training_run_whose_every_setup_failed_ends_failed_with_the_reason(
        tmp_path: Path, workspace: Path, asynchronous: bool) -> None:
    root = _write_tasks(tmp_path)
    text = tiny_run_config(updates=2, extra="[runtime]\nasynchronous = true\n"
                           if asynchronous else "")
    tasks_section = "[tasks]\nbuttons = 2\nbuttons_grid = [2, 2]\n"
    assert tasks_section in text
    text = text.replace(tasks_section, f'[tasks]\nsuite = "{root / "examples"}"\n')
    config = parse_run_config(text)
    if asynchronous:
        from trainer.runtime import AsyncTrainingRun

        run: TrainingRun = AsyncTrainingRun(config, text, workspace, progress=False)
    else:
        run = TrainingRun(config, text, workspace, progress=False)
    with pytest.raises(EverySetupFailed) as caught:
        run.run()
    message = str(caught.value)
    assert message.startswith("every one of the ")
    assert "failed at its setup (nothing was scored)" in message
    assert "condition {'returncode': 0} not met" in message
    with Store.open(workspace, create=False) as store:
        stored: Any = store.runs.get(run.run_id or "")
        assert stored.status == "failed"
        assert store.runs.metrics(stored.id) == []  # no update was logged on nothing
        episodes = [store.episodes.load(i)
                    for i in store.queries.ids(EpisodeFilter(run_ids=[stored.id]))]
    # the errors, each with its reason and no score; episodes the stopping run cancelled
    # (the asynchronous runtime's workers had begun more) end "aborted", unscored too
    assert any(e.status == "error" for e in episodes), [(e.status, e.error) for e in episodes]
    for episode in episodes:
        assert episode.score is None and episode.status in ("error", "aborted"), episode
        if episode.status == "error":
            assert (episode.error or "").startswith(f"{RESET_ERROR}TaskSetupError")


@pytest.mark.x11
@pytest.mark.slow
def test_a_rollout_whose_every_setup_failed_exits_1_with_the_reason(
        tmp_path: Path, workspace: Path) -> None:
    root = _write_tasks(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "--workspace", str(workspace), "rollout",
         "--oracle", "--tasks", str(root / "examples"), "--envs", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "TQDM_DISABLE": "1"})
    assert result.returncode == 1, result.stderr[-3000:]
    assert "2 episodes: 0 done, 2 error" in result.stdout  # the summary still comes
    assert "rollout failed: every one of the 2 episodes failed at its setup" in result.stderr
    assert "condition {'returncode': 0} not met" in result.stderr
