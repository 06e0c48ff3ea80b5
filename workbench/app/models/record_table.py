"""A table model over a list of records, with columns declared as (title, getter): the
small tables of the app (sandboxes, snapshots, the success pool) are lists that are
replaced whole when read again."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from PyQt6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PyQt6.QtGui import QColor

R = TypeVar("R")
Index = QModelIndex | QPersistentModelIndex
RECORD_ROLE = Qt.ItemDataRole.UserRole  # the record itself


@dataclass(frozen=True)
class Column(Generic[R]):
    title: str
    text: Callable[[R], str]
    tip: Callable[[R], str] | None = None
    align_right: bool = False
    color: Callable[[R], str | None] | None = None  # the text's colour ("#b00020"), or None


class RecordTableModel(QAbstractTableModel, Generic[R]):
    def __init__(self, columns: Sequence[Column[R]], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.columns = list(columns)
        self.records: list[R] = []

    def set_records(self, records: Sequence[R]) -> None:
        self.beginResetModel()
        self.records = list(records)
        self.endResetModel()

    def record(self, row: int) -> R:
        return self.records[row]

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.records)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self.records):
            return None
        record = self.records[index.row()]
        column = self.columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return column.text(record)
        if role == Qt.ItemDataRole.ToolTipRole and column.tip is not None:
            return column.tip(record)
        if role == Qt.ItemDataRole.ForegroundRole and column.color is not None:
            color = column.color(record)
            return QColor(color) if color else None
        if role == Qt.ItemDataRole.TextAlignmentRole and column.align_right:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == RECORD_ROLE:
            return record
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if (role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal
                and 0 <= section < len(self.columns)):
            return self.columns[section].title
        return None
