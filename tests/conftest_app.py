"""Fixtures for the app's tests: a small workspace with real screenshots and varied
episodes, a 100k-episode workspace, settings in a temporary INI file, and the main window.

Fixtures are defined as `<name>_fixture` with `name="<name>"`: import the function (e.g.
``from tests.conftest_app import demo_fixture  # noqa: F401``) and ask for `demo`.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from agents.trajectory import Episode, Step
from trainer.store import Store, TaskRecord
from vm.actions import Click, DragTo, Hotkey, MoveTo, Press, Scroll, TypeText

SCREEN = (640, 400)
BIG_EPISODES = 100_000


def screen_png(seed: int, size: tuple[int, int] = SCREEN, title: str = "") -> bytes:
    """A desktop-like screenshot: a coloured background, a window with a title and lines."""
    rng = random.Random(seed)
    image = Image.new("RGB", size, (rng.randrange(30, 90), rng.randrange(60, 120), 150))
    draw = ImageDraw.Draw(image)
    x, y = rng.randrange(20, 200), rng.randrange(20, 120)
    draw.rectangle((x, y, x + 360, y + 220), fill=(245, 245, 245), outline=(80, 80, 80))
    draw.rectangle((x, y, x + 360, y + 22), fill=(210, 214, 226))
    draw.text((x + 8, y + 5), title or f"window {seed}", fill=(20, 20, 20))
    for line in range(10):
        draw.text((x + 10, y + 30 + line * 18), f"line {line} of screen {seed}",
                  fill=(30, 30, 30))
    draw.rectangle((0, size[1] - 24, size[0], size[1]), fill=(25, 25, 25))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


@dataclass
class DemoWorkspace:
    path: Path
    store: Store
    rollout: str  # 4 steps: click, drag, scroll, type+hotkey; done, score 1, v2, run-a
    failed: str  # same task, v1, score 0, tagged "hard"
    human: str  # another task, by a person, unscored, done
    error: str  # a third task, status error
    imported: str  # the second task, imported, score 0.5
    tasks: tuple[str, ...]


def _response(thought: str, action: str) -> str:
    return f"Thought: {thought}\nAction: {action}"


def build_demo(path: Path) -> DemoWorkspace:
    store = Store.open(path, fsync_frames=False)
    tasks = ("calc-sum", "notes-save", "files-rename", "browser-bookmark")
    store.tasks.put(TaskRecord(tasks[0], "Add up column A in the spreadsheet", "calc"))
    store.tasks.put(TaskRecord(tasks[1], "Save the note as todo.txt", "notes"))
    store.tasks.put(TaskRecord(tasks[2], "Rename report.txt to final.txt", "files"))
    store.tasks.put(TaskRecord(tasks[3], "Bookmark the open page", "browser"))

    def save(episode: Episode, seeds: list[int], final: int | None) -> str:
        for step, seed in zip(episode.steps, seeds, strict=True):
            step.frame = store.frames.put(screen_png(seed, title=f"step {step.index + 1}"))
        if final is not None:
            episode.final_frame = store.frames.put(screen_png(final, title="final"))
        store.episodes.save(episode)
        return episode.id

    now = time.time()
    rollout = save(Episode(
        id="ep-rollout", task_id=tasks[0], instruction="Add up column A in the spreadsheet",
        environment="sandbox", policy_version=2, run_id="run-a", source="rollout",
        status="done", score=1.0, tags=["gold"], created_at=now - 50, finished_at=now - 40,
        steps=[
            Step(0, response=_response("The sheet is open; I click cell A1.",
                                       "click(start_box='(120,80)')"),
                 actions=[Click(120, 80)], entropies=[0.5, 1.5, 1.0],
                 logprobs=[-0.1, -0.3, -0.2], token_ids=[1, 2, 3],
                 timings={"model": 1.25, "env": 0.5}),
            Step(1, response=_response("Select down to A5 by dragging.",
                                       "drag(start_box='(120,80)', end_box='(120,180)')"),
                 actions=[MoveTo(120, 80), DragTo(120, 180)], timings={"model": 1.0}),
            Step(2, response=_response("Scroll to see the total row.", "scroll(down)"),
                 actions=[Scroll(dy=-5, x=300, y=200)]),
            Step(3, response=_response("Type the formula and confirm.",
                                       "type(content='=SUM(A1:A5)\\n')"),
                 actions=[TypeText("=SUM(A1:A5)"), Press("enter"), Hotkey(("ctrl", "s"))],
                 reward=1.0, done=True),
        ]), [1, 2, 3, 4], 5)
    failed = save(Episode(
        id="ep-failed", task_id=tasks[0], instruction="Add up column A in the spreadsheet",
        environment="sandbox", policy_version=1, run_id="run-a", source="rollout",
        status="done", score=0.0, tags=["hard"], created_at=now - 100, finished_at=now - 90,
        steps=[Step(0, response=_response("Click somewhere.", "click(start_box='(500,300)')"),
                    actions=[Click(500, 300)]),
               Step(1, response="I am not sure what to do.", parse_error="no Action: line")]),
        [6, 7], 8)
    human = save(Episode(
        id="ep-human", task_id=tasks[1], instruction="Save the note as todo.txt",
        environment="sandbox", source="human", status="done", score=None,
        created_at=now - 30, finished_at=now - 20,
        steps=[Step(0, response="a person saved the note", actions=[Hotkey(("ctrl", "s"))]),
               Step(1, response="typed the name", actions=[TypeText("todo.txt"),
                                                           Press("enter")])]), [9, 10], 11)
    error = save(Episode(
        id="ep-error", task_id=tasks[2], instruction="Rename report.txt to final.txt",
        environment="sandbox", policy_version=2, run_id="run-b", source="rollout",
        status="error", error="the desktop stopped answering", created_at=now - 10,
        steps=[Step(0, response=_response("Open the file manager.", "click(start_box="
                                          "'(40,380)')"), actions=[Click(40, 380, count=2)])]),
        [12], None)
    imported = save(Episode(
        id="ep-imported", task_id=tasks[1], instruction="Save the note as todo.txt",
        environment="osworld", policy_version=3, source="import", status="done", score=0.5,
        tags=["osworld"], created_at=now - 5, finished_at=now - 4,
        steps=[Step(0, response=_response("Press ctrl+s.", "hotkey(key='ctrl s')"),
                    actions=[Hotkey(("ctrl", "s"))])]), [13], 14)
    return DemoWorkspace(path, store, rollout, failed, human, error, imported, tasks)


@pytest.fixture(name="demo")
def demo_fixture(tmp_path: Path) -> Iterator[DemoWorkspace]:
    workspace = build_demo(tmp_path / "demo-workspace")
    yield workspace
    workspace.store.close()


def build_big(path: Path, episodes: int = BIG_EPISODES) -> Path:
    """A workspace of `episodes` episodes (rows only, no steps or frames), written in one
    transaction: what the table must open without reading every row."""
    rng = random.Random(7)
    tasks = [f"task-{i:03d}" for i in range(200)]
    sources = ("rollout", "rollout", "rollout", "human", "import")
    with Store.open(path, fsync_frames=False) as store, store.database.write() as db:
        db.conn.executemany(
            "INSERT INTO tasks (id, instruction, created_at) VALUES (?, ?, 0)",
            [(t, f"Do the thing number {i} in the app") for i, t in enumerate(tasks)])
        rows = []
        for i in range(episodes):
            task = tasks[i % len(tasks)]
            source = sources[i % len(sources)]
            rows.append((f"big-{i:06d}", task, source, "done",
                         round(rng.random(), 2), None if source == "human" else i % 7,
                         f"run-{i % 3}", f"Do the thing number {i % len(tasks)} in the app",
                         json.dumps(["hard"] if i % 10 == 0 else []), float(i), 5))
        db.conn.executemany(
            "INSERT INTO episodes (id, task_id, source, status, score, policy_version, run_id,"
            " instruction, tags, created_at, step_count) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
        db.conn.executemany("INSERT INTO episode_tags (episode_id, tag) VALUES (?, 'hard')",
                            [(r[0],) for r in rows if r[8] != "[]"])
    return path


@pytest.fixture(scope="session", name="big_workspace")
def big_workspace_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_big(tmp_path_factory.mktemp("big") / "workspace")


@pytest.fixture(name="settings_file")
def settings_file_fixture(tmp_path: Path) -> Path:
    return tmp_path / "settings" / "workbench.ini"


@pytest.fixture(name="window")
def window_fixture(qtbot: Any, demo: DemoWorkspace, settings_file: Path) -> Iterator[Any]:
    """The main window on the demo workspace, shown, on the Trajectories screen."""
    from workbench.app.main_window import MainWindow
    from workbench.app.settings import AppSettings

    window = MainWindow(AppSettings.at(settings_file), demo.path)
    qtbot.addWidget(window)
    show_at(window, (1500, 950))
    qtbot.waitExposed(window)
    window.show_screen("trajectories")
    yield window
    window.close()


def open_window(qtbot: Any, settings_file: Path, workspace: Path,
                size: tuple[int, int] = (1280, 720)) -> Any:
    """The main window on `workspace`, shown at `size` (closed by qtbot afterwards)."""
    from workbench.app.main_window import MainWindow
    from workbench.app.settings import AppSettings

    window = MainWindow(AppSettings.at(settings_file), workspace)
    qtbot.addWidget(window)
    show_at(window, size)
    return window


def open_active_window(qtbot: Any, settings_file: Path, workspace: Path,
                       size: tuple[int, int] = (1280, 720)) -> Any:
    """open_window, exposed and the application's active window (keys reach it)."""
    from PyQt6.QtWidgets import QApplication

    window = open_window(qtbot, settings_file, workspace, size)
    qtbot.waitExposed(window)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    return window


