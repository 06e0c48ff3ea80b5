"""Recording a person's demonstration of a task, on real sandbox desktops into a real store:
first the Qt-free DemoRecorder (set-up as a rollout does it, steps with the screen they
were performed on, DONE/FAIL, evaluation, the success pool, discard, a desktop that dies),
then the Environments screen driving it from clicks on the live view."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from PyQt6.QtCore import QPoint, Qt

from agents.trajectory import FAILED_COMMANDS_INFO, SETUP_FAILED_INFO
from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    wait_for_worker,
    window_fixture,
)
from trainer.store import Store
from vm.actions import Click, Done, DragTo, Fail, MoveTo, Press, TypeText
from vm.env import DesktopEnv
from vm.errors import EnvironmentDead
from vm.providers.sandbox import SandboxProvider
from vm.suite import bundled_suite
from vm.suite.families import button_target
from vm.suite.oracles.desktop import app_state, click_widget, wait_state
from vm.tasks import Task
from workbench.app.main_window import MainWindow
from workbench.app.pages.environments import EnvironmentsPage
from workbench.services.demo_recorder import DemoError, DemoRecorder

pytestmark = [pytest.mark.x11, pytest.mark.slow]
SANDBOX = "demo-rec"


@pytest.fixture(scope="module")
def suite() -> Any:
    return bundled_suite()


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DesktopEnv]:
    """One sandbox for the recorder tests (each recording starts from its init_state)."""
    folder = tmp_path_factory.mktemp("recorder")
    env = DesktopEnv(SandboxProvider(SANDBOX, folder, guest_server=False))
    try:
        yield env
    finally:
        env.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "store", fsync_frames=False) as opened:
        yield opened


def pixel(png: bytes, point: tuple[int, int]) -> tuple[int, int, int]:
    with Image.open(io.BytesIO(png)) as image:
        value = image.convert("RGB").getpixel(point)
    assert isinstance(value, tuple)
    return value[0], value[1], value[2]


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def close_to(a: tuple[int, int, int], b: tuple[int, int, int], tolerance: int = 12) -> bool:
    return all(abs(x - y) <= tolerance for x, y in zip(a, b, strict=True))


def layout_of(provider: Any) -> list[dict[str, Any]]:
    state = wait_state(provider, "buttons", what="the buttons app ready")
    return list(state["layout"])


def off_buttons(layout: list[dict[str, Any]], screen: tuple[int, int]) -> tuple[int, int]:
    """A point on the window's background, away from every button."""
    for y in range(20, screen[1], 40):
        for x in range(20, screen[0], 40):
            if all(not (b["x"] - 30 <= x <= b["x"] + b["width"] + 30
                        and b["y"] - 30 <= y <= b["y"] + b["height"] + 30) for b in layout):
                return x, y
    raise AssertionError("no free background in the layout")


# -- the recorder, without Qt ------------------------------------------------------------


def test_demonstration_of_a_buttons_task_is_stored_scored_and_pooled(
        desktop: DesktopEnv, store: Store, suite: Any) -> None:
    task: Task = suite.tasks["buttons-0"]
    recorder = DemoRecorder(desktop, store)
    episode_id = recorder.start(task)
    running = store.episodes.load(episode_id)
    assert (running.status, running.source, running.task_id) == ("running", "human", task.id)
    assert running.info["sandbox"] == SANDBOX and running.instruction == task.instruction

    # what the oracle would click: the button the instruction names (the setup ran)
    target = click_widget(desktop.provider, "buttons", f"button_{button_target(task)}")
    assert recorder.record(target) == 0
    wait_state(desktop.provider, "buttons", lambda s: s.get("clicked"), what="the click")
    result = recorder.finish()
    assert (result.status, result.score, result.succeeded) == ("done", 1.0, True)
    assert (result.episode_id, result.steps, result.ending) == (episode_id, 2, "done")
    assert not recorder.recording

    stored = store.episodes.load(episode_id)
    assert (stored.status, stored.score, stored.source) == ("done", 1.0, "human")
    assert [s.actions for s in stored.steps] == [[target], [Done()]]
    assert stored.steps[-1].done and stored.steps[0].response == (
        f"pyautogui.click({target.x}, {target.y})")
    assert all(s.frame is not None and store.frames.exists(s.frame) for s in stored.steps)
    assert stored.final_frame is not None
    # the screen stored with the click is the one it was made on: the button is there
    assert stored.steps[0].frame is not None and target.x is not None and target.y is not None
    before = store.frames.get(stored.steps[0].frame)
    colour = next(b["color"] for b in layout_of(desktop.provider)
                  if b["name"] == button_target(task))
    assert close_to(pixel(before, (target.x, target.y)), hex_rgb(colour))

    entry = recorder.add_to_pool(result, added_by="tester")
    assert (entry.episode_id, entry.source, entry.added_by) == (episode_id, "human", "tester")
    assert store.pool.counts() == {task.id: 1}


