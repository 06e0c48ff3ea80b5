"""The Training screen's list of runs: a filter (name, id or status), the runs table (tick
to compare; the name elided in the middle, whole on hover, renamed in place) and the
buttons that act on the chosen run; and the table of a run's checkpoints."""

from __future__ import annotations

import datetime

from PyQt6.QtCore import QModelIndex, Qt
from PyQt6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from trainer.store.runs import Checkpoint
from workbench.app.models.record_table import Column, RecordTableModel
from workbench.app.models.run_table import COMPARE_TIP, RunTableModel
from workbench.app.widgets.record_table import record_table_view
from workbench.services.run_names import run_matches
from workbench.services.training_runs import RunRow


def when(seconds: float | None) -> str:
    if not seconds:
        return ""
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")


RUN_COLUMNS: tuple[Column[RunRow], ...] = (
    Column("Run", lambda r: r.title, lambda r: f"{r.id}\n{COMPARE_TIP}"),
    Column("Status", lambda r: r.status),
    Column("Created", lambda r: when(r.created_at),
           lambda r: f"finished {when(r.finished_at)}" if r.finished_at else "not finished"),
    Column("Latest version", lambda r: "" if r.latest_version is None
           else f"v{r.latest_version}", align_right=True),
    Column("Checkpoints", lambda r: str(r.checkpoints), align_right=True),
    Column("Id", lambda r: r.id),
)
CHECKPOINT_COLUMNS: tuple[Column[Checkpoint], ...] = (
    Column("Version", lambda c: f"v{c.policy_version}", align_right=True),
    Column("Update", lambda c: str(c.info.get("update", "")), align_right=True),
    Column("Saved", lambda c: when(c.created_at)),
    Column("Folder", lambda c: c.path, lambda c: "relative to the workspace"),
)
RUN_BUTTONS = (
    ("Resume", "Continue the chosen stopped run from its newest checkpoint"),
    ("Use its configuration", "Load the chosen run's configuration into the form"),
    ("Rename…", "Give the chosen run a name of your own (F2 or a double-click on its name "
                "does too): legends, tables and Compare show it"),
)


def checkpoint_table(parent: QWidget) -> tuple[RecordTableModel[Checkpoint], QTableView]:
    """The chosen run's checkpoints: (model, view)."""
    model: RecordTableModel[Checkpoint] = RecordTableModel(CHECKPOINT_COLUMNS, parent)
    view = record_table_view(model)
    for column, width in enumerate((60, 60, 135)):
        view.setColumnWidth(column, width)
    return model, view


class RunList(QGroupBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Runs (tick to compare)", parent)
        self.setToolTip(COMPARE_TIP)
        self.filter = QLineEdit()
        self.filter.setObjectName("run-filter")
        self.filter.setPlaceholderText("Filter runs: name, id or status")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(lambda _: self.apply_filter())
        self.shown = QLabel("")
        self.shown.setObjectName("runs-shown")
        self.run_model = RunTableModel(RUN_COLUMNS, self)
        self.run_view = record_table_view(self.run_model)
        self.run_view.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                      | QAbstractItemView.EditTrigger.EditKeyPressed)
        # both ends of a long name tell runs apart ("demo: tiny…#3"); whole on hover
        self.run_view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        for column, width in enumerate((220, 70, 135, 95, 85)):
            self.run_view.setColumnWidth(column, width)
        self.buttons: dict[str, QPushButton] = {}
        bar = QHBoxLayout()
        for text, tip in RUN_BUTTONS:
            button = QPushButton(text)
            button.setToolTip(tip)
            bar.addWidget(button)
            self.buttons[text] = button
        bar.addStretch(1)
        self.buttons["Rename…"].clicked.connect(self.rename_current)
        filter_bar = QHBoxLayout()
        filter_bar.addWidget(self.filter, 1)
        filter_bar.addWidget(self.shown)
        layout = QVBoxLayout(self)
        layout.addLayout(filter_bar)
        layout.addWidget(self.run_view, 1)
        layout.addLayout(bar)

    def rename_current(self) -> bool:
        """Edit the chosen run's name in place (Enter keeps it, Esc does not)."""
        index = self.run_view.currentIndex()
        if not index.isValid():
            return False
        self.run_view.edit(self.run_model.index(index.row(), 0))
        return True

    def apply_filter(self) -> None:
        """Hide the runs the filter does not match (ticks and the choice stay)."""
        text = self.filter.text()
        records = self.run_model.records
        shown = 0
        for row, run in enumerate(records):
            match = run_matches(run, self.run_model.title(run.id), text)
            self.run_view.setRowHidden(row, not match)
            shown += match
        self.shown.setText(f"{shown} of {len(records)}" if text.strip() else "")

    def shown_run_ids(self) -> list[str]:
        return [run.id for row, run in enumerate(self.run_model.records)
                if not self.run_view.isRowHidden(row)]

    def current_index(self) -> QModelIndex:
        return self.run_view.currentIndex()
