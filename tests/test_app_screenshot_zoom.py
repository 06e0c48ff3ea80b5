"""The screenshot viewer as a reviewer uses it: zoom (keys, buttons, Ctrl+wheel about the
pointer), pan (drag, wheel), the action marks and the corrected point where they belong at
every zoom, picking a point on a zoomed screenshot, full screen, and Before/After zooming
and panning together. Screens here are 1280x800, shown at about half size when fitted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PyQt6.QtCore import QPoint, QPointF, Qt
from PyQt6.QtGui import QColor, QWheelEvent
from PyQt6.QtWidgets import QApplication

from agents.trajectory import Episode, Step
from tests.conftest_app import (  # noqa: F401
    open_window,
    screen_png,
    settings_file_fixture,
)
from trainer.store import Store, TaskRecord
from vm.actions import Click, DragTo, MoveTo, TypeText
from workbench.app.main_window import MainWindow
from workbench.app.pages.trajectories import TrajectoriesPage
from workbench.app.widgets.screenshot_view import ScreenshotView
from workbench.services.action_overlay import CORRECTION_COLOUR
from workbench.services.viewport import MAX_SCALE, Viewport, ZoomState

SCREEN = (1280, 800)
CLICK = (900, 500)  # step 1's click


@dataclass
class WideWorkspace:
    path: Path
    store: Store
    episode: str


@pytest.fixture(name="wide")
def wide_fixture(tmp_path: Path) -> Iterator[WideWorkspace]:
    """One episode of three steps on 1280x800 screens: a click, a drag, typed text."""
    store = Store.open(tmp_path / "wide-workspace", fsync_frames=False)
    store.tasks.put(TaskRecord("calc-sum", "Add up column A in the spreadsheet", "calc"))
    steps = [Step(0, response="Thought: click the cell.\nAction: click",
                  actions=[Click(*CLICK)]),
             Step(1, response="Thought: select.\nAction: drag",
                  actions=[MoveTo(200, 150), DragTo(600, 300)]),
             Step(2, response="Thought: type.\nAction: type", actions=[TypeText("=SUM(A1:A5)")])]
    for step in steps:
        step.frame = store.frames.put(screen_png(20 + step.index, SCREEN,
                                                 title=f"step {step.index + 1}"))
    episode = Episode(id="ep-wide", task_id="calc-sum", source="rollout", status="done",
                      instruction="Add up column A in the spreadsheet", score=1.0,
                      created_at=time.time(), steps=steps)
    episode.final_frame = store.frames.put(screen_png(30, SCREEN, title="final"))
    store.episodes.save(episode)
    yield WideWorkspace(tmp_path / "wide-workspace", store, episode.id)
    store.close()


@pytest.fixture(name="shown")
def shown_fixture(qtbot: Any, wide: WideWorkspace, settings_file: Path
                  ) -> Iterator[tuple[MainWindow, TrajectoriesPage]]:
    """The main window at 1280x720 on the Trajectories screen, the episode open."""
    window = open_window(qtbot, settings_file, wide.path, (1280, 720))
    qtbot.waitExposed(window)
    window.show_screen("trajectories")
    page = window.trajectories
    assert page is not None
    qtbot.waitUntil(lambda: page.player.before.image is not None)
    page.table.setFocus()
    yield window, page
    if page.player.full_screen is not None:
        page.player.full_screen.close()
    window.close()


def press(qtbot: Any, page: TrajectoriesPage, key: Qt.Key,
          modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    """A key as a person presses it with the episode table focused."""
    qtbot.keyClick(page.table, key, modifier)


def wheel(view: ScreenshotView, at: QPointF, angle_y: int,
          modifiers: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> bool:
    """Turn the wheel over `view`; True when the view took the event."""
    event = QWheelEvent(at, view.mapToGlobal(at), QPoint(0, 0), QPoint(0, angle_y),
                        Qt.MouseButton.NoButton, modifiers, Qt.ScrollPhase.NoScrollPhase,
                        False)
    QApplication.sendEvent(view, event)
    return event.isAccepted()


def drag(qtbot: Any, view: ScreenshotView, start: QPoint, end: QPoint,
         button: Qt.MouseButton = Qt.MouseButton.LeftButton) -> None:
    qtbot.mousePress(view, button, pos=start)
    qtbot.mouseMove(view, pos=QPoint((start.x() + end.x()) // 2, (start.y() + end.y()) // 2))
    qtbot.mouseMove(view, pos=end)
    qtbot.mouseRelease(view, button, pos=end)


def widget_of(view: ScreenshotView, x: float, y: float) -> QPointF:
    """Where the middle of screen pixel (x, y) is drawn now."""
    wx, wy = view.placement().to_widget(x + 0.5, y + 0.5)
    return QPointF(wx, wy)


def screen_at(view: ScreenshotView, at: QPointF) -> tuple[float, float]:
    """The screen point (unrounded) drawn at widget point `at`."""
    place = view.placement()
    return ((at.x() - place.left) / place.scale, (at.y() - place.top) / place.scale)


def colour_near(image: Any, at: QPointF, wanted: QColor, radius: int = 1) -> bool:
    for dx in range(-radius, radius + 1):
        for dy in range(-radius, radius + 1):
            got = image.pixelColor(round(at.x()) + dx, round(at.y()) + dy)
            if max(abs(got.red() - wanted.red()), abs(got.green() - wanted.green()),
                   abs(got.blue() - wanted.blue())) <= 40:
                return True
    return False


def test_zoom_keys_buttons_and_ctrl_wheel_change_the_scale(
        qtbot: Any, shown: tuple[MainWindow, TrajectoriesPage], artifacts: Path) -> None:
    window, page = shown
    player, view = page.player, page.player.before
    fit = view.scale
    assert view.viewport.fitted and 0.2 < fit < 0.8  # a 1280-wide screen, fitted
    assert player.zoom_label.text() == f"Fit {fit * 100:.0f}%"
    assert not view.can_pan()

    press(qtbot, page, Qt.Key.Key_Z)  # 100%
    assert view.scale == 1.0 and player.zoom_label.text() == "100%" and view.can_pan()
    press(qtbot, page, Qt.Key.Key_Plus)
    assert view.scale == 1.25
    press(qtbot, page, Qt.Key.Key_Equal)  # "+" without Shift
    assert view.scale == 1.5
    press(qtbot, page, Qt.Key.Key_Minus)
    press(qtbot, page, Qt.Key.Key_Minus)
    assert view.scale == 1.0
    for _ in range(8):  # zooming out ends at the fitted screenshot
        press(qtbot, page, Qt.Key.Key_Minus)
    assert view.viewport.fitted and view.scale == fit
    player.actual_button.click()
    assert view.scale == 1.0
    press(qtbot, page, Qt.Key.Key_W)
    assert view.viewport.fitted
    press(qtbot, page, Qt.Key.Key_Z)
    press(qtbot, page, Qt.Key.Key_0, Qt.KeyboardModifier.ControlModifier)
    assert view.viewport.fitted
    player.zoom_in_button.click()
    assert view.scale > fit and not view.viewport.fitted
    player.fit_button.click()
    assert view.viewport.fitted
    assert window.commands["zoom_in"].isEnabled()
    # the step keys are still the player's
    press(qtbot, page, Qt.Key.Key_Right)
    assert player.index == 1
    press(qtbot, page, Qt.Key.Key_Left)
    assert player.index == 0

    # Ctrl+wheel zooms about the pointer: the screen point under it stays under it (from
    # 100%, where the screenshot fills the view both ways, so nothing is re-centred)
    press(qtbot, page, Qt.Key.Key_Z)
    at = QPointF(view.width() * 0.3, view.height() * 0.6)
    under = screen_at(view, at)
    assert wheel(view, at, 240, Qt.KeyboardModifier.ControlModifier)
    assert view.scale == pytest.approx(1.25 ** 2)
    assert screen_at(view, at) == pytest.approx(under)
    assert wheel(view, at, 120, Qt.KeyboardModifier.ControlModifier)
    assert screen_at(view, at) == pytest.approx(under)
    for _ in range(60):
        wheel(view, at, 120, Qt.KeyboardModifier.ControlModifier)
    assert view.scale == MAX_SCALE
    for _ in range(60):
        wheel(view, at, -120, Qt.KeyboardModifier.ControlModifier)
    assert view.viewport.fitted
    # the plain wheel over a fitted screenshot is left to what holds it (a scrolled page)
    assert not wheel(view, at, -120)
    assert view.viewport.fitted

    press(qtbot, page, Qt.Key.Key_Z)
    window.grab().save(str(artifacts / "app-screenshot-zoom-1280x720.png"))


def test_a_mark_is_drawn_where_its_point_is_after_zoom_and_pan(
        qtbot: Any, shown: tuple[MainWindow, TrajectoriesPage], artifacts: Path) -> None:
    _, page = shown
    view = page.player.before
    (mark,) = view.marks
    assert mark.kind == "cross" and mark.points == (CLICK,)
    colour = QColor(mark.colour)
    fitted = widget_of(view, *CLICK)
    assert colour_near(view.grab().toImage(), fitted, colour)

    # 200% about the click: it stays where it was
    view.zoom_by(2.0 / view.scale, (fitted.x(), fitted.y()))
    assert view.scale == pytest.approx(2.0)
    here = widget_of(view, *CLICK)
    assert here.x() == pytest.approx(fitted.x(), abs=1) \
        and here.y() == pytest.approx(fitted.y(), abs=1)
    # drag the picture 80 px left and 40 px up: the mark goes with it
    start = QPoint(view.width() // 2, view.height() // 2)
    drag(qtbot, view, start, start + QPoint(-80, -40))
    moved = widget_of(view, *CLICK)
    assert moved.x() == pytest.approx(here.x() - 80, abs=0.01)
    assert moved.y() == pytest.approx(here.y() - 40, abs=0.01)
    # the wheel pans a zoomed screenshot: one click up shows 60 px more of the top
    assert wheel(view, QPointF(start), 120)
    assert widget_of(view, *CLICK).y() == pytest.approx(moved.y() + 60, abs=0.01)
    mark_at = widget_of(view, *CLICK)
    # the screen at 200%: the mark is at the screen's point, drawn in its colour
    place = view.placement()
    assert place.scale == pytest.approx(2.0)
    assert mark_at.x() == pytest.approx(place.left + (CLICK[0] + 0.5) * 2.0)
    assert mark_at.y() == pytest.approx(place.top + (CLICK[1] + 0.5) * 2.0)
    grab = view.grab().toImage()
    assert 0 < mark_at.x() < view.width() and 0 < mark_at.y() < view.height()
    assert colour_near(grab, mark_at, colour)
    # and the picture under it is the screen's own pixel 30 px away, scaled by 2
    screen_pixel = view.image.pixelColor(CLICK[0] - 15, CLICK[1])  # type: ignore[union-attr]
    assert colour_near(grab, mark_at - QPointF(30, 0), screen_pixel, radius=0)
    view.grab().save(str(artifacts / "app-screenshot-zoom-mark-200.png"))

    # a drag step's arrow ends where its points are, too
    page.player.next()
    (arrow,) = [m for m in view.marks if m.points == ((200, 150), (600, 300))]
    assert arrow.kind == "arrow"
    view.zoom_actual()
    view.pan_by(10_000, 10_000)  # the top left corner: both ends in view at 100%
    start_at, end_at = widget_of(view, 200, 150), widget_of(view, 600, 300)
    assert (start_at.x(), start_at.y()) == pytest.approx((200.5, 150.5))
    assert (end_at.x(), end_at.y()) == pytest.approx((600.5, 300.5))
    on_line = start_at + (end_at - start_at) * 0.25  # in view in a narrow pane too
    assert view.rect().contains(on_line.toPoint())
    assert colour_near(view.grab().toImage(), on_line, QColor(arrow.colour))


def test_picking_a_point_on_a_zoomed_screenshot_gives_its_screen_point(
        qtbot: Any, wide: WideWorkspace, shown: tuple[MainWindow, TrajectoriesPage],
        artifacts: Path) -> None:
    window, page = shown
    view = page.player.before
    view.zoom_by(3.0 / view.scale)
    view.pan_by(-250, 40)
    assert view.scale == pytest.approx(3.0)
    target = (700, 420)
    at = widget_of(view, *target)
    assert 0 < at.x() < view.width() and 0 < at.y() < view.height()
    press(qtbot, page, Qt.Key.Key_C)
    assert view.picking and view.cursor().shape() == Qt.CursorShape.CrossCursor
    state = view.zoom_state()
    qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=at.toPoint())
    (corrected,) = wide.store.annotations.current(wide.episode)[0].corrected_actions or []
    assert isinstance(corrected, Click) and (corrected.x, corrected.y) == target
    assert view.correction == target
    assert view.zoom_state() == state  # a pick does not pan
    assert not view.picking
    # the corrected point is drawn at its screen point at this zoom
    assert colour_near(view.grab().toImage(), widget_of(view, *target), QColor(CORRECTION_COLOUR),
                       radius=int(12 * 1.3) + 1)
    window.grab().save(str(artifacts / "app-screenshot-zoom-correction.png"))


def test_full_screen_opens_the_step_fitted_and_esc_closes_it(
        qtbot: Any, wide: WideWorkspace, shown: tuple[MainWindow, TrajectoriesPage],
        artifacts: Path) -> None:
    _, page = shown
    player = page.player
    press(qtbot, page, Qt.Key.Key_F)
    qtbot.waitUntil(lambda: player.full_screen is not None and player.full_screen.isVisible())
    full = player.full_screen
    assert full is not None and full.isFullScreen()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is full)  # its keys go there
    shown_view = full.views[0]
    assert shown_view.image is not None and shown_view.image.size() == player.before.image.size()  # type: ignore[union-attr]
    # fitted: the whole screen in view, none of it cut
    assert shown_view.marks == player.before.marks and shown_view.viewport.fitted
    assert not full.boxes[1].isVisible()  # Before/After is off
    assert "step 1 / 3" in full.caption.text()
    qtbot.waitUntil(lambda: full.views[0].width() > 0)
    full.grab().save(str(artifacts / "app-screenshot-full-screen.png"))

    # the arrow keys step there; the window follows
    qtbot.keyClick(full, Qt.Key.Key_Right)
    assert player.index == 1 and "step 2 / 3" in full.caption.text()
    assert [m.kind for m in shown_view.marks] == [m.kind for m in player.before.marks]
    qtbot.keyClick(full, Qt.Key.Key_1)  # the review keys work there too
    assert wide.store.annotations.current(wide.episode)[1].label == "correct"
    qtbot.keyClick(full, Qt.Key.Key_Z)  # 100% there
    assert shown_view.scale == 1.0
    qtbot.keyClick(full, Qt.Key.Key_Minus)
    assert shown_view.scale == 0.9 and player.before.scale != 0.9  # its own zoom
    qtbot.keyClick(full, Qt.Key.Key_W)
    assert shown_view.viewport.fitted

    qtbot.keyClick(full, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: player.full_screen is None)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is page.window())

    # a double-click on the screenshot opens it too, where the person had zoomed in
    player.before.zoom_by(2.0 / player.before.scale)
    qtbot.mouseDClick(player.before, Qt.MouseButton.LeftButton,
                      pos=QPoint(player.before.width() // 2, player.before.height() // 2))
    qtbot.waitUntil(lambda: player.full_screen is not None and player.full_screen.isVisible())
    full = player.full_screen
    assert full is not None and full.views[0].scale == pytest.approx(2.0)
    full.close()
    qtbot.waitUntil(lambda: player.full_screen is None)


def test_before_and_after_zoom_and_pan_together(
        qtbot: Any, shown: tuple[MainWindow, TrajectoriesPage], artifacts: Path) -> None:
    window, page = shown
    player = page.player
    press(qtbot, page, Qt.Key.Key_B)
    qtbot.waitUntil(lambda: player.after.isVisible() and player.after.image is not None)
    before, after = player.before, player.after

    def in_step() -> bool:
        """The same zoom, and the same screen point in the middle of both panes."""
        return before.scale == pytest.approx(after.scale) and all(
            abs(a - b) <= 1 for a, b in zip(
                screen_at(before, QPointF(before.width() / 2, before.height() / 2)),
                screen_at(after, QPointF(after.width() / 2, after.height() / 2)),
                strict=True))

    press(qtbot, page, Qt.Key.Key_Z)
    assert before.scale == after.scale == 1.0 and in_step()
    middle = QPoint(after.width() // 2, after.height() // 2)
    drag(qtbot, after, middle, middle + QPoint(120, 70))  # panning the After pane
    assert in_step() and before.zoom_state().centre != (0.5, 0.5)
    assert wheel(before, QPointF(middle), -240)
    assert in_step()
    assert wheel(after, QPointF(middle), 120, Qt.KeyboardModifier.ControlModifier)
    assert after.scale == pytest.approx(1.25) and in_step()
    press(qtbot, page, Qt.Key.Key_Right)  # stepping keeps the zoom
    assert player.index == 1 and before.scale == pytest.approx(1.25) and in_step()
    press(qtbot, page, Qt.Key.Key_Z)
    window.grab().save(str(artifacts / "app-screenshot-zoom-before-after-1280x720.png"))

    # full screen shows both, at the 100% chosen here, still together
    press(qtbot, page, Qt.Key.Key_F)
    qtbot.waitUntil(lambda: player.full_screen is not None and player.full_screen.isVisible())
    full = player.full_screen
    assert full is not None and full.boxes[1].isVisible()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is full)
    assert full.views[1].image is not None and full.views[0].scale == full.views[1].scale == 1
    qtbot.keyClick(full, Qt.Key.Key_Plus)
    assert full.views[1].scale == 1.25
    full.grab().save(str(artifacts / "app-screenshot-full-screen-before-after.png"))
    full.close()
    qtbot.waitUntil(lambda: player.full_screen is None)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)

    press(qtbot, page, Qt.Key.Key_W)
    assert before.viewport.fitted and after.viewport.fitted


def test_a_live_tile_keeps_its_wheel_and_double_click(qtbot: Any) -> None:
    """Tiles of the live grid sit in a scrolled page and open on a double-click: their
    screenshots do not zoom."""
    from workbench.app.widgets.live_grid import LiveTile

    tile = LiveTile("sandbox-1")
    qtbot.addWidget(tile)
    tile.resize(320, 240)
    tile.show()
    qtbot.waitExposed(tile)
    tile.view.set_image(_image(SCREEN))
    opened: list[str] = []
    tile.activated.connect(opened.append)
    at = QPointF(tile.view.width() / 2, tile.view.height() / 2)
    assert not wheel(tile.view, at, 120, Qt.KeyboardModifier.ControlModifier)
    assert tile.view.viewport.fitted
    qtbot.mouseDClick(tile.view, Qt.MouseButton.LeftButton, pos=at.toPoint())
    assert opened == ["sandbox-1"]


def _image(size: tuple[int, int]) -> Any:
    from workbench.app.widgets.live_view import decode_png

    return decode_png(screen_png(3, size))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(screen=st.tuples(st.integers(50, 4000), st.integers(50, 3000)),
       area=st.tuples(st.integers(50, 2500), st.integers(50, 1500)),
       steps=st.lists(st.tuples(st.sampled_from(["in", "out", "by", "pan", "fit", "100"]),
                                st.floats(-3000, 3000), st.floats(-3000, 3000)), max_size=12))
def test_any_zoom_and_pan_keeps_points_and_edges(
        screen: tuple[int, int], area: tuple[int, int],
        steps: list[tuple[str, float, float]]) -> None:
    viewport = Viewport()
    viewport.resize(screen, area)
    for kind, a, b in steps:
        anchor = (abs(a) % area[0], abs(b) % area[1])
        if kind == "in":
            viewport.zoom_in(anchor)
        elif kind == "out":
            viewport.zoom_out(anchor)
        elif kind == "by":
            viewport.zoom_by(1.0 + abs(a) / 1000, anchor)
        elif kind == "pan":
            viewport.pan(a, b)
        elif kind == "fit":
            viewport.fit()
        else:
            viewport.set_scale(1.0, anchor)
        place = viewport.placement()
        # (a tiny screenshot fitted to a large view may be drawn above MAX_SCALE)
        assert min(viewport.min_scale, viewport.fit_scale) - 1e-9 <= place.scale \
            <= max(MAX_SCALE, viewport.fit_scale) + 1e-9
        for length, size, start in ((area[0], screen[0], place.left),
                                    (area[1], screen[1], place.top)):
            drawn = size * place.scale
            if drawn <= length:  # smaller than the area: centred
                assert start == pytest.approx((length - drawn) / 2)
            else:  # larger: it covers the area, no empty band at an edge
                assert start <= 1e-6 and start + drawn >= length - 1e-6
        # a widget point and its screen point map onto each other
        x, y = screen[0] // 3, screen[1] // 2
        assert place.to_screen(*place.to_widget(x + 0.5, y + 0.5)) == (x, y)
        # a linked viewport of the same size shows the same
        twin = Viewport()
        twin.resize(screen, area)
        twin.set_state(viewport.state())
        assert twin.placement().scale == pytest.approx(place.scale)
        assert twin.placement().left == pytest.approx(place.left, abs=1e-6)
        assert twin.placement().top == pytest.approx(place.top, abs=1e-6)
    assert ZoomState() == Viewport().state()