def open_on_evaluations(qtbot: Any, settings_file: Path, workspace: Path) -> tuple[Any, Any]:
    """The app on a new empty workspace, its Evaluations screen shown: (window, page)."""
    Store.open(workspace, create=True).close()
    window = open_window(qtbot, settings_file, workspace)
    qtbot.waitExposed(window)
    window.show_screen("evaluations")
    page = window.evaluations
    assert page is not None and page.names.count() == 0
    return window, page


def show_at(window: Any, size: tuple[int, int], episode_list: bool = True) -> None:
    """Show `window` at `size` (not maximised, as a first window on the offscreen
    platform's small screen would be), with the episode list open (as L opens it) unless
    `episode_list` is False: most tests click rows in it."""
    from PyQt6.QtCore import Qt

    window.setWindowState(Qt.WindowState.WindowNoState)
    window.resize(*size)
    window.show()
    if episode_list and window.trajectories is not None:
        window.trajectories.set_drawer_open(True)


def wait_for_worker(qtbot: Any, worker: Any, timeout: int = 20_000) -> None:
    """Wait until a workbench.app.workers.Worker has ended (done, failed or cancelled) and
    its results have reached the GUI thread. (A signal cannot be waited for here: a quick
    worker may have emitted it before the wait connects.)"""
    qtbot.waitUntil(lambda: worker.ended, timeout=timeout)


def run_app_on_screen(script: str, args: list[str], width: int, height: int,
                      config: Path, window_frames: bool = True) -> dict[str, Any]:
    """Run `script` (python -c, with `args`) on an offscreen screen of width x height
    (its Qt screen configuration written to `config`); the JSON it prints last. Fails with
    the script's error output when it does not exit 0."""
    screens: dict[str, Any] = {"screens": [{
        "name": "screen", "x": 0, "y": 0, "width": width, "height": height,
        "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}
    if not window_frames:
        screens["windowFrameMargins"] = False
    config.write_text(json.dumps(screens))
    env = {**os.environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}"}
    result = subprocess.run([sys.executable, "-c", script, *args],
                            cwd=Path(__file__).resolve().parent.parent, env=env,
                            capture_output=True, text=True, timeout=120)
    problems = [line for line in result.stderr.splitlines()
                if "propagateSizeHints" not in line]  # the offscreen platform's notice
    assert result.returncode == 0, (result.returncode, problems[-40:])
    seen: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return seen
