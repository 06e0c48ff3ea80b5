"""A scripted solution for every bundled task: proof that the task is solvable.

An oracle is a generator ``oracle(provider) -> Iterator[Action]``. The caller performs
each Action (through DesktopEnv.step) before asking for the next, so an oracle may look at
the desktop between actions: our own apps' state files (which list the screen rectangle
of each named widget), window geometry through xdotool, or a command's output. Oracles
never change the desktop except through the Actions they yield.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from vm.actions import Action, Click, Done, Fail, Hotkey, Press, TypeText, Wait
from vm.providers.base import Provider
from vm.tasks.accessible import Accessible, AccessibleNotFound, wait_accessible
from vm.tasks.families import FAMILY_DOMAIN, TABS_DOMAIN, button_target, tabs_target
from vm.tasks.model import Task

Oracle = Callable[[Provider], Iterator[Action]]
ORACLES: dict[str, Callable[[Task, Provider], Iterator[Action]]] = {}
STATE_TIMEOUT = 30.0


class OracleError(RuntimeError):
    """An oracle could not find its target on the desktop in time."""


def oracle(*task_ids: str) -> Callable[[Callable[[Task, Provider], Iterator[Action]]],
                                       Callable[[Task, Provider], Iterator[Action]]]:
    def add(fn: Callable[[Task, Provider], Iterator[Action]]
            ) -> Callable[[Task, Provider], Iterator[Action]]:
        for task_id in task_ids:
            ORACLES[task_id] = fn
        return fn
    return add


def oracle_for(task: Task) -> Oracle:
    """The scripted solution of a bundled (or family) task; KeyError if it has none.
    An infeasible task's oracle answers FAIL."""
    if task.id in ORACLES:
        fn = ORACLES[task.id]
    elif task.domain == FAMILY_DOMAIN or task.id.startswith("buttons-"):
        fn = _buttons
    elif task.domain == TABS_DOMAIN or task.id.startswith("tabs-"):
        fn = _tabs
    elif task.infeasible:
        fn = _infeasible
    else:
        raise KeyError(f"task {task.id!r} has no oracle")
    return lambda provider: fn(task, provider)


def has_oracle(task: Task) -> bool:
    try:
        oracle_for(task)
    except KeyError:
        return False
    return True


# ---------------------------------------------------------------------------------------
# Looking at the desktop


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
    deadline = time.monotonic() + timeout
    while True:
        result = provider.execute(["xdotool", "search", "--onlyvisible", "--name",
                                   title_pattern], timeout=10)
        if (result.returncode == 0 and result.output.strip() != "") == present:
            return
        if time.monotonic() > deadline:
            raise OracleError(f"window {title_pattern!r} "
                              f"{'did not appear' if present else 'did not go away'} "
                              f"within {timeout} s ({_windows_seen(provider)})")
        time.sleep(0.1)


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
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise OracleError(f"{what} not reached within {timeout} s")
        time.sleep(0.05)


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
# Generic


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


def _infeasible(task: Task, provider: Provider) -> Iterator[Action]:
    yield Fail()


def _buttons(task: Task, provider: Provider) -> Iterator[Action]:
    yield click_widget(provider, "buttons", f"button_{button_target(task)}")
    wait_state(provider, "buttons", lambda s: s.get("clicked"), what="a click recorded")
    yield Done()


def _tabs(task: Task, provider: Provider) -> Iterator[Action]:
    tab, button = tabs_target(task)
    for count, widget in enumerate((f"tab_{tab}", f"button_{button}", "confirm"), 1):
        yield click_widget(provider, "tabs", widget)  # the button shows once its tab is open

        def recorded(state: dict[str, Any], n: int = count) -> bool:
            return len(state.get("clicks", [])) >= n

        wait_state(provider, "tabs", recorded, what=f"click {count} recorded")
    yield Done()


# ---------------------------------------------------------------------------------------
# Our form app


def _type_into(provider: Provider, app: str, widget: str, text: str) -> Iterator[Action]:
    yield click_widget(provider, app, widget, count=3)  # select what is there
    yield TypeText(text)


def _choose(provider: Provider, app: str, combo: str, text: str) -> Iterator[Action]:
    """Pick `text` in a dropdown: open its list, type the entry's first letters (the
    list's keyboard search selects it) and press Enter."""
    yield click_widget(provider, app, combo)
    wait_state(provider, app, lambda s: s.get("open_popup") == combo,
               what=f"list of {combo} open")
    yield TypeText(text)
    yield Press("enter")
    wait_state(provider, app, lambda s: s.get("open_popup") is None,
               what=f"list of {combo} closed")


