"""Running a task's setup steps (`config`) and an evaluator's `postconfig` on a desktop.

Step types and parameters are OSWorld's (desktop_env/controllers/setup.py). Steps that
need something we cannot offer offline (chrome_open_tabs, googledrive, login, ...) fail
with TaskSetupError naming the type and the task, rather than being skipped. As in OSWorld,
an `activate_window`/`close_window` step that finds no such window does not fail the
setup: OSWorld's server answers 404 and its controller logs it and goes on; here it is a
warning, returned by run_steps/run_setup and kept on the episode. A command that exits
non-zero does not stop the setup either (OSWorld's controller goes on), but it is recorded
(vm.tasks.setup_report.FailedCommand: the command, its exit status, its stderr) and kept on
the episode; with `strict` an unmarked one is a TaskSetupError.

In command strings and local paths, three variables are expanded so that a bundled task
can start our own apps wherever the workbench is installed: `$WORKBENCH_PYTHON` (this
Python), `$WORKBENCH_APPS` (assets/apps) and `$WORKBENCH_TASK_DIR` (the task file's folder).
In `execute`/`command` steps, OSWorld's own placeholders (`{SCREEN_WIDTH_HALF}`, ...) are
replaced as OSWorld replaces them, with the desktop's screen size.
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from vm.assets import APPS
from vm.errors import EnvironmentError_
from vm.providers.base import Provider
from vm.tasks.files import FetchError, fetch, local_task_file
from vm.tasks.model import SetupStep, Task
from vm.tasks.setup_report import StepsReport, failed_command

log = logging.getLogger(__name__)

MAX_SLEEP_SECONDS = 600.0
EXECUTE_TIMEOUT = 120.0

# The evaluation's cache folder while an evaluator's postconfig runs: an `execute` step
# with "stdout"/"stderr" file names writes the command's output there, where the
# `cache_file` getter reads it (OSWorld's env.cache_dir).
STEP_OUTPUT_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "step_output_dir", default=None)
# The report of the steps now running and the step's place ("config", 3): where a
# command that fails is recorded.
_REPORT: contextvars.ContextVar[StepsReport | None] = contextvars.ContextVar(
    "steps_report", default=None)
_CURRENT_STEP: contextvars.ContextVar[tuple[str, int]] = contextvars.ContextVar(
    "current_step")


class TaskSetupError(RuntimeError):
    """A setup step failed or is not supported; the message names task, step and type."""


def variables(task: Task | None = None) -> dict[str, str]:
    folder = task.folder if task is not None else None
    return {
        "WORKBENCH_PYTHON": sys.executable,
        "WORKBENCH_APPS": str(APPS),
        "WORKBENCH_TASK_DIR": str(folder.resolve()) if folder else "",
    }


def expand(value: Any, task: Task | None = None) -> Any:
    """`value` with $WORKBENCH_* variables replaced, through lists (and nothing else)."""
    if isinstance(value, str):
        for name, replacement in variables(task).items():
            value = value.replace("${" + name + "}", replacement).replace("$" + name,
                                                                           replacement)
        return value
    if isinstance(value, list):
        return [expand(v, task) for v in value]
    return value


OSWORLD_HOME = "/home/user"  # the user's home in OSWorld images
_OSWORLD_HOME_PATTERN = re.compile(r"(?<![\w/.-])/home/user(?=$|[/\s'\";:)|&>])")


def desktop_command(provider: Provider, command: list[str] | str) -> list[str] | str:
    """`command` as the desktop runs it: unchanged wherever /home/user is the real home
    (VMs, and sandboxes, whose namespaces mount their home there); only a sandbox run with
    isolation = "none" (its `command_home` is a host folder) gets OSWorld's /home/user
    replaced by that folder."""
    home = getattr(provider, "command_home", None)
    if home is None:
        return command
    if isinstance(command, str):
        return _OSWORLD_HOME_PATTERN.sub(lambda _: str(home), command)
    return [_OSWORLD_HOME_PATTERN.sub(lambda _: str(home), part) for part in command]


class _StepFailed(Exception):
    pass


class StepWarning(Exception):
    """Raised by a step runner: the step did nothing, and OSWorld goes on in that case (a
    window it names is not there); the setup goes on, the message is kept as a warning."""


def _param(params: dict[str, Any], name: str, kind: type | tuple[type, ...],
           default: Any = ...) -> Any:
    if name not in params:
        if default is ...:
            raise _StepFailed(f"missing parameter {name!r}")
        return default
    value = params[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
        raise _StepFailed(f"parameter {name!r} has the wrong type ({type(value).__name__})")
    return value


def _command(params: dict[str, Any], task: Task) -> tuple[list[str] | str, bool]:
    command = _param(params, "command", (list, str))
    if isinstance(command, list) and not all(isinstance(c, str) for c in command):
        raise _StepFailed("parameter 'command' must be a string or a list of strings")
    shell = bool(params.get("shell", False))
    return expand(command, task), shell


def _desktop_command(provider: Provider, params: dict[str, Any], task: Task
                     ) -> tuple[list[str] | str, bool]:
    command, shell = _command(params, task)
    return desktop_command(provider, command), shell


def _launch(provider: Provider, params: dict[str, Any], task: Task) -> None:
    command, shell = _desktop_command(provider, params, task)
    provider.launch(command, shell=shell)


# OSWorld's placeholders in `execute`/`command` steps (its SetupController replaces them
# there, before a command runs, in setup and in an evaluator's postconfig); the screen's
# are the desktop's own size, the password that of OSWorld's images' user.
PLACEHOLDER = re.compile(r"\{(CLIENT_PASSWORD|SCREEN_WIDTH_HALF|SCREEN_HEIGHT_HALF|"
                         r"SCREEN_WIDTH|SCREEN_HEIGHT)\}")
CLIENT_PASSWORD = "password"  # OSWorld's default for its VM images (WORKBENCH_CLIENT_PASSWORD)


def placeholder_values(provider: Provider) -> dict[str, str]:
    """What OSWorld's placeholders stand for on this desktop."""
    width, height = provider.screen_size()
    return {"CLIENT_PASSWORD": os.environ.get("WORKBENCH_CLIENT_PASSWORD", CLIENT_PASSWORD),
            "SCREEN_WIDTH": str(width), "SCREEN_HEIGHT": str(height),
            "SCREEN_WIDTH_HALF": str(width // 2), "SCREEN_HEIGHT_HALF": str(height // 2)}


def substitute_placeholders(provider: Provider, command: list[str] | str
                            ) -> list[str] | str:
    """`command` with OSWorld's `{SCREEN_WIDTH_HALF}` and friends replaced; the desktop is
    asked for its size only when the command holds one."""
    parts = [command] if isinstance(command, str) else command
    if not any(PLACEHOLDER.search(part) for part in parts):
        return command
    values = placeholder_values(provider)
    replaced = [PLACEHOLDER.sub(lambda match: values[match.group(1)], part) for part in parts]
    return replaced[0] if isinstance(command, str) else replaced


def _execute(provider: Provider, params: dict[str, Any], task: Task) -> None:
    shown, shell = _desktop_command(provider, params, task)  # logged: no password in it
    command = substitute_placeholders(provider, shown)
    timeout = float(_param(params, "timeout", (int, float), EXECUTE_TIMEOUT))
    until = _param(params, "until", dict, None)
    deadline = time.monotonic() + float(params.get("max_wait", 30.0 if until else 0.0))
    pause = 0.02  # most conditions (an app writing "ready") hold within a second: poll
    while True:   # often at first, then back off slowly to 0.2 s
        result = provider.execute(command, shell=shell, timeout=timeout)
        if until is None:
            if result.returncode != 0:  # OSWorld goes on; here it is recorded
                _record_failure(task, shown, result.returncode, result.error,
                                check="stdout" in params or "stderr" in params
                                or _writes_a_result_file(task, shown))
            _keep_output(params, task, result.output, result.error)
            return
        if _until_met(until, result.returncode, result.output, result.error):
            return
        if time.monotonic() > deadline:
            raise _StepFailed(f"condition {until} not met within {params.get('max_wait', 30)}"
                              f" s (last exit status {result.returncode})")
        time.sleep(pause)
        pause = min(0.2, pause * 1.15)


# `... > log.txt`: a shell redirection's target (the file name, without its folder)
_REDIRECT = re.compile(r"(?<![0-9&])>>?\s*([^\s;&|<>]+)")


def _writes_a_result_file(task: Task, shown: list[str] | str) -> bool:
    """Whether a postconfig command writes its output to a file the evaluator scores (its
    `result` getters' paths): a probe such as `ls -R project/ > log.txt` (acb0f96b), whose
    failure on an undone task is the answer, not setup left undone."""
    if _CURRENT_STEP.get(("config", -1))[0] != "evaluator.postconfig":
        return False
    text = shown if isinstance(shown, str) else " ".join(shown)
    targets = {PurePosixPath(name.strip("'\"")).name for name in _REDIRECT.findall(text)}
    read: set[str] = set()
    for getter in task.evaluator.result:
        paths = (getter or {}).get("path") or []
        read.update(PurePosixPath(str(path)).name
                    for path in (paths if isinstance(paths, list) else [paths]))
    return bool(targets & read)


def _record_failure(task: Task, shown: list[str] | str, returncode: int, stderr: str,
                    check: bool) -> None:
    """Keep a failed command on the report of the steps now running (run_steps); `check`:
    its output is kept for the evaluator (a probe, whose exit status is part of it)."""
    failure = failed_command(*_CURRENT_STEP.get(("config", -1)), task.id, shown, returncode,
                             stderr, check)
    log.warning("task %s: %s", task.id, failure.describe())
    report = _REPORT.get()
    if report is not None:
        report.failed_commands.append(failure)


def _keep_output(params: dict[str, Any], task: Task, output: str, error: str) -> None:
    """Write the command's output to the files its "stdout"/"stderr" parameters name, in
    the evaluation's cache folder (only a plain file name: nothing outside the folder)."""
    folder = STEP_OUTPUT_DIR.get()
    for key, text in (("stdout", output), ("stderr", error)):
        name = params.get(key)
        if name is None:
            continue
        if not isinstance(name, str) or not name or Path(name).name != name \
                or name in (".", ".."):
            raise _StepFailed(f"{key} must be a plain file name, got {name!r}")
        if folder is None:
            log.warning("task %s: the command's %s (%s) is kept only while an evaluator "
                        "runs; not kept at setup", task.id, key, name)
            continue
        (folder / name).write_text(text, encoding="utf-8")


def _until_met(until: dict[str, Any], returncode: int, output: str, error: str) -> bool:
    if "returncode" in until and returncode != until["returncode"]:
        return False
    if "stdout" in until and str(until["stdout"]) not in output:
        return False
    return not ("stderr" in until and str(until["stderr"]) not in error)


def _files(params: dict[str, Any]) -> list[dict[str, Any]]:
    files = _param(params, "files", list)
    for i, entry in enumerate(files):
        if not isinstance(entry, dict):
            raise _StepFailed(f"files[{i}] must be an object")
    return files


def _download(provider: Provider, params: dict[str, Any], task: Task) -> None:
    for i, entry in enumerate(_files(params)):
        url, path = entry.get("url"), entry.get("path")
        if not isinstance(url, str) or not isinstance(path, str):
            raise _StepFailed(f"files[{i}] needs string fields 'url' and 'path'")
        try:
            data = fetch(expand(url, task), task.id, Path(path).name, task.folder)
        except FetchError as exc:
            raise _StepFailed(f"files[{i}].url: {exc}") from None
        provider.write_file(path, data)


def _upload_file(provider: Provider, params: dict[str, Any], task: Task) -> None:
    for i, entry in enumerate(_files(params)):
        local, path = entry.get("local_path"), entry.get("path")
        if not isinstance(local, str) or not isinstance(path, str):
            raise _StepFailed(f"files[{i}] needs string fields 'local_path' and 'path'")
        try:
            source = local_task_file(expand(local, task), task.folder)
        except FetchError as exc:
            raise _StepFailed(f"files[{i}].local_path: {exc}") from None
        provider.write_file(path, source.read_bytes())


def _open(provider: Provider, params: dict[str, Any], task: Task) -> None:
    """OSWorld's open: the file in its default application, its window in front once it
    shows (a warning when none came: vm.file_windows)."""
    note = provider.open_file(expand(_param(params, "path", str), task))
    if note:
        raise StepWarning(note)


def _sleep(provider: Provider, params: dict[str, Any], task: Task) -> None:
    seconds = float(_param(params, "seconds", (int, float)))
    if not 0 <= seconds <= MAX_SLEEP_SECONDS:
        raise _StepFailed(f"seconds must be within 0..{MAX_SLEEP_SECONDS:.0f}")
    time.sleep(seconds)  # the step asks for exactly this


def _activate_window(provider: Provider, params: dict[str, Any], task: Task) -> None:
    _on_window(provider.activate_window, params)


def _close_window(provider: Provider, params: dict[str, Any], task: Task) -> None:
    _on_window(provider.close_window, params)


def _on_window(call: Callable[..., None], params: dict[str, Any]) -> None:
    """Activate or close the window the step names; none found is a warning, not a failure
    (OSWorld's /setup/activate_window and /setup/close_window answer 404 and its
    SetupController only logs it)."""
    name = _param(params, "window_name", str)
    try:
        call(name, strict=bool(params.get("strict", False)),
             by_class=bool(params.get("by_class", False)))
    except LookupError as exc:  # the providers' "no window matches"
        raise StepWarning(f"{exc} (OSWorld goes on without it)") from None


StepRunner = Callable[[Provider, dict[str, Any], Task], None]

STEP_RUNNERS: dict[str, StepRunner] = {
    "launch": _launch,
    "execute": _execute,
    "command": _execute,
    "download": _download,
    "upload_file": _upload_file,
    "open": _open,
    "sleep": _sleep,
    "activate_window": _activate_window,
    "close_window": _close_window,
}


class StepFailed(_StepFailed):
    """Raised by a step runner: the step could not be done (the message says why)."""


def register_step(name: str) -> Callable[[StepRunner], StepRunner]:
    """Decorator: make `runner(provider, parameters, task)` the runner of steps of type
    `name` (application modules under vm/tasks/steps/ add OSWorld's other step types)."""

    def add(runner: StepRunner) -> StepRunner:
        if name in STEP_RUNNERS and STEP_RUNNERS[name] is not runner:
            raise ValueError(f"setup step type {name!r} is already registered")
        STEP_RUNNERS[name] = runner
        return runner
    return add


def load_step_modules() -> None:
    """Import the application modules that register more step types."""
    from vm.tasks import steps

    steps.load_all()


def run_steps(provider: Provider, task: Task, steps: tuple[SetupStep, ...],
              field: str = "config", output_dir: Path | None = None,
              strict: bool = False) -> StepsReport:
    """Run `steps` in order; the first failure raises TaskSetupError. Returns the warnings
    of steps that did nothing where OSWorld goes on (a window that is not there), each
    naming the task and the step, and the commands that exited non-zero (OSWorld goes on
    after those too). With `strict`, a failed command not marked as needing the web or as
    failing on OSWorld's image too is a TaskSetupError. With `output_dir` (an evaluation's
    cache folder), commands' "stdout"/"stderr" files are written there."""
    report = StepsReport()
    tokens = (STEP_OUTPUT_DIR.set(output_dir), _REPORT.set(report))
    try:
        _run_steps(provider, task, steps, field, report, strict)
        return report
    finally:
        _REPORT.reset(tokens[1])
        STEP_OUTPUT_DIR.reset(tokens[0])


def _run_steps(provider: Provider, task: Task, steps: tuple[SetupStep, ...],
               field: str, report: StepsReport, strict: bool) -> None:
    load_step_modules()
    for i, step in enumerate(steps):
        where = f"task {task.id!r}: {field}[{i}] (type {step.type!r})"
        runner = STEP_RUNNERS.get(step.type)
        if runner is None:
            raise TaskSetupError(f"{where}: setup step type {step.type!r} is not supported "
                                 f"here (supported: {', '.join(sorted(STEP_RUNNERS))})")
        token = _CURRENT_STEP.set((field, i))
        try:
            runner(provider, step.parameters, task)
        except StepWarning as exc:
            log.warning("%s: %s", where, exc)
            report.warnings.append(f"{where}: {exc}")
        except _StepFailed as exc:
            raise TaskSetupError(f"{where}: {exc}") from None
        except EnvironmentError_:
            raise  # a dead desktop is the environment's failure, not the task's
        except (OSError, RuntimeError, ValueError, LookupError) as exc:
            if isinstance(exc, TaskSetupError):
                raise
            raise TaskSetupError(f"{where}: {type(exc).__name__}: {exc}") from exc
        finally:
            _CURRENT_STEP.reset(token)
        if strict:
            failed = [f for f in report.unexpected_failures if f.index == i
                      and f.part == field]
            if failed:
                raise TaskSetupError(f"{where}: a command failed (strict): "
                                     f"{failed[0].describe()}")


def unsupported_steps(task: Task) -> list[str]:
    """Step types of the task (config and postconfig) this runner cannot perform."""
    load_step_modules()
    steps = task.config + task.evaluator.postconfig
    return sorted({s.type for s in steps if s.type not in STEP_RUNNERS})


def run_setup(provider: Provider, task: Task, strict: bool = False) -> StepsReport:
    """Run the task's setup steps (its `config`) on the desktop; what they left to say
    (run_steps: warnings and failed commands)."""
    return run_steps(provider, task, task.config, "config", strict=strict)
