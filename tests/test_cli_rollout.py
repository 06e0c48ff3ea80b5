"""`workbench rollout` as a person runs it: a subprocess, sandboxes, the workspace store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.trajectory import Episode
from tests.tiny_models import tiny_qwen25_vl
from trainer.store import EpisodeFilter, Store

pytestmark = [pytest.mark.x11, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def _workbench(workspace: Path, *args: str, timeout: float = 300
               ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_WORKSPACE"}
    return subprocess.run([sys.executable, "-m", "workbench", "--workspace", str(workspace),
                           "rollout", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _episodes(workspace: Path) -> list[Episode]:
    with Store.open(workspace, create=False) as store:
        ids = [s.id for s in store.queries.page(EpisodeFilter(), limit=100)]
        return [store.episodes.load(i) for i in ids]


def test_oracle_rollout_on_two_sandboxes(workspace: Path) -> None:
    result = _workbench(workspace, "--oracle", "--tasks", "buttons-0", "todo-tick",
                        "--envs", "2", "--run", "smoke", "--tag", "cli")
    assert result.returncode == 0, result.stderr
    assert "2 episodes: 2 done, 0 error; mean score 1.000" in result.stdout
    episodes = _episodes(workspace)
    assert sorted(e.task_id for e in episodes) == ["buttons-0", "todo-tick"]
    for episode in episodes:
        assert (episode.status, episode.score, episode.source) == ("done", 1.0, "oracle")
        assert episode.run_id == "smoke" and episode.tags == ["cli"]
        assert episode.steps and episode.environment == "sandbox"
    # the command's own sandboxes are gone once it ends
    assert not any((workspace / "sandboxes").iterdir())


def test_tiny_model_rollout_stores_tokens(workspace: Path) -> None:
    result = _workbench(workspace, "--model", str(tiny_qwen25_vl()), "--tasks", "todo-add",
                        "--max-steps", "2", "--max-new-tokens", "16", "--seed", "0",
                        "--max-pixels", str(48 * 28 * 28), "--keep-going",
                        "--policy-version", "4")
    assert result.returncode == 0, result.stderr
    [episode] = _episodes(workspace)
    assert episode.task_id == "todo-add" and episode.policy_version == 4
    assert episode.status == "done" and episode.score == 0.0
    assert len(episode.steps) == 2
    for step in episode.steps:
        assert step.token_ids and step.prompt_ids
        assert step.logprobs is not None and len(step.logprobs) == len(step.token_ids)


def test_missing_model_folder_is_a_clear_error(workspace: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    result = _workbench(workspace, "--model", str(missing), "--tasks", "buttons-0")
    assert result.returncode in (1, 2)
    assert str(missing) in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_task_is_a_clear_error(workspace: Path) -> None:
    result = _workbench(workspace, "--oracle", "--tasks", "no-such-task")
    assert result.returncode == 1
    assert "no-such-task" in result.stderr and "Traceback" not in result.stderr
