"""The Trajectories screen as a person uses it: open an episode, see the action drawn in
the colour of its text, step with the keyboard and play, label and correct steps, judge
episodes, curate the success pool, compare two episodes, export in the background."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from PyQt6.QtCore import QPoint, Qt

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    wait_for_worker,
    window_fixture,
)
from vm.actions import MoveTo
from workbench.app.main_window import MainWindow
from workbench.app.pages.trajectories import TrajectoriesPage
from workbench.services.exports import ExportResult
from workbench.services.progress import TaskState


def page_of(window: MainWindow) -> TrajectoriesPage:
    assert window.trajectories is not None
    return window.trajectories


def open_in_table(qtbot: Any, window: MainWindow, episode_id: str) -> TrajectoriesPage:
    """Click the episode's row, as a person would."""
    page = page_of(window)
    row = page.model.row_of(episode_id)
    assert row is not None
    rect = page.table.visualRect(page.model.index(row, 0))
    viewport = page.table.viewport()
    assert viewport is not None
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: page.current_episode_id() == episode_id)
    page.table.setFocus()
    return page


def key(qtbot: Any, page: TrajectoriesPage, key: Qt.Key,
        modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    qtbot.keyClick(page.table, key, modifier)


def test_episode_view_draws_each_action_in_the_colour_of_its_text(
        qtbot: Any, window: MainWindow, demo: DemoWorkspace, artifacts: Path) -> None:
    page = open_in_table(qtbot, window, demo.rollout)
    player = page.player
    assert player.before.image is not None and player.before.image.width() == 640
    (mark,) = player.before.marks
    assert mark.kind == "cross" and mark.points == ((120, 80),)
    (line,) = player.current_lines
    assert line.text == "pyautogui.click(120, 80)" and line.colour == mark.colour
    assert f"color:{mark.colour}" in player.actions_text.toHtml().replace(" ", "").lower() \
        or mark.colour in player.actions_text.toHtml()
    assert player.thought.toPlainText() == "The sheet is open; I click cell A1."
    assert "click(start_box='(120,80)')" in player.raw.toPlainText()
    metrics = player.metrics.toPlainText()
    assert "entropy (mean)" in metrics and "1.000" in metrics and "1.250 s" in metrics
    assert player.step_model.rowCount() == 4
    window.grab().save(str(artifacts / "app-trajectories.png"))

    player.go(1)  # the drag: an arrow from the pressed point to the release point
    kinds = {m.kind: m for m in player.before.marks}
    assert kinds["arrow"].points == ((120, 80), (120, 180))
    player.go(3)  # typed text and keys are captions
    captions = [m.text for m in player.before.marks if m.kind == "caption"]
    assert captions == ["type “=SUM(A1:A5)”", "press enter", "ctrl+s"]
    window.commands["show_after"].setChecked(True)
    assert player.after_box.isVisible()
    assert player.after.image is not None and player.after_title.text().startswith(
        "After: the final screen")
    window.grab().save(str(artifacts / "app-trajectories-before-after.png"))


def test_keyboard_steps_and_plays(qtbot: Any, window: MainWindow, demo: DemoWorkspace
                                  ) -> None:
    page = open_in_table(qtbot, window, demo.rollout)
    player = page.player
    key(qtbot, page, Qt.Key.Key_Right)
    assert player.index == 1
    key(qtbot, page, Qt.Key.Key_Right, Qt.KeyboardModifier.ControlModifier)
    assert player.index == 2
    key(qtbot, page, Qt.Key.Key_End)
    assert player.index == 3
    key(qtbot, page, Qt.Key.Key_Right)
    assert player.index == 3  # stays on the last step
    key(qtbot, page, Qt.Key.Key_Home)
    assert player.index == 0
    key(qtbot, page, Qt.Key.Key_Left)
    assert player.index == 0
    assert page.current_episode_id() == demo.rollout  # the table row did not move

    player.set_speed(8.0)
    key(qtbot, page, Qt.Key.Key_Space)
    assert player.playing and window.commands["play"].isChecked()
    seen: list[int] = []
    player.step_changed.connect(seen.append)
    qtbot.waitUntil(lambda: not player.playing, timeout=5000)
    assert seen == [1, 2, 3] and player.index == 3
    assert not window.commands["play"].isChecked()
    assert window.settings.play_speed == 8.0  # kept for the next launch


def test_labels_from_number_keys_are_stored(qtbot: Any, window: MainWindow,
                                            demo: DemoWorkspace) -> None:
    page = open_in_table(qtbot, window, demo.rollout)
    key(qtbot, page, Qt.Key.Key_2)
    assert demo.store.annotations.current(demo.rollout)[0].label == "wrong"
    key(qtbot, page, Qt.Key.Key_Right)
    key(qtbot, page, Qt.Key.Key_3)
    key(qtbot, page, Qt.Key.Key_Right)
    key(qtbot, page, Qt.Key.Key_1)
    current = demo.store.annotations.current(demo.rollout)
    assert {i: current[i].label for i in (0, 1, 2)} == {0: "wrong", 1: "critical",
                                                         2: "correct"}
    assert page.review.label_buttons["correct"].isChecked()
    assert page.player.step_model.data(page.player.step_model.index(1)).endswith("!")
    key(qtbot, page, Qt.Key.Key_0)
    assert page.reviewer.step(demo.rollout, 2).label is None
    # the table shows the episode as annotated
    row = page.model.row_of(demo.rollout)
    assert row is not None
    assert page.model.data(page.model.index(row, 8)).startswith("✎")


def test_corrected_point_is_set_by_clicking_the_screenshot(
        qtbot: Any, window: MainWindow, demo: DemoWorkspace, artifacts: Path) -> None:
    page = open_in_table(qtbot, window, demo.rollout)
    player = page.player
    key(qtbot, page, Qt.Key.Key_Right)  # the drag step
    key(qtbot, page, Qt.Key.Key_C)
    assert page.review.pick_button.isChecked() and player.before.picking
    x, y = player.before.placement().to_widget(300.5, 200.5)
    qtbot.mouseClick(player.before, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))
    current = demo.store.annotations.current(demo.rollout)[1]
    assert current.corrected_actions is not None
    (moved, _drag) = current.corrected_actions
    assert isinstance(moved, MoveTo) and abs(moved.x - 300) <= 1 and abs(moved.y - 200) <= 1
    assert not page.review.pick_button.isChecked()  # one point per request
    assert player.before.correction == (moved.x, moved.y)
    assert "corrected" in page.review.correction_label.text()
    window.grab().save(str(artifacts / "app-trajectories-correction.png"))

    page.review.step_note.setText("the drag should end lower")
    qtbot.keyClick(page.review.step_note, Qt.Key.Key_Return)
    current = demo.store.annotations.current(demo.rollout)[1]
    assert current.note == "the drag should end lower" and current.corrected_actions
    page.review.clear_correction_button.click()
    assert demo.store.annotations.current(demo.rollout)[1].corrected_actions is None
    assert player.before.correction is None


