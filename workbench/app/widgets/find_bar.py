"""Find in a read-only text (a step's prompt): a field, previous and next, how many
matches, every match highlighted and the current one scrolled into view. The field takes
the keyboard only when clicked; Esc clears it and gives the keyboard back to the text."""

from __future__ import annotations

from PyQt6.QtCore import Qt
from PyQt6.QtGui import QColor, QKeyEvent, QTextCursor
from PyQt6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QTextEdit,
    QToolButton,
    QWidget,
)

MATCH_COLOUR = "#ffe082"  # every match
CURRENT_COLOUR = "#ff9800"  # the one the text is scrolled to


class FindField(QLineEdit):
    """The find field: Enter goes to the next match (Shift+Enter the previous), Esc
    clears it and leaves it."""

    def __init__(self, bar: FindBar) -> None:
        super().__init__(bar)
        self.bar = bar

    def keyPressEvent(self, event: QKeyEvent | None) -> None:
        if event is not None and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            backward = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
            self.bar.find_next(backward=backward)
            return
        if event is not None and event.key() == Qt.Key.Key_Escape:
            self.clear()
            self.bar.text.setFocus()
            return
        super().keyPressEvent(event)


class FindBar(QWidget):
    def __init__(self, text: QTextEdit, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text = text
        self.field = FindField(self)
        self.field.setPlaceholderText("Find in the prompt")
        self.field.setClearButtonEnabled(True)
        self.field.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # never reached by Tab
        self.field.textChanged.connect(lambda _: self.find_next(restart=True))
        self.previous = QToolButton()
        self.previous.setText("↑")
        self.previous.setToolTip("The previous match (Shift+Enter)")
        self.previous.clicked.connect(lambda: self.find_next(backward=True))
        self.next = QToolButton()
        self.next.setText("↓")
        self.next.setToolTip("The next match (Enter)")
        self.next.clicked.connect(lambda: self.find_next())
        self.count = QLabel("")
        self.count.setObjectName("find-count")
        self.count.setMinimumWidth(self.count.fontMetrics().horizontalAdvance("999 of 999"))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.field, 1)
        for widget in (self.previous, self.next, self.count):
            layout.addWidget(widget)
        self.matches: list[QTextCursor] = []
        self.current = -1

    def search(self, words: str) -> int:
        """Find `words` (case-insensitive); the number of matches."""
        if self.field.text() != words:
            self.field.setText(words)  # finds, through textChanged
        else:
            self.find_next(restart=True)
        return len(self.matches)

    def refresh(self) -> None:
        """The text changed (another step): find again from its start."""
        self.find_next(restart=True)

    def find_next(self, backward: bool = False, restart: bool = False) -> None:
        words = self.field.text()
        document = self.text.document()
        self.matches = []
        if words and document is not None:
            cursor = QTextCursor(document)
            while True:
                cursor = document.find(words, cursor)
                if cursor.isNull():
                    break
                self.matches.append(QTextCursor(cursor))
        if not self.matches:
            self.current = -1
        elif restart or self.current < 0:
            self.current = len(self.matches) - 1 if backward else 0
        else:
            step = -1 if backward else 1
            self.current = (self.current + step) % len(self.matches)
        self._show(words)

    def _show(self, words: str) -> None:
        selections = []
        for index, match in enumerate(self.matches):
            selection = QTextEdit.ExtraSelection()
            selection.cursor = match
            selection.format.setBackground(QColor(
                CURRENT_COLOUR if index == self.current else MATCH_COLOUR))
            selections.append(selection)
        self.text.setExtraSelections(selections)
        if self.current >= 0:
            self.text.setTextCursor(self.matches[self.current])
            self.text.ensureCursorVisible()
            self.count.setText(f"{self.current + 1} of {len(self.matches)}")
        else:
            cursor = self.text.textCursor()
            cursor.clearSelection()  # no match: nothing stays marked as one
            self.text.setTextCursor(cursor)
            self.count.setText("not found" if words else "")
        self.count.setStyleSheet("color: #b3261e" if words and not self.matches else "")

