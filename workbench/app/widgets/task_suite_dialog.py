"""An OSWorld task folder opened in the app: per domain, how many tasks load, are ready,
need downloads, accounts or a VM, and run in a sandbox here; per task, its instruction,
domain, state and why not; the tasks chosen go where the dialog was opened from (a new
evaluation, the demonstration task list, a training run's tasks), named by its action
button. Both tables sort by any column (a header click) and the tasks filter by domain
(the domain list, or a click on a domain's row)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from PyQt6.QtCore import Qt
from PyQt6.QtGui import QColor, QGuiApplication
from PyQt6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
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
TASK_COLUMNS = ("Task", "Domain", "State", "Why not (or what it needs)", "Last smoke",
                "Instruction")
# The columns by their index in the model; the Instruction is shown second (after the
# Task), its index kept last so that the others keep theirs.
WHY_COLUMN, SMOKE_COLUMN, INSTRUCTION_COLUMN = 3, 4, 5
FAILED_COLOR = "#b3261e"
# The Task column's most, in digits of the table's font (so it grows with the font): an
# OSWorld id, a 36-character UUID, and its check box whole; a longer name is cut rather
# than pushing the other columns out of a dialog on a 1280-pixel screen.
TASK_COLUMN_CHARACTERS = 48
# The Instruction column's most, in average characters: the rest is on hover and in the
# line under the table (the why-not column keeps its room on a 1280-pixel screen).
INSTRUCTION_COLUMN_CHARACTERS = 36
TASK_ROW = Qt.ItemDataRole.UserRole  # on a row's Task cell: the task's place in `tasks`
ALL_DOMAINS = "All domains"
DOMAIN_SHARE = 0.45  # the domain table's most of the tables' height (all rows if they fit)


EVALUATE = "Evaluate the chosen…"


def _number(value: int) -> QTableWidgetItem:
    """A cell that sorts as a number (10 after 9), not as text."""
    item = QTableWidgetItem()
    item.setData(Qt.ItemDataRole.DisplayRole, value)
    return item


def _sortable(table: QTableWidget) -> None:
    """A header click sorts by that column (rather than selecting it); the rows stay in
    the order given until then."""
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    header = table.horizontalHeader()
    assert header is not None
    header.setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
    header.setSortIndicatorShown(True)
    table.setSortingEnabled(True)
    vertical = table.verticalHeader()
    assert vertical is not None
    vertical.setVisible(False)
    vertical.setDefaultSectionSize(table.fontMetrics().height() + 8)


class TaskSuiteDialog(QDialog):
    def __init__(self, folder: Path, domains: Sequence[SuiteDomain],
                 tasks: Sequence[SuiteTask], parent: QWidget | None = None,
                 action: str = EVALUATE) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Task suite: {folder.name}")
        self.folder = folder
        self.tasks = list(tasks)
        runnable = sum(t.runnable for t in self.tasks)
        self.summary = QLabel(f"{folder}: {len(self.tasks)} task(s) in {len(domains) - 1} "
                              f"domain(s); {runnable} run in a sandbox here")
        self.summary.setWordWrap(True)
        self.domain_table = self._domain_table(domains)
        self.task_table = self._task_table()
        self.detail = QLabel("")  # the current task's whole instruction and why not
        self.detail.setObjectName("task-detail")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.task_table.currentCellChanged.connect(lambda row, *_: self._show_detail(row))

        self.domain_filter = QComboBox()
        self.domain_filter.setToolTip("Show the tasks of one domain (a click on a domain's "
                                      "row above does too)")
        self.domain_filter.addItem(ALL_DOMAINS, "")
        for domain in sorted({t.domain for t in self.tasks}):
            count = sum(t.domain == domain for t in self.tasks)
            self.domain_filter.addItem(f"{domain} ({count})", domain)
        self.domain_filter.currentIndexChanged.connect(lambda _: self._filter())
        self.domain_table.cellClicked.connect(self._domain_clicked)
        self.only_runnable = QCheckBox("Only the tasks that run here")
        self.only_runnable.toggled.connect(lambda _: self._filter())
        choose = QPushButton("Choose all that run here")
        choose.setToolTip("Tick every task that runs in a sandbox here (in every domain)")
        choose.clicked.connect(self.choose_runnable)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.action_button = self.buttons.addButton(
            action, QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.task_table.itemChanged.connect(lambda _: self._update_buttons())

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(self.domain_table)
        tasks_box = QWidget()
        tasks_layout = QVBoxLayout(tasks_box)
        tasks_layout.setContentsMargins(0, 0, 0, 0)
        tasks_layout.addWidget(self.task_table, 1)
        tasks_layout.addWidget(self.detail)
        self.splitter.addWidget(tasks_box)
        self.splitter.setChildrenCollapsible(False)
        filters = QHBoxLayout()
        filters.addWidget(QLabel("Domain"))
        filters.addWidget(self.domain_filter)
        filters.addWidget(self.only_runnable)
        filters.addStretch(1)
        filters.addWidget(choose)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.splitter, 1)
        layout.addLayout(filters)
        layout.addWidget(self.buttons)
        self._size_to_screen()
        self._update_buttons()

    # -- the tables -----------------------------------------------------------------------

    def _domain_table(self, domains: Sequence[SuiteDomain]) -> QTableWidget:
        table = QTableWidget(len(domains), len(DOMAIN_COLUMNS))
        table.setHorizontalHeaderLabels(DOMAIN_COLUMNS)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setToolTip("Click a domain to list its tasks below; click a header to sort")
        for row, domain in enumerate(domains):
            counts = (domain.tasks, domain.loads, domain.ready, domain.downloads,
                      domain.accounts, domain.vm, domain.sandbox)
            items = [QTableWidgetItem(domain.domain), *map(_number, counts)]
            failed = (QTableWidgetItem("") if domain.failed_commands is None
                      else _number(domain.failed_commands))
            if domain.failed_commands:
                failed.setForeground(QColor(FAILED_COLOR))
                failed.setToolTip("setup and postconfig commands that exited non-zero in "
                                  "the last `workbench tasks smoke` runs (not counting "
                                  "those that need the web or fail on OSWorld's image)")
            for column, item in enumerate([*items, failed]):
                table.setItem(row, column, item)
        table.resizeColumnsToContents()
        smoked = any(t.smoke for t in self.tasks)
        # shown once `workbench tasks smoke` has run this folder in this workspace
        table.setColumnHidden(len(DOMAIN_COLUMNS) - 1, not smoked)
        _sortable(table)
        return table

    def _task_table(self) -> QTableWidget:
        table = QTableWidget(len(self.tasks), len(TASK_COLUMNS))
        table.setHorizontalHeaderLabels(TASK_COLUMNS)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setWordWrap(False)
        for row, task in enumerate(self.tasks):
            chosen = QTableWidgetItem(task.id)
            chosen.setFlags(chosen.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            chosen.setCheckState(Qt.CheckState.Unchecked)
            chosen.setData(TASK_ROW, row)
            chosen.setToolTip(f"{task.file}\n{task.instruction}".strip())
            state = QTableWidgetItem(task.state)
            state.setForeground(QColor("#1b7f3b" if task.runnable else "#b3261e"))
            why = QTableWidgetItem(task.why)
            why.setToolTip(task.why)
            smoke = QTableWidgetItem(task.smoke)
            smoke.setToolTip(task.smoke_details or task.smoke)
            if task.smoke and task.smoke != "ok":
                smoke.setForeground(QColor(FAILED_COLOR))
            instruction = QTableWidgetItem(task.instruction)
            instruction.setToolTip(task.instruction)
            for column, item in enumerate((chosen, QTableWidgetItem(task.domain), state, why,
                                           smoke, instruction)):
                table.setItem(row, column, item)
        table.resizeColumnsToContents()
        table.setColumnHidden(SMOKE_COLUMN, not any(t.smoke for t in self.tasks))
        header = table.horizontalHeader()
        assert header is not None
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(WHY_COLUMN, QHeaderView.ResizeMode.Stretch)
        header.moveSection(header.visualIndex(INSTRUCTION_COLUMN), 1)
        metrics = table.fontMetrics()
        # as wide as its widest id (a fixed 280 pixels cut a UUID by a few and wrapped it)
        most = metrics.horizontalAdvance("0" * TASK_COLUMN_CHARACTERS)
        table.setColumnWidth(0, min(table.sizeHintForColumn(0), most))
        table.setColumnWidth(INSTRUCTION_COLUMN, min(
            table.sizeHintForColumn(INSTRUCTION_COLUMN),
            metrics.averageCharWidth() * INSTRUCTION_COLUMN_CHARACTERS))
        _sortable(table)
        return table

    def _size_to_screen(self) -> None:
        """1000 x 640 where the screen has room, less where it has not; the domain table as
        tall as its rows (every domain in view) up to DOMAIN_SHARE of the tables."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        room = screen.availableGeometry() if screen is not None else None
        width = 1000 if room is None else min(1000, room.width() - 40)
        height = 640 if room is None else min(700, room.height() - 60)
        self.resize(width, height)
        header = self.domain_table.horizontalHeader()
        vertical = self.domain_table.verticalHeader()
        assert header is not None and vertical is not None
        frame = 2 * self.domain_table.frameWidth()
        wanted = header.sizeHint().height() + vertical.length() + frame
        tables = max(height - 160, 200)  # the summary, filters and buttons take the rest
        top = min(wanted, int(tables * DOMAIN_SHARE))
        self.splitter.setSizes([top, tables - top])

    # -- choosing -------------------------------------------------------------------------

    def _rows(self) -> list[tuple[int, SuiteTask]]:
        """(table row, task) in the table's order (sorted as the person sorted it)."""
        found = []
        for row in range(self.task_table.rowCount()):
            item = self.task_table.item(row, 0)
            if item is not None:
                found.append((row, self.tasks[int(item.data(TASK_ROW))]))
        return found

    def chosen(self) -> list[SuiteTask]:
        """The ticked tasks, in the table's order."""
        return [task for row, task in self._rows()
                if (item := self.task_table.item(row, 0)) is not None
                and item.checkState() == Qt.CheckState.Checked]

    def chosen_files(self) -> list[str]:
        return [task.file for task in self.chosen()]

    def _tick(self, wanted: set[str] | None) -> None:
        """Tick exactly the tasks whose ids are in `wanted` (None: those that run here)."""
        for row, task in self._rows():
            item = self.task_table.item(row, 0)
            ticked = task.runnable if wanted is None else task.id in wanted
            if item is not None:
                item.setCheckState(Qt.CheckState.Checked if ticked
                                   else Qt.CheckState.Unchecked)

    def choose(self, task_ids: Sequence[str]) -> None:
        """Tick exactly these tasks."""
        self._tick(set(task_ids))

    def choose_runnable(self) -> None:
        self._tick(None)

    # -- filtering ------------------------------------------------------------------------

    def domain_shown(self) -> str:
        """The domain whose tasks are listed ("": every domain)."""
        return str(self.domain_filter.currentData() or "")

    def show_domain(self, domain: str) -> None:
        """List only `domain`'s tasks ("" or "all": every domain's)."""
        index = self.domain_filter.findData("" if domain == "all" else domain)
        self.domain_filter.setCurrentIndex(max(index, 0))

    def _domain_clicked(self, row: int, _column: int) -> None:
        item = self.domain_table.item(row, 0)
        if item is not None:
            self.show_domain(item.text())

    def _filter(self) -> None:
        domain, only = self.domain_shown(), self.only_runnable.isChecked()
        for row, task in self._rows():
            self.task_table.setRowHidden(row, (only and not task.runnable)
                                         or bool(domain and task.domain != domain))

    def shown_tasks(self) -> list[SuiteTask]:
        """The tasks the table lists now, in its order."""
        return [task for row, task in self._rows() if not self.task_table.isRowHidden(row)]

    def _show_detail(self, row: int) -> None:
        item = self.task_table.item(row, 0) if row >= 0 else None
        if item is None:
            self.detail.setText("")
            return
        task = self.tasks[int(item.data(TASK_ROW))]
        text = html.escape
        self.detail.setText(f"<b>{text(task.id)}</b> ({text(task.domain)}): "
                            f"{text(task.instruction or '(no instruction)')}"
                            + (f"<br><i>{text(task.state)}: {text(task.why)}</i>"
                               if task.why else ""))

    def _update_buttons(self) -> None:
        if self.action_button is not None:
            self.action_button.setEnabled(bool(self.chosen()))
