"""The tabs family on a real sandbox: three dependent clicks (the named tab, the named button
on it, Confirm) score 1 only in that order; the app acknowledges each click, so the
screenshot after a step already shows what the click did and evaluation needs no settle."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

from vm.actions import Click, Done
from vm.suite.families import TabsLayout, tabs_layout, tabs_target, tabs_tasks
from vm.suite.oracles.desktop import app_state
from workbench.vetting.check import run_noop, run_oracle

pytestmark = [pytest.mark.x11, pytest.mark.slow]

SCREEN = (448, 280)
TASKS = tabs_tasks(2, seed=151, screen_size=SCREEN)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from vm.env import DesktopEnv
    from vm.providers.sandbox import SandboxProvider

    provider = SandboxProvider("tabs", tmp_path_factory.mktemp("tabs"), SCREEN,
                               guest_server=False)
    with DesktopEnv(provider, action_space="actions") as environment:
        yield environment


def targets(layout: TabsLayout) -> tuple[Any, Any, Any]:
    """The target tab, the target button, and the other tab."""
    tab, buttons = next(t for t in layout.tabs if t[0].name == layout.target_tab)
    other = next(t[0] for t in layout.tabs if t[0].name != layout.target_tab)
    return tab, next(b for b in buttons if b.name == layout.target_button), other


def pixel(observation: dict[str, Any], point: tuple[int, int]) -> str:
    from PIL import Image

    rgb = Image.open(io.BytesIO(observation["screenshot"])).convert("RGB").getpixel(point)
    assert isinstance(rgb, tuple)
    return "#" + "".join(f"{channel:02x}" for channel in rgb[:3])


def test_the_layout_is_seeded_and_names_one_tab_and_one_button_on_it() -> None:
    layout = tabs_layout(151, SCREEN)
    assert layout == tabs_layout(151, SCREEN)
    tab, button, _ = targets(layout)
    assert (tab.name, button.name) == tabs_target(TASKS[0])
    assert TASKS[0].instruction == (f"Open the {tab.name} tab, click the {button.name} "
                                    "button, then click Confirm.")
    names = [t.name for t, _ in layout.tabs] + [b.name for _, bs in layout.tabs for b in bs]
    assert len(set(names)) == len(names) == 6


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_oracle_solves_and_doing_nothing_fails(env: Any, task: Any) -> None:
    score, actions = run_oracle(env, task)
    assert score == 1.0, f"the oracle of {task.id} scored {score} after {actions} actions"
    assert run_noop(env, task) == 0.0


def test_the_three_clicks_in_order_score_and_the_screen_follows_each(env: Any) -> None:
    layout = tabs_layout(151, SCREEN)
    tab, button, _ = targets(layout)
    observation = env.reset(TASKS[0])
    corner = (tab.x + 8, tab.y + 8)  # off the tab's label
    assert pixel(observation, corner) == tab.color  # "ready": the window is drawn
    assert pixel(observation, button.centre) != button.color  # no tab is open at first
    observation, *_ = env.step(Click(*tab.centre))
    assert pixel(observation, button.centre) == button.color  # its page is on screen
    env.step(Click(*button.centre))
    env.step(Click(*layout.confirm.centre))
    assert env.evaluate() == 1.0  # no settle: the app has acknowledged all three clicks
    state = app_state(env.provider, "tabs")
    assert state is not None and state["inputs"] == 3


@pytest.mark.parametrize("order", ["wrong tab", "no tab", "confirm first", "extra click"])
def test_any_other_order_scores_zero(env: Any, order: str) -> None:
    layout = tabs_layout(151, SCREEN)
    tab, button, other = targets(layout)
    clicks = {
        "wrong tab": [other.centre, button.centre, layout.confirm.centre],  # its button cell
        "no tab": [button.centre, layout.confirm.centre],
        "confirm first": [layout.confirm.centre, tab.centre, button.centre],
        "extra click": [tab.centre, tab.centre, button.centre, layout.confirm.centre],
    }[order]
    env.reset(TASKS[0])
    for point in clicks:
        env.step(Click(*point))
    env.step(Done())
    assert env.evaluate() == 0.0
    state = app_state(env.provider, "tabs")
    assert state is not None and state["inputs"] == len(clicks)  # misses count too
