"""A do-nothing run waits, as OSWorld's runner does before an agent looks, for what the
task's setup opens: the windows its activate_window steps name (a window that maps late
is waited for; one that never comes is named) and the browser's DevTools when it starts
Chrome (OSWorld's own launch line, as a sandbox rewrites it for Chromium)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from vm.tasks import Task
from vm.tasks.devtools import DevTools, devtools_endpoint
from vm.tasks.readiness import has_window, starts_browser, wait_until_open, windows_named

pytestmark = pytest.mark.x11


def _task(config: list[dict[str, Any]]) -> Task:
    return Task.from_dict({"id": "wb-readiness", "instruction": "x", "config": config,
                           "evaluator": {"func": "infeasible"}})


CHROME_LAUNCH = [  # OSWorld's chrome tasks start the browser this way (e.g. 12086550)
    {"type": "launch", "parameters": {"command": ["google-chrome",
                                                  "--remote-debugging-port=1337"]}},
    {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork",
                                                  "tcp:localhost:1337"]}}]


def test_what_a_task_opens_is_read_from_its_setup() -> None:
    assert starts_browser(_task(CHROME_LAUNCH))
    assert starts_browser(_task([{"type": "execute", "parameters": {
        "command": "google-chrome --remote-debugging-port=1337 &", "shell": True}}]))
    assert not starts_browser(_task([{"type": "launch", "parameters": {
        "command": ["libreoffice", "--calc"]}}]))
    assert windows_named(_task([{"type": "activate_window", "parameters": {
        "window_name": "Untitled 1 - LibreOffice Calc", "strict": True}}])) \
        == [("Untitled 1 - LibreOffice Calc", True, False)]
    # a window the setup closes again is not waited for (its name in the title closes it)
    activate = {"type": "activate_window", "parameters": {
        "window_name": "notes.txt (~/Documents) - gedit", "strict": True}}
    assert windows_named(_task([activate, {"type": "close_window", "parameters": {
        "window_name": "notes.txt"}}])) == []
    assert windows_named(_task([activate, {"type": "close_window", "parameters": {
        "window_name": "notes.txt", "strict": True}}])) != []  # strict: not that title
    assert windows_named(_task([{"type": "close_window", "parameters": {
        "window_name": "notes.txt"}}, activate])) != []  # closed before, activated after


def test_a_window_that_maps_late_is_waited_for(make_sandbox: Any) -> None:
    provider = make_sandbox()
    task = _task([{"type": "activate_window", "parameters": {"window_name": "Late window"}}])
    # the program maps its window a second and a half after it starts
    provider.launch("sleep 1.5; exec xterm -T 'Late window'", shell=True)
    assert wait_until_open(provider, task, timeout=30) == []
    assert has_window(provider, "Late window", False, False)
    never = _task([{"type": "activate_window", "parameters": {"window_name": "Never"}}])
    assert wait_until_open(provider, never, timeout=0.5) == [
        "no window matching 'Never' within 0.5 s"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_the_browser_answers_before_the_run_is_scored(make_sandbox: Any) -> None:
    from vm.tasks import run_setup

    provider = make_sandbox()
    task = _task(CHROME_LAUNCH)
    run_setup(provider, task)
    assert wait_until_open(provider, task, timeout=60) == []
    assert DevTools(devtools_endpoint(provider)).version()["Browser"]
