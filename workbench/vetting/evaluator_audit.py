"""Can a task's evaluator be trusted? Four probes on a desktop, one verdict per task.

1. The oracle (where the task has one) must score 1: the task can be solved.
2. The final state it leaves is scored again `rescores` times: an evaluator whose score
   changes on an unchanged desktop is flaky.
3. An agent that does nothing (answers DONE at once) must score 0, and
4. so must random actions (`random_steps` of them, seeded): an evaluator either passes is
   one a policy can game.

Verdicts, worst first: "error" (a probe failed to run), "flaky" (2), "gameable" (3 or 4),
"unsolvable" (1 scored below 1), "no oracle" (probes 2-4 passed; solvability unknown),
"ok" (all four passed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from vm.actions import Action, Done
from vm.suite.oracles import has_oracle
from vm.tasks.model import Task
from workbench.vetting.check import run_noop, run_oracle

VERDICTS = ("error", "flaky", "gameable", "unsolvable", "no oracle", "ok")


@dataclass(frozen=True)
class EvaluatorAudit:
    task_id: str
    domain: str
    oracle_score: float | None  # None: no oracle (or it failed to run)
    rescores: tuple[float, ...]  # the oracle's final state (else do-nothing's), re-scored
    noop_score: float | None
    random_score: float | None
    seconds: float
    error: str = ""
    oracle: bool = True  # the task has a scripted oracle

    @property
    def verdict(self) -> str:
        if self.error:
            return "error"
        if len(set(self.rescores)) > 1:
            return "flaky"
        if (self.noop_score or 0) > 0 or (self.random_score or 0) > 0:
            return "gameable"
        if not self.oracle:
            return "no oracle"
        return "ok" if self.oracle_score == 1.0 else "unsolvable"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}


class RandomActor(Protocol):
    """What the random probe needs of a policy: the caller passes one (agents'
    RandomPolicy, as `workbench tasks audit --evaluators` does)."""

    def reset(self, task: Any, env: Any) -> None: ...

    def random_action(self, screen_size: tuple[int, int]) -> Action: ...


def run_random(env: Any, task: Task, steps: int, policy: RandomActor) -> float:
    """Reset to the task, take `steps` of `policy`'s random actions, say DONE; the score."""
    policy.reset(task, env)
    env.reset(task)
    screen_size = env.provider.screen_size()
    for _ in range(steps):
        _observation, _reward, done, _info = env.step(policy.random_action(screen_size))
        if done:
            break
    env.step(Done())
    return float(env.evaluate())


def audit_evaluator(env: Any, task: Task, random_policy: Callable[[int], RandomActor],
                    rescores: int = 3, random_steps: int = 10,
                    seed: int = 0) -> EvaluatorAudit:
    """The four probes of `task` on `env` (a vm.env.DesktopEnv); the random one acts with
    `random_policy(seed)`."""
    started = time.perf_counter()
    oracle = has_oracle(task)
    oracle_score = noop_score = random_score = None
    scores: list[float] = []
    error = ""
    try:
        if oracle:
            oracle_score, _ = run_oracle(env, task)
            scores = [oracle_score] + [float(env.evaluate()) for _ in range(rescores)]
        noop_score = run_noop(env, task)
        if not oracle:
            scores = [noop_score] + [float(env.evaluate()) for _ in range(rescores)]
        random_score = run_random(env, task, random_steps, random_policy(seed))
    except Exception as exc:  # a probe that cannot run is a verdict, not a crash
        error = f"{type(exc).__name__}: {exc}"
    return EvaluatorAudit(task.id, task.domain, oracle_score, tuple(scores), noop_score,
                          random_score, time.perf_counter() - started, error, oracle)