def _submit_form(provider: Provider) -> Iterator[Action]:
    """Submit, then Yes in the confirmation dialog. Each click is made again if the app
    never saw it (click_until); one it saw is never repeated (a second Submit under the
    modal dialog, or a second Yes, would not be what a person does)."""
    count = (app_state(provider, "form") or {}).get("submit_count", 0)
    yield from click_until(provider, "form", lambda: click_widget(provider, "form", "submit"),
                           lambda s: True, what="Submit")
    wait_state(provider, "form", lambda s: s.get("dialog") == "Confirm"
               and "confirm_yes" in s.get("widgets", {}), what="confirmation dialog")
    yield from click_until(provider, "form",
                           lambda: click_widget(provider, "form", "confirm_yes"),
                           lambda s: True, what="Yes in the confirmation dialog")
    wait_state(provider, "form", lambda s: s.get("submit_count", 0) > count,
               what="form submitted")
    yield Done()


@oracle("form-name")
def _form_name(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _type_into(provider, "form", "full_name", "Ada Lovelace")
    yield from _submit_form(provider)


@oracle("form-name-email-country")
def _form_name_email_country(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _type_into(provider, "form", "full_name", "Grace Hopper")
    yield from _type_into(provider, "form", "email", "grace@navy.mil")
    yield from _choose(provider, "form", "country", "Canada")
    wait_state(provider, "form", lambda s: s["current"]["country"] == "Canada",
               what="country chosen")
    yield from _submit_form(provider)


@oracle("form-checkboxes")
def _form_checkboxes(task: Task, provider: Provider) -> Iterator[Action]:
    yield from toggle(provider, "form", "terms", "current", "terms", True)
    yield from toggle(provider, "form", "newsletter", "current", "newsletter", True)
    wait_state(provider, "form", lambda s: s["current"]["terms"] and s["current"]["newsletter"],
               what="both boxes ticked")
    yield from _submit_form(provider)


@oracle("form-plan-country")
def _form_plan_country(task: Task, provider: Provider) -> Iterator[Action]:
    yield from toggle(provider, "form", "plan_team", "current", "plan", "team")
    yield from _choose(provider, "form", "country", "Japan")
    wait_state(provider, "form", lambda s: s["current"]["country"] == "Japan"
               and s["current"]["plan"] == "team", what="plan and country chosen")
    yield from _submit_form(provider)


@oracle("form-full")
def _form_full(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _type_into(provider, "form", "full_name", "Alan Turing")
    yield from _type_into(provider, "form", "email", "alan@bletchley.uk")
    yield from _choose(provider, "form", "country", "Norway")
    yield click_widget(provider, "form", "age")
    yield Hotkey(("ctrl", "a"))
    yield TypeText("41")
    yield from toggle(provider, "form", "plan_pro", "current", "plan", "pro")
    yield from toggle(provider, "form", "terms", "current", "terms", True)
    wait_state(provider, "form", lambda s: s["current"]["age"] == 41 and s["current"]["terms"]
               and s["current"]["country"] == "Norway", what="form filled")
    yield from _submit_form(provider)


# ---------------------------------------------------------------------------------------
# Our settings app


def _settings_tab(provider: Provider, name: str) -> Iterator[Action]:
    state = wait_state(provider, "settings", lambda s: name in s.get("tab_rects", {}),
                       what=f"tab {name}")
    if state.get("tab") != name:
        yield Click(*centre(state["tab_rects"][name]))
        wait_state(provider, "settings", lambda s: s.get("tab") == name, what=f"tab {name}")


def _settings_apply(provider: Provider, button: str = "apply") -> Iterator[Action]:
    count = (app_state(provider, "settings") or {}).get("apply_count", 0)
    yield click_widget(provider, "settings", button)
    wait_state(provider, "settings", lambda s: s.get("apply_count", 0) > count,
               what="settings applied")
    yield Done()


@oracle("settings-dark-mode")
def _settings_dark_mode(task: Task, provider: Provider) -> Iterator[Action]:
    yield from toggle(provider, "settings", "dark_mode", "shown", "dark_mode", True)
    wait_state(provider, "settings", lambda s: s["shown"]["dark_mode"], what="box ticked")
    yield from _settings_apply(provider)


@oracle("settings-language-ok")
def _settings_language(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _choose(provider, "settings", "language", "Fran")
    wait_state(provider, "settings", lambda s: s["shown"]["language"] == "Français",
               what="language chosen")
    yield from _settings_apply(provider, "ok")


@oracle("settings-notifications-autosave")
def _settings_notifications(task: Task, provider: Provider) -> Iterator[Action]:
    yield from toggle(provider, "settings", "notifications", "shown", "notifications", False)
    yield from toggle(provider, "settings", "auto_save", "shown", "auto_save", True)
    wait_state(provider, "settings", lambda s: not s["shown"]["notifications"]
               and s["shown"]["auto_save"], what="boxes toggled")
    yield from _settings_apply(provider)


@oracle("settings-appearance")
def _settings_appearance(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _settings_tab(provider, "Appearance")
    yield from _choose(provider, "settings", "theme", "High")
    yield click_widget(provider, "settings", "font_size")
    yield Hotkey(("ctrl", "a"))
    yield TypeText("16")
    wait_state(provider, "settings", lambda s: s["shown"]["theme"] == "High contrast"
               and s["shown"]["font_size"] == 16, what="appearance set")
    yield from _settings_apply(provider)


@oracle("settings-many")
def _settings_many(task: Task, provider: Provider) -> Iterator[Action]:
    yield from toggle(provider, "settings", "dark_mode", "shown", "dark_mode", True)
    yield from toggle(provider, "settings", "spell_check", "shown", "spell_check", False)
    yield from _choose(provider, "settings", "language", "Deutsch")
    yield from _settings_tab(provider, "Appearance")
    yield click_widget(provider, "settings", "font_size")
    yield Hotkey(("ctrl", "a"))
    yield TypeText("14")
    wait_state(provider, "settings", lambda s: s["shown"]["dark_mode"]
               and not s["shown"]["spell_check"] and s["shown"]["language"] == "Deutsch"
               and s["shown"]["font_size"] == 14, what="settings set")
    yield from _settings_apply(provider, "ok")


# ---------------------------------------------------------------------------------------
# Our to-do app


def _todo_row(provider: Provider, text: str) -> list[int]:
    state = wait_state(provider, "todo", lambda s: any(i["text"] == text for i in s["items"]),
                       what=f"item {text!r}")
    index = [i["text"] for i in state["items"]].index(text)
    return list(state["item_rows"][index])


def _todo_select(provider: Provider, text: str) -> Iterator[Action]:
    x, y, width, height = _todo_row(provider, text)
    yield Click(x + width // 2, y + height // 2)
    wait_state(provider, "todo", lambda s: s.get("selected") == text, what=f"{text!r} selected")


def _todo_tick(provider: Provider, text: str) -> Iterator[Action]:
    def tick() -> Click:
        x, y, _width, height = _todo_row(provider, text)
        return Click(x + height // 2 + 2, y + height // 2)  # the check box leads the row

    yield from click_until(provider, "todo", tick,
                           lambda s: {"text": text, "done": True} in s["items"],
                           f"{text!r} ticked")


def _todo_menu(provider: Provider, menu: str, entry: str) -> Iterator[Action]:
    state = wait_state(provider, "todo", lambda s: menu in s.get("menu_titles", {}),
                       what=f"menu {menu}")
    yield Click(*centre(state["menu_titles"][menu]))
    state = wait_state(provider, "todo", lambda s: entry in s.get("menu_rows", {}),
                       what=f"menu entry {entry}")
    yield Click(*centre(state["menu_rows"][entry]))


def _todo_add(provider: Provider, text: str) -> Iterator[Action]:
    yield click_widget(provider, "todo", "new_item")
    yield TypeText(text)
    yield Press("enter")
    wait_state(provider, "todo", lambda s: any(i["text"] == text for i in s["items"]),
               what=f"{text!r} added")


def _todo_save(provider: Provider) -> Iterator[Action]:
    yield from _todo_menu(provider, "File", "Save")
    wait_state(provider, "todo", lambda s: s.get("saved") == s["items"], what="list saved")


@oracle("todo-add")
def _todo_add_task(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _todo_add(provider, "Book flights")
    yield Done()


@oracle("todo-tick")
def _todo_tick_task(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _todo_tick(provider, "Call Anna")
    yield Done()


@oracle("todo-delete")
def _todo_delete(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _todo_select(provider, "Pay rent")
    yield Press("delete")
    wait_state(provider, "todo", lambda s: all(i["text"] != "Pay rent" for i in s["items"]),
               what="item deleted")
    yield Done()


@oracle("todo-rename")
def _todo_rename(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _todo_select(provider, "Water plants")
    yield from _todo_menu(provider, "Edit", "Rename item…")
    wait_state(provider, "todo", lambda s: s.get("dialog") == "Rename item",
               what="rename dialog")
    yield Hotkey(("ctrl", "a"))
    yield TypeText("Water the garden")
    yield Press("enter")
    wait_state(provider, "todo", lambda s: s["items"][0]["text"] == "Water the garden",
               what="item renamed")
    yield Done()


@oracle("todo-sort-save")
def _todo_sort_save(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _todo_menu(provider, "View", "Sort A-Z")
    wait_state(provider, "todo", lambda s: [i["text"] for i in s["items"]]
               == sorted(i["text"] for i in s["items"]), what="list sorted")
    yield from _todo_save(provider)
    yield Done()


@oracle("todo-weekly")
def _todo_weekly(task: Task, provider: Provider) -> Iterator[Action]:
    for text in ("Book flights", "Renew passport", "Pack bags"):
        yield from _todo_add(provider, text)
    yield from _todo_tick(provider, "Buy milk")
    yield from _todo_tick(provider, "Pay rent")
    yield from _todo_menu(provider, "Edit", "Clear completed")
    wait_state(provider, "todo", lambda s: not any(i["done"] for i in s["items"]),
               what="completed items cleared")
    yield from _todo_save(provider)
    yield Done()


# ---------------------------------------------------------------------------------------
# xterm


def _terminal(provider: Provider, *commands: str,
              until: Callable[[], Any] | None = None) -> Iterator[Action]:
    x, y, width, height = window_rect(provider, "^Terminal$")
    yield Click(x + width // 2, y + height // 2)
    wait_active(provider, "^Terminal$")
    for command in commands:
        yield TypeText(command + "\n")
    if until is not None:
        wait_until(until, "the commands' effect")
    else:
        yield Wait(1.0)
    yield Done()


def _exists(provider: Provider, test: str) -> Callable[[], bool]:
    return lambda: provider.execute(f"test {test}", shell=True).returncode == 0


@oracle("terminal-touch")
def _terminal_touch(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "touch ~/hello.txt",
                         until=_exists(provider, "-f ~/hello.txt"))


@oracle("terminal-mkdir")
def _terminal_mkdir(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "mkdir -p ~/projects/alpha",
                         until=_exists(provider, "-d ~/projects/alpha"))


@oracle("terminal-greeting")
def _terminal_greeting(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "echo 'Hello, world' > ~/greeting.txt",
                         until=lambda: file_text(provider, "greeting.txt") == "Hello, world\n")


@oracle("terminal-count-lines")
def _terminal_count_lines(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "wc -l < ~/data/measurements.csv > ~/line_count.txt",
                         until=lambda: (file_text(provider, "line_count.txt") or "").strip())


@oracle("terminal-rename-move")
def _terminal_rename_move(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "cd ~", "mv report_draft.txt archive/report_final.txt",
                         until=_exists(provider, "-f ~/archive/report_final.txt"))


@oracle("terminal-backup-index")
def _terminal_backup_index(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(
        provider, "cd ~", "mkdir -p backup", "cp notes/*.txt backup/",
        "(cd notes && ls *.txt | sort) > backup/index.tmp", "mv backup/index.tmp backup/index.txt",
        until=_exists(provider, "-f ~/backup/index.txt"))


@oracle("terminal-sort-names")
def _terminal_sort_names(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "LC_ALL=C sort ~/names.txt > ~/sorted_names.tmp",
                         "mv ~/sorted_names.tmp ~/sorted_names.txt",
                         until=_exists(provider, "-f ~/sorted_names.txt"))


# ---------------------------------------------------------------------------------------
# mousepad


def _editor_focus(provider: Provider, title: str = "notes.txt - Mousepad$") -> Iterator[Action]:
    x, y, width, height = window_rect(provider, title)
    yield Click(x + width // 2, y + height // 2)
    wait_active(provider, title)


def _editor_save(provider: Provider, name: str, expected: str) -> Iterator[Action]:
    yield Hotkey(("ctrl", "s"))
    wait_until(lambda: file_text(provider, name) == expected, f"{name} saved")
    yield Done()


@oracle("editor-append-line")
def _editor_append(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "end"))
    yield TypeText("third line\n")
    yield from _editor_save(provider, "notes.txt", "first line\nsecond line\nthird line\n")


@oracle("editor-replace-all")
def _editor_replace_all(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "a"))
    yield TypeText("Meeting at 10am\n")
    yield from _editor_save(provider, "notes.txt", "Meeting at 10am\n")


@oracle("editor-delete-line")
def _editor_delete_line(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "home"))
    yield Press("down")
    yield Hotkey(("shift", "down"))
    yield Press("delete")
    yield from _editor_save(provider, "notes.txt", "first line\n")


@oracle("editor-edit-word")
def _editor_edit_word(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "home"))
    yield Press("down")
    for _ in range(len("second")):
        yield Press("delete")
    yield TypeText("2nd")
    yield from _editor_save(provider, "notes.txt", "first line\n2nd line\n")


@oracle("editor-new-file")
def _editor_new_file(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "n"))
    wait_window(provider, "^Untitled")
    yield TypeText("Shopping: eggs, flour\n")
    yield Hotkey(("ctrl", "s"))
    wait_window(provider, "^Save As$")
    yield Hotkey(("ctrl", "a"))
    # The dialog opens in the folder of notes.txt, the home folder; a bare name avoids
    # the path completion popup that would swallow Enter.
    yield TypeText("shopping.txt")
    yield Wait(0.5)  # GTK's file chooser drops an Enter that follows typing too closely
    yield Press("enter")
    wait_until(lambda: file_text(provider, "shopping.txt") == "Shopping: eggs, flour\n",
               "shopping.txt saved")
    yield Done()


# ---------------------------------------------------------------------------------------
# pcmanfm


def _files_focus(provider: Provider) -> Iterator[Action]:
    x, y, width, height = window_rect(provider, "^Documents$")
    # an empty spot of the folder view, right of the sidebar and below the icons
    yield Click(x + width * 3 // 4, y + height - 60)
    wait_active(provider, "^Documents$")


def _files_select(provider: Provider, name: str) -> Iterator[Action]:
    yield from _files_focus(provider)
    yield TypeText(name)  # the folder view's type-ahead search selects the file
    yield Press("escape")


def _listing(provider: Provider, folder: str = "~/Documents") -> list[str]:
    return provider.execute(f"ls -A {folder}", shell=True).output.split()


def _files_new_folder(provider: Provider, name: str) -> Iterator[Action]:
    yield from _files_focus(provider)
    yield Hotkey(("ctrl", "shift", "n"))
    wait_window(provider, "^Creating New Folder$")
    yield Hotkey(("ctrl", "a"))
    yield TypeText(name)
    yield Press("enter")
    wait_until(lambda: name in _listing(provider), f"folder {name} created")


@oracle("files-new-folder")
def _files_new_folder_task(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _files_new_folder(provider, "Invoices")
    yield Done()


@oracle("files-rename")
def _files_rename(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _files_select(provider, "draft.txt")
    yield Press("f2")
    wait_window(provider, "^Rename File$")
    yield Hotkey(("ctrl", "a"))
    yield TypeText("final.txt")
    yield Press("enter")
    wait_until(lambda: "final.txt" in _listing(provider), "file renamed")
    yield Done()


@oracle("files-delete")
def _files_delete(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _files_select(provider, "old.log")
    yield Hotkey(("shift", "delete"))
    wait_window(provider, "^Confirm$")
    yield Press("enter")
    wait_until(lambda: "old.log" not in _listing(provider), "file deleted")
    yield Done()


@oracle("files-archive")
def _files_archive(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _files_new_folder(provider, "Archive")
    yield from _files_select(provider, "report-2023.txt")
    yield Hotkey(("ctrl", "x"))
    yield Hotkey(("ctrl", "l"))  # the location bar
    yield Hotkey(("ctrl", "a"))
    yield TypeText(home_path(provider) + "/Documents/Archive\n")
    wait_window(provider, "^Archive$")
    yield from _files_focus_titled(provider, "^Archive$")
    yield Hotkey(("ctrl", "v"))
    wait_until(lambda: "report-2023.txt" in _listing(provider, "~/Documents/Archive")
               and "report-2023.txt" not in _listing(provider), "file moved")
    yield Done()


def _files_focus_titled(provider: Provider, title: str) -> Iterator[Action]:
    x, y, width, height = window_rect(provider, title)
    yield Click(x + width * 3 // 4, y + height - 60)


# The oracles of the bundled tasks on OSWorld's applications, one module per group; they
# register themselves with `oracle` above.
from vm.tasks import oracles_browser_mail, oracles_media, oracles_office  # noqa: E402, F401