def test_a_setup_command_that_failed_is_said_before_recording_and_kept_on_the_episode(
        desktop: DesktopEnv, store: Store) -> None:
    task = Task.from_dict({
        "id": "wb-demo-setup-fails", "instruction": "nothing to do",
        "config": [{"type": "execute", "parameters": {
            "command": "ls /home/user/no-such-folder", "shell": True}}],
        "evaluator": {"func": "exact_match",
                      "result": {"type": "vm_command_line", "command": "echo done",
                                 "shell": True},
                      "expected": {"type": "rule", "rules": {"expected": "done\n"}}}})
    recorder = DemoRecorder(desktop, store)
    episode_id = recorder.start(task)
    # the person is told before doing anything (the Environments screen shows this text)
    assert recorder.setup_warning.startswith(
        "setup incomplete: 1 command failed, so the desktop is not as the task expects "
        "(config[0] 'ls /home/user/no-such-folder' exited with 2: ")
    result = recorder.finish()
    assert (result.status, result.score) == ("done", 1.0)
    stored = store.episodes.load(episode_id)
    assert stored.info[SETUP_FAILED_INFO] == 1
    [record] = stored.info[FAILED_COMMANDS_INFO]
    assert (record["part"], record["index"], record["returncode"]) == ("config", 0, 2)
    assert store.queries.summaries([episode_id])[0].setup_failed == 1
    assert recorder.setup_warning == ""  # the next recording starts without it


