"""Review with the keyboard only: the review keys work wherever the focus is except in a
text field being edited; Esc leaves a field, Enter saves it and gives the keys back to the
screenshot; a click on the screenshot takes the focus; one highlighted row, the open
episode's; a corrected point is set with C, the arrow keys and Enter."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PyQt6.QtCore import Qt
from PyQt6.QtGui import QColor
from PyQt6.QtWidgets import QApplication, QWidget

from agents.trajectory import Episode, Step
from tests.conftest_app import open_window, screen_png, settings_file_fixture  # noqa: F401
from trainer.store import Store
from vm.actions import Click
from workbench.app.pages.trajectories import TrajectoriesPage
from workbench.services.action_overlay import corrected_point

EPISODES = ("k1", "k2", "k3", "k4")  # newest first: the table's order
STEPS = 5  # 4 x 5 = a 20-step review
Mod = Qt.KeyboardModifier


def build(path: Path) -> None:
    now = time.time()
    with Store.open(path, create=True) as store:
        for n, episode_id in enumerate(EPISODES):
            steps = []
            for i in range(STEPS):
                step = Step(i, response=f"Action: click(start_box='({100 + 20 * i},120)')",
                            actions=[Click(100 + 20 * i, 120)])
                step.frame = store.frames.put(screen_png(10 * n + i))
                steps.append(step)
            store.episodes.save(Episode(
                id=episode_id, task_id=f"task-{n}", instruction=f"do task {n}",
                environment="sandbox", source="rollout", status="done", score=1.0,
                created_at=now - n, finished_at=now - n, steps=steps))


def press(qtbot: Any, key: Qt.Key, modifier: Qt.KeyboardModifier = Mod.NoModifier) -> None:
    """A key pressed as a person presses it: into whatever holds the focus now."""
    focus = QApplication.focusWidget()
    assert focus is not None
    qtbot.keyClick(focus, key, modifier)


def highlighted_rows(page: TrajectoriesPage) -> list[int]:
    """The table's rows drawn in the highlight colour in the window's backing store."""
    view = page.table
    viewport = view.viewport()
    assert viewport is not None
    window = view.window()
    handle = window.windowHandle() if window is not None else None
    screen = handle.screen() if handle is not None else None
    assert handle is not None and screen is not None
    image = screen.grabWindow(handle.winId()).toImage()
    highlight = view.palette().highlight().color().name()
    rows = []
    for row in range(page.model.rowCount()):
        rect = view.visualRect(page.model.index(row, 0))  # the task: first in view
        point = viewport.mapTo(view.window(), rect.topLeft())
        if QColor(image.pixel(point.x() + 3, point.y() + 2)).name() == highlight:
            rows.append(row)
    return rows


def review_window(qtbot: Any, settings_file: Path, tmp_path: Path) -> TrajectoriesPage:
    """The app at 1280x720, active, on a workspace of four 5-step episodes."""
    build(tmp_path / "ws")
    window = open_window(qtbot, settings_file, tmp_path / "ws")
    qtbot.waitExposed(window)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    page = window.trajectories
    assert page is not None and page.current_episode_id() == "k1"
    return page


def test_a_20_step_review_with_the_keyboard_only(qtbot: Any, settings_file: Path,
                                                 tmp_path: Path) -> None:
    page = review_window(qtbot, settings_file, tmp_path)
    viewer = page.player.before
    # a note behind the episode list never takes the keys: the screenshot does
    assert page.drawer_open()
    page.review.step_note.setFocus()
    qtbot.waitUntil(viewer.hasFocus)
    press(qtbot, Qt.Key.Key_L)  # the list closed, the note in view
    # focus the app moves there (as opening from the Success pool once did) is refused
    page.review.step_note.setFocus()
    qtbot.waitUntil(viewer.hasFocus)
    page.review.step_note.setFocus(Qt.FocusReason.MouseFocusReason)  # a click opens it
    qtbot.waitUntil(page.review.step_note.hasFocus)
    qtbot.keyClicks(page.review.step_note, "u")  # in a field the keys type...
    press(qtbot, Qt.Key.Key_Escape)  # ...Esc drops the edit and leaves the field
    assert viewer.hasFocus() and page.review.step_note.text() == ""
    press(qtbot, Qt.Key.Key_L)  # the list again: Up/Down there, the review keys too

    labels = {Qt.Key.Key_1: "correct", Qt.Key.Key_2: "wrong", Qt.Key.Key_3: "critical"}
    keys = list(labels)
    expected: dict[str, dict[int, str]] = {}
    for n, episode_id in enumerate(EPISODES):
        assert page.current_episode_id() == episode_id and page.player.index == 0
        expected[episode_id] = {}
        for i in range(STEPS):
            key = keys[(n + i) % 3]
            press(qtbot, key)
            expected[episode_id][i] = labels[key]
            if (n, i) == (0, 1):  # correct the click: C, three left, two up, Enter
                press(qtbot, Qt.Key.Key_C)
                for arrow in (Qt.Key.Key_Left,) * 3 + (Qt.Key.Key_Up,) * 2:
                    press(qtbot, arrow)
                press(qtbot, Qt.Key.Key_Up, Mod.ShiftModifier)  # Shift: one pixel
                press(qtbot, Qt.Key.Key_Return)
                assert page.player.index == 1  # the arrows moved the point, not the step
            if (n, i) == (1, 2):  # a note: N, type, Enter saves and gives the keys back
                press(qtbot, Qt.Key.Key_N)
                assert QApplication.focusWidget() is page.note_box.field
                qtbot.keyClicks(QApplication.focusWidget(), "looks off")
                press(qtbot, Qt.Key.Key_Return)
                assert viewer.hasFocus() and not page.note_box.isVisible()
            if i < STEPS - 1:
                press(qtbot, Qt.Key.Key_Right)
                assert page.player.index == i + 1
        # the verdict (one key, or the old chord), then the next unreviewed episode
        press(qtbot, Qt.Key.Key_A if n < 3 else Qt.Key.Key_R,
              Mod.ControlModifier | Mod.ShiftModifier if n % 2 else Mod.NoModifier)
        if n < 3:
            # one highlighted row: the open episode's
            row = page.model.row_of(EPISODES[n + 1])
            assert page.selected_episode_ids() == [EPISODES[n + 1]]
            qtbot.waitUntil(lambda r=row: highlighted_rows(page) == [r])

    reviewer = page.reviewer
    for episode_id in EPISODES:
        steps = reviewer.steps(episode_id)
        assert {i: r.label for i, r in steps.items()} == expected[episode_id]
        assert reviewer.episode(episode_id).verdict == (
            "reject" if episode_id == "k4" else "accept")
    assert corrected_point(reviewer.steps("k1")[1].corrected_actions) == (90, 99)
    assert reviewer.steps("k2")[2].note == "looks off"
    assert all(r.note in ("", "looks off") for e in EPISODES
               for r in reviewer.steps(e).values())  # no key typed into a note
    assert "4 of 4 reviewed" in page.filter_bar.count.text()


def test_review_keys_work_wherever_the_focus_is(qtbot: Any, settings_file: Path,
                                                tmp_path: Path) -> None:
    page = review_window(qtbot, settings_file, tmp_path)
    places: list[QWidget] = [page.table, page.player.step_list, page.player.slider,
                             page.player.speed, page.player.thought, page.player.actions_text,
                             page.review.label_buttons["correct"], page.review.pool]
    for place in places:
        place.setFocus()
        qtbot.waitUntil(place.hasFocus)
        before = page.player.index
        press(qtbot, Qt.Key.Key_Right)
        assert page.player.index == before + 1, type(place).__name__
        press(qtbot, Qt.Key.Key_Left)
        assert page.player.index == before, type(place).__name__
    # a note being typed keeps its keys; a click on the screenshot takes them back
    press(qtbot, Qt.Key.Key_L)  # the list closed: the review column in view
    page.review.episode_note.setFocus(Qt.FocusReason.MouseFocusReason)  # clicked
    qtbot.waitUntil(page.review.episode_note.hasFocus)
    qtbot.keyClicks(page.review.episode_note, "fine")
    press(qtbot, Qt.Key.Key_Return)  # saved, and the keys go back to the screenshot
    assert page.player.before.hasFocus()
    assert page.reviewer.episode("k1").note == "fine"
    press(qtbot, Qt.Key.Key_L)  # the list again, with its search box
    page.filter_bar.search.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.waitUntil(page.filter_bar.search.hasFocus)
    press(qtbot, Qt.Key.Key_Right)  # the search box's cursor moves, not the step
    assert page.player.index == 0
    qtbot.mouseClick(page.player.before, Qt.MouseButton.LeftButton)
    assert page.player.before.hasFocus()
    press(qtbot, Qt.Key.Key_U)
    assert page.current_episode_id() == "k2"
    assert page.filter_bar.search.text() == ""
