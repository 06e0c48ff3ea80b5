"""A do-nothing run of every selected task: start a desktop, run the task's setup, take no
action, evaluate; per task, whether setup and evaluation ran (or why not) and what doing
nothing scores (`workbench tasks smoke`, the health check before a long run).

A feasible task that scores above 0 for doing nothing is flagged: a trainer would hand out
free reward for it; one that needs the web (workbench.vetting.audit.web_urls) says so, as
offline it cannot start from OSWorld's state. Tasks that need a VM or the user's account
(workbench.vetting.audit knows) are reported as such and not run. With stand-ins
(workbench.vetting.stand_ins) for downloads that can be neither found nor fetched, setup
and getters run, but the score is not meaningful. Before scoring, it waits
(vm.tasks.readiness) for the windows the task's setup activates and for the browser's
DevTools when it starts one, as OSWorld's runner waits before an agent's first look.

A setup or postconfig command that exits non-zero is never "ok", though OSWorld's runner
goes on after it: the task's status is "commands failed" and the commands are listed,
unless each is marked (it needs the web, OSWorld's image fails it too, or it worked on a
stand-in file: vm.tasks.setup_report). With a strict desktop (DesktopEnv(strict_setup=
True), `tasks smoke --strict`) an unmarked one fails the setup.
"""

from __future__ import annotations

import fnmatch
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from vm.actions import Done
from vm.tasks.model import Task, TaskFileError, load_task
from vm.tasks.readiness import wait_until_open
from vm.tasks.setup_report import A_CHECK, FAILS_ON_OSWORLD, NEEDS_WEB, FailedCommand
from workbench.vetting.audit import TaskAudit, audit_task, task_downloads, task_files, web_urls
from workbench.vetting.domain_totals import per_domain
from workbench.vetting.stand_ins import StandIns

# Why a task is not run, in the order they are judged.
NOT_LOADED, NEEDS_VM, NEEDS_ACCOUNT = "does not load", "needs a VM", "needs an account"
NOT_IMPLEMENTED, NOT_INSTALLED = "not implemented", "not installed here"
ON_STAND_IN = "on a stand-in file"  # a failed command's mark: it worked on a stand-in
STATUSES = ("ok", "flagged", "commands failed", "setup failed", "evaluation failed",
            "skipped")


@dataclass
class SmokeResult:
    """One task's do-nothing run (or why it was not run)."""

    task_id: str
    domain: str
    file: str
    infeasible: bool = False
    skipped: str = ""  # one of the reasons above when the task was not run
    skip_reason: str = ""  # ... and the details
    setup_ok: bool | None = None  # None: not run
    setup_error: str = ""
    evaluation_ok: bool | None = None  # None: not reached
    evaluation_error: str = ""
    score: float | None = None  # what doing nothing scored
    notes: list[str] = field(default_factory=list)  # parts that scored 0 uncomputed, why
    # setup and postconfig steps that did nothing where OSWorld goes on (a window not there)
    warnings: list[str] = field(default_factory=list)
    # setup and postconfig commands that exited non-zero (OSWorld goes on; they are not ok)
    failed_commands: list[FailedCommand] = field(default_factory=list)
    stand_ins: list[str] = field(default_factory=list)  # URLs replaced by stand-ins
    web_urls: list[str] = field(default_factory=list)  # external URLs it opens or reads
    seconds: float = 0.0

    @property
    def score_meaningful(self) -> bool:
        """False when a stand-in replaced one of the task's files."""
        return not self.stand_ins

    @property
    def needs_web(self) -> bool:
        """It opens or reads external URLs: offline it does not start from OSWorld's state."""
        return bool(self.web_urls)

    @property
    def commands_failed(self) -> list[FailedCommand]:
        """Failed setup commands not marked (needing the web, failing on OSWorld's image,
        ...): the setup did not all happen."""
        return [f for f in self.failed_commands if not f.expected and f.part == "config"]

    @property
    def postconfig_failed(self) -> list[FailedCommand]:
        """Failed postconfig commands not marked: in a do-nothing run most work on what the
        agent should have made (tar of PDFs never written, killall of a terminal never
        opened), so they are listed and counted apart, not a failed setup."""
        return [f for f in self.failed_commands if not f.expected and f.part != "config"]

    @property
    def flagged(self) -> bool:
        """A feasible task that scores above 0 for doing nothing (on its real files)."""
        return (bool(self.evaluation_ok) and not self.infeasible and self.score_meaningful
                and (self.score or 0.0) > 0.0)

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        if not self.setup_ok:
            return "setup failed"
        if not self.evaluation_ok:
            return "evaluation failed"
        if self.commands_failed:
            return "commands failed"
        return "flagged" if self.flagged else "ok"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status, "flagged": self.flagged,
                "score_meaningful": self.score_meaningful, "needs_web": self.needs_web}


