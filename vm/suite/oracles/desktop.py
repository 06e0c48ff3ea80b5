"""What oracles read of the desktop, and actions repeated until the desktop shows them.

Oracles look at the desktop between their actions: our own apps' state files (which list
the screen rectangle of each named widget), window geometry through xdotool, a command's
output, or the accessibility tree (vm.suite.oracles.accessible). They never change the
desktop except through the Actions they yield.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from vm.actions import Action, Click, Hotkey, TypeText
from vm.providers.base import Provider
from vm.suite.oracles.accessible import Accessible, AccessibleNotFound, wait_accessible
from vm.suite.oracles.registry import OracleError
from vm.waiting import poll_until

STATE_TIMEOUT = 30.0


def app_state(provider: Provider, app: str) -> dict[str, Any] | None:
    try:
        data = json.loads(provider.read_file(f"~/.workbench/{app}.json"))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def wait_state(provider: Provider, app: str,
               condition: Callable[[dict[str, Any]], Any] = lambda s: s.get("ready"),
               timeout: float = STATE_TIMEOUT, what: str = "") -> dict[str, Any]:
    """The app's state once `condition` holds; OracleError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        state = app_state(provider, app)
        if state is not None and state.get("ready") and condition(state):
            return state
        if time.monotonic() > deadline:
            raise OracleError(f"{app}: {what or 'condition'} not reached within {timeout} s "
                              f"(last state: {state_summary(state)})")
        time.sleep(0.05)


def state_summary(state: dict[str, Any] | None, limit: int = 600) -> str:
    """An app's state for an error: its fields first, then the names of the widgets on
    screen (their rectangles would push the fields out of the limit)."""
    if state is None:
        return "none written"
    fields = {key: value for key, value in state.items() if key != "widgets"}
    widgets = sorted(state.get("widgets") or {})
    return json.dumps({**fields, "widgets on screen": widgets})[:limit]


def centre(rect: list[int]) -> tuple[int, int]:
    x, y, width, height = rect
    return x + width // 2, y + height // 2


