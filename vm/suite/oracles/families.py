"""Oracles of the generated families (vm.suite.families): click the button the
instruction names (`buttons`); open the tab, click its button, Confirm (`tabs`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from vm.actions import Action, Done
from vm.providers.base import Provider
from vm.suite.families import FAMILY_DOMAIN, TABS_DOMAIN, button_target, tabs_target
from vm.suite.oracles.desktop import click_widget, wait_state
from vm.suite.oracles.registry import family_oracle
from vm.tasks.model import Task


@family_oracle(FAMILY_DOMAIN, "buttons-")
def _buttons(task: Task, provider: Provider) -> Iterator[Action]:
    yield click_widget(provider, "buttons", f"button_{button_target(task)}")
    wait_state(provider, "buttons", lambda s: s.get("clicked"), what="a click recorded")
    yield Done()


@family_oracle(TABS_DOMAIN, "tabs-")
def _tabs(task: Task, provider: Provider) -> Iterator[Action]:
    tab, button = tabs_target(task)
    for count, widget in enumerate((f"tab_{tab}", f"button_{button}", "confirm"), 1):
        yield click_widget(provider, "tabs", widget)  # the button shows once its tab is open

        def recorded(state: dict[str, Any], n: int = count) -> bool:
            return len(state.get("clicks", [])) >= n

        wait_state(provider, "tabs", recorded, what=f"click {count} recorded")
    yield Done()