@dataclass
class SmokeTotals:
    """Counts of one domain (or "all")."""

    domain: str
    tasks: int = 0
    ran: int = 0
    setup_ok: int = 0
    evaluation_ok: int = 0
    flagged: int = 0  # feasible, scored > 0 for doing nothing
    with_stand_ins: int = 0  # ran on stand-ins: scores not meaningful
    with_warnings: int = 0  # a setup or postconfig step did nothing (a window not there)
    with_failed_commands: int = 0  # tasks with a failed command not marked
    failed_commands: int = 0  # failed setup commands not marked (needs the web, ...)
    failed_postconfig: int = 0  # failed postconfig commands not marked
    failed_needs_web: int = 0  # failed commands that reach for the web
    failed_on_osworld: int = 0  # failed commands that fail on OSWorld's image too
    failed_on_stand_ins: int = 0  # failed commands that worked on a stand-in file
    failed_checks: int = 0  # failed postconfig probes whose output the evaluator scores
    needs_web: int = 0  # opens or reads external URLs (workbench.vetting.audit.web_urls)
    needs_vm: int = 0
    needs_account: int = 0
    other_skipped: int = 0  # does not load, not implemented, not installed here

    @property
    def failed_commands_marked(self) -> int:
        """Failed commands that are not the desktop's fault (the marks, added up)."""
        return (self.failed_needs_web + self.failed_on_osworld + self.failed_on_stand_ins
                + self.failed_checks)

    def add(self, result: SmokeResult) -> None:
        self.tasks += 1
        self.ran += result.setup_ok is not None
        self.setup_ok += bool(result.setup_ok)
        self.evaluation_ok += bool(result.evaluation_ok)
        self.flagged += result.flagged
        self.with_stand_ins += bool(result.stand_ins)
        self.with_warnings += bool(result.warnings)
        self.with_failed_commands += bool(result.commands_failed)
        self.failed_commands += len(result.commands_failed)
        self.failed_postconfig += len(result.postconfig_failed)
        self.failed_needs_web += sum(f.expected == NEEDS_WEB for f in result.failed_commands)
        self.failed_on_osworld += sum(f.expected.startswith(FAILS_ON_OSWORLD)
                                      for f in result.failed_commands)
        self.failed_on_stand_ins += sum(f.expected == ON_STAND_IN
                                        for f in result.failed_commands)
        self.failed_checks += sum(f.expected == A_CHECK for f in result.failed_commands)
        self.needs_web += result.needs_web
        self.needs_vm += result.skipped == NEEDS_VM
        self.needs_account += result.skipped == NEEDS_ACCOUNT
        self.other_skipped += result.skipped not in ("", NEEDS_VM, NEEDS_ACCOUNT)


def totals(results: Iterable[SmokeResult]) -> dict[str, SmokeTotals]:
    """Per-domain totals, plus "all" last."""
    return per_domain(results, SmokeTotals)


def why_not_run(audit: TaskAudit) -> tuple[str, str] | None:
    """(reason, details) when the audit says the task cannot run in a sandbox here."""
    if audit.needs_vm:
        return NEEDS_VM, f"uses an application only a VM has ({', '.join(audit.apps)})"
    if audit.needs_credentials:
        return NEEDS_ACCOUNT, ("uses the user's Google account "
                               "($WORKBENCH_GOOGLE_CREDENTIALS; see docs/osworld.md)")
    missing = [f"{kind} {', '.join(names)}" for kind, names in
               (("steps", audit.missing_steps), ("getters", audit.missing_getters),
                ("metrics", audit.missing_metrics)) if names]
    if missing:
        return NOT_IMPLEMENTED, "; ".join(missing)
    if audit.missing_apps:
        return NOT_INSTALLED, "; ".join(audit.missing_apps)
    return None


def select(root: str | Path, domain: str | None = None,
           patterns: Sequence[str] = ()) -> tuple[list[Task], list[SmokeResult]]:
    """The tasks of an evaluation_examples tree to run, and results for those selected that
    will not run (a file that does not load; a task that needs a VM, an account, ...).
    `patterns` are task ids or fnmatch patterns; one that matches nothing is a ValueError."""
    tasks: list[Task] = []
    skipped: list[SmokeResult] = []
    matched: set[str] = set()

    def chosen(task_id: str) -> bool:
        hits = {p for p in patterns if fnmatch.fnmatchcase(task_id, p)}
        matched.update(hits)
        return not patterns or bool(hits)

    for folder_domain, file in task_files(Path(root)):
        if domain is not None and folder_domain != domain:
            continue
        try:
            task = load_task(file, folder_domain)
        except (TaskFileError, OSError) as exc:
            if chosen(file.stem):
                skipped.append(SmokeResult(file.stem, folder_domain, str(file),
                                           skipped=NOT_LOADED, skip_reason=str(exc)))
            continue
        if not chosen(task.id):
            continue
        audit = audit_task(task, str(file))
        reason = why_not_run(audit)
        if reason is None:
            tasks.append(task)
        else:
            skipped.append(SmokeResult(task.id, task.domain, str(file),
                                       infeasible=task.evaluator.infeasible,
                                       skipped=reason[0], skip_reason=reason[1],
                                       web_urls=audit.web_urls))
    unmatched = [p for p in patterns if p not in matched]
    if unmatched:
        raise ValueError(f"--tasks: no task in {root}"
                         + (f" (domain {domain})" if domain else "")
                         + f" matches {', '.join(unmatched)}")
    return tasks, skipped


