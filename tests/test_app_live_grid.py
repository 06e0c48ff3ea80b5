"""The Live screen's grid on real sandbox desktops: a tile per running environment whose
screen changes as the desktop does, the episode running there read from the store, the
grid quiet while hidden; and the Environments list that follows sandboxes started and
stopped elsewhere without a click."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtCore import Qt
from PyQt6.QtGui import QImage

from agents.trajectory import Step
from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    window_fixture,
)
from trainer.store import Store
from vm.actions import Click
from vm.env import DesktopEnv
from vm.providers.sandbox import SandboxProvider
from vm.suite import bundled_suite
from workbench.app.main_window import MainWindow
from workbench.app.pages.live import LivePage, RunningEpisode, running_episodes, tile_episodes
from workbench.services.demo_recorder import DemoRecorder

pytestmark = [pytest.mark.x11, pytest.mark.slow]


@pytest.fixture
def sandboxes(demo: DemoWorkspace) -> Iterator[Callable[[str], SandboxProvider]]:
    """Start sandboxes in the demo workspace (as another process would); all stopped after."""
    started: list[SandboxProvider] = []

    def make(name: str) -> SandboxProvider:
        provider = SandboxProvider(name, demo.path, guest_server=False)
        provider.start()
        started.append(provider)
        return provider

    yield make
    for provider in started:
        provider.stop()


def live_page(qtbot: Any, window: MainWindow) -> LivePage:
    window.show_screen("live")
    page = window.live
    assert page is not None and window.current_screen() == "live"
    qtbot.waitUntil(lambda: page.isVisible())
    return page


def tile_image(page: LivePage, name: str) -> QImage | None:
    tile = page.grid.tile(name)
    return tile.view.image if tile is not None else None


def test_grid_shows_each_running_sandbox_live_with_its_episode(
        qtbot: Any, window: MainWindow, demo: DemoWorkspace,
        sandboxes: Callable[[str], SandboxProvider], artifacts: Path) -> None:
    trainer = sandboxes("train-r1-0")  # named as a training run names its sandboxes
    person = sandboxes("desk")
    page = live_page(qtbot, window)
    qtbot.waitUntil(lambda: sorted(page.grid.names()) == ["desk", "train-r1-0"],
                    timeout=20_000)
    qtbot.waitUntil(lambda: all(tile_image(page, n) is not None for n in page.grid.names()),
                    timeout=20_000)
    first = {n: QImage(image) for n in page.grid.names()
             if (image := tile_image(page, n)) is not None}

    # a training episode in the store, and a person's demonstration on the other desktop
    suite = bundled_suite()
    writer = demo.store.episodes.begin("buttons-3", run_id="r1", policy_version=3,
                                       instruction="Click the green button.")
    writer.append_step(Step(index=0, response="click", actions=[Click(5, 5)]))
    env = DesktopEnv(person)
    recorder = DemoRecorder(env, demo.store)
    recorder.start(suite.tasks["buttons-0"])  # launches the buttons app on "desk"
    trainer.launch(["xterm", "-T", "in-training", "-geometry", "80x20+100+100"])

    def changed(name: str) -> bool:
        image = tile_image(page, name)
        return image is not None and image != first[name]

    qtbot.waitUntil(lambda: changed("desk") and changed("train-r1-0"), timeout=30_000)
    tiles = {n: t for n in page.grid.names() if (t := page.grid.tile(n)) is not None}
    qtbot.waitUntil(lambda: "buttons-0 · step 0 (human)" in tiles["desk"].episode.text()
                    and "run r1 · buttons-3 · step 1 · v3" in tiles["train-r1-0"].episode.text(),
                    timeout=20_000)
    assert all(t.running and t.frames > 0 for t in tiles.values())
    assert "2 environment(s) running" in page.summary.text()
    window.grab().save(str(artifacts / "app-live-grid.png"))

    # hidden: no screenshots and no re-reading
    window.show_screen("trajectories")
    qtbot.waitUntil(lambda: not page.isVisible())
    assert not page.timer.isActive()
    assert not any(t.running for t in tiles.values())
    recorder.discard()
    writer.finish("done", 1.0)

    # shown again: a stopped sandbox's tile goes, the episodes that ended are no longer shown
    person.stop()
    live_page(qtbot, window)
    qtbot.waitUntil(lambda: page.grid.names() == ["train-r1-0"], timeout=20_000)
    tile = page.grid.tile("train-r1-0")
    assert tile is not None
    qtbot.waitUntil(lambda: tile.episode.text() == "run r1: no episode running", timeout=20_000)
    qtbot.waitUntil(lambda: tile.running and tile.frames > 0, timeout=20_000)

    # a double-clicked tile opens its environment on the Environments screen
    qtbot.mouseDClick(tile.view, Qt.MouseButton.LeftButton)
    assert window.current_screen() == "environments" and window.environments is not None
    environments = window.environments
    qtbot.waitUntil(lambda: environments.current_name() == "train-r1-0", timeout=20_000)
    assert not page.timer.isActive() and not tile.running


def test_episodes_are_matched_to_sandboxes_as_far_as_the_store_tells(
        demo: DemoWorkspace) -> None:
    store: Store = demo.store
    pid = os.getpid()
    writers = [store.episodes.begin(task, run_id=None) for task in ("todo-add", "form-name")]
    demo_writer = store.episodes.begin("buttons-1", source="human",
                                       info={"sandbox": "desk"})
    for writer in writers:
        writer.append_step(Step(index=0, response="x", actions=[Click(1, 1)]))
    episodes = running_episodes(store)
    assert [e.task_id for e in episodes] == ["todo-add", "form-name", "buttons-1"]
    assert all(e.writer_pid == pid for e in episodes)
    assert episodes[2].sandbox == "desk" and episodes[0].steps == 1

    two = [f"rollout-{pid}-0", f"rollout-{pid}-1", "desk"]
    # two sandboxes of one rollout process and two episodes: which is where is not known
    shared = tile_episodes(two[0], two, episodes)
    assert shared.exact is None and [e.task_id for e in shared.group] == ["todo-add",
                                                                          "form-name"]
    text, tip = shared.text()
    assert text == f"rollout process {pid}: 2 episode(s) running"
    assert "todo-add · step 1" in tip and "not recorded" in tip
    # the demonstration says where it runs
    exact = tile_episodes("desk", two, episodes).exact
    assert exact is not None and exact.task_id == "buttons-1"
    # a process with a single sandbox and a single episode: it runs there
    lone = tile_episodes(f"rollout-{pid}-0", [f"rollout-{pid}-0"], episodes[:1])
    assert lone.exact is not None and lone.exact.task_id == "todo-add"
    # another process's sandbox, and a sandbox of no run, show nothing of ours
    assert tile_episodes("rollout-1-0", two, episodes).text()[0] == (
        "rollout process 1: no episode running")
    assert tile_episodes("mine", two, episodes).text()[0] == "no episode running"
    for writer in (*writers, demo_writer):
        writer.finish("done", 0.0)
    assert running_episodes(store) == []
    assert RunningEpisode("e", "t", "rollout", "r", None, 0, None, None).describe() == (
        "t · step 0")


def test_environments_list_follows_sandboxes_started_and_stopped_elsewhere(
        qtbot: Any, window: MainWindow, sandboxes: Callable[[str], SandboxProvider]) -> None:
    window.show_screen("environments")
    page = window.environments
    assert page is not None
    qtbot.waitUntil(lambda: page.list_timer.isActive())
    assert page.sandbox_model.records == []
    elsewhere = sandboxes("elsewhere")  # e.g. `workbench env up` in a terminal
    qtbot.waitUntil(lambda: [i.name for i in page.sandbox_model.records] == ["elsewhere"],
                    timeout=20_000)
    qtbot.waitUntil(lambda: page.feed is not None, timeout=10_000)
    assert page.current_name() == "elsewhere"
    feed = page.feed
    elsewhere.stop()
    # (SandboxManager keeps its handle on a sandbox stopped by another process and so
    # reports it "dead" rather than "stopped": either way it is no longer running)
    qtbot.waitUntil(lambda: page.sandbox_model.records[0].status in ("stopped", "dead"),
                    timeout=20_000)
    status = page.sandbox_model.records[0].status
    qtbot.waitUntil(lambda: page.feed is None and f"is {status}" in page.live.message,
                    timeout=10_000)
    assert feed is not None and not feed.session.running
    window.show_screen("trajectories")
    qtbot.waitUntil(lambda: not page.list_timer.isActive())
