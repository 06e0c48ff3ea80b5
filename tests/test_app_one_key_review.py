"""One-key review (issue 47, item 2), at 1280x720 on the demo workspace: A accepts, R
rejects and S skips, each moving on to the next unreviewed episode (a setting, on by
default); the old Ctrl+Shift chords still work; the keys can be changed and a key already
in use is refused; the verdict shows whole in the header and in the list; `?`, F1 and
Help list every key, read from the window's QActions and QShortcuts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from PyQt6.QtCore import Qt
from PyQt6.QtGui import QAction, QKeySequence, QShortcut
from PyQt6.QtWidgets import QApplication, QMenu

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    open_active_window,
    open_window,
    settings_file_fixture,
)
from workbench.app.main_window import MainWindow
from workbench.app.models.episode_table import COLUMNS
from workbench.app.pages.trajectories import TrajectoriesPage
from workbench.app.settings import AppSettings
from workbench.app.text_fields import in_view
from workbench.app.widgets.review_keys_dialog import ReviewKeysDialog
from workbench.app.widgets.shortcuts_dialog import ShortcutsDialog
from workbench.services.review import Reviewer

Mod = Qt.KeyboardModifier
Text = QKeySequence.SequenceFormat.NativeText


def press(qtbot: Any, key: Qt.Key | str, modifier: Qt.KeyboardModifier = Mod.NoModifier
          ) -> None:
    focus = QApplication.focusWidget()
    assert focus is not None
    qtbot.keyClick(focus, key, modifier)


def reviewing(qtbot: Any, settings_file: Path, demo: DemoWorkspace
              ) -> tuple[MainWindow, TrajectoriesPage]:
    window = open_active_window(qtbot, settings_file, demo.path, (1280, 720))
    page = window.trajectories
    assert page is not None
    page.set_drawer_open(False)
    return window, page


def verdict(demo: DemoWorkspace, episode_id: str) -> str | None:
    """The episode's verdict as stored (a withdrawn one is None)."""
    return Reviewer(demo.store).episode(episode_id).verdict


def test_single_keys_give_verdicts_and_move_on(qtbot: Any, settings_file: Path,
                                               demo: DemoWorkspace, artifacts: Path) -> None:
    window, page = reviewing(qtbot, settings_file, demo)
    order = [page.model.episode_id(r) for r in range(page.model.rowCount())]
    page.open_episode(order[0])
    assert page.player.verdict.text() == "unreviewed"

    press(qtbot, Qt.Key.Key_A)  # accept, and on to the next without a verdict
    assert verdict(demo, order[0]) == "accept" and page.current_episode_id() == order[1]
    press(qtbot, Qt.Key.Key_R)
    assert verdict(demo, order[1]) == "reject" and page.current_episode_id() == order[2]
    press(qtbot, Qt.Key.Key_S)  # skipped: no verdict
    assert verdict(demo, order[2]) is None and page.current_episode_id() == order[3]
    press(qtbot, Qt.Key.Key_A, Mod.ControlModifier | Mod.ShiftModifier)  # the old chord
    assert verdict(demo, order[3]) == "accept" and page.current_episode_id() == order[4]
    press(qtbot, Qt.Key.Key_R, Mod.ControlModifier | Mod.ShiftModifier)
    assert verdict(demo, order[4]) == "reject"
    assert page.current_episode_id() == order[2]  # the one skipped, the last without
    assert "4 of 5 reviewed" in page.filter_bar.count.text()

    # the verdict in the header, whole, and in the list, whole and in view
    page.open_episode(order[1])
    header = page.player.verdict
    assert header.isVisible() and header.text() == "✗ rejected"
    assert header.width() >= header.fontMetrics().horizontalAdvance(header.text())
    press(qtbot, Qt.Key.Key_L)
    table = page.table
    column = [c.title for c in COLUMNS].index("Review")
    row = page.model.row_of(order[1])
    assert row is not None
    text = page.model.index(row, column).data()
    assert text.startswith("✗ rejected")
    needed = table.fontMetrics().horizontalAdvance(text) + 8  # the cell's margins
    assert table.columnWidth(column) >= needed, (text, table.columnWidth(column))
    cell = table.visualRect(page.model.index(row, column))
    viewport = table.viewport()
    assert viewport is not None and viewport.rect().contains(cell)
    assert page.model.index(row, column).data(Qt.ItemDataRole.ToolTipRole) == text
    window.grab().save(str(artifacts / "episode-1280x720-verdicts.png"))

    # the same key again takes the verdict back and stays
    assert QApplication.focusWidget() is table  # L: Up/Down browse the list
    press(qtbot, Qt.Key.Key_Escape)  # the list closes, the keys review
    assert not page.drawer_open() and page.player.before.hasFocus()
    page.open_episode(order[1])
    press(qtbot, Qt.Key.Key_R)
    assert verdict(demo, order[1]) is None and page.current_episode_id() == order[1]
    assert header.text() == "unreviewed"

    # moving on is a setting
    window.settings.advance_after_verdict = False
    window.close()
    again = open_window(qtbot, settings_file, demo.path, (1280, 720))
    again.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is again)
    page = again.trajectories
    assert page is not None and not page.advance_after_verdict
    page.open_episode(order[2])
    page.player.before.setFocus()
    press(qtbot, Qt.Key.Key_A)
    assert verdict(demo, order[2]) == "accept" and page.current_episode_id() == order[2]