def _reason(exc: BaseException) -> str:
    from vm.tasks.evaluate import TaskEvaluationError
    from vm.tasks.setup import TaskSetupError

    if isinstance(exc, (TaskSetupError, TaskEvaluationError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def smoke_task(env: Any, task: Task, stand_ins: StandIns | None = None) -> SmokeResult:
    """Reset `env` (a vm.env.DesktopEnv) to `task`, answer DONE at once, evaluate. Every
    failure is a result with its reason, never an exception; a setup failure has no score."""
    started = time.perf_counter()
    result = SmokeResult(task.id, task.domain, task.path,
                         infeasible=task.evaluator.infeasible, web_urls=web_urls(task))
    if stand_ins is not None:
        stand_ins.forget(task.id)
    try:
        env.reset(task)
        result.setup_ok = True
        result.warnings = list(getattr(env, "setup_warnings", ()))
        result.failed_commands = list(getattr(env, "setup_failures", ()))
    except Exception as exc:  # a failed setup is this task's result, not the run's end
        result.setup_ok = False
        # DesktopEnv wraps the last attempt's error with the number of attempts
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        result.setup_error = _reason(cause)
    if result.setup_ok:
        # as OSWorld's runner waits before the agent's first look: for what setup opens
        provider = getattr(env, "provider", None)
        if provider is not None:
            result.warnings += [f"smoke: {line}" for line in wait_until_open(provider, task)]
        try:
            env.step(Done())
            result.score = float(env.evaluate())
            result.evaluation_ok = True
            evaluation = getattr(env, "last_evaluation", None)
            result.notes = list(getattr(evaluation, "notes", ()))
            result.warnings += list(getattr(evaluation, "warnings", ()))
            result.failed_commands += list(getattr(evaluation, "failed_commands", ()))
        except Exception as exc:  # likewise
            result.evaluation_ok = False
            result.evaluation_error = _reason(exc)
    if stand_ins is not None:
        result.stand_ins = stand_ins.used_by(task.id)
        result.failed_commands = _mark_stand_ins(task, result.stand_ins,
                                                 result.failed_commands)
    result.seconds = time.perf_counter() - started
    return result


def _mark_stand_ins(task: Task, urls: list[str], failed: list[FailedCommand]
                    ) -> list[FailedCommand]:
    """Failed commands that work on a file a stand-in replaced (unzipping a stand-in
    archive), or that come after a step a stand-in was downloaded by, marked as such: on
    the real file they may well succeed."""
    names = {name for url, name in task_downloads(task) if url in urls and name}
    # (part, index) of each download step that got a stand-in: a command after it may run
    # what the file should have held (an empty setup.sh makes no project folder)
    after = []
    for part, steps in (("config", task.config), ("evaluator.postconfig",
                                                   task.evaluator.postconfig)):
        for index, step in enumerate(steps):
            files = step.parameters.get("files") if step.type == "download" else None
            if isinstance(files, list) and any(isinstance(entry, dict)
                                               and entry.get("url") in urls
                                               for entry in files):
                after.append((part, index))

    def follows(f: FailedCommand) -> bool:
        return any((f.part == part and f.index > index) or
                   (part == "config" and f.part == "evaluator.postconfig")
                   for part, index in after)

    return [replace(f, expected=ON_STAND_IN)
            if not f.expected and (any(name in f.command for name in names) or follows(f))
            else f for f in failed]


def run_smoke(pool: Any, tasks: Sequence[Task], stand_ins: StandIns | None = None,
              on_result: Callable[[SmokeResult], None] | None = None) -> list[SmokeResult]:
    """Smoke-test `tasks` on the desktops of `pool` (a started vm.pool.EnvPool), as many at
    once as it has; `on_result` is called (one at a time) as each finishes."""
    from vm.pool import PoolClosed

    lock = threading.Lock()

    def one(task: Task) -> SmokeResult:
        try:
            with pool.lease() as env:
                result = smoke_task(env, task, stand_ins)
        except (PoolClosed, TimeoutError) as exc:
            result = SmokeResult(task.id, task.domain, task.path,
                                 infeasible=task.evaluator.infeasible, setup_ok=False,
                                 setup_error=f"no desktop to run on: {exc}",
                                 web_urls=web_urls(task))
        if on_result is not None:
            with lock:
                on_result(result)
        return result

    executor = ThreadPoolExecutor(max(1, pool.size), thread_name_prefix="smoke")
    futures = [executor.submit(one, task) for task in tasks]
    try:
        results = [future.result() for future in as_completed(futures)]
    except BaseException:  # Ctrl-C: start nothing more; the caller closes the pool
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    executor.shutdown()
    return results
