"""Auditing an OSWorld `evaluation_examples` folder in the background, for the screens that
offer "Open task suite…" (Evaluations, Environments' demonstration tasks, the run form)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.app.workers import Worker, Workers


def audit_in_background(workers: Workers, folder: Path,
                        show: Callable[[Path, Any, Any], None],
                        report: Callable[[str], None],
                        workspace: Path | None = None) -> Worker:
    """Audit `folder`'s tasks on a worker (with the last smoke results kept in
    `workspace`); then `show(folder, domains, tasks)` on the GUI thread, or `report(error)`
    when the folder cannot be read."""
    from workbench.services.task_suite import open_suite

    def done(result: Any) -> None:
        domains, tasks = result
        show(folder, domains, tasks)

    return workers.submit(f"Auditing the tasks of {folder.name}",
                          lambda state: open_suite(folder, workspace), on_done=done,
                          on_failed=report)
