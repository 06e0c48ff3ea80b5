"""The episode list as a drawer: the filter and the episode table in a panel laid over
the right of the Episode view (over the column beside the screenshot), so that opening
it leaves the screenshot where it is and most of it in view. L or the list's button opens
and closes it; Esc in the table closes it and gives the keys back to the screenshot."""

from __future__ import annotations

from PyQt6.QtCore import QRect, Qt, pyqtSignal
from PyQt6.QtGui import QKeyEvent
from PyQt6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHeaderView,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from workbench.app.models.episode_table import COLUMNS, EpisodeTableModel

# Columns in the order a reviewer reads them in a narrow drawer (the verdict beside the
# task); the rest scroll into view.
COLUMN_ORDER = ("Task", "Review", "Score", "Status", "Steps", "Source", "Version",
                "Instruction", "Tags", "Created")
COLUMN_WIDTHS = {"Task": 130, "Instruction": 320, "Source": 70, "Version": 60,
                 "Score": 50, "Steps": 45, "Status": 60, "Tags": 110, "Created": 125}
REVIEW_SAMPLE = "✗ rejected ({author}) ✎99"  # the Review column is as wide as this
DRAWER_SHARE = 0.33  # of the page's width
DRAWER_WIDTHS = (400, 720)  # pixels: the narrowest and widest drawer


def episode_table(model: EpisodeTableModel, author: str) -> QTableView:
    """The episode table: rows selected whole, no editing, fixed widths (resizing to
    contents would read every row), the Review column wide enough for its verdict."""
    table = QTableView()
    table.setModel(model)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setWordWrap(False)
    table.setAlternatingRowColors(True)
    header = table.horizontalHeader()
    assert header is not None
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    header.setStretchLastSection(True)
    titles = [column.title for column in COLUMNS]
    review_width = table.fontMetrics().horizontalAdvance(
        REVIEW_SAMPLE.format(author=author[:16])) + 16
    for i, title in enumerate(titles):
        table.setColumnWidth(i, review_width if title == "Review"
                             else COLUMN_WIDTHS.get(title, 90))
    for visual, title in enumerate(COLUMN_ORDER):
        if title in titles:
            header.moveSection(header.visualIndex(titles.index(title)), visual)
    # The indicator first: enabling sorting sorts by whatever it shows.
    header.setSortIndicator(model.sort_column(), Qt.SortOrder.DescendingOrder)
    table.setSortingEnabled(True)
    vertical = table.verticalHeader()
    assert vertical is not None
    vertical.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
    vertical.setDefaultSectionSize(22)
    return table


class EpisodeDrawer(QFrame):
    """A panel over its parent: `place` puts it at the right of an area."""

    close_requested = pyqtSignal()  # Esc in the drawer (outside a text field)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("episodeDrawer")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)  # over the screenshot: opaque
        self.setStyleSheet("#episodeDrawer { border-left: 3px solid #9aa0a6; }")
        self.content = QVBoxLayout(self)
        self.content.setContentsMargins(6, 4, 4, 4)

    def add(self, widget: QWidget, stretch: int = 0) -> None:
        self.content.addWidget(widget, stretch)

    def place(self, area: QRect) -> None:
        """At the right of `area` (the parent's coordinates), its full height."""
        width = min(max(round(area.width() * DRAWER_SHARE), DRAWER_WIDTHS[0]),
                    DRAWER_WIDTHS[1], area.width())
        self.setGeometry(QRect(area.right() + 1 - width, area.top(), width, area.height()))
        self.raise_()

    def keyPressEvent(self, event: QKeyEvent | None) -> None:
        if event is not None and event.key() == Qt.Key.Key_Escape:
            self.close_requested.emit()
            event.accept()
            return
        super().keyPressEvent(event)
