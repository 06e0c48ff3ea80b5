"""A sandbox revert brings our task apps back as the snapshot held them (issue 47, item 8):
a form half filled in, with its confirmation dialog open, and a to-do list with its rename
dialog open, changed by real clicks and keys on a real Xvfb, come back so after a revert,
their state files and widgets as the snapshot's, with and without namespaces."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.conftest_x11 import needs_xvfb
from vm.actions import Click, Hotkey, Press, TypeText

APPS = Path(__file__).resolve().parents[1] / "assets" / "apps"
# what the app writes about its widgets and this process, not what it holds
NOT_HELD = {"widgets", "open_popup", "ready", "inputs", "loaded", "menu_titles",
            "menu_rows", "item_rows"}

pytestmark = [pytest.mark.x11, pytest.mark.slow, needs_xvfb]


def read_state(sandbox: Any, app: str) -> dict[str, Any]:
    try:
        found = json.loads((sandbox.home / ".workbench" / f"{app}.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def wait_state(sandbox: Any, app: str, what: str, condition: Any) -> dict[str, Any]:
    """The app's state once `condition(state)` holds."""
    return wait_until(lambda: (lambda s: s if s and condition(s) else None)(
        read_state(sandbox, app)), 60,
        message=lambda: f"{app}: {what}; its state: {read_state(sandbox, app)}; app log: "
                        f"{_tail(sandbox.logs / 'apps.log')}")


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-800:] if path.exists() else "(none)"


