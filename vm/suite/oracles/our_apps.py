"""Oracles of the bundled tasks on our own small apps (assets/apps): the form, the
settings dialog and the to-do list. Each app writes its state, with the screen rectangle of
every named widget, to ~/.workbench/<app>.json; the oracles click those rectangles and
wait for the state to show each click's effect."""

from __future__ import annotations

from collections.abc import Iterator

from vm.actions import Action, Click, Done, Hotkey, Press, TypeText
from vm.providers.base import Provider
from vm.suite.oracles.desktop import (
    app_state,
    centre,
    click_until,
    click_widget,
    toggle,
    wait_state,
)
from vm.suite.oracles.registry import oracle
from vm.tasks.model import Task

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
