"""A step's screenshots at full size in a window of their own, full screen: the screen
before the step with its marks (and the screen after it, beside it, zooming and panning
together). It mirrors the views it was opened from, so stepping, labelling and picking a
corrected point go on while it is open. Esc, F or a double-click closes it."""

from __future__ import annotations

from collections.abc import Sequence

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtGui import QCloseEvent, QKeyEvent
from PyQt6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from workbench.app.widgets.screenshot_view import ScreenshotView, ZoomLink
from workbench.services.viewport import ZoomState

HINT = ("Esc close · ←/→ step · Space play · +/− or Ctrl+wheel zoom · W fit · Z 100% · "
        "drag or scroll to pan")
STEP_KEYS = {Qt.Key.Key_Left: "previous", Qt.Key.Key_Right: "next",
             Qt.Key.Key_Home: "first", Qt.Key.Key_End: "last", Qt.Key.Key_Space: "play"}


class ScreenshotWindow(QWidget):
    step_requested = pyqtSignal(str)  # "previous", "next", "first", "last" or "play"
    closed = pyqtSignal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setWindowTitle("Screenshot")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # the keys come here
        self.setStyleSheet("background: #202124; color: #e8eaed")
        self.caption = QLabel("")
        # a long instruction is cut, not a reason for a window wider than the screen
        self.caption.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.hint = QLabel(HINT)
        self.hint.setStyleSheet("color: #9aa0a6")
        self.zoom_label = QLabel("")
        top = QHBoxLayout()
        top.addWidget(self.caption, 1)
        top.addWidget(self.zoom_label)
        self.views = [ScreenshotView(), ScreenshotView()]
        self.titles = [QLabel(""), QLabel("")]
        self.boxes: list[QWidget] = []
        self.sources: list[ScreenshotView] = []
        self.link = ZoomLink(self.views, self)
        panes = QHBoxLayout()
        panes.setContentsMargins(0, 0, 0, 0)
        for view, title in zip(self.views, self.titles, strict=True):
            box = QWidget()
            layout = QVBoxLayout(box)
            layout.setContentsMargins(0, 0, 0, 0)
            layout.addWidget(title)
            layout.addWidget(view, 1)
            panes.addWidget(box, 1)
            self.boxes.append(box)
            view.full_screen_requested.connect(self.close)
            view.zoom_changed.connect(self._show_zoom)
        # a point picked here is picked on the view this pane shows
        self.views[0].point_picked.connect(lambda x, y: self._picked(0, x, y))
        self.views[1].point_picked.connect(lambda x, y: self._picked(1, x, y))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addLayout(top)
        layout.addLayout(panes, 1)
        layout.addWidget(self.hint)

    def show_panes(self, panes: Sequence[tuple[str, ScreenshotView]], caption: str = ""
                   ) -> None:
        """Show these views (one or two), each under its title, and what they show."""
        self.sources = [view for _, view in panes][:len(self.views)]
        for i, (view, title, box) in enumerate(zip(self.views, self.titles, self.boxes,
                                                   strict=True)):
            box.setVisible(i < len(self.sources))
            if i < len(self.sources):
                title.setText(panes[i][0])
                view.copy_content(self.sources[i])
        self.caption.setText(caption)
        self._show_zoom()

    def start_at(self, state: ZoomState) -> None:
        self.views[0].set_zoom_state(state)  # the link brings the other pane along

    def _picked(self, pane: int, x: int, y: int) -> None:
        if pane < len(self.sources):
            self.sources[pane].point_picked.emit(x, y)

    def _show_zoom(self) -> None:
        self.zoom_label.setText(self.views[0].zoom_text())

    def keyPressEvent(self, event: QKeyEvent | None) -> None:
        if event is None:
            return
        key = Qt.Key(event.key())
        ctrl = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
        view = self.views[0]
        if key in (Qt.Key.Key_Escape, Qt.Key.Key_F):
            self.close()
        elif key in STEP_KEYS:
            self.step_requested.emit(STEP_KEYS[key])
        elif key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            view.zoom_in()
        elif key == Qt.Key.Key_Minus:
            view.zoom_out()
        elif key == Qt.Key.Key_W or (ctrl and key == Qt.Key.Key_0):
            view.zoom_fit()
        elif key == Qt.Key.Key_Z:
            view.zoom_actual()
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def closeEvent(self, event: QCloseEvent | None) -> None:
        self.closed.emit()
        super().closeEvent(event)