def click(sandbox: Any, state: dict[str, Any], widget: str, left: bool = False) -> None:
    """A click on the widget's centre, or its left end (`left`: a check box's or radio
    button's box; the rest of a stretched one is not clickable)."""
    x, y, width, height = state["widgets"][widget]
    sandbox.perform(Click(x + 10 if left else x + width // 2, y + height // 2))


def held(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in NOT_HELD}


def relaunched(sandbox: Any, app: str) -> dict[str, Any]:
    """The state once the relaunched app has settled: "inputs" 0 (the snapshot's file,
    put back by the revert, counted the clicks before it)."""
    return wait_state(sandbox, app, "the relaunched app's window",
                      lambda s: s.get("ready") is True and s.get("inputs") == 0)


@pytest.mark.parametrize("isolation", ["namespaces", "none"])
def test_a_reverted_form_comes_back_filled_in_with_its_dialog_open(
        make_sandbox: Any, isolation: str) -> None:
    sandbox = make_sandbox(f"resume-form-{isolation}", isolation=isolation)
    sandbox.launch([sys.executable, str(APPS / "form.py")])
    state = wait_state(sandbox, "form", "the form on screen",
                       lambda s: s.get("ready") is True and "full_name" in s["widgets"])
    click(sandbox, state, "full_name")
    sandbox.perform(TypeText("Ada Lovelace"))
    state = wait_state(sandbox, "form", "the typed name",
                       lambda s: s["current"]["full_name"] == "Ada Lovelace")
    click(sandbox, state, "terms", left=True)
    click(sandbox, state, "plan_team", left=True)
    state = wait_state(sandbox, "form", "terms and plan",
                       lambda s: s["current"]["terms"] and s["current"]["plan"] == "team")
    click(sandbox, state, "submit")
    kept = wait_state(sandbox, "form", "the confirmation dialog",
                      lambda s: s["dialog"] == "Confirm" and "confirm_yes" in s["widgets"])
    sandbox.save_snapshot("half")

    click(sandbox, kept, "confirm_yes")  # after the snapshot: undone by the revert
    state = wait_state(sandbox, "form", "the submit", lambda s: s["submit_count"] == 1)
    click(sandbox, state, "clear")
    wait_state(sandbox, "form", "the cleared form", lambda s: s["current"]["full_name"] == "")

    sandbox.revert_snapshot("half")
    state = relaunched(sandbox, "form")
    assert held(state) == held(kept)  # "current" is read from the widgets
    assert state["current"]["full_name"] == "Ada Lovelace" and state["submitted"] is None
    # the dialog is open again, and answers
    state = wait_state(sandbox, "form", "the reopened dialog",
                       lambda s: "confirm_yes" in s["widgets"])
    click(sandbox, state, "confirm_yes")
    state = wait_state(sandbox, "form", "the submit after the revert",
                       lambda s: s["submit_count"] == 1)
    assert state["submitted"] == kept["current"] and state["dialog"] is None


def test_a_reverted_todo_list_comes_back_with_its_items_and_rename_dialog(
        make_sandbox: Any) -> None:
    sandbox = make_sandbox("resume-todo")
    sandbox.launch([sys.executable, str(APPS / "todo.py"), "--items", "Buy milk",
                    "Call Anna"])
    state = wait_state(sandbox, "todo", "the list on screen",
                       lambda s: s.get("ready") is True and len(s["item_rows"]) == 2)
    x, y, width, height = state["item_rows"][0]
    sandbox.perform(Click(x + width // 2, y + height // 2))
    sandbox.perform(Press("space"))  # ticks the selected item
    wait_state(sandbox, "todo", "Buy milk ticked",
               lambda s: s["items"][0] == {"text": "Buy milk", "done": True})
    sandbox.perform(Hotkey(("ctrl", "n")))
    wait_state(sandbox, "todo", "the Add dialog", lambda s: s["dialog"] == "Add item"
               and "input_dialog" in s["widgets"])
    sandbox.perform(TypeText("Water plants"))
    sandbox.perform(Press("enter"))
    state = wait_state(sandbox, "todo", "the added item", lambda s: len(s["items"]) == 3
                       and s["dialog"] is None)
    sandbox.perform(Hotkey(("ctrl", "s")))
    x, y, width, height = state["item_rows"][1]
    sandbox.perform(Click(x + width // 2, y + height // 2))
    wait_state(sandbox, "todo", "Call Anna selected", lambda s: s["saved"] is not None
               and s["selected"] == "Call Anna")
    sandbox.perform(Press("f2"))
    wait_state(sandbox, "todo", "the Rename dialog", lambda s: s["dialog"] == "Rename item"
               and "input_dialog" in s["widgets"])
    sandbox.perform(Hotkey(("ctrl", "a")))
    sandbox.perform(TypeText("Call Bob"))
    kept = wait_state(sandbox, "todo", "the typed new name",
                      lambda s: s["dialog_text"] == "Call Bob")
    sandbox.save_snapshot("renaming")

    sandbox.perform(Press("enter"))  # after the snapshot: undone by the revert
    wait_state(sandbox, "todo", "the renamed item", lambda s: s["items"][1]["text"] == "Call Bob")
    sandbox.perform(Press("delete"))
    wait_state(sandbox, "todo", "the deleted item", lambda s: len(s["items"]) == 2)

    sandbox.revert_snapshot("renaming")
    state = relaunched(sandbox, "todo")
    assert held(state) == held(kept)  # items, saved, selection, dialog and its text
    assert [i["text"] for i in state["items"]] == ["Buy milk", "Call Anna", "Water plants"]
    # the dialog is open again with the typed text: Enter renames with it
    wait_state(sandbox, "todo", "the reopened dialog", lambda s: "input_dialog" in s["widgets"])
    sandbox.perform(Press("enter"))
    state = wait_state(sandbox, "todo", "the rename after the revert",
                       lambda s: s["dialog"] is None)
    assert state["items"][1] == {"text": "Call Bob", "done": False}


def test_only_the_task_apps_a_revert_relaunches_are_told_they_are_resumed(
        make_sandbox: Any) -> None:
    """A program that is not a task app (a terminal, which would hand the variable to
    everything started in it: here its shell writes its environment) is relaunched
    without the resume variable; the form beside it is told, and takes up its state."""
    sandbox = make_sandbox("resume-only-apps")
    sandbox.launch(["xterm", "-e", "sh", "-c",
                    'env > "$HOME/env-$(date +%s%N).txt"; sleep 600'])
    sandbox.launch([sys.executable, str(APPS / "form.py")])
    wait_state(sandbox, "form", "the form on screen", lambda s: s.get("ready") is True)
    first = wait_until(lambda: set(sandbox.home.glob("env-*.txt")), 30,
                       message="the shell's environment file")
    sandbox.save_snapshot("both")
    sandbox.revert_snapshot("both")
    relaunched(sandbox, "form")
    new = wait_until(lambda: set(sandbox.home.glob("env-*.txt")) - first, 30,
                     message="the relaunched shell's environment file")
    [written] = new
    environment = written.read_text()
    assert "HOME=/home/user" in environment
    assert "WORKBENCH_RESUME" not in environment
