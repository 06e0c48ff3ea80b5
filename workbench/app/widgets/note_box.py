"""A note typed where the person is looking: a box over the foot of the screenshot, opened
by N (the step's note) or Shift+N (the episode's). Enter saves and Esc drops the edit;
either way the box closes and the keys go back to the screenshot. Leaving it any other
way (a click elsewhere, a dialog, another window) saves what was typed and closes it, so
no key ever reaches a note nobody sees."""

from __future__ import annotations

from collections.abc import Callable

from PyQt6.QtCore import QEvent, QObject, QRect, Qt, pyqtSignal
from PyQt6.QtGui import QFocusEvent, QKeyEvent
from PyQt6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QWidget

MARGIN = 12  # pixels between the box and the screenshot's edges
LEAVE_KEYS = (Qt.Key.Key_Escape, Qt.Key.Key_Return, Qt.Key.Key_Enter)
Reason = Qt.FocusReason
# how the box's field may get the keys: opened (N), a click, Tab, back from its own menu
TAKEN = (Reason.ShortcutFocusReason, Reason.MouseFocusReason, Reason.TabFocusReason,
         Reason.BacktabFocusReason, Reason.PopupFocusReason)


class NoteBox(QFrame):
    saved = pyqtSignal(str, str)  # which note ("step" or "episode"), its text

    def __init__(self, viewer: QWidget,
                 covered: Callable[[], QRect | None] | None = None) -> None:
        super().__init__(viewer)
        self.viewer = viewer  # the screenshot: the box lies over it, the keys go back to it
        # the part of the screenshot something else lies over (the episode list), in the
        # screenshot's coordinates: the box stays left of it
        self.covered = covered
        self.which = "step"
        self.setObjectName("noteBox")
        self.setStyleSheet("#noteBox { background: rgba(32, 33, 36, 235); border: 2px solid "
                           "#ffd54f; border-radius: 5px; } QLabel { color: #e8eaed; }")
        self.title = QLabel("")
        self.title.setStyleSheet("font-weight: bold; color: #ffd54f")
        self.field = QLineEdit()
        self.field.setClearButtonEnabled(True)
        self.hint = QLabel("Enter saves · Esc cancels")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 5, 8, 5)
        layout.addWidget(self.title)
        layout.addWidget(self.field, 1)
        layout.addWidget(self.hint)
        self.field.returnPressed.connect(self.commit)
        self.field.installEventFilter(self)
        viewer.installEventFilter(self)
        self._closing = False
        self.hide()

    def is_open(self) -> bool:
        return self.isVisible()

    def open(self, which: str, title: str, text: str) -> None:
        """Edit `text`, the note of the step ("step") or of the episode ("episode")."""
        self.which = which
        self.title.setText(title)
        self.field.setText(text)
        self.field.selectAll()
        self.place()
        self.show()
        self.raise_()
        self.field.setFocus(Reason.ShortcutFocusReason)

    def place(self) -> None:
        right = self.viewer.width()
        covered = self.covered() if self.covered is not None else None
        if covered is not None and covered.intersects(self.viewer.rect()):
            right = max(covered.left(), min(right, 200 + 2 * MARGIN))
        width = max(right - 2 * MARGIN, min(right, 200))
        height = self.sizeHint().height()
        self.setGeometry((right - width) // 2,
                         max(self.viewer.height() - height - MARGIN, 0), width, height)

    def commit(self) -> None:
        """Save what was typed, close, and give the keys to the screenshot."""
        if self.is_open() and not self._closing:
            text = self.field.text().strip()
            self._close(give_keys_back=True)
            self.saved.emit(self.which, text)

    def cancel(self) -> None:
        """Drop the edit, close, and give the keys to the screenshot."""
        if self.is_open() and not self._closing:
            self._close(give_keys_back=True)

    def _close(self, give_keys_back: bool) -> None:
        self._closing = True
        try:
            if give_keys_back:
                # before hiding: a hidden focus widget would pass the keys on to whatever
                # comes next in the focus chain (a text field, maybe)
                self.viewer.setFocus(Reason.ShortcutFocusReason)
            self.hide()
        finally:
            self._closing = False

    def eventFilter(self, watched: QObject | None, event: QEvent | None) -> bool:
        if event is None:
            return False
        if watched is self.viewer:
            if event.type() == QEvent.Type.Resize and self.is_open():
                self.place()
            return False
        kind = event.type()
        if kind == QEvent.Type.FocusIn and isinstance(event, QFocusEvent) \
                and (not self.is_open() or event.reason() not in TAKEN):
            # handed the keys by Qt (a tab shown again, the window active again): the
            # screenshot takes them; only N opens the box
            self.viewer.setFocus(Reason.ShortcutFocusReason)
            return True
        if kind == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) \
                and event.key() in LEAVE_KEYS:
            event.accept()  # Esc and Enter belong to the box, whatever else binds them
            return True
        if kind == QEvent.Type.KeyPress and isinstance(event, QKeyEvent) \
                and event.key() == Qt.Key.Key_Escape:
            self.cancel()
            return True
        if kind == QEvent.Type.FocusOut and isinstance(event, QFocusEvent) \
                and self.is_open() and not self._closing \
                and event.reason() != Reason.PopupFocusReason:  # its own menu: stays
            text = self.field.text().strip()
            # Another window (a dialog): when this one is active again, the keys are the
            # screenshot's. A click or Tab elsewhere: the keys stay where the person put them.
            self._close(give_keys_back=event.reason() == Reason.ActiveWindowFocusReason)
            self.saved.emit(self.which, text)
        return False