def test_episode_verdicts_score_override_and_pool(qtbot: Any, window: MainWindow,
                                                  demo: DemoWorkspace, artifacts: Path
                                                  ) -> None:
    page = open_in_table(qtbot, window, demo.failed)
    key(qtbot, page, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier
        | Qt.KeyboardModifier.ShiftModifier)
    assert demo.store.annotations.current(demo.failed)[None].label == "reject"
    assert page.current_episode_id() != demo.failed  # on to the next unreviewed one
    page = open_in_table(qtbot, window, demo.failed)
    page.review.score.setValue(0.3)
    episode = demo.store.annotations.current(demo.failed)[None]
    assert (episode.label, episode.score) == ("reject", 0.3)
    assert demo.store.episodes.load(demo.failed).score == 0.0  # the model's score stays

    page = open_in_table(qtbot, window, demo.rollout)
    key(qtbot, page, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier
        | Qt.KeyboardModifier.ShiftModifier)
    assert demo.store.annotations.current(demo.rollout)[None].label == "accept"
    page = open_in_table(qtbot, window, demo.rollout)  # the verdict moved on: back to it
    key(qtbot, page, Qt.Key.Key_P, Qt.KeyboardModifier.ControlModifier
        | Qt.KeyboardModifier.ShiftModifier)
    assert demo.store.pool.get(demo.rollout) is not None
    assert page.review.pool.isChecked()

    # an episode that ended in error cannot be a success
    page = open_in_table(qtbot, window, demo.error)
    assert not page.review.pool.isEnabled()

    # the success pool tab: calc-sum has one; files-rename (only an error) and
    # browser-bookmark (never tried) are hard tasks with none
    page.tabs.setCurrentWidget(page.pool_view)
    pool = page.pool_view
    rows = {r.task_id: r for r in pool.task_model.records}
    assert rows["calc-sum"].pooled == 1
    pool.only_needing.setChecked(True)
    assert {r.task_id for r in pool.task_model.records} == {"files-rename",
                                                            "browser-bookmark"}
    pool.only_needing.setChecked(False)
    row = [r.task_id for r in pool.task_model.records].index("calc-sum")
    pool.task_view.setCurrentIndex(pool.task_model.index(row, 0))
    assert [e.episode_id for e in pool.entry_model.records] == [demo.rollout]
    window.grab().save(str(artifacts / "app-success-pool.png"))
    pool.show_button.click()  # the table shows that task's episodes
    assert {page.model.episode_id(r) for r in range(page.model.rowCount())} == {
        demo.rollout, demo.failed}


