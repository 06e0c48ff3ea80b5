"""A desktop's screen, live, with manual control: while control is on, mouse and keyboard
on the picture become Actions (a click, a drag, a scroll, typed text, keys and hotkeys)
at screen coordinates, emitted for the environment to perform.

`LiveFeed` adapts a workbench.services.live_session.LiveSession to Qt: screenshots are
grabbed and decoded into QImages on the session's thread and arrive here as signals."""

from __future__ import annotations

import time
from collections import deque

from PyQt6.QtCore import QEvent, QObject, Qt, pyqtSignal
from PyQt6.QtGui import (
    QColor,
    QFocusEvent,
    QImage,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QWheelEvent,
)
from PyQt6.QtWidgets import QWidget

from vm.actions import Action, MouseButton
from vm.providers.base import Provider
from workbench.app.keys import key_action
from workbench.app.widgets.screenshot_view import ScreenshotView
from workbench.services.live_session import DEFAULT_INTERVAL_S, LiveSession
from workbench.services.pointer_input import PointerGesture, wheel_scroll

BUTTONS: dict[Qt.MouseButton, MouseButton] = {
    Qt.MouseButton.LeftButton: "left", Qt.MouseButton.RightButton: "right",
    Qt.MouseButton.MiddleButton: "middle"}


BLANK_HINT = ("Nothing is open on this desktop yet.\n"
              "Choose a task below and press Record: its setup opens the task's "
              "applications and documents.\nRollouts, evaluations and training runs set "
              "their desktops up themselves.")
BLANK_SAMPLES = 24  # a grid of this many by this many pixels decides "one colour"


def decode_png(png: bytes) -> QImage:
    return QImage.fromData(png, "PNG")


