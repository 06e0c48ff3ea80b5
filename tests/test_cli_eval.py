"""`workbench eval` as a person runs it: a subprocess on sandboxes, the oracle, random
actions, the tiny model and a training checkpoint; its report files; resuming after Ctrl-C
without repeating finished episodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.run_configs import ignoring_sigint, tiny_run_config
from tests.tiny_models import tiny_qwen25_vl
from trainer.config import parse_run_config
from trainer.loop import TrainingRun
from trainer.store import EpisodeFilter, Store

pytestmark = [pytest.mark.x11, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def _command(workspace: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "workbench", "--workspace", str(workspace), "eval", *args]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_WORKSPACE"}
    return {**env, "TQDM_DISABLE": "1"}


def _eval(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(workspace, *args), cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=600)


def _tags(workspace: Path, name: str) -> list[tuple[str, str, list[str]]]:
    with Store.open(workspace, create=False) as store:
        ids = store.queries.ids(EpisodeFilter(tags=[f"eval:{name}"]), descending=False)
        return [(s.task_id, s.status, s.tags) for s in store.queries.summaries(ids)]


def test_oracle_random_model_and_checkpoint_are_compared(workspace: Path) -> None:
    # a checkpoint of a one-update training run of the tiny model
    text = tiny_run_config(updates=1)
    run = TrainingRun(parse_run_config(text), text, workspace, progress=False)
    run.run()
    args = ["suite", "--policy", "oracle", "--policy", "random",
            "--policy", f"tiny=model:{tiny_qwen25_vl()}",
            "--policy", f"trained=checkpoint:{run.run_id}", "--tasks", "buttons-0",
            "buttons-1", "--seeds", "2", "--envs", "2", "--max-steps", "2",
            "--max-new-tokens", "12", "--max-pixels", str(48 * 28 * 28), "--keep-going"]
    result = _eval(workspace, *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 policies x 2 tasks x 2 seeds = 16 episodes, 0 done, 16 to run" in result.stderr
    folder = workspace / "evaluations" / "suite"
    report = json.loads((folder / "report.json").read_text())
    by_label = {p["label"]: p for p in report["policies"]}
    assert list(by_label) == ["oracle", "random", "tiny", "trained"]
    assert by_label["oracle"]["success_rate"] == 1.0
    assert by_label["oracle"]["interval"][0] > 0.3  # Wilson for 4 of 4
    for label in by_label:
        assert by_label[label]["episodes"] == 4 and by_label[label]["errors"] == 0
    assert len(report["comparisons"]) == 6  # every pair of the four
    assert report["info"]["policies"]["trained"] == f"trained=checkpoint:{run.run_id}"
    assert (folder / "report.html").read_text().startswith("<!doctype html>")
    assert "oracle vs random: 4 pairs" in result.stdout
    episodes = _tags(workspace, "suite")
    assert len(episodes) == 16 and all(status == "done" for _, status, _ in episodes)
    assert {tag for _, _, tags in episodes for tag in tags} >= {
        "eval:suite", "policy:oracle", "policy:trained", "seed:0", "seed:1"}
    # a checkpoint the run does not have is refused, and the plan stays as it was
    plan = (folder / "plan.json").read_text()
    wrong = _eval(workspace, "suite", "--policy", f"v9=checkpoint:{run.run_id}@9")
    assert wrong.returncode != 0 and "has no checkpoint of policy version 9" in wrong.stderr
    assert (folder / "plan.json").read_text() == plan
    # run again: nothing left to run; the report is the same
    again = _eval(workspace, "suite")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "16 done, 0 to run" in again.stderr
    assert len(_tags(workspace, "suite")) == 16
    assert json.loads((folder / "report.json").read_text())["policies"] == report["policies"]


def test_ctrl_c_keeps_finished_episodes_and_the_same_command_resumes(workspace: Path) -> None:
    # random actions on a 12-step form cannot finish 100000 steps before the Ctrl-C
    args = ["cut", "--policy", "oracle", "--policy", "random", "--tasks", "buttons-0",
            "form-full", "--seeds", "1", "--envs", "1", "--max-steps", "100000"]
    # started with SIGINT ignored, as a shell script's background job is
    process = subprocess.Popen(ignoring_sigint(_command(workspace, *args)), cwd=ROOT,
                               env=_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def random_is_running() -> bool:
        if not (workspace / "workbench.db").exists():
            return False
        episodes = _tags(workspace, "cut")
        oracle_done = sum(status == "done" and "policy:oracle" in tags
                          for _, status, tags in episodes)
        return oracle_done == 2 and any(status == "running" and "policy:random" in tags
                                        for _, status, tags in episodes)

    try:
        wait_until(random_is_running, timeout=300, message="the oracle's episodes done and "
                                                           "a random episode running")
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output[-3000:]
    assert "run the same command to resume" in output
    # resume with a step budget the random episodes can finish
    result = _eval(workspace, "cut", "--seeds", "1", "--max-steps", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 done, 2 to run" in result.stderr  # the oracle's two are not run again
    episodes = _tags(workspace, "cut")
    assert sum("policy:oracle" in tags for _, _, tags in episodes) == 2
    random_runs = [status for _, status, tags in episodes if "policy:random" in tags]
    assert sorted(random_runs) == ["aborted", "done", "done"]
    report = json.loads((workspace / "evaluations" / "cut" / "report.json").read_text())
    assert [p["episodes"] for p in report["policies"]] == [2, 2]


def test_max_steps_bounds_agents_not_the_oracles_script(workspace: Path) -> None:
    # form-name's oracle needs several steps; --max-steps 1 is for the agents
    result = _eval(workspace, "script", "--policy", "oracle", "--tasks", "form-name",
                   "--seeds", "1", "--max-steps", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((workspace / "evaluations" / "script" / "report.json").read_text())
    assert report["policies"][0]["success_rate"] == 1.0


def test_listed_seeds_run_exactly_those_seeds(workspace: Path) -> None:
    bad = _eval(workspace, "picked", "--policy", "random", "--seeds", "0, x 0")
    assert bad.returncode == 2
    assert "argument --seeds: seed 'x': not a whole number; seed '0': given twice" in bad.stderr
    result = _eval(workspace, "picked", "--policy", "random", "--tasks", "buttons-0",
                   "--seeds", "4, 1", "--envs", "1", "--max-steps", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "1 policy x 1 task x 2 seeds (1, 4) = 2 episodes, 0 done, 2 to run" \
        in result.stderr
    assert "1 task x 2 seeds (1, 4)" in result.stdout  # the report says which
    folder = workspace / "evaluations" / "picked"
    plan = json.loads((folder / "plan.json").read_text())
    assert plan["seeds"] == [1, 4]

    def seeds(name: str) -> list[str]:
        return sorted(tag for _, status, tags in _tags(workspace, name) for tag in tags
                      if tag.startswith("seed:") and status == "done")

    assert seeds("picked") == ["seed:1", "seed:4"]
    # a count adds seeds 0..N-1 to those listed
    more = _eval(workspace, "picked", "--seeds", "2", "--max-steps", "1")
    assert more.returncode == 0, more.stderr[-3000:]
    assert "3 seeds (0, 1, 4) = 3 episodes, 2 done, 1 to run" in more.stderr
    assert seeds("picked") == ["seed:0", "seed:1", "seed:4"]
    # a plan.json written before seeds were listed (a count) still runs: seeds 0..N-1
    old = workspace / "evaluations" / "old" / "plan.json"
    old.parent.mkdir()
    old.write_text(json.dumps({**plan, "name": "old", "seeds": 1}))
    resumed = _eval(workspace, "old", "--max-steps", "1")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "1 policy x 1 task x 1 seed = 1 episode, 0 done, 1 to run" in resumed.stderr
    assert seeds("old") == ["seed:0"]
    assert json.loads(old.read_text())["seeds"] == [0]
