"""The window is never larger than the screen: the first window fits the available
screen (a geometry saved on a larger screen is clipped to it), and no action (Before/After,
Compare of two runs, long names) widens it past the screen. Checked on Qt's offscreen
screens of 1280x720 and 1024x768 (a screen configuration file), in a process of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.trajectory import Episode, Step
from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    build_demo,
    demo_fixture,
    run_app_on_screen,
    screen_png,
    settings_file_fixture,
)
from trainer.store import Store, TaskRecord
from vm.actions import Click

ROOT = Path(__file__).resolve().parent.parent
LONG = "a-task-with-a-very-long-name-" * 6

# Run on a screen of the given size: open the app on a fresh settings file (a first
# launch), act, save settings as closing does; then the window saved at 1900x1000 (as
# on a larger screen) is restored. Prints one JSON line of what was seen.
SCRIPT = r"""
import json, sys
from pathlib import Path
from PyQt6.QtWidgets import QApplication
app = QApplication([])
from workbench.app.main_window import MainWindow
from workbench.app.settings import AppSettings

workspace, settings_path, long_id = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
seen = {}

def settle(window):
    for _ in range(3):
        app.processEvents()
    frame = window.frameGeometry()
    return [frame.x(), frame.y(), frame.width(), frame.height()]

def first_launch():
    window = MainWindow(AppSettings.at(settings_path), workspace)
    window.show()
    seen["available"] = list(window.screen().availableGeometry().getRect())
    seen["first"] = settle(window)
    page = window.trajectories
    page.open_episode(long_id)
    window.commands["show_after"].setChecked(True)       # B
    seen["after_b"] = settle(window)
    page.table.selectAll()                               # Compare runs: two ticked
    window.commands["compare"].trigger()
    seen["compare"] = settle(window)
    seen["compare_ids"] = list(page.compare_view.episode_ids())
    for name in ("environments", "training", "live", "evaluations", "trajectories"):
        window.show_screen(name)
        seen[name] = settle(window)
    window.showNormal()
    window.resize(1900, 1000)                            # as saved on a larger screen
    window.close()

def restored_launch():
    window = MainWindow(AppSettings.at(settings_path), workspace)
    window.show()
    seen["restored"] = settle(window)
    window.close()

first_launch()
restored_launch()
print(json.dumps(seen))
"""


def add_long_episodes(path: Path) -> str:
    """Two episodes of a task with a very long id and instruction; the first's id."""
    with Store.open(path) as store:
        store.tasks.put(TaskRecord(LONG, "Do " + "something long " * 30, "calc"))
        for n in range(2):
            episode = Episode(id=f"{LONG}-{n}", task_id=LONG, instruction="Do " +
                              "something long " * 30, environment="sandbox",
                              source="rollout", status="done", score=float(n),
                              run_id=f"{LONG}-run-{n}", tags=[LONG],
                              steps=[Step(0, response="click", actions=[Click(10, 10)])])
            episode.steps[0].frame = store.frames.put(screen_png(n))
            store.episodes.save(episode)
    return f"{LONG}-0"


def run_on_screen(tmp_path: Path, width: int, height: int) -> dict[str, Any]:
    workspace = tmp_path / "ws"
    build_demo(workspace).store.close()
    long_id = add_long_episodes(workspace)
    return run_app_on_screen(SCRIPT, [str(workspace), str(tmp_path / "s.ini"), long_id],
                             width, height, tmp_path / "screens.json")


@pytest.mark.parametrize("size", [(1280, 720), (1024, 768)])
def test_the_window_never_outgrows_the_screen(tmp_path: Path, size: tuple[int, int]) -> None:
    seen = run_on_screen(tmp_path, *size)
    x, y, width, height = seen["available"]
    assert (width, height) == size

    def inside(frame: list[int]) -> bool:
        fx, fy, fw, fh = frame
        return fx >= x and fy >= y and fx + fw <= x + width and fy + fh <= y + height

    for when in ("first", "after_b", "compare", "environments", "training", "live",
                 "evaluations", "trajectories", "restored"):
        assert inside(seen[when]), (when, seen[when], seen["available"])
    assert seen["compare_ids"][0] != seen["compare_ids"][1]  # two runs were compared
    # the window saved at 1900x1000 comes back as large as this screen allows, no larger
    assert seen["restored"][2] >= width * 0.9 and seen["restored"][3] >= height * 0.8
