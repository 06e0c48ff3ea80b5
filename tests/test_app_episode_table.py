"""The episode table: a lazy model (ids only, rows read when shown) that filters, sorts
and searches in the store, and opens 100k episodes without reading them all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PyQt6.QtCore import Qt

from tests.conftest_app import (  # noqa: F401
    BIG_EPISODES,
    DemoWorkspace,
    big_workspace_fixture,
    demo_fixture,
    settings_file_fixture,
    show_at,
    window_fixture,
)
from trainer.store import EpisodeFilter, Store
from workbench.app.main_window import MainWindow
from workbench.app.models.episode_table import COLUMNS, EpisodeTableModel
from workbench.app.models.record_table import RecordTableModel
from workbench.app.models.step_list import StepListModel
from workbench.app.pages.pool import TASK_COLUMNS
from workbench.app.settings import AppSettings
from workbench.services.episode_rows import DEFAULT_BLOCK, EpisodeRows
from workbench.services.review import Reviewer
from workbench.services.success_pool import pool_overview


def shown_ids(window: MainWindow) -> list[str]:
    page = window.trajectories
    assert page is not None
    return [page.model.episode_id(r) for r in range(page.model.rowCount())]


def test_models_pass_the_model_tester(qtmodeltester: Any, demo: DemoWorkspace) -> None:
    rows = EpisodeRows(demo.store.queries)
    table = EpisodeTableModel(rows)
    table.search(EpisodeFilter())
    qtmodeltester.check(table)
    steps = StepListModel()
    steps.set_steps(demo.store.episodes.load(demo.rollout).steps,
                    Reviewer(demo.store).steps(demo.rollout))
    qtmodeltester.check(steps)
    pool: RecordTableModel[Any] = RecordTableModel(TASK_COLUMNS)
    pool.set_records(pool_overview(demo.store))
    qtmodeltester.check(pool)


def test_table_shows_every_episode_newest_first(window: MainWindow, demo: DemoWorkspace
                                                ) -> None:
    assert shown_ids(window) == [demo.imported, demo.error, demo.human, demo.rollout,
                                 demo.failed]
    page = window.trajectories
    assert page is not None
    model = page.model
    row = model.row_of(demo.rollout)
    assert row is not None
    text = {c.title: model.data(model.index(row, i)) for i, c in enumerate(COLUMNS)}
    assert text["Task"] == "calc-sum" and text["Score"] == "1.00" and text["Steps"] == "4"
    assert text["Source"] == "rollout" and text["Version"] == "2" and text["Tags"] == "gold"
    assert page.filter_bar.count.text() == "5 episodes · 0 of 5 reviewed"


def test_filters_narrow_the_table(qtbot: Any, window: MainWindow, demo: DemoWorkspace
                                  ) -> None:
    page = window.trajectories
    assert page is not None
    bar = page.filter_bar

    def choose(name: str, value: Any, expected: set[str]) -> None:
        bar.set_value(name, value)
        assert set(shown_ids(window)) == expected, name
        bar.clear()

    choose("task", "calc-sum", {demo.rollout, demo.failed})
    choose("source", "human", {demo.human})
    choose("status", "error", {demo.error})
    choose("run", "run-a", {demo.rollout, demo.failed})
    choose("version", 2, {demo.rollout, demo.error})
    choose("tag", "hard", {demo.failed})
    bar.min_score.setValue(0.5)
    assert set(shown_ids(window)) == {demo.rollout, demo.imported}
    bar.max_score.setValue(0.6)
    assert shown_ids(window) == [demo.imported]
    assert page.filter_bar.count.text() == "1 of 5 episodes · 0 of 1 reviewed"
    bar.clear()
    # annotated or not: annotate one episode, then filter
    Reviewer(demo.store).set_label(demo.human, 0, "correct")
    choose("annotated", True, {demo.human})
    choose("annotated", False, {demo.rollout, demo.failed, demo.error, demo.imported})
    # instruction search (typed, applied after a short pause)
    bar.search.setText("todo.TXT")
    qtbot.waitUntil(lambda: set(shown_ids(window)) == {demo.human, demo.imported})


def test_header_click_sorts_in_the_store(window: MainWindow, demo: DemoWorkspace) -> None:
    page = window.trajectories
    assert page is not None
    header = page.table.horizontalHeader()
    assert header is not None
    score = [c.title for c in COLUMNS].index("Score")
    header.setSortIndicator(score, Qt.SortOrder.AscendingOrder)
    ids = shown_ids(window)
    scores = [s.score for s in demo.store.queries.summaries(ids)]
    assert [s for s in scores if s is not None] == sorted(s for s in scores if s is not None)
    header.setSortIndicator(score, Qt.SortOrder.DescendingOrder)
    assert shown_ids(window)[0] == demo.rollout  # score 1.0 first
    # the instruction column is not sortable in the store: the order stays
    before = shown_ids(window)
    header.setSortIndicator([c.title for c in COLUMNS].index("Instruction"),
                            Qt.SortOrder.AscendingOrder)
    assert shown_ids(window) == before


def test_100k_episodes_open_without_reading_every_row(qtbot: Any, big_workspace: Path,
                                                      settings_file: Path,
                                                      artifacts: Path) -> None:
    window = MainWindow(AppSettings.at(settings_file), big_workspace)
    qtbot.addWidget(window)
    show_at(window, (1500, 950))  # with the episode list open
    qtbot.waitExposed(window)
    window.show_screen("trajectories")
    page = window.trajectories
    assert page is not None
    assert page.model.rowCount() == BIG_EPISODES
    qtbot.waitUntil(lambda: page.rows.fetched > 0)  # the visible rows were read...
    assert page.rows.fetched <= 2 * DEFAULT_BLOCK  # ...and only about those
    assert page.model.data(page.model.index(0, 0)) == "task-199"  # newest: big-099999

    page.table.scrollTo(page.model.index(60_000, 0))
    qtbot.waitUntil(lambda: page.rows.cached(60_000) is not None)
    assert page.rows.fetched <= 4 * DEFAULT_BLOCK

    page.filter_bar.set_value("source", "human")
    assert page.model.rowCount() == BIG_EPISODES // 5
    qtbot.waitUntil(lambda: page.rows.cached(0) is not None)
    visible = [page.rows.cached(r) for r in range(10)]
    assert all(s is not None and s.source == "human" for s in visible)
    assert page.filter_bar.count.text() == (f"{BIG_EPISODES // 5:,} of {BIG_EPISODES:,} "
                                            f"episodes · 0 of {BIG_EPISODES // 5:,} reviewed")
    assert page.rows.fetched <= 6 * DEFAULT_BLOCK
    window.grab().save(str(artifacts / "app-trajectories-100k.png"))
    with Store.open(big_workspace) as store:  # nothing was written by looking
        assert store.queries.workspace_stats().annotations == 0
