"""Our bundled offline suite, apart from OSWorld's layer (vm.tasks) that runs it: the tasks
in assets/tasks, the generated task families, choosing tasks by name, and a scripted oracle
per task (vm.suite.oracles) that proves it solvable.

vm.suite builds on vm.tasks; vm.tasks never imports vm.suite (pyproject's import-linter
contracts)."""

from __future__ import annotations

from vm.suite.bundled import BUNDLED_TASKS, bundled_suite
from vm.suite.oracles import has_oracle, oracle_for

__all__ = ["BUNDLED_TASKS", "bundled_suite", "has_oracle", "oracle_for"]
