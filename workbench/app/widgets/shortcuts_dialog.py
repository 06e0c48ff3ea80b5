"""Every key of the app in one list (`?`, F1, Help ▸ Keyboard Shortcuts): read from the
QActions and QShortcuts the window holds when it opens, so it always says what the keys
do now (a review key changed in Review ▸ Review Keys… included)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from PyQt6.QtGui import QAction, QKeySequence, QShortcut
from PyQt6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QMenu,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

Text = QKeySequence.SequenceFormat.NativeText


@dataclass(frozen=True)
class ShortcutRow:
    place: str  # the menu, or the part of the window the key works in
    command: str
    keys: str  # e.g. "A, Ctrl+Shift+A"


def _words(class_name: str) -> str:
    """"PromptView" -> "Prompt view"."""
    words = re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", class_name)
    return " ".join(words).capitalize() if words else class_name


def shortcut_rows(root: QWidget) -> list[ShortcutRow]:
    """The keys bound under `root`: its QActions (by menu, in menu order) and QShortcuts."""
    rows: list[ShortcutRow] = []
    for action in root.findChildren(QAction):
        keys = action.shortcuts()
        if not keys:
            continue
        menus = [o for o in action.associatedObjects() if isinstance(o, QMenu)]
        place = menus[0].title().replace("&", "") if menus else "Window"
        rows.append(ShortcutRow(place, action.text().replace("&", "").rstrip("…"),
                                ", ".join(k.toString(Text) for k in keys)))
    for shortcut in root.findChildren(QShortcut):
        if shortcut.key().isEmpty():
            continue
        parent = shortcut.parent()
        place = _words(type(parent).__name__) if parent is not None else "Window"
        keys = QShortcut.keys(shortcut)  # a QShortcut, not a dict: ruff's SIM118 misreads it
        rows.append(ShortcutRow(place, shortcut.whatsThis() or shortcut.objectName()
                                or "(a key of its own)",
                                ", ".join(k.toString(Text) for k in keys)))
    order = list(dict.fromkeys(row.place for row in rows))
    return sorted(rows, key=lambda row: order.index(row.place))  # stable: menu order kept


class ShortcutsDialog(QDialog):
    """A read-only table of `shortcut_rows(root)`; Esc or Close shuts it."""

    def __init__(self, root: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent if parent is not None else root)
        self.setWindowTitle("Keyboard shortcuts")
        self.rows = shortcut_rows(root)
        self.table = QTableWidget(len(self.rows), 3)
        self.table.setHorizontalHeaderLabels(["Menu", "Command", "Keys"])
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(False)
        vertical = self.table.verticalHeader()
        if vertical is not None:
            vertical.hide()
        for row, entry in enumerate(self.rows):
            for column, text in enumerate((entry.place, entry.command, entry.keys)):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                self.table.setItem(row, column, item)
        header = self.table.horizontalHeader()
        if header is not None:
            header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
            header.setStretchLastSection(True)
        note = QLabel("In a text field the keys type; Enter saves it and Esc leaves it, and "
                      "the keys above work again.")
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.resize(620, 560)

    def keys_of(self, command: str) -> str:
        """The keys shown for a command (its text without & or …); "" when not listed."""
        return next((row.keys for row in self.rows if row.command == command), "")
