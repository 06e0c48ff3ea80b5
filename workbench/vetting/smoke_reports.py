"""The last `tasks smoke` report of each task folder, kept in the workspace so the app's
suite view can show what the do-nothing run found (failed setup commands above all, and
the windows a setup or postconfig step waited for in vain).

One JSON file per folder: `<workspace>/smoke/<digest of the folder's path>.json`, written
atomically; a later run replaces the results of the tasks it ran and keeps the others.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vm.atomic_write import write_atomic
from vm.tasks.setup_report import FailedCommand

FOLDER = "smoke"


@dataclass(frozen=True)
class LastSmoke:
    """One task's result in the last smoke run that ran it."""

    task_id: str
    domain: str
    status: str  # workbench.vetting.smoke.STATUSES
    failed_commands: tuple[FailedCommand, ...]
    finished_at: float  # unix seconds
    # setup and postconfig steps that did nothing (a window not there), as the table says
    warnings: tuple[str, ...] = ()

    @property
    def unmarked_failures(self) -> list[FailedCommand]:
        """Setup commands that failed, not marked: the setup did not all happen."""
        return [f for f in self.failed_commands if not f.expected and f.part == "config"]

    def summary(self) -> str:
        """E.g. "commands failed: 2 (1 postconfig; 1 marked: web, OSWorld or stand-in)",
        "ok; 1 warning"."""
        setup = len(self.unmarked_failures)
        marked = sum(bool(f.expected) for f in self.failed_commands)
        postconfig = len(self.failed_commands) - setup - marked
        text = self.status
        if setup and self.status != "commands failed":
            text += f"; {setup} setup command(s) failed"
        elif setup:
            text += f": {setup}"
        more = [f"{postconfig} postconfig"] if postconfig else []
        more += [f"{marked} marked: web, OSWorld or stand-in"] if marked else []
        text += f" ({'; '.join(more)})" if more else ""
        count = len(self.warnings)
        return text + (f"; {count} warning{'s' if count > 1 else ''}" if count else "")

    def details(self) -> str:
        """The failed commands, then the warnings, one per line."""
        return "\n".join([f.describe() for f in self.failed_commands]
                         + [f"warning: {w}" for w in self.warnings])


def report_path(workspace: Path, suite_folder: Path) -> Path:
    key = str(Path(suite_folder).expanduser().resolve())
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(workspace) / FOLDER / f"{digest}.json"


def save_results(workspace: Path, suite_folder: Path, results: Iterable[Any]) -> Path:
    """Merge `results` (workbench.vetting.smoke.SmokeResult, those run) into the folder's report."""
    path = report_path(workspace, suite_folder)
    kept = _read(path)
    now = time.time()
    for result in results:
        if result.skipped:
            continue
        kept[result.task_id] = {
            "task_id": result.task_id, "domain": result.domain, "status": result.status,
            "failed_commands": [f.to_json() for f in result.failed_commands],
            "warnings": list(result.warnings), "finished_at": now}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"folder": str(Path(suite_folder).resolve()),
                                   "tasks": kept}, indent=1))
    return path


def last_results(workspace: Path, suite_folder: Path) -> dict[str, LastSmoke]:
    """task id -> its last smoke result for this folder (empty: never smoked here)."""
    found = {}
    for task_id, raw in _read(report_path(workspace, suite_folder)).items():
        try:
            warnings = raw.get("warnings", [])  # absent in reports from before they were kept
            if not isinstance(warnings, list):
                raise TypeError("warnings: not a list")
            found[task_id] = LastSmoke(
                str(raw["task_id"]), str(raw["domain"]), str(raw["status"]),
                tuple(FailedCommand.from_json(f) for f in raw.get("failed_commands", [])),
                float(raw.get("finished_at", 0.0)), tuple(str(w) for w in warnings))
        except (KeyError, TypeError, ValueError):
            continue  # a damaged entry: shown as never smoked, replaced by the next run
    return found


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    tasks = data.get("tasks") if isinstance(data, dict) else None
    return dict(tasks) if isinstance(tasks, dict) else {}
