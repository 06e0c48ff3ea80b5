"""Running the commands, scripts and programs the guest server is asked to start.

Every child gets the server's environment plus the configured extra variables (the sandbox
tags its processes that way) and runs in a session of its own, so a timeout kills the whole
process group and a launched program outlives the request.
"""

from __future__ import annotations

import os
import reprlib
import shlex
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vm.guest.validation import InvalidInput, os_text

KILL_GRACE_SECONDS = 2.0


class CommandInputError(InvalidInput):
    """A request field that does not describe a command; the message names the field."""


@dataclass(frozen=True)
class Completed:
    returncode: int
    output: str
    error: str
    timed_out: bool = False


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


def normalise_command(command: Any, shell: bool, python: str | None = None,
                      field: str = "command") -> list[str] | str:
    """OSWorld's rules: a string is split unless shell; `~/` arguments are expanded.
    A leading `python`/`python3` becomes `python` (the interpreter that has pyautogui), so
    OSWorld's `python -c "import pyautogui; ..."` actions work in a sandbox.
    CommandInputError (naming the item) for text no program can be given: NUL characters,
    lone surrogates."""
    if shell:  # a list goes to subprocess as is: its first item is the shell command
        if isinstance(command, list) and command and \
                all(isinstance(a, str) for a in command):
            _check_items(command, field)
            return command
        if not isinstance(command, str) or not command.strip():
            raise CommandInputError(f"{field}: expected a non-empty shell command string")
        _check_text(command, field)
        return command
    if isinstance(command, str):
        _check_text(command, field)
        try:
            command = shlex.split(command)
        except ValueError as exc:
            raise CommandInputError(f"{field}: cannot split {reprlib.repr(command)}: "
                                    f"{exc}") from exc
    if not isinstance(command, list) or not command or \
            not all(isinstance(a, str) for a in command):
        raise CommandInputError(f"{field}: expected a non-empty list of strings or a string")
    _check_items(command, field)
    argv = [os.path.expanduser(a) if a.startswith("~/") else a for a in command]
    if python and argv[0] in ("python", "python3"):
        argv[0] = python
    return argv


def _check_text(text: str, field: str) -> None:
    try:
        os_text(text, field)
    except InvalidInput as exc:
        raise CommandInputError(str(exc)) from exc


def _check_items(argv: list[str], field: str) -> None:
    for index, item in enumerate(argv):
        _check_text(item, f"{field}[{index}]")


def run(command: list[str] | str, *, shell: bool, timeout: float, env: Mapping[str, str],
        cwd: str | Path | None = None, merge_stderr: bool = False) -> Completed:
    """Run to completion; after `timeout` seconds kill its whole process group."""
    proc = subprocess.Popen(
        command, shell=shell, env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        try:  # a process that escaped the group may hold the pipes open
            stdout, stderr = proc.communicate(timeout=KILL_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = b"", b""
        timed_out = True
    return Completed(returncode=proc.returncode if proc.returncode is not None else -1,
                     output=_text(stdout), error=_text(stderr), timed_out=timed_out)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def launch(command: list[str] | str, *, shell: bool, env: Mapping[str, str],
           cwd: str | Path | None = None) -> int:
    """Start a program that outlives the request; returns its pid. A thread reaps it."""
    proc = subprocess.Popen(command, shell=shell, env=dict(env), cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
    return proc.pid


def run_python(code: str, *, python: str, timeout: float, env: Mapping[str, str]) -> Completed:
    """Run `code` from a temporary file with `python`, in the temp folder (as OSWorld)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="python_exec_",
                                     delete=False, encoding="utf-8") as f:
        f.write(code)
    try:
        return run([python, f.name], shell=False, timeout=timeout, env=env,
                   cwd=tempfile.gettempdir())
    finally:
        os.unlink(f.name)


def run_bash_script(script: str, *, timeout: float, env: Mapping[str, str],
                    cwd: str | Path) -> Completed:
    """Run `script` with bash, stderr merged into the output (as OSWorld)."""
    with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="bash_script_",
                                     delete=False, encoding="utf-8") as f:
        f.write("#!/bin/bash\n" + script)
    try:
        return run(["/bin/bash", f.name], shell=False, timeout=timeout, env=env, cwd=cwd,
                   merge_stderr=True)
    finally:
        os.unlink(f.name)
