"""One training plot in a window of its own (Enlarge…): the plot itself moves there, its
lines, crosshair and zoom with it, and goes back to the grid when the window closes. The
window opens over most of the screen and can be maximised to fill it."""

from __future__ import annotations

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PyQt6.QtWidgets import QVBoxLayout, QWidget

SCREEN_SHARE = 0.85  # of the screen's width and height, at first


class PlotWindow(QWidget):
    closed = pyqtSignal(str)  # the plot's title: take it back

    def __init__(self, title: str, plot: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.title = title
        self.plot = plot
        self.setWindowTitle(f"{title} · training plots")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(plot)
        plot.show()
        close = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        close.activated.connect(self.close)
        screen = (parent.screen() if parent is not None else None) or self.screen()
        if screen is not None:
            room = screen.availableGeometry()
            self.resize(int(room.width() * SCREEN_SHARE), int(room.height() * SCREEN_SHARE))
            self.move(room.center() - self.rect().center())

    def release(self) -> QWidget:
        """The plot, out of this window (to go back to the grid)."""
        layout = self.layout()
        if layout is not None:
            layout.removeWidget(self.plot)
        return self.plot

    def closeEvent(self, event: QCloseEvent | None) -> None:
        super().closeEvent(event)
        self.closed.emit(self.title)
