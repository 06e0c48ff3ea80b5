"""An OSWorld task folder opened in the app: per domain, how many tasks load, are ready,
need downloads, accounts or a VM, and run in a sandbox here; per task, its state and why
not; the tasks chosen go where the dialog was opened from (a new evaluation, the
demonstration task list, a training run's tasks), named by its action button."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PyQt6.QtCore import Qt
from PyQt6.QtGui import QColor
from PyQt6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.services.task_suite import SuiteDomain, SuiteTask

DOMAIN_COLUMNS = ("Domain", "Tasks", "Load", "Ready", "Need downloads", "Need accounts",
                  "Need a VM", "Run in a sandbox", "Failed commands")
TASK_COLUMNS = ("Task", "Domain", "State", "Why not (or what it needs)", "Last smoke")
WHY_COLUMN, SMOKE_COLUMN = 3, 4
FAILED_COLOR = "#b3261e"
# The Task column's most, in digits of the table's font (so it grows with the font): an
# OSWorld id, a 36-character UUID, and its check box whole; a longer name is cut rather
# than pushing the other columns out of a dialog on a 1280-pixel screen.
TASK_COLUMN_CHARACTERS = 48


EVALUATE = "Evaluate the chosen…"


class TaskSuiteDialog(QDialog):
    def __init__(self, folder: Path, domains: Sequence[SuiteDomain],
                 tasks: Sequence[SuiteTask], parent: QWidget | None = None,
                 action: str = EVALUATE) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Task suite: {folder.name}")
        self.resize(1000, 640)
        self.folder = folder
        self.tasks = list(tasks)
        runnable = sum(t.runnable for t in self.tasks)
        self.summary = QLabel(f"{folder}: {len(self.tasks)} task(s) in {len(domains) - 1} "
                              f"domain(s); {runnable} run in a sandbox here")
        self.summary.setWordWrap(True)
        self.domain_table = QTableWidget(len(domains), len(DOMAIN_COLUMNS))
        self.domain_table.setHorizontalHeaderLabels(DOMAIN_COLUMNS)
        self.domain_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for row, domain in enumerate(domains):
            failed = "" if domain.failed_commands is None else str(domain.failed_commands)
            values = (domain.domain, domain.tasks, domain.loads, domain.ready,
                      domain.downloads, domain.accounts, domain.vm, domain.sandbox, failed)
            for column, value in enumerate(values):
                item = QTableWidgetItem(str(value))
                if column == len(values) - 1 and domain.failed_commands:
                    item.setForeground(QColor(FAILED_COLOR))
                    item.setToolTip("setup and postconfig commands that exited non-zero in "
                                    "the last `workbench tasks smoke` runs (not counting "
                                    "those that need the web or fail on OSWorld's image)")
                self.domain_table.setItem(row, column, item)
        self.domain_table.resizeColumnsToContents()
        smoked = any(t.smoke for t in self.tasks)
        # shown once `workbench tasks smoke` has run this folder in this workspace
        self.domain_table.setColumnHidden(len(DOMAIN_COLUMNS) - 1, not smoked)
        self.task_table = QTableWidget(len(self.tasks), len(TASK_COLUMNS))
        self.task_table.setHorizontalHeaderLabels(TASK_COLUMNS)
        self.task_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for row, task in enumerate(self.tasks):
            chosen = QTableWidgetItem(task.id)
            chosen.setFlags(chosen.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            chosen.setCheckState(Qt.CheckState.Unchecked)
            chosen.setToolTip(task.file)
            state = QTableWidgetItem(task.state)
            state.setForeground(QColor("#1b7f3b" if task.runnable else "#b3261e"))
            why = QTableWidgetItem(task.why)
            why.setToolTip(task.why)
            smoke = QTableWidgetItem(task.smoke)
            smoke.setToolTip(task.smoke_details or task.smoke)
            if task.smoke and task.smoke != "ok":
                smoke.setForeground(QColor(FAILED_COLOR))
            for column, item in enumerate((chosen, QTableWidgetItem(task.domain), state, why,
                                           smoke)):
                self.task_table.setItem(row, column, item)
        self.task_table.resizeColumnsToContents()
        self.task_table.setColumnHidden(SMOKE_COLUMN, not smoked)
        header = self.task_table.horizontalHeader()
        if header is not None:
            header.setSectionResizeMode(WHY_COLUMN, QHeaderView.ResizeMode.Stretch)
            header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        # as wide as its widest id (a fixed 280 pixels cut a UUID by a few and wrapped it)
        most = self.task_table.fontMetrics().horizontalAdvance("0" * TASK_COLUMN_CHARACTERS)
        self.task_table.setColumnWidth(0, min(self.task_table.sizeHintForColumn(0), most))
        self.only_runnable = QCheckBox("Only the tasks that run here")
        self.only_runnable.toggled.connect(self._filter)
        choose = QPushButton("Choose all that run here")
        choose.clicked.connect(self.choose_runnable)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.action_button = self.buttons.addButton(
            action, QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.task_table.itemChanged.connect(lambda _: self._update_buttons())
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.domain_table)
        splitter.addWidget(self.task_table)
        splitter.setSizes([160, 400])
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(splitter, 1)
        row_buttons = QVBoxLayout()
        row_buttons.addWidget(self.only_runnable)
        row_buttons.addWidget(choose)
        layout.addLayout(row_buttons)
        layout.addWidget(self.buttons)
        self._update_buttons()

    def chosen(self) -> list[SuiteTask]:
        """The ticked tasks, in the table's order."""
        found = []
        for row, task in enumerate(self.tasks):
            item = self.task_table.item(row, 0)
            if item is not None and item.checkState() == Qt.CheckState.Checked:
                found.append(task)
        return found

    def chosen_files(self) -> list[str]:
        return [task.file for task in self.chosen()]

    def choose(self, task_ids: Sequence[str]) -> None:
        """Tick exactly these tasks."""
        for row, task in enumerate(self.tasks):
            item = self.task_table.item(row, 0)
            if item is not None:
                item.setCheckState(Qt.CheckState.Checked if task.id in task_ids
                                   else Qt.CheckState.Unchecked)

    def choose_runnable(self) -> None:
        for row, task in enumerate(self.tasks):
            item = self.task_table.item(row, 0)
            if item is not None:
                item.setCheckState(Qt.CheckState.Checked if task.runnable
                                   else Qt.CheckState.Unchecked)

    def _filter(self, only: bool) -> None:
        for row, task in enumerate(self.tasks):
            self.task_table.setRowHidden(row, only and not task.runnable)

    def _update_buttons(self) -> None:
        if self.action_button is not None:
            self.action_button.setEnabled(bool(self.chosen()))
