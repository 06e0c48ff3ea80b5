"""Text fields that give the keyboard back: in a field the keys type (the review keys
wait), Esc leaves the field with its edit dropped, Enter saves (the field's own signal)
and leaves it. Either way the focus goes to the screenshot, where the keys review."""

from __future__ import annotations

from collections.abc import Callable

from PyQt6.QtCore import QEvent, QObject, Qt
from PyQt6.QtGui import QKeyEvent
from PyQt6.QtWidgets import QAbstractSpinBox, QLineEdit, QWidget


class TextFieldKeys(QObject):
    """Watches text fields; `viewer()` names the widget the focus goes back to."""

    def __init__(self, viewer: Callable[[], QWidget], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.viewer = viewer
        self._reverts: dict[QObject, Callable[[], None]] = {}

    def watch(self, field: QLineEdit | QAbstractSpinBox,
              revert: Callable[[], None] | None = None) -> None:
        """Esc in `field` calls `revert` (shows the saved text again) and leaves it;
        Enter leaves it once the field has saved (its editingFinished comes first)."""
        field.installEventFilter(self)
        if revert is not None:
            self._reverts[field] = revert
        if isinstance(field, QLineEdit):
            field.returnPressed.connect(self.leave)
        else:
            field.editingFinished.connect(lambda f=field: self.leave() if f.hasFocus()
                                          else None)

    def leave(self) -> None:
        self.viewer().setFocus(Qt.FocusReason.ShortcutFocusReason)

    def eventFilter(self, watched: QObject | None, event: QEvent | None) -> bool:
        if event is not None and event.type() == QEvent.Type.KeyPress \
                and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Escape:
            revert = self._reverts.get(watched) if watched is not None else None
            if revert is not None:
                revert()
            self.leave()
            return True
        return False
