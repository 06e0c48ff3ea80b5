"""Warm resets on a real sandbox, and scoring without a settle.

A reset onto another task of the app already running asks that app for the new layout
instead of reverting the desktop and starting it again. The episode that follows must be
indistinguishable from one after a full reset: nothing of the last episode left (clicks,
open tab, acknowledged inputs), the new layout on screen, the same scores; and a desktop
the warm path cannot serve gets the full reset."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import wait_until
from vm.actions import Click, MouseDown
from vm.suite.families import button_layout, button_tasks, tabs_layout, tabs_tasks
from vm.suite.oracles.desktop import app_state

pytestmark = [pytest.mark.x11, pytest.mark.slow]

SCREEN = (448, 280)


@pytest.fixture()
def env(tmp_path: Any) -> Iterator[Any]:
    from vm.env import DesktopEnv
    from vm.providers.sandbox import SandboxProvider

    provider = SandboxProvider("warm", tmp_path, SCREEN, guest_server=False)
    with DesktopEnv(provider, action_space="actions") as environment:
        yield environment


def app_processes(env: Any, script: str) -> list[int]:
    """This sandbox's running processes whose command line names `script`."""
    from vm.processes import process_of, tagged_pids

    state = env.provider.state
    assert state is not None
    found = [process_of(pid) for pid in tagged_pids(state.tag)]
    return [p.pid for p in found if p is not None and any(a.endswith(script) for a in p.argv)]


def pixel(observation: dict[str, Any], point: tuple[int, int]) -> str:
    from PIL import Image

    rgb = Image.open(io.BytesIO(observation["screenshot"])).convert("RGB").getpixel(point)
    assert isinstance(rgb, tuple)
    return "#" + "".join(f"{channel:02x}" for channel in rgb[:3])


def solve_tabs(env: Any, seed: int) -> None:
    layout = tabs_layout(seed, SCREEN)
    tab, buttons = next(t for t in layout.tabs if t[0].name == layout.target_tab)
    button = next(b for b in buttons if b.name == layout.target_button)
    for point in (tab.centre, button.centre, layout.confirm.centre):
        env.step(Click(*point))


def test_a_reset_onto_the_running_app_is_warm_and_leaves_nothing_of_the_last_episode(
        env: Any) -> None:
    first, second = tabs_tasks(2, seed=151, screen_size=SCREEN)
    env.reset(first)
    assert env.last_reset_kind == "full"
    solve_tabs(env, 151)
    assert env.evaluate() == 1.0
    reverts = env.last_revert_seconds

    observation = env.reset(second)
    assert env.last_reset_kind == "warm" and env.last_revert_seconds == reverts
    state = app_state(env.provider, "tabs")
    assert state is not None
    assert state["layout"] == tabs_layout(152, SCREEN).to_json()
    assert (state["clicks"], state["tab"], state["inputs"]) == ([], None, 0)
    layout = tabs_layout(152, SCREEN)
    for tab, buttons in layout.tabs:  # the new tabs are drawn, no page is open
        assert pixel(observation, (tab.x + 8, tab.y + 8)) == tab.color
        assert all(pixel(observation, b.centre) != b.color for b in buttons)
    assert env.evaluate() == 0.0  # nothing done yet: the last episode's clicks are gone
    solve_tabs(env, 152)
    assert env.evaluate() == 1.0


def test_a_warm_reset_scores_what_a_full_reset_scores(env: Any) -> None:
    tasks = button_tasks(4, seed=46, screen_size=SCREEN, grid=(2, 2))
    # An hour's settle is never waited: every input of these episodes is a click the app
    # acknowledged, so its state file already shows what they did (if it were waited,
    # the test would time out, not pass)
    env.settle = 3600.0
    kinds, scores = [], []
    for task in [*tasks, *tasks]:
        env.reset(task)
        kinds.append(env.last_reset_kind)
        layout, target = button_layout(int(task.id.rsplit("-", 1)[1]), SCREEN, grid=(2, 2))
        wrong = next(b for b in layout if b.name != target)
        env.step(Click(*wrong.centre))
        scores.append(env.evaluate())
        env.reset(task)
        kinds.append(env.last_reset_kind)
        env.step(Click(*next(b for b in layout if b.name == target).centre))
        scores.append(env.evaluate())
    assert kinds == ["full"] + ["warm"] * 15
    assert scores == [0.0, 1.0] * 8


def test_a_closed_app_or_a_held_button_gets_the_full_reset(env: Any) -> None:
    first, second, third = tabs_tasks(3, seed=151, screen_size=SCREEN)
    env.reset(first)
    assert app_processes(env, "tabs.py")  # the wait below has something to wait for
    env.provider.close_window("Tabs")  # the app ends with its window, once it gets the close
    # Closing is asynchronous: an app still running when the load request comes answers it
    # (a warm reset that is right, since the app is there). Wait until it has exited.
    wait_until(lambda: not app_processes(env, "tabs.py"), timeout=60,
               message=lambda: f"the tabs app to exit: {app_processes(env, 'tabs.py')}")
    env.reset(second)  # the load request is never answered: revert and start the app
    assert env.last_reset_kind == "full"
    restarted = app_state(env.provider, "tabs")
    assert restarted is not None
    assert restarted["layout"] == tabs_layout(152, SCREEN).to_json()
    solve_tabs(env, 152)
    assert env.evaluate() == 1.0

    env.step(MouseDown())  # a button left down: a revert releases it, a warm reset cannot
    env.reset(third)
    assert env.last_reset_kind == "full"
    state = json.loads(env.provider.read_file("/home/user/.workbench/tabs.json"))
    assert state["layout"] == tabs_layout(153, SCREEN).to_json()


def test_a_task_of_another_app_gets_the_full_reset(env: Any) -> None:
    env.reset(tabs_tasks(1, seed=151, screen_size=SCREEN)[0])
    env.reset(button_tasks(1, seed=46, screen_size=SCREEN, grid=(2, 2))[0])
    assert env.last_reset_kind == "full"
    env.reset(None)  # a bare reset reverts too
    assert env.last_reset_kind == "full"
