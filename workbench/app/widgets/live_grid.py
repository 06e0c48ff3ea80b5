"""A grid of live desktops: one tile per running environment, its screen updating a few
times a second, its name and what runs on it.

Each tile watches its desktop through a `LiveFeed` (workbench.app.widgets.live_view):
screenshots are grabbed and decoded on the feed's own thread and reach the tile as
signals, so the grid never waits for a desktop. Feeds run only while the grid is active
(`set_active`), so a hidden grid costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtGui import QImage, QMouseEvent
from PyQt6.QtWidgets import QFrame, QGridLayout, QLabel, QVBoxLayout, QWidget

from vm.providers.base import Provider
from workbench.app.widgets.live_view import LiveFeed
from workbench.app.widgets.screenshot_view import ScreenshotView

GRID_INTERVAL_S = 0.4  # a tile's screen about 2-3 times a second


class LiveTile(QFrame):
    """One environment: its screen, its name and a line on the episode running there."""

    activated = pyqtSignal(str)  # the environment's name (double-click)

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.feed: LiveFeed | None = None
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.view = ScreenshotView()
        self.view.setMinimumSize(200, 125)
        self.view.zoomable = False  # the wheel scrolls the grid; the tile opens big
        self.view.message = "waiting for the first screen…"
        self.title = QLabel(f"<b>{name}</b>")
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.episode = QLabel("no episode running")
        self.episode.setWordWrap(True)
        self.status = QLabel("")
        self.status.setStyleSheet("color: #b00020")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(2)
        layout.addWidget(self.title)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.episode)
        layout.addWidget(self.status)

    @property
    def frames(self) -> int:
        """Frames shown since the tile's feed last started."""
        return self.feed.frames if self.feed is not None else 0

    @property
    def running(self) -> bool:
        return self.feed is not None

    def start(self, provider: Provider, interval_s: float = GRID_INTERVAL_S) -> None:
        if self.feed is not None:
            return
        self.feed = LiveFeed(provider, interval_s=interval_s, parent=self)
        self.feed.frame.connect(self._frame)
        self.feed.error.connect(self.status.setText)
        self.feed.start()

    def stop(self) -> None:
        if self.feed is not None:
            self.feed.stop()
            self.feed.deleteLater()
            self.feed = None

    def set_episode(self, text: str, tip: str = "") -> None:
        self.episode.setText(text)
        self.episode.setToolTip(tip)

    def _frame(self, image: QImage) -> None:
        self.view.set_image(image)
        if self.status.text():
            self.status.setText("")  # the desktop answers again

    def mouseDoubleClickEvent(self, event: QMouseEvent | None) -> None:
        self.activated.emit(self.name)
        super().mouseDoubleClickEvent(event)


class LiveGrid(QWidget):
    """Tiles of the environments named in `set_environments`, laid out in a square-ish
    grid; `provider_for(name)` gives the desktop a tile watches."""

    activated = pyqtSignal(str)

    def __init__(self, provider_for: Callable[[str], Provider],
                 interval_s: float = GRID_INTERVAL_S, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.provider_for = provider_for
        self.interval_s = interval_s
        self.active = False
        self.tiles: dict[str, LiveTile] = {}
        self.empty = QLabel("No environment is running. Start one on the Environments "
                            "screen, or start a training run or `workbench rollout`.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.layout_grid = QGridLayout(self)
        self.layout_grid.setContentsMargins(4, 4, 4, 4)
        self.layout_grid.setSpacing(6)
        self.layout_grid.addWidget(self.empty, 0, 0)

    def names(self) -> list[str]:
        return list(self.tiles)

    def tile(self, name: str) -> LiveTile | None:
        return self.tiles.get(name)

    def set_environments(self, names: Sequence[str]) -> None:
        """Show a tile for each of `names` (in that order); tiles of others go."""
        wanted = list(dict.fromkeys(names))
        for name in [n for n in self.tiles if n not in wanted]:
            tile = self.tiles.pop(name)
            tile.stop()
            self.layout_grid.removeWidget(tile)
            tile.deleteLater()
        for name in wanted:
            if name not in self.tiles:
                tile = LiveTile(name, self)
                tile.activated.connect(self.activated)
                self.tiles[name] = tile
                if self.active:
                    self._start(tile)
        self._relayout(wanted)

    def _relayout(self, order: list[str]) -> None:
        for tile in self.tiles.values():
            self.layout_grid.removeWidget(tile)
        self.layout_grid.removeWidget(self.empty)
        self.empty.setVisible(not order)
        if not order:
            self.layout_grid.addWidget(self.empty, 0, 0)
            return
        columns = max(1, math.ceil(math.sqrt(len(order))))
        for i, name in enumerate(order):
            self.layout_grid.addWidget(self.tiles[name], i // columns, i % columns)

    def set_active(self, active: bool) -> None:
        """Start (or stop) every tile's feed: only a visible grid grabs screens."""
        self.active = active
        for tile in self.tiles.values():
            if active:
                self._start(tile)
            else:
                tile.stop()

    def _start(self, tile: LiveTile) -> None:
        try:
            tile.start(self.provider_for(tile.name), self.interval_s)
        except Exception as exc:  # a desktop that went away between listing and here
            tile.status.setText(f"cannot watch {tile.name}: {exc}")

    def stop(self) -> None:
        self.set_active(False)