def test_review_keys_are_configurable_and_never_clash(
        qtbot: Any, settings_file: Path, demo: DemoWorkspace) -> None:
    window, page = reviewing(qtbot, settings_file, demo)
    # no key bound twice among the app's commands
    keys = Counter(key.toString() for action in window.commands.actions.values()
                   for key in action.shortcuts())
    assert [k for k, n in keys.items() if n > 1] == []

    dialog = ReviewKeysDialog(window.commands, window.settings, window)
    dialog.edits["accept_episode"].setKeySequence(QKeySequence("L"))  # the list's key
    dialog.accept()
    assert dialog.result() == 0 and "Episode List" in dialog.problem.text()
    assert window.commands["accept_episode"].shortcuts()[0] == QKeySequence("A")
    dialog.edits["accept_episode"].setKeySequence(QKeySequence("Y"))
    dialog.edits["skip_episode"].setKeySequence(QKeySequence("K"))
    dialog.advance.setChecked(False)
    dialog.accept()
    assert dialog.result() == 1
    assert [k.toString() for k in window.commands["accept_episode"].shortcuts()] == [
        "Y", "Ctrl+Shift+A"]  # the chord kept
    assert AppSettings.at(settings_file).review_key("accept_episode") == "Y"
    window.settings.sync()
    page.advance_after_verdict = window.settings.advance_after_verdict
    first = page.current_episode_id()
    assert first is not None
    page.player.before.setFocus()
    press(qtbot, Qt.Key.Key_Y)
    assert verdict(demo, first) == "accept" and page.current_episode_id() == first
    press(qtbot, Qt.Key.Key_A)  # no longer a review key
    assert verdict(demo, first) == "accept"

    window.close()  # the next launch binds the chosen keys
    again = open_window(qtbot, settings_file, demo.path, (1280, 720))
    assert again.commands["skip_episode"].shortcuts()[0] == QKeySequence("K")
    assert not again.trajectories.advance_after_verdict


def test_question_mark_f1_and_help_list_every_key(qtbot: Any, settings_file: Path,
                                                  demo: DemoWorkspace, artifacts: Path
                                                  ) -> None:
    window, page = reviewing(qtbot, settings_file, demo)
    menus = [o.title() for o in window.commands["show_shortcuts"].associatedObjects()
             if isinstance(o, QMenu)]
    assert menus == ["&Help"]

    for key in ("?", Qt.Key.Key_F1):
        page.player.before.setFocus()
        press(qtbot, key)
        qtbot.waitUntil(lambda: isinstance(QApplication.activeWindow(), ShortcutsDialog))
        dialog = QApplication.activeWindow()
        assert isinstance(dialog, ShortcutsDialog)
        # every key bound under the window, as bound now
        bound = [(a.text().replace("&", "").rstrip("…"),
                  ", ".join(k.toString(Text) for k in a.shortcuts()))
                 for a in window.findChildren(QAction) if a.shortcuts()]
        bound += [("", ", ".join(k.toString(Text) for k in QShortcut.keys(s)))
                  for s in window.findChildren(QShortcut) if not s.key().isEmpty()]
        shown = [(row.command, row.keys) for row in dialog.rows]
        for command, keys in bound:
            assert any(keys == k and (not command or command == c) for c, k in shown), \
                (command, keys)
        assert dialog.keys_of("Accept Episode") == "A, Ctrl+Shift+A"
        assert dialog.keys_of("Skip Episode") == "S"
        assert dialog.keys_of("Keyboard Shortcuts") == "?, F1"
        assert in_view(dialog.table)
        if key == "?":
            dialog.grab().save(str(artifacts / "app-keyboard-shortcuts.png"))
        qtbot.keyClick(dialog, Qt.Key.Key_Escape)
        qtbot.waitUntil(lambda d=dialog: not d.isVisible())
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.commands["show_shortcuts"].trigger()  # the Help menu's entry
    qtbot.waitUntil(lambda: isinstance(QApplication.activeWindow(), ShortcutsDialog))
    dialog = QApplication.activeWindow()
    assert isinstance(dialog, ShortcutsDialog)
    dialog.reject()
