"""Dialogs that a person opens and cancels, driven without timers: a real message box is
shown over the main window and made the active window, then closed with Cancel, and the
main window is active again (as a window manager makes it). The window hands its focus
back as it does after any dialog, which is where a key can land in a field nobody sees.

`ask_before_quitting` makes Ctrl+Q ask a question (as a running trainer does) that is
cancelled; `cancel_file_dialogs` turns the file dialogs (exports) into cancelled ones."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QApplication, QFileDialog, QMessageBox, QWidget

Button = QMessageBox.StandardButton


def cancel_a_dialog(qtbot: Any, window: QWidget, title: str = "A question") -> None:
    """Show a modal question over `window`, make it active, press its Cancel button, and
    wait until `window` is the active window again."""
    box = QMessageBox(QMessageBox.Icon.Question, title, f"{title}?",
                      Button.Yes | Button.Cancel, window)
    box.setWindowModality(Qt.WindowModality.ApplicationModal)
    box.show()
    box.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is box)
    cancel = box.button(Button.Cancel)
    assert cancel is not None
    cancel.click()
    qtbot.waitUntil(lambda: not box.isVisible())
    window.activateWindow()  # the window manager gives the activation back
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    box.deleteLater()


class QuitQuestion:
    """What `confirm_close` of a page with work in progress does: ask; here the answer is
    Cancel while `asking`, so Ctrl+Q leaves the app open."""

    def __init__(self, qtbot: Any, window: QWidget) -> None:
        self.qtbot = qtbot
        self.window = window
        self.asking = True
        self.asked = 0
        self.trainer = SimpleNamespace(run_id=None)  # no run of its own: no sandboxes kept

    def confirm_close(self) -> bool:
        if not self.asking:
            return True
        self.asked += 1
        cancel_a_dialog(self.qtbot, self.window, "A training run is in progress. Stop it "
                        "and close")
        return False

    def shutdown(self) -> None:
        """The workspace closes: nothing was running."""


def ask_before_quitting(monkeypatch: Any, qtbot: Any, window: Any) -> QuitQuestion:
    """Ctrl+Q asks, as it does while a trainer runs, and the person cancels."""
    question = QuitQuestion(qtbot, window)
    monkeypatch.setattr(window, "_built_pages", lambda: (question, None, None, None))
    return question


def cancel_file_dialogs(monkeypatch: Any, qtbot: Any, window: QWidget) -> list[str]:
    """Every file dialog is shown and cancelled; the titles asked, in order."""
    asked: list[str] = []

    def folder(_parent: Any, title: str = "", *_args: Any, **_kwargs: Any) -> str:
        asked.append(title)
        cancel_a_dialog(qtbot, window, title or "Choose a folder")
        return ""

    def save_file(_parent: Any, title: str = "", *_args: Any, **_kwargs: Any
                  ) -> tuple[str, str]:
        asked.append(title)
        cancel_a_dialog(qtbot, window, title or "Save as")
        return "", ""

    monkeypatch.setattr(QFileDialog, "getExistingDirectory", folder)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", save_file)
    return asked
