"""The Training screen's "Compare runs" table: the plotted runs side by side, one column
each (headed by its name in its plot colour, elided in the middle, whole on hover), their
settings and final figures in rows, rows where they differ in bold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PyQt6.QtCore import Qt
from PyQt6.QtGui import QColor, QFont
from PyQt6.QtWidgets import QTableWidget, QTableWidgetItem, QWidget

from workbench.services.run_comparison import ComparedRun, comparison_rows


class RunComparisonTable(QTableWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("run-comparison")
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.setWordWrap(False)
        self.setToolTip("The plotted runs side by side; rows where they differ are in bold")
        header = self.horizontalHeader()
        assert header is not None
        header.setStretchLastSection(True)
        # a long name loses its middle, not both ends; whole on hover
        header.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self._shown: tuple[object, ...] = ()

    def show_runs(self, runs: Sequence[ComparedRun], colours: Mapping[str, str]) -> None:
        """Show these runs (`colours`: each one's plot colour by id); redrawn only where
        something changed (it is read every second)."""
        lines = comparison_rows(runs) if runs else []
        shown = (tuple((run.id, run.title, colours.get(run.id, "")) for run in runs),
                 tuple(lines))
        if shown == self._shown:
            return
        self._shown = shown
        self.setColumnCount(len(runs))
        self.setRowCount(len(lines))
        self.setVerticalHeaderLabels([line.label for line in lines])
        for column, run in enumerate(runs):
            item = QTableWidgetItem(run.title)
            item.setData(Qt.ItemDataRole.DecorationRole, QColor(colours.get(run.id, "")))
            item.setToolTip(f"{run.title}\nrun {run.id}")  # whole where the column cuts it
            self.setHorizontalHeaderItem(column, item)
        bold = QFont(self.font())
        bold.setBold(True)
        for row, line in enumerate(lines):
            for column, value in enumerate(line.values):
                cell = self.item(row, column)
                if cell is None:
                    cell = QTableWidgetItem()
                    self.setItem(row, column, cell)
                if cell.text() != value:
                    cell.setText(value)
                cell.setFont(bold if line.differs and len(runs) > 1 else self.font())
