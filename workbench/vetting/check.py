"""Proving tasks solvable: run each task's oracle (and a do-nothing agent) on a desktop.

`workbench tasks check` and the end-to-end tests use this. A task is solved when its
oracle scores 1 and an agent that only says DONE scores 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vm.actions import Done
from vm.suite.oracles import oracle_for
from vm.tasks.model import Task

MAX_ORACLE_ACTIONS = 200


@dataclass(frozen=True)
class CheckResult:
    task_id: str
    domain: str
    oracle_score: float | None  # None when the run failed before scoring
    noop_score: float | None
    actions: int
    seconds: float
    error: str = ""

    @property
    def solved(self) -> bool:
        return self.oracle_score == 1.0 and self.noop_score == 0.0 and not self.error


def run_oracle(env: Any, task: Task) -> tuple[float, int]:
    """Reset `env` (a vm.env.DesktopEnv) to the task, play its oracle; (score, actions)."""
    env.reset(task)
    count = 0
    for action in oracle_for(task)(env.provider):
        count += 1
        if count > MAX_ORACLE_ACTIONS:
            raise RuntimeError(f"oracle of {task.id} did not finish within "
                               f"{MAX_ORACLE_ACTIONS} actions")
        _obs, _reward, done, _info = env.step(action)
        if done:
            break
    return float(env.evaluate()), count


def run_noop(env: Any, task: Task) -> float:
    """Reset to the task and answer DONE at once: what an agent that does nothing scores."""
    env.reset(task)
    env.step(Done())
    return float(env.evaluate())


def check_task(env: Any, task: Task, noop: bool = True) -> CheckResult:
    started = time.perf_counter()
    oracle_score = noop_score = None
    actions = 0
    error = ""
    try:
        oracle_score, actions = run_oracle(env, task)
        noop_score = run_noop(env, task) if noop else 0.0
    except Exception as exc:  # a failed check is a result to report, not a crash
        error = f"{type(exc).__name__}: {exc}"
    return CheckResult(task.id, task.domain, oracle_score, noop_score, actions,
                       time.perf_counter() - started, error)


def check_tasks(env: Any, tasks: Iterable[Task], noop: bool = True,
                progress: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    results = []
    for task in tasks:
        result = check_task(env, task, noop)
        results.append(result)
        if progress is not None:
            progress(result)
    return results
