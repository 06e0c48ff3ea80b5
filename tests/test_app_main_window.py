"""The main window: screens as pages, opening and creating workspaces, settings kept
between launches, the Training placeholder, and the `workbench` entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from PyQt6.QtCore import QPoint, Qt

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    window_fixture,
)
from tests.conftest_x11 import reserved_display
from workbench.__main__ import _app_workspace
from workbench.app.main_window import MainWindow
from workbench.app.settings import AppSettings

REPO = Path(__file__).resolve().parent.parent


def test_without_a_workspace_the_window_offers_to_open_one(qtbot: Any, settings_file: Path,
                                                          artifacts: Path) -> None:
    window = MainWindow(AppSettings.at(settings_file))
    qtbot.addWidget(window)
    window.resize(1200, 800)
    window.show()
    assert window.store is None and window.stack.currentWidget() is window.welcome
    assert not window.navigation.isEnabled()
    assert not window.commands["next_step"].isEnabled()
    window.grab().save(str(artifacts / "app-welcome.png"))


def test_creating_and_opening_workspaces(qtbot: Any, settings_file: Path, tmp_path: Path
                                         ) -> None:
    window = MainWindow(AppSettings.at(settings_file))
    qtbot.addWidget(window)
    assert not window.open_workspace(tmp_path / "not-yet")  # opening does not create
    assert "no workspace here" in window.welcome.problem.text()
    assert window.open_workspace(tmp_path / "fresh", create=True)
    assert (tmp_path / "fresh" / "workbench.db").exists()
    assert window.current_screen() == "trajectories"
    assert window.trajectories is not None and window.trajectories.model.rowCount() == 0
    assert window.windowTitle().startswith("fresh")
    assert window.open_workspace(tmp_path / "second", create=True)
    assert window.settings.recent_workspaces[:2] == [str(tmp_path / "second"),
                                                     str(tmp_path / "fresh")]


def test_screens_switch_from_the_keyboard(qtbot: Any, window: MainWindow, artifacts: Path
                                          ) -> None:
    qtbot.keyClick(window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert window.current_screen() == "environments"
    assert window.stack.currentWidget() is window.environments
    assert not window.commands["label_correct"].isEnabled()  # episode keys are off here
    qtbot.keyClick(window, Qt.Key.Key_3, Qt.KeyboardModifier.ControlModifier)
    assert window.current_screen() == "training"
    assert window.training is not None
    assert window.stack.currentWidget() is window.training
    assert window.training.form.is_valid()  # the example configuration, ready to start
    window.grab().save(str(artifacts / "app-training-screen.png"))
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert window.current_screen() == "trajectories"
    assert window.commands["label_correct"].isEnabled()


def page_left(window: MainWindow) -> int:
    """Where the current page starts, in window pixels."""
    page = window.stack.currentWidget()
    assert page is not None
    return page.mapTo(window, QPoint(0, 0)).x()


def test_the_page_starts_right_after_the_screen_list(qtbot: Any, settings_file: Path,
                                                     tmp_path: Path) -> None:
    """The screen list is icons below 1600 pixels and has titles above: the page moves
    with it in the same resize (a grab straight after resize() once showed a 92-pixel
    empty column at 1280x720 after 1920x1080, and the page under the list the other
    way), on any screen, as shown first at 1500x950 as the demo's screenshots are."""
    from workbench.app.main_window import COMPACT_NAVIGATION_WIDTH, NAVIGATION_WIDTH

    window = MainWindow(AppSettings.at(settings_file), tmp_path / "workspace")
    qtbot.addWidget(window)
    window.resize(1500, 950)
    window.show()
    qtbot.waitExposed(window)
    body = window.centralWidget()
    assert body is not None
    for screen in ("trajectories", "evaluations"):
        window.show_screen(screen)
        for (width, height), list_width in (((1280, 720), COMPACT_NAVIGATION_WIDTH),
                                            ((1920, 1080), NAVIGATION_WIDTH),
                                            ((1280, 720), COMPACT_NAVIGATION_WIDTH)):
            window.resize(width, height)  # no events between: what a grab would draw
            assert (window.width(), window.height()) == (width, height)
            assert window.navigation.width() == list_width
            assert window.navigation.mapTo(window, QPoint(0, 0)).x() == 0
            assert page_left(window) == list_width, (screen, width)
            assert window.stack.geometry().right() == body.width() - 1


