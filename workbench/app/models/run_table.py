"""The Training screen's runs list: the record table with a check box on each run to plot
it beside the chosen one, and the colour its lines have on the charts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PyQt6.QtCore import QModelIndex, QObject, Qt, pyqtSignal
from PyQt6.QtGui import QColor

from workbench.app.models.record_table import Column, Index, RecordTableModel
from workbench.services.training_runs import RunRow

COMPARE_TIP = "Tick runs to plot them beside the chosen one and compare their settings"


class RunTableModel(RecordTableModel[RunRow]):
    """Runs, newest first; the first column's check box marks a run for the plots. Ticks
    are kept by run id, in the order they were made, across reads of the store."""

    checked_changed = pyqtSignal()

    def __init__(self, columns: Sequence[Column[RunRow]], parent: QObject | None = None
                 ) -> None:
        super().__init__(columns, parent)
        self.checked: list[str] = []
        self.colour_of: Callable[[str], str | None] = lambda _: None

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
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        return flags

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if index.isValid() and index.column() == 0 and 0 <= index.row() < len(self.records):
            run_id = self.records[index.row()].id
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
                and role == Qt.ItemDataRole.CheckStateRole
                and 0 <= index.row() < len(self.records)):
            return False
        run_id = self.records[index.row()].id
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
