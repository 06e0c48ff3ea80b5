"""A to-do list with a menu bar and dialogs: add, tick, rename, delete, sort, save.

    python todo.py [--items "Buy milk" "Call Anna" ...]

State ($HOME/.workbench/todo.json): "items" (each {"text", "done"} in list order),
"saved" (the items at the last File > Save, or null), "selected" (the selected item's
text, or null), "selected_row" (its row, or null), "dialog" (the title of an open dialog,
or null), "dialog_text" (the text typed in it, or null), "entry" (the New item field's
text), "menu_rows" (the screen rectangle of each entry of the open menu, by its text).
Resumed (appstate.resumed_state), it shows those again (not a menu), an Add or Rename
dialog reopened with its text; `--items` is then ignored.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from appstate import StateWriter, show_first_window
from PyQt6.QtCore import Qt, QTimer
from PyQt6.QtGui import QAction, QKeySequence
from PyQt6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)


class TodoWindow(QMainWindow):
    def __init__(self, items: list[str]) -> None:
        super().__init__()
        self.setWindowTitle("To-do list")
        self.setObjectName("todo_window")
        self.saved: list[dict[str, Any]] | None = None
        self.dialog: str | None = None
        self.dialog_text: str | None = None
        self.open_menu: QMenu | None = None
        self.state = StateWriter("todo", self.fields)

        self.list = QListWidget(objectName="items")
        for text in items:
            self.add_item(text)
        self.entry = QLineEdit(objectName="new_item")
        self.entry.setPlaceholderText("New item")
        self.entry.returnPressed.connect(self.add_from_entry)
        self.entry.textChanged.connect(lambda *_: self.state.changed())
        add = QPushButton("Add", objectName="add")
        add.clicked.connect(self.add_from_entry)
        row = QHBoxLayout()
        row.addWidget(self.entry)
        row.addWidget(add)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(self.list)
        layout.addLayout(row)
        self.setCentralWidget(central)
        self.menuBar().setObjectName("menu_bar")

        self._menu("File", [("Save", "Ctrl+S", self.save), ("Quit", "Ctrl+Q", self.close)])
        self._menu("Edit", [("Add item…", "Ctrl+N", self.add_with_dialog),
                            ("Rename item…", "F2", self.rename_selected),
                            ("Delete item", "Delete", self.delete_selected),
                            ("Clear completed", None, self.clear_completed)])
        self._menu("View", [("Sort A-Z", None, self.sort_items)])
        self.list.itemChanged.connect(lambda *_: self.state.changed())
        self.list.currentItemChanged.connect(lambda *_: self.state.changed())
        self.list.model().rowsInserted.connect(lambda *_: self.state.changed())
        self.list.model().rowsRemoved.connect(lambda *_: self.state.changed())
        self.resize(420, 420)

    def _menu(self, title: str, entries: list[tuple[str, str | None, Any]]) -> None:
        menu = self.menuBar().addMenu(title)
        menu.setObjectName(f"menu_{title.lower()}")
        for text, shortcut, slot in entries:
            action = QAction(text, self)
            if shortcut:
                action.setShortcut(QKeySequence(shortcut))
            # the slot without "checked" (the dialogs take a resumed text as their argument)
            action.triggered.connect(lambda _checked=False, run=slot: run())
            menu.addAction(action)
        menu.aboutToShow.connect(lambda m=menu: self._menu_shown(m))
        menu.aboutToHide.connect(self._menu_hidden)

    def _menu_shown(self, menu: QMenu) -> None:
        self.open_menu = menu
        self.state.changed()

    def _menu_hidden(self) -> None:
        self.open_menu = None
        self.state.changed()

    def menu_rows(self) -> dict[str, list[int]]:
        menu = self.open_menu
        if menu is None or not menu.isVisible():
            return {}
        rows = {}
        for action in menu.actions():
            rect = menu.actionGeometry(action)
            origin = menu.mapToGlobal(rect.topLeft())
            rows[action.text()] = [origin.x(), origin.y(), rect.width(), rect.height()]
        return rows

    def menu_titles(self) -> dict[str, list[int]]:
        bar = self.menuBar()
        out = {}
        for action in bar.actions():
            rect = bar.actionGeometry(action)
            origin = bar.mapToGlobal(rect.topLeft())
            out[action.text()] = [origin.x(), origin.y(), rect.width(), rect.height()]
        return out

    def item_rows(self) -> list[list[int]]:
        out = []
        for i in range(self.list.count()):
            rect = self.list.visualItemRect(self.list.item(i))
            origin = self.list.viewport().mapToGlobal(rect.topLeft())
            out.append([origin.x(), origin.y(), rect.width(), rect.height()])
        return out

    def items(self) -> list[dict[str, Any]]:
        return [{"text": self.list.item(i).text(),
                 "done": self.list.item(i).checkState() == Qt.CheckState.Checked}
                for i in range(self.list.count())]

    def fields(self) -> dict[str, Any]:
        current = self.list.currentItem()
        return {"items": self.items(), "saved": self.saved, "dialog": self.dialog,
                "dialog_text": self.dialog_text, "entry": self.entry.text(),
                "selected": current.text() if current is not None else None,
                "selected_row": self.list.currentRow() if current is not None else None,
                "menu_titles": self.menu_titles(), "menu_rows": self.menu_rows(),
                "item_rows": self.item_rows()}

    def add_item(self, text: str, done: bool = False) -> None:
        item = QListWidgetItem(text)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked if done else Qt.CheckState.Unchecked)
        self.list.addItem(item)

    def add_from_entry(self) -> None:
        text = self.entry.text().strip()
        if text:
            self.add_item(text)
            self.entry.clear()

    def _ask(self, title: str, label: str, text: str = "") -> str | None:
        dialog = QInputDialog(self)
        dialog.setObjectName("input_dialog")
        dialog.setWindowTitle(title)
        dialog.setLabelText(label)
        dialog.setTextValue(text)
        self.dialog, self.dialog_text = title, text
        dialog.textValueChanged.connect(self._dialog_typed)
        self.state.changed()
        accepted = dialog.exec()
        self.dialog = self.dialog_text = None
        self.state.changed()
        return dialog.textValue().strip() if accepted else None

    def _dialog_typed(self, text: str) -> None:
        self.dialog_text = text
        self.state.changed()

    def add_with_dialog(self, typed: str = "") -> None:
        text = self._ask("Add item", "New item:", typed)
        if text:
            self.add_item(text)

    def rename_selected(self, typed: str | None = None) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        text = self._ask("Rename item", "New text:", item.text() if typed is None else typed)
        if text:
            item.setText(text)

    def delete_selected(self) -> None:
        row = self.list.currentRow()
        if row >= 0:
            self.list.takeItem(row)

    def clear_completed(self) -> None:
        for i in reversed(range(self.list.count())):
            if self.list.item(i).checkState() == Qt.CheckState.Checked:
                self.list.takeItem(i)

    def sort_items(self) -> None:
        self.list.sortItems(Qt.SortOrder.AscendingOrder)
        self.state.changed()

    def save(self) -> None:
        self.saved = self.items()
        self.state.changed()

    def restore(self, state: dict[str, Any]) -> None:
        """Take up a resumed app's saved state: the items, the last save, the selection,
        the New item field; an open Add or Rename dialog opens again with the text typed
        in it once the window is up (the event loop runs)."""
        self.list.clear()
        items = checked_items(state["items"], "items")
        for item in items:
            self.add_item(item["text"], item["done"])
        saved = state["saved"]
        self.saved = None if saved is None else checked_items(saved, "saved")
        self.entry.setText(state.get("entry", ""))
        row = state.get("selected_row")
        texts = [item["text"] for item in items]
        if not (isinstance(row, int) and 0 <= row < len(texts)
                and texts[row] == state["selected"]):
            # a state written before "selected_row": the first item with that text
            row = texts.index(state["selected"]) if state["selected"] is not None else -1
        self.list.setCurrentRow(row)
        typed = state.get("dialog_text")
        if typed is not None and not isinstance(typed, str):
            raise TypeError(f"'dialog_text' is {typed!r}, not text or null")
        if state["dialog"] == "Add item":
            QTimer.singleShot(0, lambda: self.add_with_dialog(typed or ""))
        elif state["dialog"] == "Rename item":
            QTimer.singleShot(0, lambda: self.rename_selected(typed))


def checked_items(value: Any, field: str) -> list[dict[str, Any]]:
    """`value`, a saved state's field `field`, when it is a list of {"text", "done"};
    TypeError otherwise."""
    if not isinstance(value, list) or not all(
            isinstance(item, dict) and isinstance(item.get("text"), str)
            and isinstance(item.get("done"), bool) for item in value):
        raise TypeError(f"{field!r} is not a list of items with 'text' and 'done'")
    return [{"text": item["text"], "done": item["done"]} for item in value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", nargs="*", default=[])
    args, qt_args = parser.parse_known_args(argv)
    app = QApplication([sys.argv[0], *qt_args])
    _window = start_window(args.items)  # held: the window lives as long as this reference
    return app.exec()


def start_window(items: list[str]) -> TodoWindow:
    """The list on screen: `items`, or as it was when the app is being resumed."""
    return show_first_window("todo", lambda: TodoWindow([]), lambda: TodoWindow(items),
                             (430, 170))


if __name__ == "__main__":
    sys.exit(main())