def test_typing_and_drags_make_one_step_each_and_a_wrong_click_scores_zero(
        desktop: DesktopEnv, store: Store, suite: Any) -> None:
    task: Task = suite.tasks["buttons-1"]
    recorder = DemoRecorder(desktop, store)
    episode_id = recorder.start(task)
    layout = layout_of(desktop.provider)
    free = off_buttons(layout, desktop.provider.screen_size())
    wrong = next(b for b in layout if b["name"] != button_target(task))
    wrong_click = Click(wrong["x"] + wrong["width"] // 2, wrong["y"] + wrong["height"] // 2)

    indices = [recorder.record(TypeText("a")), recorder.record(TypeText("b")),
               recorder.record(Press("enter")), recorder.record(MoveTo(*free)),
               recorder.record(DragTo(free[0] + 5, free[1] + 30)),
               recorder.record(wrong_click)]
    assert indices == [0, 0, 1, 2, 2, 3]
    assert recorder.step_count == 4
    wait_state(desktop.provider, "buttons", lambda s: s.get("clicked"), what="the click")
    result = recorder.finish()
    assert (result.status, result.score, result.succeeded) == ("done", 0.0, False)
    with pytest.raises(DemoError, match="only successes"):
        recorder.add_to_pool(result)

    stored = store.episodes.load(episode_id)
    assert [s.actions for s in stored.steps] == [
        [TypeText("ab")], [Press("enter")], [MoveTo(*free), DragTo(free[0] + 5, free[1] + 30)],
        [wrong_click], [Done()]]
    assert [s.index for s in stored.steps] == [0, 1, 2, 3, 4]
    assert len({s.frame for s in stored.steps}) >= 2  # each step has its own screen
    assert store.pool.counts() == {}


def test_fail_ending_is_evaluated_like_an_agent_fail(desktop: DesktopEnv, store: Store,
                                                     suite: Any) -> None:
    # FAIL is the right answer to an infeasible task and a wrong one to a feasible task
    infeasible: Task = suite.tasks["terminal-install-spotify"]
    assert infeasible.infeasible
    recorder = DemoRecorder(desktop, store)
    recorder.start(infeasible)
    right = recorder.finish("fail")
    assert (right.status, right.score, right.succeeded, right.steps) == ("done", 1.0, True, 1)
    assert store.episodes.load(right.episode_id).steps[0].actions == [Fail()]

    recorder.start(suite.tasks["buttons-2"])
    wrong = recorder.finish("fail")
    assert (wrong.status, wrong.score, wrong.succeeded) == ("done", 0.0, False)


def test_discard_deletes_the_episode_and_turns_are_enforced(desktop: DesktopEnv, store: Store,
                                                            suite: Any) -> None:
    recorder = DemoRecorder(desktop, store)
    with pytest.raises(DemoError, match="start"):
        recorder.record(Click(5, 5))
    with pytest.raises(DemoError, match="start"):
        recorder.finish()
    assert recorder.discard() is None
    with pytest.raises(DemoError, match="task with an id"):
        recorder.start(None)

    task: Task = suite.tasks["buttons-3"]
    episode_id = recorder.start(task)
    with pytest.raises(DemoError, match="already recording"):
        recorder.start(task)
    with pytest.raises(DemoError, match="finish"):
        recorder.record(Done())
    with pytest.raises(DemoError, match="expected an Action"):
        recorder.record("pyautogui.click(5, 5)")  # type: ignore[arg-type]
    with pytest.raises(DemoError, match="ending"):
        recorder.finish("maybe")  # type: ignore[arg-type]
    free = off_buttons(layout_of(desktop.provider), desktop.provider.screen_size())
    recorder.record(Click(*free))
    assert recorder.discard() == episode_id
    assert not store.episodes.exists(episode_id) and not recorder.recording

    # the same desktop records the next one, set up afresh
    again = recorder.start(task)
    assert again != episode_id
    assert app_state(desktop.provider, "buttons") is not None
    state = wait_state(desktop.provider, "buttons", what="a fresh buttons app")
    assert state["clicks"] == []  # the discarded click is not on the new app
    recorder.discard()


def test_a_desktop_that_dies_ends_the_demonstration_with_an_error(
        tmp_path: Path, store: Store, suite: Any) -> None:
    provider = SandboxProvider("demo-dies", tmp_path / "dies", guest_server=False)
    env = DesktopEnv(provider, call_timeout=10)
    try:
        recorder = DemoRecorder(env, store)
        task: Task = suite.tasks["buttons-4"]
        episode_id = recorder.start(task)
        free = off_buttons(layout_of(provider), provider.screen_size())
        recorder.record(Click(*free))
        provider.stop()
        with pytest.raises(EnvironmentDead):
            recorder.record(Click(free[0] + 1, free[1]))
        assert not recorder.recording
        stored = store.episodes.load(episode_id)
        assert stored.status == "error" and stored.error is not None
        assert [s.actions for s in stored.steps] == [[Click(*free)]]  # the step before
    finally:
        env.close()


# -- the Environments screen -------------------------------------------------------------


@pytest.fixture
def page(qtbot: Any, window: MainWindow) -> Iterator[EnvironmentsPage]:
    """The Environments screen with a running sandbox chosen and the tasks listed."""
    window.show_screen("environments")
    environments = window.environments
    assert environments is not None
    try:
        wait_for_worker(qtbot, environments.create_sandbox(SANDBOX), timeout=60_000)
        qtbot.waitUntil(lambda: environments.current_name() == SANDBOX, timeout=10_000)
        qtbot.waitUntil(lambda: environments.feed is not None, timeout=10_000)
        qtbot.waitUntil(lambda: bool(environments.tasks), timeout=10_000)
        yield environments
    finally:  # pytest-qt has closed the window by now (which shuts its pages down)
        environments.manager.provider(SANDBOX).stop()


def click_on_screen(qtbot: Any, page: EnvironmentsPage, point: tuple[int, int]) -> None:
    x, y = page.live.placement().to_widget(point[0] + 0.5, point[1] + 0.5)
    qtbot.mouseClick(page.live, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))


