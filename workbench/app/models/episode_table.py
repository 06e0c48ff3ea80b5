"""The episode table: a QAbstractTableModel over EpisodeRows (ids only; a row's contents
are read from the store when the view first asks for them). Sorting re-runs the query in
the store; there is no proxy model, which would read every row."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from PyQt6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PyQt6.QtGui import QColor

from trainer.store import EpisodeFilter, EpisodeSummary
from workbench.services.episode_rows import EpisodeRows

Index = QModelIndex | QPersistentModelIndex
EPISODE_ID_ROLE = Qt.ItemDataRole.UserRole  # the episode id (never reads the store)
SUCCESS_COLOUR = QColor("#1b7f3b")
FAILURE_COLOUR = QColor("#b3261e")
WARNING_COLOUR = QColor("#9a5b00")  # done, but its setup had a command that failed
SETUP_FAILED_MARK = "setup failed"


@dataclass(frozen=True)
class EpisodeColumn:
    title: str
    sort: str | None  # the store's sort key; None: not sortable


COLUMNS: tuple[EpisodeColumn, ...] = (
    EpisodeColumn("Task", "task_id"),
    EpisodeColumn("Instruction", None),
    EpisodeColumn("Source", "source"),
    EpisodeColumn("Version", "policy_version"),
    EpisodeColumn("Score", "score"),
    EpisodeColumn("Steps", "step_count"),
    EpisodeColumn("Status", "status"),
    EpisodeColumn("Tags", None),
    EpisodeColumn("Review", None),
    EpisodeColumn("Created", "created_at"),
)
NUMERIC = {"Version", "Score", "Steps"}


def review_text(summary: EpisodeSummary) -> str:
    parts = []
    if summary.verdict is not None:
        mark = "✓ accepted" if summary.verdict == "accept" else "✗ rejected"
        parts.append(f"{mark} ({summary.reviewer})" if summary.reviewer else mark)
    if summary.annotation_count:
        parts.append(f"✎{summary.annotation_count}")
    if summary.in_pool:
        parts.append("★ pool")
    return " ".join(parts)


def cell_text(summary: EpisodeSummary, title: str) -> str:
    match title:
        case "Task":
            return summary.task_id
        case "Instruction":
            return summary.instruction
        case "Source":
            return summary.source
        case "Version":
            return "" if summary.policy_version is None else str(summary.policy_version)
        case "Score":
            return "" if summary.score is None else f"{summary.score:.2f}"
        case "Steps":
            return str(summary.step_count)
        case "Status":
            if summary.setup_failed:  # scored, but not from the task's state
                return f"{summary.status} · {SETUP_FAILED_MARK}"
            return summary.status
        case "Tags":
            return ", ".join(summary.tags)
        case "Review":
            return review_text(summary)
        case "Created":
            return datetime.datetime.fromtimestamp(summary.created_at).strftime(
                "%Y-%m-%d %H:%M")
    return ""


class EpisodeTableModel(QAbstractTableModel):
    def __init__(self, rows: EpisodeRows, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.rows = rows

    # -- queries ------------------------------------------------------------------------

    def search(self, selection: EpisodeFilter | None = None) -> None:
        """Show the episodes matching `selection` (None: the current filter again)."""
        self.beginResetModel()
        self.rows.search(selection)
        self.endResetModel()

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        key = COLUMNS[column].sort if 0 <= column < len(COLUMNS) else None
        if key is None:
            return
        self.beginResetModel()
        self.rows.search(sort=key, descending=order == Qt.SortOrder.DescendingOrder)
        self.endResetModel()

    def sort_column(self) -> int:
        for i, column in enumerate(COLUMNS):
            if column.sort == self.rows.sort:
                return i
        return -1

    def episode_id(self, row: int) -> str:
        return self.rows.id_at(row)

    def row_of(self, episode_id: str) -> int | None:
        return self.rows.row_of(episode_id)

    def refresh_episodes(self, episode_ids: Iterable[str]) -> None:
        """These episodes changed (annotated, pooled): read their rows again when shown."""
        for row in self.rows.forget(episode_ids):
            self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))

    # -- the model ----------------------------------------------------------------------

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self.rows):
            return None
        if role == EPISODE_ID_ROLE:
            return self.rows.id_at(index.row())
        title = COLUMNS[index.column()].title
        if role == Qt.ItemDataRole.TextAlignmentRole:
            if title in NUMERIC:
                return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            return None
        if role not in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole,
                        Qt.ItemDataRole.ForegroundRole):
            return None
        summary = self.rows.summary(index.row())
        if summary is None:  # deleted since the search
            return "(deleted)" if role == Qt.ItemDataRole.DisplayRole and title == "Task" \
                else None
        if role == Qt.ItemDataRole.ForegroundRole:
            if title == "Score" and summary.score is not None:
                return SUCCESS_COLOUR if summary.score >= 0.5 else FAILURE_COLOUR
            if title == "Status" and summary.status == "error":
                return FAILURE_COLOUR
            if title == "Status" and summary.setup_failed:
                return WARNING_COLOUR
            if title == "Review" and summary.verdict is not None:
                return SUCCESS_COLOUR if summary.verdict == "accept" else FAILURE_COLOUR
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            if title in ("Instruction", "Task"):
                return summary.instruction or summary.task_id
            if title == "Status" and summary.error:
                return summary.error
            if title == "Review":
                return review_text(summary) or None
            return None
        return cell_text(summary, title)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(COLUMNS):
            return COLUMNS[section].title
        if orientation == Qt.Orientation.Vertical:
            return str(section + 1)
        return None
