"""Scoring a task on a desktop the way OSWorld's DesktopEnv.evaluate does.

Order: the evaluator's postconfig steps run first; then a task whose func is
"infeasible" scores 1 only when the last action was FAIL; any other task scores 0 when the
last action was FAIL; otherwise each metric gets its getters' values and the scores
combine with conj "and" (mean, a 0 stops early) or "or" (max, a 1 stops early).

A getter that fails on the desktop as it is (a file the agent never saved, an app that is
not running, a page that did not load) gives None, which its metric scores 0, as OSWorld
scores a missing result; a metric that cannot read what it was given scores 0 too. Either
way the reason is kept in `Evaluation.notes` (the rollout stores it on the episode). What
is wrong with the task itself (an unknown getter or metric, a malformed getter config, a
reference file that cannot be fetched) raises TaskEvaluationError.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vm.actions import Action, Fail
from vm.errors import EnvironmentDead
from vm.providers.base import Provider
from vm.tasks import registry
from vm.tasks.files import FetchError
from vm.tasks.metric_limits import (
    MetricLimitExceeded,
    MetricLimits,
    MetricRaised,
    call_with_limits,
)
from vm.tasks.model import Task
from vm.tasks.setup import run_steps
from vm.tasks.setup_report import FailedCommand


class TaskEvaluationError(RuntimeError):
    """A getter or metric failed (bad config, missing reference file); names the task."""


@dataclass(frozen=True)
class Evaluation:
    """A task's score and, when parts of it could not be computed, why."""

    score: float
    notes: tuple[str, ...] = ()  # e.g. "evaluator.result[0] (getter 'vm_file'): ..."
    # postconfig steps that did nothing where OSWorld goes on (a window not there)
    warnings: tuple[str, ...] = ()
    # postconfig commands that exited non-zero (vm.tasks.setup_report.FailedCommand)
    failed_commands: tuple[FailedCommand, ...] = ()

    @property
    def reason(self) -> str | None:
        return "; ".join(self.notes) if self.notes else None


def _config_errors() -> tuple[type[BaseException], ...]:
    """Errors that say the getter config itself is wrong (not the desktop's state)."""
    from vm.tasks.getters.files import GetterError

    return (GetterError, FetchError, registry.UnknownFunction)


def _value(context: registry.EvalContext, config: dict[str, Any], task: Task,
           where: str, notes: list[str]) -> Any:
    kind = config.get("type")
    try:
        return registry.getter(str(kind))(context, config)
    except registry.UnknownFunction as exc:
        raise TaskEvaluationError(f"task {task.id!r}: {where}: {exc}") from None
    except EnvironmentDead:
        raise  # a dead desktop is the environment's failure, not the agent's
    except _config_errors() as exc:
        raise TaskEvaluationError(f"task {task.id!r}: {where} (getter {kind!r}): "
                                  f"{exc}") from exc
    except Exception as exc:  # the desktop's state: scored as a missing result
        notes.append(f"{where} (getter {kind!r}) gave no value: {type(exc).__name__}: "
                     f"{str(exc)[:300]}")
        return None


def evaluate_task(provider: Provider, task: Task, last_action: Action | None = None,
                  cache_dir: str | Path | None = None,
                  limits: MetricLimits | None = None) -> Evaluation:
    """The task's score in [0, 1] on `provider`'s desktop as it is now, with the reasons
    for any part that scored 0 because it could not be computed (and the postconfig's
    warnings: a window it names that is not there). Metrics that need no
    desktop run under `limits` (default: from the environment; vm.tasks.metric_limits)."""
    evaluator = task.evaluator
    limits = limits or MetricLimits.from_environment()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="workbench-eval-") as scratch:
        folder = Path(cache_dir) if cache_dir else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        # postconfig commands may leave their output in the folder (read by cache_file)
        report = run_steps(provider, task, evaluator.postconfig, "evaluator.postconfig",
                           output_dir=folder)
        evaluation = _score(provider, task, last_action, folder, limits, notes)
        return replace(evaluation, warnings=tuple(report.warnings),
                       failed_commands=tuple(report.failed_commands))


def _score(provider: Provider, task: Task, last_action: Action | None, folder: Path,
           limits: MetricLimits, notes: list[str]) -> Evaluation:
    """The score once postconfig has run (evaluate_task)."""
    evaluator = task.evaluator
    if evaluator.infeasible:
        return Evaluation(1.0 if isinstance(last_action, Fail) else 0.0)
    if isinstance(last_action, Fail):
        return Evaluation(0.0, ("the agent answered FAIL on a feasible task",))
    context = registry.EvalContext(provider=provider, cache_dir=folder,
                                   task_id=task.id, task_folder=task.folder)
    scores: list[float] = []
    for i, name in enumerate(evaluator.func):
        where = f"evaluator.func[{i}] {name!r}"
        try:
            metric = registry.metric(name)
        except registry.UnknownFunction as exc:
            raise TaskEvaluationError(f"task {task.id!r}: {exc}") from None
        args = []
        for part, configs in (("result", evaluator.result),
                              ("expected", evaluator.expected)):
            if configs[i] is not None:
                args.append(_value(context, configs[i] or {}, task,
                                   f"evaluator.{part}[{i}]", notes))
        try:
            if registry.needs_desktop(name):  # bounded by the desktop's own timeouts
                score = float(metric(*args, **evaluator.options[i], desktop=context))
            else:
                score = call_with_limits(metric, args, evaluator.options[i], limits)
        except EnvironmentDead:
            raise
        except MetricLimitExceeded as exc:  # a bomb, or a metric that hangs: 0
            notes.append(f"{where} could not score: it {exc}")
            score = 0.0
        except MetricRaised as exc:
            notes.append(f"{where} could not score: {exc}")
            score = 0.0
        except Exception as exc:  # what it was given cannot be scored: 0, as OSWorld
            notes.append(f"{where} could not score: {type(exc).__name__}: "
                         f"{str(exc)[:300]}")
            score = 0.0
        score = min(max(score, 0.0), 1.0) if score == score else 0.0  # NaN scores 0
        if evaluator.conj == "and" and score == 0.0:
            return Evaluation(0.0, tuple(notes))
        if evaluator.conj == "or" and score == 1.0:
            return Evaluation(1.0)
        scores.append(score)
    if not scores:
        return Evaluation(0.0, tuple(notes))
    total = sum(scores) / len(scores) if evaluator.conj == "and" else max(scores)
    return Evaluation(total, tuple(notes))


def evaluate(provider: Provider, task: Task, last_action: Action | None = None,
             cache_dir: str | Path | None = None) -> float:
    """The task's score in [0, 1] on `provider`'s desktop as it is now."""
    return evaluate_task(provider, task, last_action, cache_dir).score
