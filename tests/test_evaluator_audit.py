"""`workbench tasks audit --evaluators`: the verdicts of the four probes on real sandboxes,
for sound bundled tasks and for evaluators built to be flaky, gameable or unsolvable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.policies.random_actions import RandomPolicy
from vm.tasks import Task
from workbench.vetting.evaluator_audit import EvaluatorAudit, audit_evaluator

pytestmark = [pytest.mark.x11, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from vm.env import DesktopEnv
    from vm.providers.sandbox import SandboxProvider

    provider = SandboxProvider("audit", tmp_path_factory.mktemp("audit"), guest_server=False)
    with DesktopEnv(provider, action_space="actions") as environment:
        yield environment


def _task(task_id: str, command: str, expected: str) -> Task:
    """A task scored by exact_match on the output of a shell command in the desktop."""
    return Task.from_dict({
        "id": task_id, "instruction": "nothing to do", "config": [],
        "evaluator": {"func": "exact_match",
                      "result": {"type": "vm_command_line", "command": command,
                                 "shell": True},
                      "expected": {"type": "rule", "rules": {"expected": expected}}}})


def test_verdicts_of_built_evaluators(env: Any) -> None:
    # each scoring call flips a counter's parity: the same desktop scores 1, 0, 1, ...
    counter = "n=$(cat ~/.flip 2>/dev/null || echo 0); echo $((n+1)) > ~/.flip; "
    flaky = audit_evaluator(env, _task("flips", counter + "printf $((n % 2))", "0"),
                            RandomPolicy)
    assert flaky.verdict == "flaky" and len(set(flaky.rescores)) == 2
    # true whatever the agent does
    gameable = audit_evaluator(env, _task("always", "printf yes", "yes"), RandomPolicy)
    assert (gameable.noop_score, gameable.random_score, gameable.verdict) == (
        1.0, 1.0, "gameable")
    assert gameable.oracle is False and gameable.oracle_score is None
    # false whatever happens, and no oracle to say the task can be solved
    never = audit_evaluator(env, _task("never", "printf no", "yes"), RandomPolicy)
    assert never.verdict == "no oracle" and never.rescores == (0.0, 0.0, 0.0, 0.0)


def test_a_sound_bundled_task_is_ok_and_an_oracle_that_fails_is_unsolvable(env: Any) -> None:
    from vm.suite import bundled_suite

    task = bundled_suite().tasks["buttons-0"]
    sound = audit_evaluator(env, task, RandomPolicy, rescores=2, random_steps=5)
    assert (sound.oracle_score, sound.rescores, sound.noop_score) == (1.0, (1.0, 1.0, 1.0), 0.0)
    assert sound.random_score == 0.0 and sound.verdict == "ok"
    broken = EvaluatorAudit("t", "d", 0.0, (0.0, 0.0), 0.0, 0.0, 1.0)
    assert broken.verdict == "unsolvable"
    assert EvaluatorAudit("t", "d", None, (), None, None, 1.0, "boom").verdict == "error"


def test_the_command_keeps_one_verdict_per_task(workspace: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_WORKSPACE"}

    def audit(*task_ids: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "workbench", "--workspace", str(workspace), "tasks",
             "audit", "--evaluators", "--random-steps", "3", *task_ids], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=600)

    first = audit("buttons-0", "todo-tick")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 ok;" in first.stdout
    second = audit("form-name")
    assert second.returncode == 0, second.stdout + second.stderr
    kept = json.loads((workspace / "audits" / "evaluators.json").read_text())["tasks"]
    assert sorted(kept) == ["buttons-0", "form-name", "todo-tick"]
    assert {v["verdict"] for v in kept.values()} == {"ok"}
    assert kept["form-name"]["oracle_score"] == 1.0
    unknown = audit("no-such-task")
    assert unknown.returncode != 0 and "no such task" in unknown.stderr
