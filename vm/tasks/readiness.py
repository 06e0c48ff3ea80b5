"""Waiting, after a task's setup, for what it opens: the windows its `activate_window`
steps name and, when it starts the browser, the browser's DevTools answering.

OSWorld's runner sleeps a fixed 60 s after a reset before the agent's first look (and its
evaluation reads the browser through DevTools). A do-nothing run scored at once would
score a desktop still opening, not the one an agent starts from; instead of a fixed sleep
this waits for those conditions, each up to a deadline, and says which never came.
"""

from __future__ import annotations

import os
import shlex
import time
from functools import partial
from typing import Any

from vm.providers.sandbox.apps import CHROME_NAMES, window_matches
from vm.tasks.model import Task
from vm.waiting import poll_until
from vm.x11 import window_named

READY_TIMEOUT = 30.0  # seconds for all of a task's conditions together
# step types that start or drive the browser themselves (vm/tasks/steps/chrome.py)
BROWSER_STEPS = frozenset({"chrome_open_tabs", "chrome_close_tabs", "update_browse_history"})


def starts_browser(task: Task) -> bool:
    """Its setup launches Chrome (any of OSWorld's names for it) or drives its tabs."""
    for step in task.config:
        if step.type in BROWSER_STEPS:
            return True
        if step.type not in ("launch", "execute", "command"):
            continue
        command = step.parameters.get("command")
        if isinstance(command, str):
            text = command
            try:
                command = shlex.split(text)
            except ValueError:
                command = text.split()
        if isinstance(command, list) and command and isinstance(command[0], str) \
                and os.path.basename(command[0]) in CHROME_NAMES:
            return True
    return False


def windows_named(task: Task) -> list[tuple[str, bool, bool]]:
    """(window_name, strict, by_class) of each of its setup's activate_window steps, but
    those a later close_window step of the setup closes (the task means them gone)."""
    named: list[tuple[str, bool, bool]] = []
    for step in task.config:
        name = step.parameters.get("window_name")
        if not isinstance(name, str):
            continue
        if step.type == "activate_window":
            named.append((name, bool(step.parameters.get("strict", False)),
                          bool(step.parameters.get("by_class", False))))
        elif step.type == "close_window" and not step.parameters.get("by_class", False):
            strict = bool(step.parameters.get("strict", False))
            named = [n for n in named if n[2] or not (
                n[0] == name if strict else name.lower() in n[0].lower())]
    return named


def has_window(provider: Any, name: str, strict: bool, by_class: bool) -> bool:
    """A window OSWorld's name finds (as this machine's applications name their windows)."""
    windows = provider.windows()
    return any(window_named(window, match.name, match.strict, match.by_class)
               for match in window_matches(name, strict, by_class) for window in windows)


def wait_until_open(provider: Any, task: Task, timeout: float = READY_TIMEOUT
                    ) -> list[str]:
    """Wait for the windows the task's setup activates and, when it starts the browser, its
    DevTools; what never came within `timeout` s (all together), one line each. Desktops
    that cannot list windows (a VM, a remote guest) are only waited on for DevTools."""
    from vm.tasks.devtools import DevTools, DevToolsError, devtools_endpoint, poll

    deadline = time.monotonic() + timeout
    missing = []
    if starts_browser(task):
        try:
            browser = DevTools(devtools_endpoint(provider))
            poll(browser.version, max(0.0, deadline - time.monotonic()),
                 "the browser's DevTools")
        except DevToolsError as exc:
            missing.append(f"the browser's DevTools never answered: {exc}")
    if not hasattr(provider, "windows"):
        return missing
    for name, strict, by_class in windows_named(task):
        if not poll_until(partial(has_window, provider, name, strict, by_class),
                          max(0.0, deadline - time.monotonic()), 0.05, backoff=1.5,
                          longest=0.5):
            missing.append(f"no window matching {name!r} within {timeout:g} s")
    return missing
