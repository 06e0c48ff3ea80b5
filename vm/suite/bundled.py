"""The bundled offline suite in assets/tasks (an evaluation_examples-shaped tree)."""

from __future__ import annotations

from pathlib import Path

from vm.assets import ASSETS
from vm.tasks.model import TaskSuite, load_suite

BUNDLED_TASKS = ASSETS / "tasks"


def bundled_suite(root: str | Path | None = None) -> TaskSuite:
    """Every bundled task (examples/<app>/<id>.json), with the index files beside them."""
    return load_suite(root if root is not None else BUNDLED_TASKS)
