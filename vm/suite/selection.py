"""Choosing tasks by name: task files, folders (an OSWorld evaluation_examples tree or a
folder of task files), or ids and fnmatch patterns of a suite (the bundled one unless
another is given)."""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Sequence
from pathlib import Path

from vm.suite.bundled import bundled_suite
from vm.tasks.model import Task, TaskFileError, TaskSuite, load_suite, load_task

log = logging.getLogger(__name__)


def tasks_in_folder(path: Path) -> list[Task]:
    """An evaluation_examples tree, or else every task file under `path`."""
    try:
        return list(load_suite(path).tasks.values())
    except FileNotFoundError:  # not an evaluation_examples tree: a folder of files
        found = []
        for file in sorted(path.rglob("*.json")):
            try:
                found.append(load_task(file))
            except TaskFileError as exc:
                log.warning("skipped %s: %s", file, exc)
        return found


def select_tasks(items: Sequence[str] | None, suite: TaskSuite | None = None,
                 where: str = "tasks") -> list[Task]:
    """Tasks named by files, folders, or ids/patterns of `suite` (the bundled suite when
    None), in the order given, each once. No items: the whole suite."""
    if not items:
        tasks = list((suite or bundled_suite()).tasks.values())
        if not tasks:
            raise ValueError(f"{where}: the task suite is empty")
        return tasks
    chosen: dict[str, Task] = {}
    for item in items:
        path = Path(item).expanduser()
        if path.is_file():
            found = [load_task(path)]
        elif path.is_dir():
            found = tasks_in_folder(path)
            if not found:
                raise ValueError(f"{where}: no task files in {path}")
        else:
            suite = suite or bundled_suite()
            if item in suite.tasks:
                found = [suite.tasks[item]]
            else:
                found = [suite.tasks[i] for i in sorted(suite.tasks)
                         if fnmatch.fnmatchcase(i, item)]
            if not found:
                raise ValueError(f"{where}: {item!r} is neither a task file, a folder nor a "
                                 f"task id of the suite (see `workbench tasks list`)")
        for task in found:
            chosen.setdefault(task.id, task)
    return list(chosen.values())
