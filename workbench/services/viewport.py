"""Zoom and pan of a picture of a screen inside a widget: which part of the screen shows,
at which scale, as a Placement. Qt-free, so the views, their links and the tests share one
piece of arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.services.pointer_input import Placement

# The steps of the zoom keys and buttons, as in browsers and image viewers (1.0 is 100%).
ZOOM_LEVELS = (0.1, 0.125, 0.167, 0.25, 0.333, 0.5, 0.667, 0.75, 0.9, 1.0, 1.25, 1.5, 2.0,
               3.0, 4.0, 6.0, 8.0)
MAX_SCALE = ZOOM_LEVELS[-1]  # 8 screen pixels per screen pixel shows single pixels well
WHEEL_FACTOR = 1.25  # zoom per wheel click (120 angle units) with Ctrl held


@dataclass(frozen=True)
class ZoomState:
    """What linked views share: fitted, or a scale and the point shown at the centre of
    the widget (as fractions of the screen's width and height, so screens of different
    sizes still line up)."""

    fitted: bool = True
    scale: float = 1.0
    centre: tuple[float, float] = (0.5, 0.5)


class Viewport:
    """A screen of `screen` pixels shown in an area of `area` widget pixels: fitted
    (scaled to fit, centred) or at a chosen scale, panned to a chosen centre. A screen
    larger than the area can be panned only as far as its edges."""

    def __init__(self) -> None:
        self.screen: tuple[int, int] = (0, 0)
        self.area: tuple[int, int] = (0, 0)
        self.fitted = True
        self._scale = 1.0
        self._centre = (0.5, 0.5)

    def resize(self, screen: tuple[int, int], area: tuple[int, int]) -> None:
        self.screen, self.area = screen, area

    @property
    def empty(self) -> bool:
        return min(*self.screen, *self.area) <= 0

    # -- what shows ---------------------------------------------------------------------

    @property
    def fit_scale(self) -> float:
        return Placement.fit(self.screen, self.area).scale

    @property
    def scale(self) -> float:
        return self.fit_scale if self.fitted else self._scale

    @property
    def min_scale(self) -> float:
        """Zooming out stops at the fitted picture (or 100% when that is smaller)."""
        return min(self.fit_scale, 1.0)

    def placement(self) -> Placement:
        if self.fitted or self.empty:
            return Placement.fit(self.screen, self.area)
        scale = self._scale
        left = self._offset(self.area[0], self.screen[0] * scale, self._centre[0])
        top = self._offset(self.area[1], self.screen[1] * scale, self._centre[1])
        return Placement(left, top, scale, self.screen)

    @staticmethod
    def _offset(area: float, size: float, centre: float) -> float:
        """Where the picture starts along one axis: centred when it fits, else as near
        `centre` (a fraction of the picture) as the edges allow."""
        if size <= area:
            return (area - size) / 2
        return min(0.0, max(area - size, area / 2 - centre * size))

    def can_pan(self) -> bool:
        if self.empty:
            return False
        place = self.placement()
        return (self.screen[0] * place.scale > self.area[0] + 0.5
                or self.screen[1] * place.scale > self.area[1] + 0.5)

    def visible(self) -> tuple[float, float, float, float]:
        """The part of the screen in view: left, top, right, bottom as fractions."""
        if self.empty:
            return (0.0, 0.0, 1.0, 1.0)
        place = self.placement()
        width, height = self.screen[0] * place.scale, self.screen[1] * place.scale
        return (max(0.0, -place.left / width), max(0.0, -place.top / height),
                min(1.0, (self.area[0] - place.left) / width),
                min(1.0, (self.area[1] - place.top) / height))

    def describe(self) -> str:
        """The zoom as a person reads it: "Fit 47%", "100%"."""
        if self.empty:
            return "–"
        percent = f"{self.scale * 100:.0f}%"
        return f"Fit {percent}" if self.fitted else percent

    # -- changing it --------------------------------------------------------------------

    def state(self) -> ZoomState:
        if self.fitted or self.empty:
            return ZoomState(fitted=self.fitted, scale=self._scale, centre=self._centre)
        return ZoomState(False, self._scale, self._centre_of(self.placement()))

    def set_state(self, state: ZoomState) -> None:
        self.fitted = state.fitted
        self._scale = state.scale
        self._centre = state.centre
        self._settle()

    def fit(self) -> None:
        self.fitted = True
        self._centre = (0.5, 0.5)

    def set_scale(self, scale: float, anchor: tuple[float, float] | None = None) -> None:
        """Show the screen at `scale`, keeping the screen point under `anchor` (a widget
        point; default the area's centre) where it is. Below the smallest scale, fit."""
        if self.empty:
            return
        if scale < self.min_scale * 1.0001:
            if self.fit_scale <= 1.0:
                self.fit()
                return
            scale = self.min_scale  # a small screen in a large area: 100% at least
        scale = min(scale, MAX_SCALE)
        place = self.placement()
        ax, ay = anchor if anchor is not None else (self.area[0] / 2, self.area[1] / 2)
        # the screen point under the anchor, as a fraction of the screen
        fx = (ax - place.left) / (self.screen[0] * place.scale)
        fy = (ay - place.top) / (self.screen[1] * place.scale)
        left = ax - fx * self.screen[0] * scale
        top = ay - fy * self.screen[1] * scale
        self.fitted = False
        self._scale = scale
        self._centre = self._centre_of(Placement(left, top, scale, self.screen))
        self._settle()

    def zoom_by(self, factor: float, anchor: tuple[float, float] | None = None) -> None:
        self.set_scale(self.scale * factor, anchor)

    def zoom_in(self, anchor: tuple[float, float] | None = None) -> None:
        """The next zoom level above the current scale."""
        current = self.scale
        self.set_scale(next((z for z in ZOOM_LEVELS if z > current * 1.01), MAX_SCALE),
                       anchor)

    def zoom_out(self, anchor: tuple[float, float] | None = None) -> None:
        current = self.scale
        self.set_scale(next((z for z in reversed(ZOOM_LEVELS) if z < current * 0.99), 0.0),
                       anchor)

    def pan(self, dx: float, dy: float) -> None:
        """Move the picture by (dx, dy) widget pixels, as far as its edges allow."""
        if self.fitted or self.empty:
            return
        width, height = self.screen[0] * self._scale, self.screen[1] * self._scale
        cx, cy = self._centre_of(self.placement())
        self._centre = (cx - dx / width, cy - dy / height)
        self._settle()

    def _centre_of(self, place: Placement) -> tuple[float, float]:
        return ((self.area[0] / 2 - place.left) / (self.screen[0] * place.scale),
                (self.area[1] / 2 - place.top) / (self.screen[1] * place.scale))

    def _settle(self) -> None:
        """Keep the centre where the edges put it, so a pan past an edge is not stored
        (the next pan back moves at once)."""
        if not self.fitted and not self.empty:
            self._centre = self._centre_of(self.placement())
