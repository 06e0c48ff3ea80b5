"""Notes in view (issue 47, item 3), at 1280x720 on the demo workspace: N and Shift+N open
a note box over the screenshot, in view with the episode list open and in focus mode;
Enter saves and Esc drops the edit, both giving the keys back to the screenshot; a
dialog cancelled while a note is typed (Ctrl+Q, then Cancel) saves what was typed and
hands the keys to the screenshot, never to a field: the next key (L) is not typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QApplication, QWidget

from tests.cancelled_dialogs import ask_before_quitting, cancel_a_dialog
from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    open_active_window,
    open_window,
    settings_file_fixture,
)
from workbench.app.main_window import MainWindow
from workbench.app.pages.trajectories import TrajectoriesPage
from workbench.app.text_fields import in_view

Mod = Qt.KeyboardModifier


def press(qtbot: Any, key: Qt.Key, modifier: Qt.KeyboardModifier = Mod.NoModifier) -> None:
    """A key as a person presses it: into whatever has the focus."""
    focus = QApplication.focusWidget()
    assert focus is not None
    qtbot.keyClick(focus, key, modifier)


def type_text(qtbot: Any, text: str) -> None:
    focus = QApplication.focusWidget()
    assert focus is not None
    qtbot.keyClicks(focus, text)


def reviewing(qtbot: Any, settings_file: Path, demo: DemoWorkspace
              ) -> tuple[MainWindow, TrajectoriesPage]:
    """The app at 1280x720, active, on the rollout's first step, the list open."""
    window = open_active_window(qtbot, settings_file, demo.path, (1280, 720))
    page = window.trajectories
    assert page is not None
    page.open_episode(demo.rollout)
    page.set_drawer_open(True)
    return window, page


def over(box: QWidget, view: QWidget) -> bool:
    """Whether `box` lies inside `view`'s rectangle (the screenshot)."""
    corner = box.mapTo(view, box.rect().topLeft())
    return view.rect().contains(corner) and view.rect().contains(
        corner.x() + box.width() - 1, corner.y() + box.height() - 1)


def test_the_note_box_is_in_view_and_enter_and_esc_give_the_keys_back(
        qtbot: Any, settings_file: Path, demo: DemoWorkspace, artifacts: Path) -> None:
    window, page = reviewing(qtbot, settings_file, demo)
    viewer, box = page.player.before, page.note_box
    press(qtbot, Qt.Key.Key_Right)  # the second step
    # a note field behind the episode list never takes the keys
    page.review.step_note.setFocus()
    qtbot.waitUntil(viewer.hasFocus)

    press(qtbot, Qt.Key.Key_N)  # with the episode list open: the box, in view
    assert box.isVisible() and over(box, viewer)
    assert in_view(box.field) and in_view(box.title) and in_view(box.hint)  # none covered
    assert QApplication.focusWidget() is box.field and "Step 2" in box.title.text()
    type_text(qtbot, "the drag should end lower")
    window.grab().save(str(artifacts / "episode-1280x720-note-box.png"))
    press(qtbot, Qt.Key.Key_Return)  # saved, the box closed, the keys review again
    assert not box.isVisible() and viewer.hasFocus()
    assert demo.store.annotations.current(demo.rollout)[1].note == "the drag should end lower"
    assert page.review.step_note.text() == "the drag should end lower"
    press(qtbot, Qt.Key.Key_Right)
    assert page.player.index == 2  # the keys step again

    press(qtbot, Qt.Key.Key_N)
    type_text(qtbot, "never kept")
    press(qtbot, Qt.Key.Key_Escape)  # the edit dropped
    assert not box.isVisible() and viewer.hasFocus()
    assert 2 not in demo.store.annotations.current(demo.rollout)

    window.commands["focus_mode"].trigger()  # M: the screenshot alone, the box still shows
    press(qtbot, Qt.Key.Key_N, Mod.ShiftModifier)  # the episode's note
    assert box.isVisible() and in_view(box.field) and "Episode" in box.title.text()
    type_text(qtbot, "clicked the right cells")
    press(qtbot, Qt.Key.Key_Return)
    assert viewer.hasFocus()
    assert page.reviewer.episode(demo.rollout).note == "clicked the right cells"
    window.commands["focus_mode"].trigger()


def test_a_cancelled_dialog_never_gives_the_keys_to_a_field(
        qtbot: Any, settings_file: Path, demo: DemoWorkspace, monkeypatch: Any) -> None:
    window, page = reviewing(qtbot, settings_file, demo)
    question = ask_before_quitting(monkeypatch, qtbot, window)
    viewer = page.player.before
    drawer_was = page.drawer_open()

    # the steps: N with the list open, type, Ctrl+Q, Cancel, then L
    press(qtbot, Qt.Key.Key_N)
    type_text(qtbot, "quit note")
    press(qtbot, Qt.Key.Key_Q, Mod.ControlModifier)
    assert question.asked == 1 and window.isVisible()  # cancelled: the app stays
    assert viewer.hasFocus() and not page.note_box.isVisible()
    assert demo.store.annotations.current(demo.rollout)[0].note == "quit note"  # kept
    press(qtbot, Qt.Key.Key_L)  # meant for the app: the list closes
    assert page.drawer_open() != drawer_was
    assert demo.store.annotations.current(demo.rollout)[0].note == "quit note"
    assert page.review.step_note.text() == "quit note"

    # a note typed in the review column (the list closed: in view), then a dialog
    page.set_drawer_open(False)
    field = page.review.episode_note
    qtbot.mouseClick(field, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(field.hasFocus)
    type_text(qtbot, "typed here")
    cancel_a_dialog(qtbot, window, "Export")
    assert viewer.hasFocus()  # the window is back: the keys are the screenshot's
    press(qtbot, Qt.Key.Key_L)
    assert page.drawer_open() and field.text() == "typed here"
    assert page.reviewer.episode(demo.rollout).note == "typed here"  # saved as it left
    question.asking = False