def test_settings_are_kept_between_launches(qtbot: Any, demo: DemoWorkspace,
                                            settings_file: Path) -> None:
    first = MainWindow(AppSettings.at(settings_file), demo.path)
    qtbot.addWidget(first)
    first.resize(1111, 777)
    first.show()
    first.show_screen("training")
    assert first.trajectories is not None
    first.trajectories.player.set_speed(4.0)
    first.commands["show_after"].setChecked(True)
    first.close()

    second = MainWindow(AppSettings.at(settings_file))  # no workspace named: the last one
    qtbot.addWidget(second)
    second.show()
    assert second.workspace == demo.path.resolve()
    assert second.current_screen() == "training"
    # (the offscreen platform has no window manager to honour a restored size exactly)
    assert second.settings.bytes("geometry") is not None
    assert second.trajectories is not None
    assert second.trajectories.player.playback.speed == 4.0
    assert second.commands["show_after"].isChecked()
    assert second.trajectories.player.show_after
    second.close()


def test_arguments_choose_the_app_or_the_command_line() -> None:
    assert _app_workspace([]) == (True, None)
    assert _app_workspace(["--workspace", "w"]) == (True, Path("w"))
    assert _app_workspace(["--workspace=w"]) == (True, Path("w"))
    assert _app_workspace(["env", "up", "--foreground"]) == (False, None)
    assert _app_workspace(["--workspace", "w", "env", "list"]) == (False, None)


def run_workbench(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_no_display_says_how_to_run_the_app(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    result = run_workbench(["--workspace", str(tmp_path / "ws")], env)
    assert result.returncode == 2
    assert "no display" in result.stderr and "xvfb-run" in result.stderr
    # sub-commands still go to the command line, which needs no display
    result = run_workbench(["--workspace", str(tmp_path / "ws"), "env", "list"], env)
    assert result.returncode == 0, result.stderr
    assert "no sandbox running" in result.stdout


def test_a_display_that_has_ended_says_so_instead_of_aborting(tmp_path: Path) -> None:
    # Qt aborts (exit status 134) with a message about xcb-cursor on a DISPLAY nothing
    # answers at, e.g. an SSH session's forwarded display after it closed
    env = {k: v for k, v in os.environ.items()
           if k not in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    with reserved_display() as display:
        env["DISPLAY"] = display
        result = run_workbench(["--workspace", str(tmp_path / "ws")], env)
    assert result.returncode == 2, result.stderr
    assert f"cannot open the X display DISPLAY={display}" in result.stderr
    assert "unset DISPLAY" in result.stderr and "xvfb-run -a" in result.stderr


def test_a_recorded_demonstration_appears_on_trajectories_at_once(
        qtbot: Any, window: MainWindow) -> None:
    from agents.trajectory import Episode, Step
    from vm.actions import Click

    assert window.store is not None and window.trajectories is not None
    assert window.environments is not None
    before = window.trajectories.model.rowCount()
    window.store.episodes.save(Episode(
        id="ep-new-demo", task_id="notes-save", instruction="Save the note as todo.txt",
        environment="sandbox", source="human", status="done", score=1.0,
        steps=[Step(0, response="a person clicked", actions=[Click(10, 10)])]))
    assert window.trajectories.model.rowCount() == before  # not re-read yet
    window.environments.demonstration_finished.emit(object())
    assert window.trajectories.model.rowCount() == before + 1
    window.environments.demonstration_discarded.emit("ep-new-demo")  # (still listed here)
    assert window.trajectories.model.rowCount() == before + 1