def click_widget(provider: Provider, app: str, name: str, count: int = 1,
                 left: bool = False) -> Click:
    """A click on the named widget's centre, or on its left end (`left`: where the box of
    a check box or radio button is; the rest of a stretched one is not clickable)."""
    state = wait_state(provider, app, lambda s: name in s.get("widgets", {}),
                       what=f"widget {name!r} visible")
    x, y = centre(state["widgets"][name])
    if left:
        x = state["widgets"][name][0] + min(10, state["widgets"][name][2] // 2)
    return Click(x, y, count=count)


def window_rect(provider: Provider, title_pattern: str, timeout: float = STATE_TIMEOUT
                ) -> tuple[int, int, int, int]:
    """Screen rectangle of the first visible window whose title matches (xdotool)."""
    deadline = time.monotonic() + timeout
    while True:
        result = provider.execute(["xdotool", "search", "--onlyvisible", "--name",
                                   title_pattern, "getwindowgeometry", "--shell"], timeout=10)
        values = dict(line.split("=", 1) for line in result.output.splitlines()
                      if "=" in line)
        if result.returncode == 0 and {"X", "Y", "WIDTH", "HEIGHT"} <= set(values):
            return (int(values["X"]), int(values["Y"]), int(values["WIDTH"]),
                    int(values["HEIGHT"]))
        if time.monotonic() > deadline:
            raise OracleError(f"no visible window titled like {title_pattern!r} within "
                              f"{timeout} s ({_windows_seen(provider)}; last xdotool exit "
                              f"status {result.returncode}: {result.error.strip()[:200]!r})")
        time.sleep(0.1)


def wait_window(provider: Provider, title_pattern: str, present: bool = True,
                timeout: float = STATE_TIMEOUT) -> None:
    def settled() -> bool:
        result = provider.execute(["xdotool", "search", "--onlyvisible", "--name",
                                   title_pattern], timeout=10)
        return (result.returncode == 0 and result.output.strip() != "") == present

    if not poll_until(settled, timeout, 0.1):
        raise OracleError(f"window {title_pattern!r} "
                          f"{'did not appear' if present else 'did not go away'} "
                          f"within {timeout} s ({_windows_seen(provider)})")


def _windows_seen(provider: Provider) -> str:
    """The titles of the visible windows, for an error that says what was there instead."""
    result = provider.execute(["xdotool", "search", "--onlyvisible", "--name", ".",
                               "getwindowname", "%@"], timeout=10)
    titles = [line for line in result.output.splitlines() if line.strip()]
    return f"visible windows: {titles[:12]!r}" if titles else "no visible named window"


def wait_active(provider: Provider, title_pattern: str, timeout: float = STATE_TIMEOUT
                ) -> None:
    """Wait until the window with the input focus has a title matching the pattern."""
    import re

    pattern = re.compile(title_pattern)
    wait_until(lambda: pattern.search(provider.execute(
        ["xdotool", "getactivewindow", "getwindowname"], timeout=10).output.strip()),
        f"window {title_pattern!r} active", timeout)


def wait_until(check: Callable[[], Any], what: str, timeout: float = STATE_TIMEOUT) -> None:
    if not poll_until(check, timeout, 0.05):
        raise OracleError(f"{what} not reached within {timeout} s")


def home_path(provider: Provider) -> str:
    return provider.execute('printf %s "$HOME"', shell=True).output


def file_text(provider: Provider, path: str) -> str | None:
    try:
        return provider.read_file(path).decode(errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None


def click_until(provider: Provider, app: str, make_click: Callable[[], Click],
                condition: Callable[[dict[str, Any]], Any], what: str,
                attempts: int = 3) -> Iterator[Action]:
    """Click until the app's state shows `condition`: a click that landed while the window
    was still settling is noticed and made again, as a person would.

    Each click is judged once the app has handled it (its "inputs" count, written after
    the click's effects), never by how long it took: a slow app must not get a second
    click that undoes the first (a check box toggled back). A click the app never saw
    (it missed the window) is made again after STATE_TIMEOUT."""
    state: dict[str, Any] = {}
    for _ in range(attempts):
        handled = int((app_state(provider, app) or {}).get("inputs", 0))
        yield make_click()
        try:
            state = wait_state(provider, app, _more_inputs_than(handled),
                               what=f"the click for {what} handled")
        except OracleError:
            continue  # it missed the app: click again
        if condition(state):
            return
    raise OracleError(f"{app}: {what} not reached after {attempts} clicks "
                      f"(last state: {state_summary(state)})")


def _more_inputs_than(count: int) -> Callable[[dict[str, Any]], bool]:
    return lambda state: int(state.get("inputs", 0)) > count


def toggle(provider: Provider, app: str, widget: str, section: str, field: str,
           want: object) -> Iterator[Action]:
    """Click a check box or radio button until state[section][field] == want."""
    yield from click_until(provider, app, lambda: click_widget(provider, app, widget, left=True),
                           lambda s: s[section][field] == want,
                           f"{widget} {'on' if want else 'off'}")


# ---------------------------------------------------------------------------------------
# Controls found in the accessibility tree


def fill_entry(provider: Provider, name: str, text: str, attempts: int = 3,
               timeout: float = 20.0) -> Iterator[Action]:
    """Type `text` into the entry named `name` (found on screen in the accessibility tree)
    until the tree shows the entry holding exactly it. The text is typed only once the
    entry has the keyboard focus: keys sent while a page that is still loading keeps the
    focus elsewhere would reach another control (in a mail client, a shortcut)."""
    entry = wait_accessible(provider, "entry", name, timeout=timeout)
    for _ in range(attempts):
        yield Click(*entry.centre)
        try:
            entry = wait_accessible(provider, "entry", name,
                                    lambda a: a.showing and "focused" in a.states, timeout=5.0)
        except AccessibleNotFound:
            entry = wait_accessible(provider, "entry", name, timeout=timeout)
            continue  # the click did not give it the focus: click again
        yield Hotkey(("ctrl", "a"))  # whatever a lost attempt left there is replaced
        yield TypeText(text)
        try:
            wait_accessible(provider, "entry", name, lambda a: a.text == text, timeout=10.0)
            return
        except AccessibleNotFound:
            entry = wait_accessible(provider, "entry", name, timeout=timeout)
    raise OracleError(f"the entry {name!r} does not hold {text!r} after {attempts} tries "
                      f"(it holds {entry.text!r}; states {sorted(entry.states)})")


def set_check_box(provider: Provider, label: str, want: bool, attempts: int = 3
                  ) -> Iterator[Action]:
    """Click the check box named `label` (found on screen in the accessibility tree, once
    it has stopped moving) until the tree shows it checked (`want`) or not."""
    def settled() -> Accessible:
        box = wait_accessible(provider, "check-box", label)
        for _ in range(20):  # a page still laying out (search results) moves its boxes
            time.sleep(0.15)
            again = wait_accessible(provider, "check-box", label)
            if again.rect == box.rect:
                return again
            box = again
        return box

    box = settled()
    for _ in range(attempts):
        if box.checked == want:
            return
        yield Click(*box.centre)
        try:
            box = wait_accessible(provider, "check-box", label,
                                  lambda a: a.showing and a.checked == want, timeout=3.0)
        except AccessibleNotFound:
            box = settled()
    if box.checked != want:
        raise OracleError(f"the check box {label!r} did not turn {'on' if want else 'off'} "
                          f"after {attempts} clicks")
