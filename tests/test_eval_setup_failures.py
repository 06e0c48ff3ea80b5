"""A setup command that failed is kept on the episode and shown wherever its score is:
`workbench eval` run as a person runs it (a subprocess, real sandboxes, random actions) on
task files in OSWorld's format, one whose setup has a command that fails and one that
needs the web (marked, not counted), one whose setup works. The episode's info keeps every
failed command as a record; the per-episode line, the summary, report.txt/.json/.html, the
store's summaries, the app's episode table and the episode player say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.trajectory import FAILED_COMMANDS_INFO, SETUP_FAILED_INFO
from trainer.store import EpisodeFilter, Store

pytestmark = [pytest.mark.x11, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
FAILING = "wb-eval-setup-fails"
CLEAN = "wb-eval-setup-works"


def _shell(command: str) -> dict[str, Any]:
    return {"type": "execute", "parameters": {"command": command, "shell": True}}


def _task(task_id: str, config: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": task_id, "snapshot": "os", "source": "workbench tests",
            "instruction": f"{task_id}: nothing to do.", "config": config,
            "related_apps": ["os"],
            "evaluator": {"func": "exact_match",
                          "result": {"type": "vm_command_line", "shell": True,
                                     "command": "cat /home/user/Desktop/note.txt"},
                          "expected": {"type": "rule", "rules": {"expected": "final\n"}}}}


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    failing = _task(FAILING, [
        _shell("ls /home/user/no-such-folder"),  # exits 2: this desktop's setup failed
        _shell("curl -sf https://files.workbench-test.invalid/a.txt -o /tmp/a.txt"),  # web
        _shell("echo draft > /home/user/Desktop/note.txt")])
    clean = _task(CLEAN, [_shell("echo draft > /home/user/Desktop/note.txt")])
    for raw in (failing, clean):
        (folder / f"{raw['id']}.json").write_text(json.dumps(raw, indent=2))
    return folder


def test_an_episode_whose_setup_failed_is_counted_and_marked_wherever_it_is_scored(
        workspace: Path, tasks: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_WORKSPACE"}
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "--workspace", str(workspace), "eval", "setup",
         "--policy", "random", "--tasks", str(tasks), "--seeds", "1", "--max-steps", "1"],
        cwd=ROOT, env={**env, "TQDM_DISABLE": "1"}, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    # the episode's line names the command, its exit status and stderr; the summary counts
    assert ("command failed: config[0] 'ls /home/user/no-such-folder' exited with 2: "
            in result.stderr), result.stderr[-3000:]
    assert "2 episodes: 2 done, 0 error; 1 after setup commands failed" in result.stderr

    folder = workspace / "evaluations" / "setup"
    report = json.loads((folder / "report.json").read_text())
    [policy] = report["policies"]
    assert policy["episodes"] == 2 and policy["errors"] == 0 and policy["setup_failed"] == 1
    per_task = {t["task_id"]: t for t in report["per_task"]}
    assert len(per_task[FAILING]["setup_failed"]) == 1 and per_task[CLEAN]["setup_failed"] == []
    text = (folder / "report.txt").read_text()
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("wb-")}
    assert "[setup]" in rows[FAILING] and "[setup]" not in rows[CLEAN]
    assert "[setup] episodes whose setup had a command that failed" in text
    assert "[setup]</small>" in (folder / "report.html").read_text()

    with Store.open(workspace, create=False) as store:
        ids = store.queries.ids(EpisodeFilter(tags=["eval:setup"]))
        summaries = {s.task_id: s for s in store.queries.summaries(ids)}
        assert summaries[FAILING].setup_failed == 1 and summaries[CLEAN].setup_failed == 0
        failed = store.episodes.load(summaries[FAILING].id, tokens=False)
        clean = store.episodes.load(summaries[CLEAN].id, tokens=False)
    records = failed.info[FAILED_COMMANDS_INFO]
    assert [(r["part"], r["index"], r["returncode"] != 0) for r in records] == [
        ("config", 0, True), ("config", 1, True)]
    assert records[0]["expected"] == "" and "No such file or directory" in records[0]["stderr"]
    assert records[1]["expected"] == "needs the web"  # kept, not counted
    assert failed.info[SETUP_FAILED_INFO] == 1
    assert FAILED_COMMANDS_INFO not in clean.info and SETUP_FAILED_INFO not in clean.info

    # the app: the table's Status says so; the player lists each command
    from workbench.app.models.episode_table import cell_text
    from workbench.app.widgets.episode_player import failed_command_lines

    assert cell_text(summaries[FAILING], "Status") == "done · setup failed"
    assert cell_text(summaries[CLEAN], "Status") == "done"
    lines = failed_command_lines(failed.info)
    assert lines[0].startswith("config[0] 'ls /home/user/no-such-folder' exited with 2: ")
    assert lines[1].endswith("[needs the web]")
    assert failed_command_lines(clean.info) == []