def start_recording(qtbot: Any, page: EnvironmentsPage, task_id: str) -> str:
    assert page.choose_task(task_id)
    assert page.chosen_task() is not None and page.chosen_task().id == task_id  # type: ignore[union-attr]
    assert task_id in page.instruction.text() or page.tasks[task_id].instruction in \
        page.instruction.text()
    with qtbot.waitSignal(page.recording_started, timeout=90_000) as started:
        page.demo_buttons["Record"].click()
    assert page.demo_state == "recording" and page.control_switch.isChecked()
    assert not page.sandbox_view.isEnabled()  # the desktop belongs to the demonstration
    assert page.demo_buttons["Finish"].isEnabled() and not page.demo_buttons["Record"].isEnabled()
    return str(started.args[0])


def test_record_a_demonstration_on_the_environments_screen(
        qtbot: Any, window: MainWindow, page: EnvironmentsPage, demo: DemoWorkspace,
        artifacts: Path, suite: Any) -> None:
    task: Task = suite.tasks["buttons-0"]
    episode_id = start_recording(qtbot, page, task.id)
    provider = page.manager.provider(SANDBOX)
    target = click_widget(provider, "buttons", f"button_{button_target(task)}")
    assert target.x is not None and target.y is not None
    feed = page.feed
    assert feed is not None
    frames = feed.frames
    qtbot.waitUntil(lambda: feed.frames > frames + 1, timeout=10_000)  # the app on screen
    with qtbot.waitSignal(page.step_recorded, timeout=30_000):
        click_on_screen(qtbot, page, (target.x, target.y))
    wait_state(provider, "buttons", lambda s: s.get("clicked"), what="the click")
    assert "1 step" in page.demo_status.text()
    window.grab().save(str(artifacts / "app-recording.png"))

    with qtbot.waitSignal(page.demonstration_finished, timeout=60_000) as finished:
        page.demo_buttons["Finish"].click()
    result = finished.args[0]
    assert (result.episode_id, result.status, result.score) == (episode_id, "done", 1.0)
    assert "score 1.00 (success)" in page.demo_status.text()
    assert page.demo_state == "idle" and page.sandbox_view.isEnabled()
    stored = demo.store.episodes.load(episode_id)
    assert (stored.source, stored.status, stored.score) == ("human", "done", 1.0)
    assert len(stored.steps) == 2 and isinstance(stored.steps[0].actions[0], Click)
    clicked = stored.steps[0].actions[0]
    assert abs(clicked.x - target.x) <= 2 and abs(clicked.y - target.y) <= 2  # type: ignore[operator]
    assert all(s.frame is not None and demo.store.frames.exists(s.frame) for s in stored.steps)

    pool_button = page.demo_buttons["Add to Success Pool"]
    assert pool_button.isEnabled()
    with qtbot.waitSignal(page.demonstration_pooled, timeout=20_000):
        pool_button.click()
    entry = demo.store.pool.get(episode_id)
    assert entry is not None and entry.source == "human"
    assert not pool_button.isEnabled() and "in the success pool" in page.demo_status.text()
    window.grab().save(str(artifacts / "app-recording-finished.png"))


def test_failed_and_discarded_demonstrations_on_the_screen(
        qtbot: Any, page: EnvironmentsPage, demo: DemoWorkspace, suite: Any) -> None:
    task: Task = suite.tasks["buttons-1"]
    episode_id = start_recording(qtbot, page, task.id)
    provider = page.manager.provider(SANDBOX)
    wrong = next(b for b in layout_of(provider) if b["name"] != button_target(task))
    with qtbot.waitSignal(page.step_recorded, timeout=30_000):
        click_on_screen(qtbot, page, (wrong["x"] + 20, wrong["y"] + 20))
    with qtbot.waitSignal(page.demonstration_finished, timeout=60_000) as finished:
        page.demo_buttons["Finish"].click()
    result = finished.args[0]
    assert (result.status, result.score, result.succeeded) == ("done", 0.0, False)
    assert "not a success" in page.demo_status.text()
    assert not page.demo_buttons["Add to Success Pool"].isEnabled()
    stored = demo.store.episodes.load(episode_id)
    assert (stored.source, stored.score) == ("human", 0.0)
    assert demo.store.pool.get(episode_id) is None

    discarded_id = start_recording(qtbot, page, "buttons-2")
    with qtbot.waitSignal(page.demonstration_discarded, timeout=30_000) as discarded:
        page.demo_buttons["Discard"].click()
    assert discarded.args[0] == discarded_id
    assert not demo.store.episodes.exists(discarded_id)
    assert page.demo_state == "idle" and page.demo_buttons["Record"].isEnabled()
