"""End to end: every bundled task's oracle scores 1 on a sandbox through DesktopEnv, and an
agent that does nothing (or the wrong thing) scores 0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vm.actions import Click, Done, Fail
from vm.suite import bundled_suite
from vm.suite.families import button_layout, button_target, button_tasks
from vm.suite.oracles.desktop import wait_state
from vm.tasks import Task
from workbench.vetting.check import run_noop, run_oracle

pytestmark = [pytest.mark.x11, pytest.mark.slow]

SUITE = bundled_suite()
GENERATED = button_tasks(3, seed=500)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from vm.env import DesktopEnv
    from vm.providers.sandbox import SandboxProvider

    workspace = tmp_path_factory.mktemp("tasks-suite")
    provider = SandboxProvider("suite", workspace, guest_server=False)
    with DesktopEnv(provider, action_space="actions") as environment:
        yield environment


def save_screen(env: Any, artifacts: Path, name: str) -> None:
    (artifacts / f"task-{name}.png").write_bytes(env.provider.screenshot())


# Oracle errors list the windows that were there; a failure saves the screen as well.
@pytest.mark.parametrize("task", [*SUITE, *GENERATED], ids=lambda t: t.id)
def test_oracle_solves_and_doing_nothing_fails(env: Any, task: Task,
                                               artifacts: Path) -> None:
    try:
        score, actions = run_oracle(env, task)
    except Exception:
        save_screen(env, artifacts, task.id)
        raise
    if score != 1.0:
        save_screen(env, artifacts, task.id)
    assert score == 1.0, f"the oracle of {task.id} scored {score} after {actions} actions"
    assert run_noop(env, task) == 0.0


def test_infeasible_tasks_score_only_fail(env: Any) -> None:
    task = SUITE.tasks["terminal-install-spotify"]
    env.reset(task)
    env.step(Fail())
    assert env.evaluate() == 1.0
    feasible = SUITE.tasks["terminal-touch"]
    env.reset(feasible)
    env.step(Fail())
    assert env.evaluate() == 0.0


def test_clicking_the_wrong_button_scores_zero(env: Any) -> None:
    task = GENERATED[0]
    layout, target = button_layout(500)
    assert target == button_target(task)
    wrong = next(b for b in layout if b.name != target)
    right = next(b for b in layout if b.name == target)
    env.reset(task)
    wait_state(env.provider, "buttons")
    env.step(Click(*wrong.centre))
    env.step(Click(*right.centre))  # too late: the first click counts
    wait_state(env.provider, "buttons", lambda s: len(s["clicks"]) == 2)
    env.step(Done())
    assert env.evaluate() == 0.0
