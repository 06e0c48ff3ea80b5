"""OSWorld's layer: load and validate task files (model), fetch their files (files), run
their setup steps (setup, steps/), score them with getters and metrics through a registry
(registry, getters/, metrics/, evaluate), and talk to the browser (devtools).

Our bundled suite and its oracles are vm.suite, which builds on this package; the tools
that vet tasks (audit, smoke, check) are workbench.vetting. Nothing here imports either.
Importing this package loads no getter, metric or step module, nor their libraries: the
registry imports them when a function is first asked for."""

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
from vm.tasks.registry import EvalContext, register_getter, register_metric
from vm.tasks.setup import TaskSetupError, run_setup

__all__ = [
    "EvalContext", "Evaluation", "Evaluator", "SetupStep", "Task", "TaskEvaluationError",
    "TaskFileError", "TaskSetupError", "TaskSuite", "evaluate", "evaluate_task",
    "load_suite", "load_task", "register_getter", "register_metric", "run_setup",
]