def test_compare_two_episodes_side_by_side(qtbot: Any, window: MainWindow,
                                           demo: DemoWorkspace, artifacts: Path) -> None:
    page = open_in_table(qtbot, window, demo.failed)
    row = page.model.row_of(demo.rollout)
    assert row is not None
    selection = page.table.selectionModel()
    assert selection is not None
    selection.select(page.model.index(row, 0), selection.SelectionFlag.Select
                     | selection.SelectionFlag.Rows)
    assert set(page.selected_episode_ids()) == {demo.failed, demo.rollout}
    key(qtbot, page, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    compare = page.compare_view
    assert page.tabs.currentWidget() is compare
    assert set(compare.episode_ids()) == {demo.failed, demo.rollout}
    left, right = compare.players
    left.next()
    assert right.index == 1  # stepping together
    compare.linked.setChecked(False)
    left.previous()
    assert (left.index, right.index) == (0, 1)
    window.grab().save(str(artifacts / "app-compare.png"))
    # one episode: compared with another of its task
    page.compare_view.compare(demo.human)
    assert page.compare_view.episode_ids() == (demo.human, demo.imported)


def test_exports_run_in_the_background(qtbot: Any, window: MainWindow, demo: DemoWorkspace,
                                       tmp_path: Path) -> None:
    page = page_of(window)
    ids = [demo.rollout, demo.human]
    results: list[ExportResult] = []
    page.export_finished.connect(results.append)
    worker = page.export_html(tmp_path / "html", ids)
    assert window.progress.cancel_button.isVisibleTo(window)
    wait_for_worker(qtbot, worker)
    worker = page.export_osworld(tmp_path / "osworld", ids)
    wait_for_worker(qtbot, worker)
    worker = page.export_jsonl(tmp_path / "sft.jsonl", ids)
    wait_for_worker(qtbot, worker)
    assert [r.kind for r in results] == ["html", "osworld", "jsonl"]
    assert all(p.exists() for r in results for p in r.paths)
    assert len(list((tmp_path / "html").glob("*.html"))) == 2
    samples = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert {s["episode_id"] for s in samples} == set(ids)
    qtbot.waitUntil(lambda: not window.progress.cancel_button.isVisibleTo(window))


def test_background_work_reports_progress_and_can_be_cancelled(qtbot: Any,
                                                               window: MainWindow) -> None:
    go, started = threading.Event(), threading.Event()
    progress: list[tuple[int, int]] = []
    partial: list[Any] = []

    def work(state: TaskState) -> None:
        go.wait(10)  # until the test has connected to the worker's signals
        state.set_progress(1, 100)
        state.partial("first file")
        started.set()
        while True:
            state.check()
            threading.Event().wait(0.01)

    cancelled: list[bool] = []
    worker = window.workers.submit("A long export", work, on_partial=partial.append,
                                   on_cancelled=lambda: cancelled.append(True))
    worker.signals.progress.connect(lambda d, t: progress.append((d, t)))
    go.set()
    qtbot.waitUntil(started.is_set)
    qtbot.waitUntil(lambda: window.progress.bar.value() == 1)
    assert window.progress.title.text() == "A long export"
    with qtbot.waitSignal(worker.signals.ended, timeout=5000):
        window.progress.cancel_button.click()
    assert cancelled == [True] and partial == ["first file"] and progress == [(1, 100)]
    assert window.workers.active == []


def test_typing_in_fields_does_not_trigger_review_keys(qtbot: Any, window: MainWindow,
                                                       demo: DemoWorkspace) -> None:
    page = open_in_table(qtbot, window, demo.rollout)
    page.review.step_note.setFocus(Qt.FocusReason.MouseFocusReason)  # as a click does
    qtbot.keyClicks(page.review.step_note, "1 2 3 c")
    qtbot.keyClick(page.review.step_note, Qt.Key.Key_Return)
    page.review.score.setFocus(Qt.FocusReason.MouseFocusReason)
    line_edit = page.review.score.lineEdit()
    assert line_edit is not None
    line_edit.selectAll()
    qtbot.keyClicks(line_edit, "0.3")
    qtbot.keyClick(line_edit, Qt.Key.Key_Return)
    page.filter_bar.search.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.keyClicks(page.filter_bar.search, "2 ")
    current = demo.store.annotations.current(demo.rollout)
    assert current[0].note == "1 2 3 c" and current[0].label is None
    assert current[None].score == 0.3 and current[None].label is None
    assert page.player.index == 0 and not page.review.pick_button.isChecked()


def test_pool_refusal_leaves_the_command_unchecked(qtbot: Any, window: MainWindow,
                                                   demo: DemoWorkspace) -> None:
    page = open_in_table(qtbot, window, demo.error)
    window.commands["toggle_pool"].trigger()
    assert demo.store.pool.get(demo.error) is None
    assert not window.commands["toggle_pool"].isChecked()
    assert "only finished" in page.review.message.text()
