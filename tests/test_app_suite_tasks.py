"""Tasks of an OSWorld evaluation_examples folder chosen in the app for a demonstration
(the Environments screen's task list; one demonstrated on a real sandbox) and for a
training run (the run form's Suite folder and Task ids), through the real audit and the
suite dialog; the dialog is answered as a person would, by ticking and clicking its action
button while it is open."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import QDialog

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    wait_for_worker,
    window_fixture,
)
from trainer.config import RunConfig
from trainer.loop import select_run_tasks
from workbench.app.main_window import MainWindow
from workbench.app.widgets.task_suite_dialog import TaskSuiteDialog

FOLDER = Path(__file__).parent / "fixtures" / "osworld"  # 3 tasks; 2 run in a sandbox
RUNNABLE = {"5ea617a3-0e86-4ba6-aab2-dac9aa2e8d57", "b6781586-6346-41cd-935a-a6b1487918fc"}
INFEASIBLE = "b6781586-6346-41cd-935a-a6b1487918fc"  # no set-up; FAIL is its right answer


def answer(page: Any, respond: Callable[[TaskSuiteDialog], None]) -> list[TaskSuiteDialog]:
    """When `page` opens a suite dialog, `respond` to it once it is shown (inside its
    exec); the dialogs seen."""
    seen: list[TaskSuiteDialog] = []

    def opened(dialog: QDialog) -> None:
        assert isinstance(dialog, TaskSuiteDialog)
        seen.append(dialog)
        QTimer.singleShot(0, lambda: respond(dialog))

    page.suite_opened.connect(opened)
    return seen


def choose_runnable(action: str) -> Callable[[TaskSuiteDialog], None]:
    def respond(dialog: TaskSuiteDialog) -> None:
        assert dialog.action_button is not None
        assert dialog.action_button.text() == action
        assert not dialog.action_button.isEnabled()  # nothing chosen yet
        dialog.choose_runnable()
        dialog.action_button.click()

    return respond


def instruction_of(task_id: str) -> str:
    file = next(FOLDER.rglob(f"{task_id}.json"))
    return str(json.loads(file.read_text())["instruction"])


def test_suite_tasks_join_the_demonstration_task_list(qtbot: Any, window: MainWindow,
                                                      artifacts: Path) -> None:
    window.show_screen("environments")
    page = window.environments
    assert page is not None
    qtbot.waitUntil(lambda: bool(page.bundled), timeout=30_000)  # the bundled tasks
    assert page.suite_button.isEnabled()
    seen = answer(page, choose_runnable("Demonstrate the chosen"))
    wait_for_worker(qtbot, page.open_task_suite(FOLDER), timeout=30_000)
    qtbot.waitUntil(lambda: page.chosen_task() is not None, timeout=30_000)
    assert len(seen) == 1
    # both tasks that run here are listed first, the first one chosen, read from its file
    first = next(t.id for t in seen[0].chosen())
    task = page.chosen_task()
    assert task is not None and task.id == first
    assert task.instruction == instruction_of(first)
    listed = [page.task_combo.itemData(i) for i in range(page.task_combo.count())]
    assert set(listed[:2]) == RUNNABLE
    assert {t.id for t in page.bundled} <= set(listed[2:])  # the bundled ones stay
    assert instruction_of(first) in page.instruction.text()
    window.grab().save(str(artifacts / "app-demonstration-suite-task.png"))


@pytest.mark.x11
@pytest.mark.slow
def test_a_suite_task_is_demonstrated_on_a_sandbox(qtbot: Any, window: MainWindow,
                                                   demo: DemoWorkspace) -> None:
    """Chosen from the folder, the task is set up on a running sandbox, recorded, ended
    with Fail (the right answer of an infeasible task) and scored by its own evaluator."""
    window.show_screen("environments")
    page = window.environments
    assert page is not None
    try:
        wait_for_worker(qtbot, page.create_sandbox("suite-demo"), timeout=60_000)
        qtbot.waitUntil(lambda: page.current_name() == "suite-demo", timeout=10_000)

        def choose_one(dialog: TaskSuiteDialog) -> None:
            dialog.choose([INFEASIBLE])
            assert dialog.action_button is not None
            dialog.action_button.click()

        answer(page, choose_one)
        wait_for_worker(qtbot, page.open_task_suite(FOLDER), timeout=30_000)
        qtbot.waitUntil(lambda: page.chosen_task() is not None
                        and page.chosen_task().id == INFEASIBLE,  # type: ignore[union-attr]
                        timeout=30_000)
        qtbot.waitUntil(lambda: page.demo_buttons["Record"].isEnabled(), timeout=30_000)
        with qtbot.waitSignal(page.recording_started, timeout=90_000) as started:
            page.demo_buttons["Record"].click()
        with qtbot.waitSignal(page.demonstration_finished, timeout=60_000) as finished:
            page.demo_buttons["Fail"].click()
        result = finished.args[0]
        assert (result.task_id, result.status, result.score) == (INFEASIBLE, "done", 1.0)
        stored = demo.store.episodes.load(str(started.args[0]))
        assert (stored.task_id, stored.source, stored.score) == (INFEASIBLE, "human", 1.0)
        assert stored.instruction == instruction_of(INFEASIBLE)
    finally:
        page.shutdown()
        page.manager.provider("suite-demo").stop()


def test_suite_tasks_become_a_training_runs_tasks(qtbot: Any, window: MainWindow) -> None:
    window.show_screen("training")
    page = window.training
    assert page is not None
    page.form.set_config(RunConfig())
    page.form.set_widget_value("tasks.suite", str(FOLDER))  # typed in the form
    seen = answer(page, choose_runnable("Train on the chosen"))
    said: list[str] = []
    page.message.connect(said.append)
    page.form.choose_tasks_button.click()
    qtbot.waitUntil(lambda: bool(page.form.widget_value("tasks.ids")), timeout=30_000)
    assert len(seen) == 1 and page.form.is_valid(), page.form.error
    assert f"The run trains on 2 task(s) of {FOLDER}" in said
    config = page.form.config()
    assert config.tasks.suite == str(FOLDER) and set(config.tasks.ids) == RUNNABLE
    # what `workbench train` reads: the suite's tasks, loaded from the folder
    tasks = select_run_tasks(config.tasks, (1280, 800))
    assert [t.id for t in tasks] == list(config.tasks.ids)
    assert all(t.instruction == instruction_of(t.id) for t in tasks)
    assert all(task_id in page.form.toml_text() for task_id in RUNNABLE)

    # opened again: the tasks the run trains on are ticked; closing changes nothing
    ticked: list[set[str]] = []

    def look_and_close(dialog: TaskSuiteDialog) -> None:
        ticked.append({t.id for t in dialog.chosen()})
        dialog.reject()

    page.suite_opened.disconnect()
    answer(page, look_and_close)
    worker = page.choose_suite_tasks(str(FOLDER))
    assert worker is not None
    wait_for_worker(qtbot, worker, timeout=30_000)
    qtbot.waitUntil(lambda: bool(ticked), timeout=30_000)
    assert ticked == [RUNNABLE]
    assert set(page.form.config().tasks.ids) == RUNNABLE
