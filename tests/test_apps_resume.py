"""Our task apps resumed after a sandbox revert (issue 47, item 8): started with
$WORKBENCH_RESUME=1 each shows the state its file saved (in this process, under Qt's
offscreen platform); started without it, or from a file it cannot read, it starts fresh.
The revert's side (the relaunch sets the variable): tests/test_apps_resume_sandbox.py."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import QApplication, QPushButton, QWidget

import vm.assets
from vm.providers.sandbox.resume import RESUME_VARIABLE, resumed_argv

APPS = Path(__file__).resolve().parents[1] / "assets" / "apps"
LAYOUT = [{"name": "red", "color": "#d62728", "x": 100, "y": 80, "width": 120, "height": 60},
          {"name": "blue", "color": "#1f77b4", "x": 300, "y": 80, "width": 120, "height": 60}]
TABS = {"tabs": [{"name": "red", "color": "#d62728", "x": 0, "y": 0, "width": 200, "height": 60,
                  "buttons": [{"name": "green", "color": "#2ca02c", "x": 0, "y": 100,
                               "width": 200, "height": 60}]},
                 {"name": "blue", "color": "#1f77b4", "x": 200, "y": 0, "width": 200,
                  "height": 60,
                  "buttons": [{"name": "black", "color": "#111111", "x": 200, "y": 100,
                               "width": 200, "height": 60}]}],
        "confirm": {"x": 0, "y": 300, "width": 400, "height": 60}}


class Apps:
    """Our apps' modules, loaded in this process with $HOME at `home`."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.appstate = importlib.import_module("appstate")

    def load(self, app: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"resumed_{app}", APPS / f"{app}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def plant(self, app: str, state: dict[str, Any] | str) -> None:
        """A state file as a revert puts it back (text as it is: a broken one)."""
        path = self.home / ".workbench" / f"{app}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(state if isinstance(state, str) else json.dumps(state))

    def state(self, app: str) -> dict[str, Any]:
        try:
            found = json.loads((self.home / ".workbench" / f"{app}.json").read_text())
        except (FileNotFoundError, ValueError):
            return {}  # not written yet (a write renames a whole file into place)
        assert isinstance(found, dict)
        return found


@pytest.fixture
def apps(monkeypatch: pytest.MonkeyPatch, qapp: Any, tmp_path: Path) -> Iterator[Apps]:
    # appstate points Qt at X when DISPLAY is set: keep this process offscreen.
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv(RESUME_VARIABLE, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.syspath_prepend(str(APPS))
    yield Apps(tmp_path)
    for top in QApplication.topLevelWidgets():
        state = getattr(top, "state", None)
        if state is not None:
            state.stop()
        top.close()
        top.deleteLater()
    sys.modules.pop("appstate", None)


def resume(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start the next app as a revert's relaunch does."""
    monkeypatch.setenv(RESUME_VARIABLE, "1")


def when(condition: Callable[[], bool], then: Callable[[], None]) -> QTimer:
    """Run `then` once `condition` holds, from a timer: a dialog's own event loop (exec)
    keeps running timers while it blocks the test's waits."""
    timer = QTimer()
    timer.setInterval(20)

    def poll() -> None:
        if condition():
            timer.stop()
            then()

    timer.timeout.connect(poll)
    timer.start()
    return timer


def test_both_sides_name_the_same_variable_and_the_relaunch_sets_it(apps: Apps) -> None:
    assert apps.appstate.RESUME_VARIABLE == RESUME_VARIABLE
    assert APPS == vm.assets.APPS  # where task files' $WORKBENCH_APPS points
    python = [sys.executable, str(APPS / "form.py")]
    assert resumed_argv(python) == ["env", f"{RESUME_VARIABLE}=1", *python]
    # the sandbox's own rewrites start with `env` and assignments: one more among them
    assert resumed_argv(["env", "TMPDIR=/tmp/x", *python]) == [
        "env", f"{RESUME_VARIABLE}=1", "TMPDIR=/tmp/x", *python]
    # an `env` with options takes them first: a new `env` in front
    assert resumed_argv(["env", "-i", *python]) == ["env", f"{RESUME_VARIABLE}=1", "env",
                                                    "-i", *python]


def test_only_task_apps_are_told_they_are_resumed() -> None:
    """A terminal, browser or another script relaunched with the variable would hand it to
    every program started from it: a task app started there later would take up a stale
    state file."""
    for argv in (["xterm"], ["env", "TMPDIR=/tmp/x", "chromium", "--app=x"],
                 ["lxterminal", "-e", "python3", "/home/user/form.py"],
                 [sys.executable, str(APPS / "sub" / "form.py")]):
        assert resumed_argv(argv) == argv


FORM_VALUES = {"full_name": "Ada Lovelace", "email": "ada@example.org", "country": "Kenya",
               "age": 36, "plan": "team", "newsletter": True, "terms": True}


def test_a_resumed_form_shows_its_values_and_reopens_the_confirm_dialog(
        apps: Apps, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    earlier = {**FORM_VALUES, "full_name": "Ada", "plan": "pro", "terms": False}
    apps.plant("form", {"current": FORM_VALUES, "submitted": earlier, "submit_count": 2,
                        "dialog": "Confirm", "ready": True, "inputs": 14, "widgets": {}})
    resume(monkeypatch)
    window = apps.load("form").start_window()
    assert window.values() == FORM_VALUES  # the widgets show the saved values

    seen: list[dict[str, Any]] = []

    def dialog_drawn() -> bool:
        state = apps.state("form")
        return state.get("dialog") == "Confirm" and "confirm_yes" in state.get("widgets", {})

    def answer_yes() -> None:
        seen.append(apps.state("form"))
        box = next(w for w in QApplication.topLevelWidgets()
                   if w.objectName() == "confirm_dialog" and w.isVisible())
        yes = box.findChild(QPushButton, "confirm_yes")
        assert yes is not None
        yes.click()

    timer = when(dialog_drawn, answer_yes)
    qtbot.waitUntil(lambda: apps.state("form").get("submit_count") == 3, timeout=10_000)
    timer.stop()
    (reopened,) = seen
    assert reopened["current"] == FORM_VALUES
    assert reopened["submitted"] == earlier and reopened["submit_count"] == 2
    assert reopened["inputs"] == 0  # counted by this process: none yet
    after = apps.state("form")
    assert after["submitted"] == FORM_VALUES and after["dialog"] is None


def test_a_fresh_start_ignores_a_saved_state(apps: Apps, qtbot: Any) -> None:
    apps.plant("form", {"current": FORM_VALUES, "submitted": FORM_VALUES, "submit_count": 4,
                        "dialog": None})
    apps.plant("todo", {"items": [{"text": "old", "done": True}], "saved": None,
                        "selected": None, "dialog": None})
    form = apps.load("form").start_window()
    todo = apps.load("todo").start_window(["Buy milk"])
    qtbot.waitUntil(lambda: apps.state("form").get("ready") is True, timeout=10_000)
    qtbot.waitUntil(lambda: apps.state("todo").get("ready") is True, timeout=10_000)
    assert form.values()["full_name"] == "" and form.submit_count == 0
    assert apps.state("form")["submitted"] is None
    assert apps.state("todo")["items"] == [{"text": "Buy milk", "done": False}]
    assert todo.items() == [{"text": "Buy milk", "done": False}]


@pytest.mark.parametrize("saved", [
    "{\"current\": ",  # cut short
    "[1, 2]",  # not an object
    json.dumps({"current": {**FORM_VALUES, "plan": "gold"}, "submitted": None,
                "submit_count": 1, "dialog": None}),  # a field the form does not write
])
def test_a_resumed_app_with_an_unusable_state_starts_fresh_and_says_why(
        apps: Apps, qtbot: Any, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str], saved: str) -> None:
    apps.plant("form", saved)
    resume(monkeypatch)
    window = apps.load("form").start_window()
    assert window.values()["full_name"] == "" and window.submit_count == 0
    assert "starting fresh" in capfd.readouterr().err
    qtbot.waitUntil(lambda: apps.state("form").get("ready") is True, timeout=10_000)
    assert apps.state("form")["current"]["full_name"] == ""


def test_a_resumed_todo_list_reopens_its_rename_dialog_with_the_typed_text(
        apps: Apps, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    items = [{"text": "Buy milk", "done": True}, {"text": "Call Anna", "done": False},
             {"text": "Call Anna", "done": True}]
    apps.plant("todo", {"items": items, "saved": items[:1], "selected": "Call Anna",
                        "selected_row": 2, "dialog": "Rename item", "dialog_text": "Call Bob",
                        "entry": "Water pl", "inputs": 5})
    resume(monkeypatch)
    window = apps.load("todo").start_window(["ignored when resumed"])
    seen: list[dict[str, Any]] = []

    def dialog_drawn() -> bool:
        state = apps.state("todo")
        return state.get("dialog") == "Rename item" and "input_dialog" in state.get("widgets", {})

    def accept() -> None:
        seen.append(apps.state("todo"))
        dialog = QApplication.activeModalWidget()
        assert dialog is not None and dialog.objectName() == "input_dialog"
        dialog.accept()  # type: ignore[attr-defined]

    timer = when(dialog_drawn, accept)
    qtbot.waitUntil(lambda: apps.state("todo").get("dialog") is None and bool(seen),
                    timeout=10_000)
    timer.stop()
    (reopened,) = seen
    for field in ("items", "saved", "selected", "selected_row", "dialog_text", "entry"):
        assert reopened[field] == {"items": items, "saved": items[:1], "selected": "Call Anna",
                                   "selected_row": 2, "dialog_text": "Call Bob",
                                   "entry": "Water pl"}[field], field
    # accepted: the text typed before the snapshot renames the selected (third) item
    qtbot.waitUntil(lambda: apps.state("todo").get("items", [{}] * 3)[2].get("text")
                    == "Call Bob", timeout=10_000)
    assert window.items()[1] == {"text": "Call Anna", "done": False}


def test_resumed_settings_show_the_values_applied_and_the_open_tab(
        apps: Apps, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    module = apps.load("settings")
    applied = {**module.DEFAULTS, "dark_mode": True, "language": "Deutsch"}
    shown = {**applied, "theme": "Dark", "font_size": 18, "volume": 80}
    apps.plant("settings", {"shown": shown, "applied": applied, "apply_count": 3,
                            "closed_with": None, "tab": "Appearance", "inputs": 9})
    resume(monkeypatch)
    window = module.start_window()
    assert window.shown() == shown and window.tabs.currentIndex() == 1
    qtbot.waitUntil(lambda: apps.state("settings").get("ready") is True, timeout=10_000)
    state = apps.state("settings")
    assert (state["shown"], state["applied"], state["apply_count"], state["tab"]) == (
        shown, applied, 3, "Appearance")
    assert state["inputs"] == 0 and "volume" in state["widgets"]  # the open tab's widgets
    window.tabs.widget(1).findChild(QWidget, "font_size").setValue(20)  # still the app
    qtbot.waitUntil(lambda: apps.state("settings")["shown"]["font_size"] == 20,
                    timeout=10_000)


def test_resumed_full_screen_apps_take_their_saved_layout_clicks_and_tab(
        apps: Apps, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # a warm reset had loaded another layout (request "episode-7") after the one of argv
    apps.plant("buttons", {"layout": LAYOUT, "clicks": ["blue", "red"], "clicked": "blue",
                           "loaded": "episode-7", "inputs": 2})
    apps.plant("tabs", {"layout": TABS, "clicks": ["tab red", "tab blue"], "tab": "blue",
                        "loaded": None, "inputs": 2})
    buttons, tabs = apps.load("buttons"), apps.load("tabs")
    argv_layout = [{**LAYOUT[0], "name": "first"}]
    hosts = []  # held: a host's window lives as long as the host
    first_tab: dict[str, Any] = {**TABS, "tabs": list(TABS["tabs"])[:1]}
    cases: list[tuple[str, Any, Any]] = [("buttons", buttons.ButtonsWindow, argv_layout),
                                         ("tabs", tabs.TabsWindow, first_tab)]
    for name, build, layout in cases:
        resume(monkeypatch)  # as run_full_screen_app starts a relaunched app
        hosts.append(apps.appstate.WindowHost(name, build))
        hosts[-1].show(layout, resumed=apps.appstate.resumed_state(name))

    qtbot.waitUntil(lambda: apps.state("buttons").get("ready") is True, timeout=10_000)
    qtbot.waitUntil(lambda: apps.state("tabs").get("ready") is True, timeout=10_000)
    state = apps.state("buttons")
    assert (state["layout"], state["clicks"], state["clicked"], state["loaded"],
            state["inputs"]) == (LAYOUT, ["blue", "red"], "blue", "episode-7", 0)
    assert {"button_red", "button_blue"} <= set(state["widgets"])
    state = apps.state("tabs")
    assert (state["layout"], state["clicks"], state["tab"]) == (
        TABS, ["tab red", "tab blue"], "blue")
    # the open tab's buttons are on screen, the other's not
    assert "button_black" in state["widgets"] and "button_green" not in state["widgets"]
