"""Text fields that give the keyboard back: in a field the keys type (the review keys
wait), Esc leaves the field with its edit dropped, Enter saves (the field's own signal)
and leaves it. Either way the focus goes to the screenshot, where the keys review.

A field takes the keys only when a person puts them there (a click, Tab, a command such
as N) and sees it: a field the focus would reach while it is out of view (behind the
episode list, scrolled away), one the window hands the focus back to when it is active
again (after a dialog, cancelled or not) and one the app or Qt moves the focus to (a tab
shown again) give them to the screenshot instead, so a key meant for the app is never
typed into a note."""

from __future__ import annotations

from collections.abc import Callable

from PyQt6.QtCore import QEvent, QObject, Qt
from PyQt6.QtGui import QFocusEvent, QKeyEvent
from PyQt6.QtWidgets import QAbstractSpinBox, QComboBox, QLineEdit, QScrollArea, QWidget

# Focus that arrives without a person choosing the field: the window active again, or a
# setFocus by the app or by Qt (a page of a tab widget shown again).
HANDED_BACK = (Qt.FocusReason.ActiveWindowFocusReason, Qt.FocusReason.OtherFocusReason)


def in_view(widget: QWidget) -> bool:
    """Whether a person sees `widget`: shown, and its middle not covered or scrolled away
    (the widget the window finds there is it or a part of it)."""
    if not widget.isVisible() or widget.width() <= 0 or widget.height() <= 0:
        return False
    window = widget.window()
    if window is None:
        return False
    hit = window.childAt(widget.mapTo(window, widget.rect().center()))
    return hit is not None and (hit is widget or widget.isAncestorOf(hit))


def reveal(widget: QWidget) -> None:
    """Scroll every scroll area holding `widget` so that it is in view."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea) and parent.widget() is not None \
                and parent.widget().isAncestorOf(widget):  # type: ignore[union-attr]
            parent.ensureWidgetVisible(widget)
        parent = parent.parentWidget()


class TextFieldKeys(QObject):
    """Watches text fields; `viewer()` names the widget the focus goes back to."""

    def __init__(self, viewer: Callable[[], QWidget], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.viewer = viewer
        self._reverts: dict[QObject, Callable[[], None]] = {}

    def watch(self, field: QLineEdit | QAbstractSpinBox | QComboBox,
              revert: Callable[[], None] | None = None) -> None:
        """Esc in `field` calls `revert` (shows the saved text again) and leaves it;
        Enter leaves it once the field has saved (its editingFinished comes first). An
        editable combo box holds the focus for its line: both are watched."""
        field.installEventFilter(self)
        if revert is not None:
            self._reverts[field] = revert
        if isinstance(field, QComboBox):
            line = field.lineEdit()
            if line is not None:
                self.watch(line)
        elif isinstance(field, QLineEdit):
            field.returnPressed.connect(self.leave)
        else:
            field.editingFinished.connect(lambda f=field: self.leave() if f.hasFocus()
                                          else None)

    def leave(self) -> None:
        self.viewer().setFocus(Qt.FocusReason.ShortcutFocusReason)

    def eventFilter(self, watched: QObject | None, event: QEvent | None) -> bool:
        if event is not None and event.type() == QEvent.Type.FocusIn \
                and isinstance(event, QFocusEvent) and isinstance(watched, QWidget):
            if event.reason() in HANDED_BACK:
                self.leave()  # e.g. the window is back after a dialog: keys to the picture
                return True
            reveal(watched)
            if not in_view(watched):
                self.leave()
                return True
            return False
        if event is not None and event.type() == QEvent.Type.KeyPress \
                and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Escape:
            revert = self._reverts.get(watched) if watched is not None else None
            if revert is not None:
                revert()
            self.leave()
            return True
        return False
