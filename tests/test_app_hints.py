"""Where there is nothing to see yet, the app says what to do (issue 17): an empty
workspace's Trajectories screen and the live view of a desktop with no window open."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PyQt6.QtGui import QColor, QImage

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    open_window,
    settings_file_fixture,
)
from workbench.app.widgets.live_view import BLANK_HINT, LiveView, is_blank


def solid(colour: str, size: tuple[int, int] = (640, 400)) -> QImage:
    image = QImage(size[0], size[1], QImage.Format.Format_RGB32)
    image.fill(QColor(colour))
    return image


def light_pixels(image: QImage) -> int:
    """Pixels brighter than the view's dark background and a black screen: text."""
    count = 0
    for y in range(0, image.height(), 2):
        for x in range(0, image.width(), 2):
            if QColor(image.pixel(x, y)).lightness() > 150:
                count += 1
    return count


def test_an_empty_workspace_says_where_episodes_come_from(
        qtbot: Any, settings_file: Path, tmp_path: Path, demo: DemoWorkspace,
        artifacts: Path) -> None:
    window = open_window(qtbot, settings_file, tmp_path / "empty")
    assert window.open_workspace(tmp_path / "empty", create=True)
    window.show_screen("trajectories")
    page = window.trajectories
    assert page is not None
    qtbot.waitUntil(page.empty_hint.isVisible)
    text = page.empty_hint.text()
    assert "No episodes" in text and "Record" in text and "rollout" in text
    assert "workbench demo" in text
    window.grab().save(str(artifacts / "app-trajectories-empty-1280x720.png"))

    # A workspace with episodes shows its table without the hint.
    assert window.open_workspace(demo.path)
    window.show_screen("trajectories")
    page = window.trajectories
    assert page is not None and page.model.rowCount() > 0
    assert not page.empty_hint.isVisible()


def test_a_desktop_with_nothing_open_says_what_to_do(qtbot: Any, artifacts: Path) -> None:
    view = LiveView()
    qtbot.addWidget(view)
    view.resize(640, 400)
    view.show()
    qtbot.waitExposed(view)

    view.set_image(solid("black"))
    assert view.blank
    shown = view.grab().toImage()
    assert light_pixels(shown) > 200  # the hint's text on the black screen
    shown.save(str(artifacts / "app-live-view-blank-hint.png"))
    assert "Record" in BLANK_HINT

    # As soon as something is on screen the hint goes.
    busy = solid("black")
    for x in range(100, 300):
        for y in range(100, 200):
            busy.setPixelColor(x, y, QColor("#3060c0"))
    view.set_image(busy)
    assert not view.blank
    assert light_pixels(view.grab().toImage()) == 0
    view.set_image(None, "sandbox is stopped")
    assert not view.blank


def test_blank_means_one_colour_everywhere() -> None:
    assert is_blank(solid("black")) and is_blank(solid("#123456", (7, 3)))
    assert not is_blank(None) and not is_blank(QImage())
    corner = solid("black")
    corner.setPixelColor(corner.width() - 1, corner.height() - 1, QColor("white"))
    assert is_blank(corner)  # a single pixel is not a window: the grid misses it
    window = solid("black")
    for x in range(0, 320):
        for y in range(0, 200):
            window.setPixelColor(x, y, QColor("white"))
    assert not is_blank(window)
