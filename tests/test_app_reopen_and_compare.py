"""A relaunch opens the episode the person was reviewing, not the newest one that was
aborted before its first step; Compare on a task with one episode says why there is
nothing beside it instead of showing the episode twice (issue 47, item 6). At 1280x720
on the demo workspace."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agents.trajectory import Episode
from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    open_window,
    settings_file_fixture,
)


def test_a_relaunch_opens_the_last_reviewed_episode_not_an_aborted_one(
        qtbot: Any, demo: DemoWorkspace, settings_file: Path) -> None:
    demo.store.episodes.save(Episode(  # the newest: aborted before its first step
        id="ep-aborted", task_id=demo.tasks[3], instruction="Bookmark the open page",
        environment="sandbox", source="rollout", status="aborted",
        error="the sandbox did not start", created_at=time.time(), steps=[]))
    window = open_window(qtbot, settings_file, demo.path, (1280, 720))
    page = window.trajectories
    assert page is not None
    assert page.model.episode_id(0) == "ep-aborted"  # the newest, first in the list
    assert page.current_episode_id() == demo.imported  # the newest with a step
    assert page.player.episode is not None and page.player.episode.steps
    # the person reviews another episode, then quits
    page.open_episode(demo.failed)
    page.review.toggle_verdict("reject")
    window.close()

    again = open_window(qtbot, settings_file, demo.path, (1280, 720))
    page = again.trajectories
    assert page is not None
    assert page.current_episode_id() == demo.failed
    assert page.selected_episode_ids() == [demo.failed]  # its row is the one selected
    again.close()

    # an episode since deleted: the newest with a step again
    settings = again.settings
    settings.set_last_episode(demo.path.resolve(), "ep-gone")
    settings.sync()
    third = open_window(qtbot, settings_file, demo.path, (1280, 720))
    assert third.trajectories is not None
    assert third.trajectories.current_episode_id() == demo.imported


def test_compare_on_a_task_with_one_episode_says_so(
        qtbot: Any, demo: DemoWorkspace, settings_file: Path, artifacts: Path) -> None:
    window = open_window(qtbot, settings_file, demo.path, (1280, 720))
    page = window.trajectories
    assert page is not None
    page.open_episode(demo.error)  # files-rename: its only episode
    assert page.compare()
    view = page.compare_view
    qtbot.waitUntil(lambda: view.alone.isVisible())
    left, right = view.players
    assert left.episode is not None and left.episode.id == demo.error
    assert not right.isVisible() and right.episode is None  # not the same one again
    assert not view.choosers[1].isVisible()
    assert "only episode" in view.title.text() and "nothing to compare" in view.title.text()
    words = view.alone.text()
    assert demo.error in words and "files-rename" in words and "record" in words
    window.grab().save(str(artifacts / "app-compare-one-episode-1280x720.png"))
    # a task with two: both sides again, the explanation gone
    page.open_episode(demo.rollout)
    assert page.compare()
    assert not view.alone.isVisible() and right.isVisible()
    assert view.episode_ids() == (demo.rollout, demo.failed)
