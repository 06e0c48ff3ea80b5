"""The Training screen's runs list: the record table with a check box on each run to plot
it beside the chosen one, the colour its lines have on the charts, and its display name
(distinct where two runs share one; edited in place: F2 or a double-click)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PyQt6.QtCore import QModelIndex, QObject, Qt, pyqtSignal
from PyQt6.QtGui import QColor

from workbench.app.models.record_table import Column, Index, RecordTableModel
from workbench.services.training_runs import RunRow, distinct_titles

COMPARE_TIP = "Tick runs to plot them beside the chosen one and compare their settings"


class RunTableModel(RecordTableModel[RunRow]):
    """Runs, newest first; the first column's check box marks a run for the plots. Ticks
    are kept by run id, in the order they were made, across reads of the store."""

    checked_changed = pyqtSignal()
    renamed = pyqtSignal(str, str)  # run id, the display name typed

    def __init__(self, columns: Sequence[Column[RunRow]], parent: QObject | None = None
                 ) -> None:
        super().__init__(columns, parent)
        self.checked: list[str] = []
        self.colour_of: Callable[[str], str | None] = lambda _: None
        self.titles: dict[str, str] = {}  # run id -> its name, made distinct

    def set_records(self, records: Sequence[RunRow]) -> None:
        self.titles = distinct_titles(records)
        super().set_records(records)

    def title(self, run_id: str) -> str:
        return self.titles.get(run_id, run_id)

    def set_checked(self, run_ids: Sequence[str]) -> None:
        self.checked = list(dict.fromkeys(run_ids))
        self.refresh_colours()
        self.checked_changed.emit()

    def refresh_colours(self) -> None:
        """The plots changed colours or runs: repaint the first column."""
        if self.records:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.records) - 1, 0))

    def flags(self, index: QModelIndex) -> Qt.ItemFlag:
        flags = super().flags(index)
        if index.isValid() and index.column() == 0:
            flags |= Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEditable
        return flags

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if index.isValid() and index.column() == 0 and 0 <= index.row() < len(self.records):
            run = self.records[index.row()]
            run_id = run.id
            if role == Qt.ItemDataRole.DisplayRole:
                return self.title(run_id)
            if role == Qt.ItemDataRole.EditRole:
                return run.name
            if role == Qt.ItemDataRole.ToolTipRole:  # the whole name where it is cut
                return f"{self.title(run_id)}\nrun {run_id}\n{COMPARE_TIP}; F2 or a " \
                       "double-click renames it"
            if role == Qt.ItemDataRole.CheckStateRole:
                return Qt.CheckState.Checked if run_id in self.checked \
                    else Qt.CheckState.Unchecked
            if role == Qt.ItemDataRole.DecorationRole:
                colour = self.colour_of(run_id)
                return QColor(colour) if colour else None
        return super().data(index, role)

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole
                ) -> bool:
        if not (index.isValid() and index.column() == 0
                and 0 <= index.row() < len(self.records)):
            return False
        run_id = self.records[index.row()].id
        if role == Qt.ItemDataRole.EditRole:  # the store renames it (the screen's work)
            if str(value).strip() != self.records[index.row()].name:
                self.renamed.emit(run_id, str(value))
            return True
        if role != Qt.ItemDataRole.CheckStateRole:
            return False
        state = value.value if isinstance(value, Qt.CheckState) else int(value)
        if state == Qt.CheckState.Checked.value:
            if run_id not in self.checked:
                self.checked.append(run_id)
        elif run_id in self.checked:
            self.checked.remove(run_id)
        else:
            return True
        self.dataChanged.emit(index, index, [Qt.ItemDataRole.CheckStateRole])
        self.checked_changed.emit()
        return True

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if (section == 0 and orientation == Qt.Orientation.Horizontal
                and role == Qt.ItemDataRole.ToolTipRole):
            return COMPARE_TIP
        return super().headerData(section, orientation, role)

    def index_of(self, run_id: str) -> QModelIndex:
        for row, record in enumerate(self.records):
            if record.id == run_id:
                return self.index(row, 0)
        return QModelIndex()
