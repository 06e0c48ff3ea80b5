"""A screenshot with a step's action marks drawn on it in their colours, a person's
corrected point, and (when asked) picking a point by clicking. It opens scaled to fit and
zooms (Ctrl+wheel, a pinch, the zoom commands) about the pointer; a zoomed screenshot pans
by dragging or scrolling. Marks, the corrected point and picking follow the zoom and pan.
`ZoomLink` makes views zoom and pan together (Before and After)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from PyQt6.QtCore import QEvent, QObject, QPointF, QRectF, QSize, Qt, pyqtSignal
from PyQt6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetrics,
    QImage,
    QKeyEvent,
    QMouseEvent,
    QNativeGestureEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPen,
    QResizeEvent,
    QWheelEvent,
)
from PyQt6.QtWidgets import QSizePolicy, QWidget

from workbench.services.action_overlay import CORRECTION_COLOUR, Mark
from workbench.services.pointer_input import Placement
from workbench.services.viewport import WHEEL_FACTOR, Viewport, ZoomState

CROSS_RADIUS = 12.0  # widget pixels
BACKGROUND = QColor("#202124")
OUTLINE = QColor(255, 255, 255, 220)
WHEEL_PAN_PX = 0.5  # widget pixels panned per wheel angle unit (60 per click)
PICK_STEP = 10  # screen pixels an arrow key moves the picking point (Shift: 1)
PICK_KEYS = {Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Up, Qt.Key.Key_Down,
             Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Escape}
SHARP_FROM_SCALE = 2.0  # from 200% pixels are drawn as squares, not blurred
OVERVIEW_SIZE = 132.0  # widget pixels: the longer side of the overview while zoomed


class ScreenshotView(QWidget):
    point_picked = pyqtSignal(int, int)  # screen coordinates, while picking
    zoom_changed = pyqtSignal()  # the scale or the part in view changed
    content_changed = pyqtSignal()  # the image, the marks or picking changed
    full_screen_requested = pyqtSignal()  # a double-click, where someone listens
    pick_cancelled = pyqtSignal()  # Esc while picking

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.image: QImage | None = None
        self.marks: list[Mark] = []
        self.correction: tuple[int, int] | None = None
        self.message = "no screenshot"
        self.picking = False
        self.zoomable = True  # False: always fitted (small tiles in a scrolled grid)
        self.viewport = Viewport()
        self._drag_from: QPointF | None = None  # while panning by dragging
        self._thumbnail: QImage | None = None  # the overview's picture, made when needed
        # While picking, the arrow keys move this point (screen coordinates) and Enter
        # picks it: a corrected point set from the keyboard.
        self.key_point: tuple[int, int] | None = None
        self.setMinimumSize(160, 100)
        # A click on the screenshot takes the focus from a text field: the review keys
        # work again (the view itself takes only the keys of keyboard picking).
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(640, 400)

    # -- content ------------------------------------------------------------------------

    def set_image(self, image: QImage | None, message: str = "no screenshot") -> None:
        self.image = image if image is not None and not image.isNull() else None
        self.message = message
        self._thumbnail = None
        self._update_cursor()
        self.update()
        self.content_changed.emit()

    def set_marks(self, marks: Sequence[Mark], correction: tuple[int, int] | None = None
                  ) -> None:
        self.marks = list(marks)
        self.correction = correction
        self.update()
        self.content_changed.emit()

    def set_picking(self, picking: bool) -> None:
        self.picking = picking
        if picking and self.image is not None:
            # from the step's own point (what is being corrected), else the centre
            pointed = [m.points[0] for m in self.marks if m.points and m.kind != "caption"]
            self.key_point = self.correction or (pointed[0] if pointed else (
                self.image.width() // 2, self.image.height() // 2))
        else:
            self.key_point = None
        self.update()
        self._update_cursor()
        self.content_changed.emit()

    def copy_content(self, other: ScreenshotView) -> None:
        """Show what `other` shows (its image, marks, corrected point and picking)."""
        self.set_image(other.image, other.message)
        self.set_marks(other.marks, other.correction)
        if self.picking != other.picking:
            self.set_picking(other.picking)

    def screen_size(self) -> tuple[int, int]:
        if self.image is None:
            return (0, 0)
        return self.image.width(), self.image.height()

    def _viewport(self) -> Viewport:
        self.viewport.resize(self.screen_size(), (self.width(), self.height()))
        return self.viewport

    def placement(self) -> Placement:
        """Where the screen is drawn now: widget <-> screen coordinates at this zoom."""
        return self._viewport().placement()

    # -- zoom and pan -------------------------------------------------------------------

    def zoom_state(self) -> ZoomState:
        return self._viewport().state()

    def set_zoom_state(self, state: ZoomState) -> None:
        self._zooming(lambda viewport: viewport.set_state(state))

    def zoom_text(self) -> str:
        """The zoom as shown to a person: "Fit 47%", "100%"."""
        return self._viewport().describe()

    @property
    def scale(self) -> float:
        return self._viewport().scale

    def zoom_in(self, anchor: tuple[float, float] | None = None) -> None:
        self._zooming(lambda viewport: viewport.zoom_in(anchor))

    def zoom_out(self, anchor: tuple[float, float] | None = None) -> None:
        self._zooming(lambda viewport: viewport.zoom_out(anchor))

    def zoom_by(self, factor: float, anchor: tuple[float, float] | None = None) -> None:
        self._zooming(lambda viewport: viewport.zoom_by(factor, anchor))

    def zoom_fit(self) -> None:
        self._zooming(lambda viewport: viewport.fit())

    def zoom_actual(self, anchor: tuple[float, float] | None = None) -> None:
        """One screen pixel per widget pixel (100%)."""
        self._zooming(lambda viewport: viewport.set_scale(1.0, anchor))

    def pan_by(self, dx: float, dy: float) -> None:
        self._zooming(lambda viewport: viewport.pan(dx, dy))

    def can_pan(self) -> bool:
        return self.zoomable and self._viewport().can_pan()

    def _zooming(self, change: Callable[[Viewport], object]) -> None:
        viewport = self._viewport()
        before = (viewport.state(), viewport.placement())
        change(viewport)
        if (viewport.state(), viewport.placement()) != before:
            self._update_cursor()
            self.update()
            self.zoom_changed.emit()

    def resizeEvent(self, event: QResizeEvent | None) -> None:
        super().resizeEvent(event)
        self._update_cursor()
        self.zoom_changed.emit()  # a fitted scale follows the size

    def _cursor_shape(self) -> Qt.CursorShape:
        if self.picking:
            return Qt.CursorShape.CrossCursor
        if self._drag_from is not None:
            return Qt.CursorShape.ClosedHandCursor
        if self.image is not None and self.can_pan():
            return Qt.CursorShape.OpenHandCursor
        return Qt.CursorShape.ArrowCursor

    def _update_cursor(self) -> None:
        self.setCursor(self._cursor_shape())

    # -- input --------------------------------------------------------------------------

    def mousePressEvent(self, event: QMouseEvent | None) -> None:
        if event is None:
            return
        button = event.button()
        if self.picking and self.image is not None and button == Qt.MouseButton.LeftButton:
            point = self.placement().to_screen(event.position().x(), event.position().y())
            if point is not None:
                self.point_picked.emit(*point)
                event.accept()
                return
        # The middle button pans while picking too.
        if button in (Qt.MouseButton.LeftButton, Qt.MouseButton.MiddleButton) \
                and self.image is not None and self.can_pan() \
                and (not self.picking or button == Qt.MouseButton.MiddleButton):
            self._drag_from = event.position()
            self._update_cursor()
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent | None) -> None:
        if event is None:
            return
        if self._drag_from is not None:
            moved = event.position() - self._drag_from
            self._drag_from = event.position()
            self.pan_by(moved.x(), moved.y())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent | None) -> None:
        if event is None:
            return
        if self._drag_from is not None:
            self._drag_from = None
            self._update_cursor()
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent | None) -> None:
        if event is None:
            return
        if event.button() == Qt.MouseButton.LeftButton and not self.picking \
                and self.image is not None and self.receivers(self.full_screen_requested):
            self.full_screen_requested.emit()
            event.accept()
            return
        super().mouseDoubleClickEvent(event)  # e.g. a live tile's double-click

    def _picking_key(self, event: QKeyEvent) -> bool:
        return self.picking and self.key_point is not None and event.key() in PICK_KEYS

    def keyPressEvent(self, event: QKeyEvent | None) -> None:
        if event is None or not self._picking_key(event):
            super().keyPressEvent(event)
            return
        assert self.key_point is not None and self.image is not None
        key = Qt.Key(event.key())
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.point_picked.emit(*self.key_point)
        elif key == Qt.Key.Key_Escape:
            self.pick_cancelled.emit()
        else:
            fine = event.modifiers() & (Qt.KeyboardModifier.ShiftModifier
                                        | Qt.KeyboardModifier.AltModifier)
            step = 1 if fine else PICK_STEP
            dx, dy = {Qt.Key.Key_Left: (-step, 0), Qt.Key.Key_Right: (step, 0),
                      Qt.Key.Key_Up: (0, -step), Qt.Key.Key_Down: (0, step)}[key]
            x, y = self.key_point
            self.key_point = (min(max(x + dx, 0), self.image.width() - 1),
                              min(max(y + dy, 0), self.image.height() - 1))
            self.update()
        event.accept()

    def wheelEvent(self, event: QWheelEvent | None) -> None:
        """Ctrl+wheel zooms about the pointer; the wheel pans a zoomed screenshot and
        otherwise goes to whatever holds the view (a scrolled page scrolls)."""
        if event is None:
            return
        if not self.zoomable or self.image is None:
            super().wheelEvent(event)
            return
        angle = event.angleDelta()
        at = (event.position().x(), event.position().y())
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            if angle.y():
                self.zoom_by(WHEEL_FACTOR ** (angle.y() / 120), at)
            event.accept()
            return
        if self.can_pan():
            pixels = event.pixelDelta()
            dx, dy = ((pixels.x(), pixels.y()) if not pixels.isNull()
                      else (angle.x() * WHEEL_PAN_PX, angle.y() * WHEEL_PAN_PX))
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier and dx == 0:
                dx, dy = dy, 0  # Shift+wheel pans sideways
            self.pan_by(dx, dy)
            event.accept()
            return
        super().wheelEvent(event)

    def event(self, event: QEvent | None) -> bool:
        if event is not None and event.type() == QEvent.Type.ShortcutOverride \
                and isinstance(event, QKeyEvent) and self._picking_key(event):
            event.accept()  # while picking, the arrows move the point, not the step
            return True
        if isinstance(event, QNativeGestureEvent) and self.zoomable and self.image is not None \
                and event.gestureType() == Qt.NativeGestureType.ZoomNativeGesture:
            self.zoom_by(1.0 + event.value(), (event.position().x(), event.position().y()))
            event.accept()
            return True
        return super().event(event)

    # -- painting -----------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent | None) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), BACKGROUND)
        if self.image is None:
            painter.setPen(QColor("#bbbbbb"))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.message)
            painter.end()
            return
        place = self.placement()
        target = QRectF(place.left, place.top, self.image.width() * place.scale,
                        self.image.height() * place.scale)
        shown = target.intersected(QRectF(self.rect()))
        if not shown.isEmpty():
            # only the part in view: a screen at 800% is far larger than the widget
            source = QRectF((shown.left() - place.left) / place.scale,
                            (shown.top() - place.top) / place.scale,
                            shown.width() / place.scale, shown.height() / place.scale)
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform,
                                  place.scale < SHARP_FROM_SCALE)
            painter.drawImage(shown, self.image, source)
        captions: list[Mark] = []
        for mark in self.marks:
            if mark.kind == "caption":
                captions.append(mark)
            else:
                self._draw_mark(painter, place, mark)
        if self.correction is not None:
            self._draw_correction(painter, place, self.correction)
        if self.key_point is not None:
            self._draw_key_point(painter, place, self.key_point)
        overview = self._overview_rect() if self.can_pan() else None
        self._draw_captions(painter, shown, captions,
                            reserve=overview.width() + 10 if overview is not None else 0.0)
        if overview is not None:
            self._draw_overview(painter, overview)
        painter.end()

    def _overview_rect(self) -> QRectF:
        """Bottom right: where the overview of a zoomed screenshot goes."""
        width, height = self.screen_size()
        side = max(width, height, 1)
        box = QRectF(0, 0, OVERVIEW_SIZE * width / side, OVERVIEW_SIZE * height / side)
        box.moveBottomRight(QPointF(self.width() - 10, self.height() - 10))
        return box

    def _draw_overview(self, painter: QPainter, box: QRectF) -> None:
        """The whole screen as a small box with the part in view outlined, and the zoom."""
        left, top, right, bottom = self._viewport().visible()
        if self._thumbnail is None and self.image is not None:
            self._thumbnail = self.image.scaled(
                round(box.width()), round(box.height()),
                Qt.AspectRatioMode.IgnoreAspectRatio,
                Qt.TransformationMode.SmoothTransformation)
        painter.setOpacity(0.85)
        if self._thumbnail is not None:
            painter.drawImage(box, self._thumbnail)
        painter.setOpacity(1.0)
        painter.setPen(QPen(QColor(255, 255, 255, 200), 1.0))
        painter.setBrush(QColor(20, 20, 20, 90))  # the part out of view, darker
        painter.drawRect(box)
        view = QRectF(box.left() + left * box.width(), box.top() + top * box.height(),
                      (right - left) * box.width(), (bottom - top) * box.height())
        painter.setPen(QPen(QColor(20, 20, 20), 3.0))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(view)
        painter.setPen(QPen(QColor("#ffd54f"), 1.5))
        painter.drawRect(view)
        text = self.zoom_text()
        font = QFont(self.font())
        font.setBold(True)
        painter.setFont(font)
        metrics = QFontMetrics(font)
        label = QRectF(0, 0, metrics.horizontalAdvance(text) + 10, metrics.height() + 2)
        label.moveBottomRight(QPointF(box.right(), box.top() - 4))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(20, 20, 20, 190))
        painter.drawRoundedRect(label, 3, 3)
        painter.setPen(QColor("#ffffff"))
        painter.drawText(label, Qt.AlignmentFlag.AlignCenter, text)

    def _widget_point(self, place: Placement, point: tuple[int, int]) -> QPointF:
        x, y = place.to_widget(point[0] + 0.5, point[1] + 0.5)
        return QPointF(x, y)

    @staticmethod
    def _stroke(painter: QPainter, colour: QColor, draw: Callable[[], object],
                width: float = 2.5) -> None:
        """Draw twice: a white outline under the coloured line, visible on any screen."""
        for pen_colour, pen_width in ((OUTLINE, width + 2.5), (colour, width)):
            pen = QPen(pen_colour, pen_width)
            pen.setCapStyle(Qt.PenCapStyle.RoundCap)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            draw()

    def _draw_mark(self, painter: QPainter, place: Placement, mark: Mark) -> None:
        colour = QColor(mark.colour)
        if mark.kind in ("cross", "point"):
            centre = self._widget_point(place, mark.points[0])
            r = CROSS_RADIUS
            if mark.kind == "cross":
                self._stroke(painter, colour, lambda: (
                    painter.drawLine(QPointF(centre.x() - r, centre.y()),
                                     QPointF(centre.x() + r, centre.y())),
                    painter.drawLine(QPointF(centre.x(), centre.y() - r),
                                     QPointF(centre.x(), centre.y() + r)),
                    painter.drawEllipse(centre, r * 0.55, r * 0.55)))
            else:
                self._stroke(painter, colour, lambda: painter.drawEllipse(centre, r * 0.6,
                                                                          r * 0.6))
            if mark.text:
                self._label(painter, QPointF(centre.x() + r + 3, centre.y() - r), mark.text,
                            colour)
        elif mark.kind in ("arrow", "scroll"):
            start = self._widget_point(place, mark.points[0])
            end = self._widget_point(place, mark.points[1])
            self._arrow(painter, start, end, colour, dashed=mark.kind == "scroll")
            if mark.text:
                self._label(painter, QPointF(end.x() + 8, end.y() - 8), mark.text, colour)

    def _arrow(self, painter: QPainter, start: QPointF, end: QPointF, colour: QColor,
               dashed: bool) -> None:
        angle = math.atan2(end.y() - start.y(), end.x() - start.x())
        head = 13.0
        left = QPointF(end.x() - head * math.cos(angle - 0.45),
                       end.y() - head * math.sin(angle - 0.45))
        right = QPointF(end.x() - head * math.cos(angle + 0.45),
                        end.y() - head * math.sin(angle + 0.45))
        for pen_colour, width in ((OUTLINE, 5.0), (colour, 2.5)):
            pen = QPen(pen_colour, width)
            pen.setCapStyle(Qt.PenCapStyle.RoundCap)
            if dashed and pen_colour is colour:
                pen.setStyle(Qt.PenStyle.DashLine)
            painter.setPen(pen)
            painter.drawLine(start, end)
        path = QPainterPath(end)
        path.lineTo(left)
        path.lineTo(right)
        path.closeSubpath()
        painter.setPen(QPen(OUTLINE, 1.5))
        painter.setBrush(QBrush(colour))
        painter.drawPath(path)
        painter.setBrush(QBrush(colour))
        painter.setPen(QPen(OUTLINE, 1.5))
        painter.drawEllipse(start, 4.0, 4.0)

    def _draw_correction(self, painter: QPainter, place: Placement,
                         point: tuple[int, int]) -> None:
        colour = QColor(CORRECTION_COLOUR)
        centre = self._widget_point(place, point)
        r = CROSS_RADIUS * 1.3
        pen = QPen(colour, 3.0, Qt.PenStyle.DashLine)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QPen(OUTLINE, 5.0))
        painter.drawEllipse(centre, r, r)
        painter.setPen(pen)
        painter.drawEllipse(centre, r, r)
        painter.drawLine(QPointF(centre.x() - 4, centre.y()), QPointF(centre.x() + 4, centre.y()))
        painter.drawLine(QPointF(centre.x(), centre.y() - 4), QPointF(centre.x(), centre.y() + 4))
        self._label(painter, QPointF(centre.x() + r + 3, centre.y() + r), "corrected", colour)

    def _draw_key_point(self, painter: QPainter, place: Placement,
                        point: tuple[int, int]) -> None:
        """The point the arrow keys move while picking: a cross to set with Enter."""
        colour = QColor(CORRECTION_COLOUR)
        centre = self._widget_point(place, point)
        r = CROSS_RADIUS * 1.6
        for pen in (QPen(OUTLINE, 4.0), QPen(colour, 2.0)):
            painter.setPen(pen)
            painter.drawLine(QPointF(centre.x() - r, centre.y()), QPointF(centre.x() + r,
                                                                          centre.y()))
            painter.drawLine(QPointF(centre.x(), centre.y() - r), QPointF(centre.x(),
                                                                          centre.y() + r))
        self._label(painter, QPointF(centre.x() + 6, centre.y() - 6),
                    f"({point[0]}, {point[1]}) Enter sets", colour)

    def _label(self, painter: QPainter, at: QPointF, text: str, colour: QColor) -> None:
        font = QFont(self.font())
        font.setBold(True)
        painter.setFont(font)
        metrics = QFontMetrics(font)
        box = QRectF(at.x(), at.y() - metrics.ascent(), metrics.horizontalAdvance(text) + 8,
                     metrics.height() + 2)
        if box.right() > self.width() - 2:
            box.moveRight(self.width() - 2)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(255, 255, 255, 225))
        painter.drawRoundedRect(box, 3, 3)
        painter.setPen(colour)
        painter.drawText(box, Qt.AlignmentFlag.AlignCenter, text)

    def _draw_captions(self, painter: QPainter, shown: QRectF, captions: list[Mark],
                       reserve: float = 0.0) -> None:
        """Typed text and keys, stacked at the bottom left of the screenshot in view
        (`reserve`: widget pixels kept free at the right, for the overview)."""
        if not captions or shown.isEmpty():
            return
        font = QFont(self.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        painter.setFont(font)
        metrics = QFontMetrics(font)
        line = metrics.height() + 6
        y = shown.bottom() - 10 - line * len(captions)
        for mark in captions:
            width = max(40.0, min(metrics.horizontalAdvance(mark.text) + 16,
                                  shown.width() - 20 - reserve))
            box = QRectF(shown.left() + 10, y, width, line - 2)
            painter.setPen(QPen(QColor(mark.colour), 2.0))
            painter.setBrush(QColor(20, 20, 20, 215))
            painter.drawRoundedRect(box, 4, 4)
            painter.setPen(QColor(mark.colour).lighter(135))
            elided = metrics.elidedText(mark.text, Qt.TextElideMode.ElideRight,
                                        int(box.width() - 12))
            painter.drawText(box.adjusted(8, 0, -4, 0),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, elided)
            y += line


class ZoomLink(QObject):
    """Views that zoom and pan together: a change in one is made in the others (the
    screens line up by their fractions, so different sizes still match)."""

    def __init__(self, views: Sequence[ScreenshotView] = (), parent: QObject | None = None
                 ) -> None:
        super().__init__(parent)
        self.views: list[ScreenshotView] = []
        self.enabled = True
        self._following = False
        for view in views:
            self.add(view)

    def add(self, view: ScreenshotView) -> None:
        self.views.append(view)
        view.zoom_changed.connect(lambda v=view: self._follow(v))

    def _follow(self, source: ScreenshotView) -> None:
        if not self.enabled or self._following:
            return
        self._following = True
        try:
            state = source.zoom_state()
            for view in self.views:
                if view is not source:
                    view.set_zoom_state(state)
        finally:
            self._following = False
