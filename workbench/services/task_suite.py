"""An OSWorld task folder as the app shows it: `workbench tasks audit`'s per-domain totals
and, per task, its instruction, whether it runs here and why not; the tasks a person
chose, loaded. Qt-free; the audit itself is workbench.vetting.audit's (imported when a folder is
opened: it loads the task code)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SuiteTask:
    domain: str
    id: str
    file: str
    state: str  # "runs in a sandbox", "needs a VM", "needs accounts", "not supported", ...
    why: str  # "" when it runs here
    runnable: bool  # runs in a sandbox here
    smoke: str = ""  # its last `tasks smoke` result here ("" : never smoked)
    smoke_details: str = ""  # ... and the commands that failed and its warnings, a line each
    instruction: str = ""  # what the task asks, as its file words it


@dataclass(frozen=True)
class SuiteDomain:
    domain: str
    tasks: int
    loads: int
    ready: int
    downloads: int
    accounts: int
    vm: int
    sandbox: int
    failed_commands: int | None = None  # unmarked, in the last smoke runs (None: none ran)


def task_state(audit: Any) -> tuple[str, str]:
    """(state, why not) of one workbench.vetting.audit.TaskAudit."""
    if not audit.loads:
        return "does not load", audit.load_error
    missing = [f"{kind} {', '.join(names)}" for kind, names in (
        ("setup steps", audit.missing_steps), ("getters", audit.missing_getters),
        ("metrics", audit.missing_metrics)) if names]
    if missing:
        return "not supported", "not implemented here: " + "; ".join(missing)
    if audit.needs_credentials:
        return "needs accounts", "it signs in to an online account"
    if audit.needs_vm:
        return "needs a VM", "uses " + (", ".join(audit.apps) or "an application") + \
            ", which a sandbox does not have"
    if audit.missing_apps:
        return "needs applications", "not installed here: " + ", ".join(audit.missing_apps)
    notes = []
    if audit.uncached_downloads:
        notes.append(f"downloads {len(audit.uncached_downloads)} file(s) at setup")
    if audit.needs_web:
        notes.append("opens web pages: " + ", ".join(audit.web_urls[:2]))
    return "runs in a sandbox", "; ".join(notes)


def open_suite(folder: Path, workspace: Path | None = None
               ) -> tuple[list[SuiteDomain], list[SuiteTask]]:
    """Audit every task of an OSWorld evaluation_examples folder (or its examples/); with
    `workspace`, each task's last `workbench tasks smoke` result kept there (its failed
    setup and postconfig commands, its warnings), and per domain how many commands
    failed."""
    from workbench.vetting.audit import audit_tree, totals
    from workbench.vetting.smoke_reports import last_results

    audits = audit_tree(folder)
    smoked = last_results(workspace, folder) if workspace is not None else {}
    tasks = []
    failed: dict[str, int] = {}
    for audit in audits:
        state, why = task_state(audit)
        last = smoked.get(audit.id)
        smoke = details = ""
        if last is not None:
            smoke = last.summary()
            details = last.details()
            for key in (audit.domain, "all"):
                failed[key] = failed.get(key, 0) + len(last.unmarked_failures)
        tasks.append(SuiteTask(audit.domain, audit.id, audit.file, state, why,
                               audit.runs_in_sandbox, smoke, details,
                               instruction_of(Path(audit.file))))
    domains = [SuiteDomain(t.domain, t.tasks, t.loads, t.ready, t.with_downloads,
                           t.needs_credentials, t.needs_vm, t.runs_in_sandbox,
                           failed.get(t.domain))
               for t in totals(audits).values()]
    return domains, tasks


def instruction_of(file: Path) -> str:
    """The task file's instruction, "" where the file cannot be read (the audit says why
    it does not load)."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    instruction = data.get("instruction") if isinstance(data, dict) else None
    return " ".join(instruction.split()) if isinstance(instruction, str) else ""


def load_chosen(tasks: list[SuiteTask]) -> list[Any]:
    """The vm.tasks.Task of each chosen task, read from its file (a TaskFileError names
    the file and what is wrong with it)."""
    from vm.tasks.model import load_task

    return [load_task(task.file, domain=task.domain or None) for task in tasks]