def is_blank(image: QImage | None) -> bool:
    """True when a grid of pixels across the image all have one colour: a desktop with no
    window and no wallpaper (a new sandbox is black)."""
    if image is None or image.isNull():
        return False
    width, height = image.width(), image.height()
    first = image.pixel(0, 0)
    for i in range(BLANK_SAMPLES):
        for j in range(BLANK_SAMPLES):
            x = min(width - 1, (2 * i + 1) * width // (2 * BLANK_SAMPLES))
            y = min(height - 1, (2 * j + 1) * height // (2 * BLANK_SAMPLES))
            if image.pixel(x, y) != first:
                return False
    return True


class LiveFeed(QObject):
    """Frames of one provider as `frame` signals (QImage), errors as `error`."""

    frame = pyqtSignal(QImage)
    error = pyqtSignal(str)

    def __init__(self, provider: Provider, interval_s: float = DEFAULT_INTERVAL_S,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.provider = provider
        self.session = LiveSession(provider, on_frame=self.frame.emit,
                                   on_error=self.error.emit, transform=decode_png,
                                   interval_s=interval_s)
        self._times: deque[float] = deque(maxlen=20)
        self.frame.connect(self._arrived)

    def start(self) -> LiveFeed:
        self.session.start()
        return self

    def stop(self) -> None:
        self.session.stop()

    def perform(self, action: Action) -> None:
        self.session.perform(action)

    def _arrived(self, _image: QImage) -> None:
        self._times.append(time.monotonic())
        self.session.frame_taken()

    @property
    def frames(self) -> int:
        return self.session.frames

    def rate(self) -> float:
        """Frames per second over the last few frames."""
        if len(self._times) < 2:
            return 0.0
        span = self._times[-1] - self._times[0]
        return (len(self._times) - 1) / span if span > 0 else 0.0


class LiveView(ScreenshotView):
    action = pyqtSignal(object)  # an Action, while control is on

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.control = False
        self._gesture = PointerGesture()
        self.message = "no environment chosen"
        self.blank = False  # the frame shown has one colour: a hint says what to do
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def set_image(self, image: QImage | None, message: str = "no screenshot") -> None:
        self.blank = is_blank(image)
        super().set_image(image, message)

    def set_control(self, on: bool) -> None:
        self.control = on
        self._update_cursor()
        if on:
            self.setFocus(Qt.FocusReason.OtherFocusReason)
        self.update()

    def _cursor_shape(self) -> Qt.CursorShape:
        if self.control:
            return Qt.CursorShape.PointingHandCursor
        return super()._cursor_shape()

    def _point(self, event: QMouseEvent | QWheelEvent) -> tuple[int, int] | None:
        return self.placement().to_screen(event.position().x(), event.position().y())

    def _press(self, event: QMouseEvent) -> bool:
        """Start a gesture under manual control; False when the event is not ours."""
        point = self._point(event)
        button = BUTTONS.get(event.button())
        if not (self.control and point is not None and button is not None):
            return False
        self._gesture.press(point, button)
        event.accept()
        return True

    def mousePressEvent(self, event: QMouseEvent | None) -> None:
        if event is None:
            return
        self.setFocus(Qt.FocusReason.MouseFocusReason)
        if not self._press(event):
            super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent | None) -> None:
        if event is None:
            return
        if not self.control:
            super().mouseReleaseEvent(event)
            return
        point = self._point(event)
        if point is None:  # released outside the picture: clamp to its edge
            place = self.placement()
            width, height = place.screen
            x = (event.position().x() - place.left) / place.scale
            y = (event.position().y() - place.top) / place.scale
            point = (int(min(max(x, 0), width - 1)), int(min(max(y, 0), height - 1)))
        for action in self._gesture.release(point):
            self.action.emit(action)
        event.accept()

    def mouseDoubleClickEvent(self, event: QMouseEvent | None) -> None:
        if event is None:
            return
        # Qt sends press, release, double-click, release: the double-click stands for the
        # second press; its click is sent on the release that follows.
        if not self._press(event):
            super().mouseDoubleClickEvent(event)

    def wheelEvent(self, event: QWheelEvent | None) -> None:
        if event is None:
            return
        point = self._point(event)
        if self.control and point is not None:
            delta = event.angleDelta()
            scroll = wheel_scroll(point, delta.x(), delta.y())
            if scroll is not None:
                self.action.emit(scroll)
            event.accept()
            return
        super().wheelEvent(event)

    def keyPressEvent(self, event: QKeyEvent | None) -> None:
        if event is None:
            return
        if self.control:
            action = key_action(event)
            if action is not None:
                self.action.emit(action)
            event.accept()
            return
        super().keyPressEvent(event)

    def event(self, event: QEvent | None) -> bool:
        # While controlling, every key belongs to the desktop, shortcuts included (Ctrl+Q
        # must close the desktop's window, not this app).
        if self.control and event is not None \
                and event.type() == QEvent.Type.ShortcutOverride:
            event.accept()
            return True
        return super().event(event)

    def focusNextPrevChild(self, next: bool) -> bool:
        return False if self.control else super().focusNextPrevChild(next)

    def focusOutEvent(self, event: QFocusEvent | None) -> None:
        self.update()
        super().focusOutEvent(event)

    def paintEvent(self, event: QPaintEvent | None) -> None:
        super().paintEvent(event)
        if self.blank and self.image is not None:
            self._draw_hint()
        if self.control and self.image is not None:
            painter = QPainter(self)
            colour = QColor("#e8a200") if self.hasFocus() else QColor("#888888")
            painter.setPen(QPen(colour, 3))
            painter.drawRect(self.rect().adjusted(1, 1, -2, -2))
            painter.end()

    def _draw_hint(self) -> None:
        painter = QPainter(self)
        box = self.rect().adjusted(24, 24, -24, -24)
        flags = Qt.AlignmentFlag.AlignCenter.value | Qt.TextFlag.TextWordWrap.value
        painter.setPen(QColor("#e6e6e6"))
        painter.drawText(box, flags, BLANK_HINT)
        painter.end()
