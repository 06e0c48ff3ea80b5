"""The success pool per task: how many curated successes each task has, its recent
success rate, the hard tasks that still have none, and the pooled episodes of a task."""

from __future__ import annotations

import datetime

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from trainer.store import Store
from trainer.store.pool import PoolEntry
from workbench.app.models.record_table import Column, RecordTableModel
from workbench.app.widgets.record_table import record_table_view
from workbench.services.success_pool import TaskPoolRow, pool_overview

TASK_COLUMNS: tuple[Column[TaskPoolRow], ...] = (
    Column("Task", lambda r: r.task_id, lambda r: r.instruction),
    Column("Pooled", lambda r: str(r.pooled), align_right=True),
    Column("Success rate", lambda r: "–" if r.success_rate is None
           else f"{r.success_rate:.0%}", lambda r: f"over the newest {r.scored} scored "
           "episode(s)", align_right=True),
    Column("Hard", lambda r: ("needs a success" if r.needs_success else "hard")
           if r.hard else ""),
    Column("Instruction", lambda r: r.instruction, lambda r: r.instruction),
)
ENTRY_COLUMNS: tuple[Column[PoolEntry], ...] = (
    Column("Episode", lambda e: e.episode_id[:12], lambda e: e.episode_id),
    Column("Source", lambda e: e.source),
    Column("Version", lambda e: "" if e.policy_version is None else str(e.policy_version),
           align_right=True),
    Column("Score", lambda e: "" if e.score is None else f"{e.score:.2f}", align_right=True),
    Column("Added", lambda e: datetime.datetime.fromtimestamp(e.added_at).strftime(
        "%Y-%m-%d %H:%M")),
    Column("By", lambda e: e.added_by),
    Column("Note", lambda e: e.note),
)




class PoolView(QWidget):
    open_episode = pyqtSignal(str)
    show_task = pyqtSignal(str)  # filter the episode table to this task

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store: Store | None = None
        self.rows: list[TaskPoolRow] = []
        self._stale = False  # refreshed while hidden: read when next shown
        self.only_needing = QCheckBox("Only hard tasks with no success")
        self.only_needing.setToolTip("Tasks whose recent success rate is low (or never "
                                     "scored) and whose pool is empty")
        self.only_needing.toggled.connect(self._show_rows)
        self.summary = QLabel("")
        self.task_model: RecordTableModel[TaskPoolRow] = RecordTableModel(TASK_COLUMNS, self)
        self.task_view = record_table_view(self.task_model)
        for column, width in enumerate((180, 60, 90, 120)):
            self.task_view.setColumnWidth(column, width)
        self.entry_model: RecordTableModel[PoolEntry] = RecordTableModel(ENTRY_COLUMNS, self)
        self.entry_view = record_table_view(self.entry_model)
        self.entry_view.doubleClicked.connect(
            lambda index: self.open_episode.emit(self.entry_model.record(index.row()).episode_id))
        self.show_button = QPushButton("Show this task's episodes")
        self.show_button.clicked.connect(self._show_task)
        selection = self.task_view.selectionModel()
        assert selection is not None
        selection.currentRowChanged.connect(lambda current, _: self._show_entries())

        top = QHBoxLayout()
        top.addWidget(self.only_needing)
        top.addStretch(1)
        top.addWidget(self.summary)
        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        buttons = QHBoxLayout()
        buttons.addWidget(QLabel("Pooled successes of the chosen task (double-click opens)"))
        buttons.addStretch(1)
        buttons.addWidget(self.show_button)
        lower_layout.addLayout(buttons)
        lower_layout.addWidget(self.entry_view)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.task_view)
        splitter.addWidget(lower)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)

    def set_store(self, store: Store | None) -> None:
        self.store = store
        self.refresh()

    def refresh(self) -> None:
        """Read the overview again; while the tab is hidden, only note that it is stale
        (at 100k episodes it reads every task's statistics: half a second of the first
        window). `refresh_if_stale` reads it when the tab is shown."""
        if self.isHidden():
            self._stale = True
            return
        self._stale = False
        self.rows = pool_overview(self.store) if self.store is not None else []
        self._show_rows()

    def refresh_if_stale(self) -> None:
        if self._stale:
            self.refresh()

    def _show_rows(self) -> None:
        rows = [r for r in self.rows if r.needs_success] if self.only_needing.isChecked() \
            else self.rows
        self.task_model.set_records(rows)
        needing = sum(1 for r in self.rows if r.needs_success)
        self.summary.setText(f"{len(self.rows)} task(s), "
                             f"{sum(1 for r in self.rows if r.pooled)} with pooled successes, "
                             f"{needing} hard task(s) with none")
        self._show_entries()

    def current_task(self) -> str | None:
        index = self.task_view.currentIndex()
        if not index.isValid():
            return None
        return self.task_model.record(index.row()).task_id

    def _show_entries(self) -> None:
        task = self.current_task()
        entries = self.store.pool.entries(task) if self.store is not None and task else []
        self.entry_model.set_records(entries)
        self.show_button.setEnabled(task is not None)

    def _show_task(self) -> None:
        task = self.current_task()
        if task is not None:
            self.show_task.emit(task)
