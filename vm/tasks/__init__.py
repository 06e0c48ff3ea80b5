"""Tasks with verifiable rewards: OSWorld task files, their setup steps and evaluators,
and the bundled offline suite with a scripted oracle per task."""

from __future__ import annotations

from vm.tasks.evaluate import Evaluation, TaskEvaluationError, evaluate, evaluate_task
from vm.tasks.model import (
    Evaluator,
    SetupStep,
    Task,
    TaskFileError,
    TaskSuite,
    load_suite,
    load_task,
)
from vm.tasks.oracles import oracle_for
from vm.tasks.registry import EvalContext, register_getter, register_metric
from vm.tasks.setup import TaskSetupError, run_setup
from vm.tasks.suite import bundled_suite

__all__ = [
    "EvalContext", "Evaluation", "Evaluator", "SetupStep", "Task", "TaskEvaluationError",
    "TaskFileError", "TaskSetupError", "TaskSuite", "bundled_suite", "evaluate",
    "evaluate_task", "load_suite", "load_task", "oracle_for", "register_getter",
    "register_metric", "run_setup",
]
