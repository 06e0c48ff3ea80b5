"""The review queue: each episode's verdict and reviewer in the table, filters by verdict
and by reviewer, the progress count, "next unreviewed" (U) and the reviewer's name."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agents.trajectory import Episode, Step
from tests.conftest_app import open_window, settings_file_fixture  # noqa: F401
from trainer.store import EpisodeFilter, Store
from trainer.store.annotations import CLEARED_LABEL
from vm.actions import Click

IDS = ("e1", "e2", "e3", "e4")


def build(path: Path) -> None:
    now = time.time()
    with Store.open(path, create=True) as store:
        for i, episode_id in enumerate(IDS):
            store.episodes.save(Episode(
                id=episode_id, task_id="t", instruction="do t", environment="sandbox",
                source="rollout", status="done", score=1.0, created_at=now - i,
                finished_at=now - i,
                steps=[Step(0, response="click", actions=[Click(1, 1)])]))
        store.annotations.add("e1", label="accept", author="alice")
        store.annotations.add("e2", label="accept", author="alice")
        store.annotations.add("e2", label="reject", author="bob")  # the newest counts
        store.annotations.add("e3", label="accept", author="alice")
        store.annotations.add("e3", label=CLEARED_LABEL, author="alice")  # withdrawn
        store.annotations.add("e4", step_index=0, label="wrong", author="carol")


def test_verdicts_and_reviewers_in_the_store(tmp_path: Path) -> None:
    build(tmp_path / "ws")
    with Store.open(tmp_path / "ws") as store:
        summaries = {s.id: s for s in store.queries.page(EpisodeFilter())}
        assert {k: (s.verdict, s.reviewer) for k, s in summaries.items()} == {
            "e1": ("accept", "alice"), "e2": ("reject", "bob"), "e3": (None, ""),
            "e4": (None, "")}

        def ids(**fields: Any) -> list[str]:
            return sorted(s.id for s in store.queries.page(EpisodeFilter(**fields)))

        assert ids(verdict="accept") == ["e1"] and ids(verdict="reject") == ["e2"]
        assert ids(verdict="reviewed") == ["e1", "e2"]
        assert ids(verdict="unreviewed") == ["e3", "e4"]
        assert ids(reviewer="bob") == ["e2"] and ids(reviewer="carol") == ["e4"]


def test_the_review_queue_on_the_trajectories_screen(qtbot: Any, settings_file: Path,
                                                     tmp_path: Path, artifacts: Path) -> None:
    from workbench.app.models.episode_table import COLUMNS

    build(tmp_path / "ws")
    window = open_window(qtbot, settings_file, tmp_path / "ws")
    page = window.trajectories
    assert page is not None
    assert page.current_episode_id() == "e1"  # opens with the newest episode shown
    details = page.player.details
    for index in range(details.count()):  # every tab of the step's details in full view
        text = details.tabText(index)
        needed = details.tabBar().fontMetrics().horizontalAdvance(text)
        assert details.tabBar().tabRect(index).width() > needed, text
    review_column = [c.title for c in COLUMNS].index("Review")
    texts = {page.model.episode_id(r): page.model.index(r, review_column).data()
             for r in range(page.model.rowCount())}
    assert texts["e1"] == "✓ accepted (alice) ✎1" and texts["e2"].startswith("✗ rejected (bob)")
    assert "2 of 4 reviewed" in page.filter_bar.count.text()
    page.filter_bar.set_value("annotated", "unreviewed")
    qtbot.waitUntil(lambda: len(page.rows) == 2)
    page.filter_bar.set_value("annotated", None)
    page.filter_bar.set_value("reviewer", "bob")
    qtbot.waitUntil(lambda: len(page.rows) == 1)
    page.filter_bar.clear()
    qtbot.waitUntil(lambda: len(page.rows) == 4)
    window.grab().save(str(artifacts / "app-review-queue-1280x720.png"))
    assert window.width() == 1280  # the filter bar fits

    # U opens the next episode without a verdict; accepting it counts at once
    page.open_episode("e1")
    window.commands["next_unreviewed"].trigger()
    assert page.current_episode_id() == "e3"
    window.set_reviewer_name("dana")
    window.commands["accept_episode"].trigger()
    assert "3 of 4 reviewed" in page.filter_bar.count.text()
    window.commands["next_unreviewed"].trigger()
    assert page.current_episode_id() == "e4"
    window.commands["reject_episode"].trigger()
    assert not page.next_unreviewed()  # every episode has a verdict
    assert "4 of 4 reviewed" in page.filter_bar.count.text()
    assert window.store is not None
    newest = window.store.queries.page(EpisodeFilter(reviewer="dana"))
    assert sorted(s.id for s in newest) == ["e3", "e4"]
    window.close()
