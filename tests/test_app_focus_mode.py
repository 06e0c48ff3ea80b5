"""Focus mode (M) is laid out as the toggle returns: the screenshot has its new box at
once, the box the event loop would settle on, in the Episode view and in Compare, going
in and coming back, with the episode list open or closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtCore import QEvent
from PyQt6.QtWidgets import QApplication, QWidget

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    open_window,
    settings_file_fixture,
)

Box = tuple[bool, int, int, int, int]  # visible, x and y in the window, width, height


def box(widget: QWidget, window: QWidget) -> Box:
    if not widget.isVisible():
        return (False, 0, 0, 0, 0)  # a hidden widget's geometry means nothing
    corner = widget.mapTo(window, widget.rect().topLeft())
    return (widget.isVisible(), corner.x(), corner.y(), widget.width(), widget.height())


def settle() -> None:
    """Deliver every layout request still posted (and the ones they post), then the rest
    of the queue: what the next passes of the event loop would do, without a clock."""
    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
    QApplication.processEvents()


@pytest.mark.parametrize("list_open", [True, False])
@pytest.mark.parametrize("tab", ["episode", "compare"])
def test_focus_mode_places_the_screenshot_as_m_returns(
        qtbot: Any, demo: DemoWorkspace, settings_file: Path, list_open: bool,
        tab: str) -> None:
    window = open_window(qtbot, settings_file, demo.path, (1280, 720))
    qtbot.waitExposed(window)
    page = window.trajectories
    assert page is not None
    page.set_drawer_open(list_open)
    if tab == "compare":
        page.compare()
    view = (page.player.before if tab == "episode"
            else page.compare_view.players[0].before)
    parts = {"screenshot": view, "side": page.player.side, "list": page.drawer,
             "screens": window.navigation, "tabs": page.tabs}
    settle()
    shown = box(view, window)

    for on in (True, False, True, False):
        window.commands["focus_mode"].trigger()  # M
        at_once = {name: box(part, window) for name, part in parts.items()}
        settle()
        settled = {name: box(part, window) for name, part in parts.items()}
        assert at_once == settled, f"focus mode {'on' if on else 'off'}"
        if on:  # the screenshot alone: the room of the columns and the list it had
            _, _, _, width, height = at_once["screenshot"]
            assert width >= shown[3] and height >= shown[4]
            assert width * height > 1.3 * shown[3] * shown[4]
            assert not at_once["screens"][0] and not at_once["list"][0]
        else:  # back as it was
            assert at_once["screenshot"] == shown
            assert at_once["list"][0] == list_open
