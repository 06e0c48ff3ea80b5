"""The screenshot first: on a 1280x720 screen, maximised, the Episode view's screenshot
takes at least half of the window and each side of Compare at least a quarter; a
1920x1080 screen gives it more pixels. The episode list is a drawer (L), M shows the
screenshot alone, and the layout is remembered per screen size with a "reset layout".
The shares are measured on Qt's offscreen screens of those sizes, in a process of their
own, and the windows saved under test-artifacts/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    build_demo,
    demo_fixture,
    run_app_on_screen,
    settings_file_fixture,
    show_at,
)
from workbench.app.main_window import MainWindow
from workbench.app.settings import AppSettings

ROOT = Path(__file__).resolve().parent.parent

# Opens the app maximised on a fresh settings file, as a first launch would, and measures
# the screenshot (the view's box and the picture drawn in it) against the window.
SCRIPT = r"""
import json, sys
from pathlib import Path
from PyQt6.QtWidgets import QApplication
app = QApplication([])
from workbench.app.main_window import MainWindow
from workbench.app.settings import AppSettings

workspace, settings_path, artifacts, size = (Path(sys.argv[1]), Path(sys.argv[2]),
                                             Path(sys.argv[3]), sys.argv[4])
window = MainWindow(AppSettings.at(settings_path), workspace)
window.showMaximized()
page = window.trajectories

def settle():
    for _ in range(5):
        app.processEvents()

def measure(view):
    area = window.width() * window.height()
    place = view.placement()
    width, height = view.image.width() * place.scale, view.image.height() * place.scale
    return {"view": [view.width(), view.height()],
            "view_share": view.width() * view.height() / area,
            "drawn": [round(width), round(height)], "drawn_share": width * height / area}

settle()
seen = {"window": [window.width(), window.height()], "drawer_open": page.drawer_open(),
        "episode": measure(page.player.before)}
window.grab().save(str(artifacts / f"app-episode-view-{size}.png"))
page.compare()
settle()
seen["compare"] = [measure(player.before) for player in page.compare_view.players]
window.grab().save(str(artifacts / f"app-compare-{size}.png"))
window.close()
print(json.dumps(seen))
"""


def measure_on_screen(tmp_path: Path, artifacts: Path, width: int, height: int
                      ) -> dict[str, Any]:
    workspace = tmp_path / "ws"
    if not workspace.exists():
        build_demo(workspace).store.close()
    return run_app_on_screen(
        SCRIPT, [str(workspace), str(tmp_path / f"{width}.ini"), str(artifacts),
                 f"{width}x{height}"], width, height,
        tmp_path / f"screen-{width}x{height}.json", window_frames=False)


def test_the_screenshot_gets_half_the_window_at_1280x720(tmp_path: Path,
                                                         artifacts: Path) -> None:
    small = measure_on_screen(tmp_path, artifacts, 1280, 720)
    assert small["window"] == [1280, 720] and not small["drawer_open"]
    assert small["episode"]["view_share"] >= 0.5
    assert small["episode"]["drawn_share"] >= 0.5  # the picture itself, not only its box
    for side in small["compare"]:
        assert side["view_share"] >= 0.25 and side["drawn_share"] >= 0.25

    large = measure_on_screen(tmp_path, artifacts, 1920, 1080)
    assert large["window"] == [1920, 1080] and large["drawer_open"]  # room for the list

    def pixels(seen: dict[str, Any]) -> int:
        width, height = seen["drawn"]
        return int(width * height)

    assert pixels(large["episode"]) > 1.25 * pixels(small["episode"])
    for side in range(2):
        assert pixels(large["compare"][side]) > 1.25 * pixels(small["compare"][side])
    (artifacts / "app-screenshot-shares.json").write_text(
        json.dumps({"1280x720": small, "1920x1080": large}, indent=1))


def test_drawer_focus_mode_and_the_layout_kept_per_screen_size(
        qtbot: Any, demo: DemoWorkspace, settings_file: Path) -> None:
    window = MainWindow(AppSettings.at(settings_file), demo.path)
    qtbot.addWidget(window)
    show_at(window, (1280, 720), episode_list=False)
    qtbot.waitExposed(window)
    page = window.trajectories
    assert page is not None
    view = page.player.before
    # a screen lower than 1000 pixels: the list starts closed, the screen list as icons
    assert not page.drawer_open() and window.navigation.width() < 60
    assert page.drawer_button.isVisible()  # the list's button, in the tabs' corner
    closed = view.size()
    window.commands["toggle_episode_list"].trigger()  # L
    assert page.drawer_open() and page.table.isVisible()
    # a drawer over the right of the episode: the screenshot keeps its box
    drawer = page.drawer.geometry()
    assert view.size() == closed and drawer.right() >= page.width() - 4
    assert drawer.width() < page.width() / 2

    window.commands["focus_mode"].trigger()  # M: the screenshot alone
    assert not page.drawer_open() and not window.navigation.isVisible()
    assert not page.player.side.isVisible()
    qtbot.waitUntil(lambda: view.width() > 1200)
    window.commands["focus_mode"].trigger()  # M again: back as it was
    assert page.drawer_open() and window.navigation.isVisible() and page.player.side.isVisible()

    page.player.splitter.setSizes([700, 500])  # a wider side column, remembered
    window.commands["focus_mode"].trigger()  # quitting in focus mode keeps the columns
    side = 500
    key = window.screen_size_key()
    window.close()
    settings = AppSettings.at(settings_file)
    assert settings.layout(key)["drawer_open"] is True
    assert settings.layout("1920x1080") == {}  # another screen size keeps its own

    again = MainWindow(AppSettings.at(settings_file))
    qtbot.addWidget(again)
    show_at(again, (1280, 720), episode_list=False)
    qtbot.waitExposed(again)
    page = again.trajectories
    assert page is not None and page.drawer_open()
    qtbot.waitUntil(lambda: abs(page.player.side.width() - side) <= 2)
    again.commands["reset_layout"].trigger()
    assert not page.drawer_open()
    qtbot.waitUntil(lambda: page.player.side.width() < side)
    assert AppSettings.at(settings_file).layout(key) == {}
