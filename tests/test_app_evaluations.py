"""The Evaluations screen: an evaluation's policy table, heatmap with flip rates and
comparisons, rebuilt from the store; a heatmap cell's episodes shown on Trajectories."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agents.trajectory import Episode
from tests.conftest_app import (  # noqa: F401
    open_on_evaluations,
    open_window,
    settings_file_fixture,
)
from trainer.evaluation.plan import EvalPlan, episode_tags, parse_policy, save_plan
from trainer.store import Store
from workbench.app.main_window import MainWindow
from workbench.app.settings import AppSettings

# oracle: t1 2/2, t2 1/2 (a flip); random: t1 0/2, t2 0/2
OUTCOMES = {("oracle", "t1", 0): 1.0, ("oracle", "t1", 1): 1.0, ("oracle", "t2", 0): 1.0,
            ("oracle", "t2", 1): 0.0, ("random", "t1", 0): 0.0, ("random", "t1", 1): 0.0,
            ("random", "t2", 0): 0.0, ("random", "t2", 1): 0.0}


def build(path: Path) -> None:
    plan = EvalPlan("smoke", [parse_policy("oracle"), parse_policy("random")], ["t1", "t2"],
                    ["t1", "t2"], seeds=(0, 1))
    save_plan(path, plan)
    now = time.time()
    with Store.open(path, create=True) as store:
        for i, ((label, task, seed), score) in enumerate(OUTCOMES.items()):
            store.episodes.save(Episode(
                id=f"{label}-{task}-{seed}", task_id=task, instruction=f"do {task}",
                environment="sandbox", source="rollout", status="done", score=score,
                tags=list(episode_tags("smoke", label, seed)), created_at=now + i,
                finished_at=now + i + 1))
        store.episodes.save(Episode(id="other", task_id="t1", instruction="do t1",
                                    environment="sandbox", source="rollout", status="done",
                                    score=1.0, created_at=now, finished_at=now))


def test_evaluations_screen_and_click_through(qtbot: Any, settings_file: Path,
                                              tmp_path: Path, artifacts: Path) -> None:
    workspace = tmp_path / "ws"
    build(workspace)
    window = open_window(qtbot, settings_file, workspace)
    qtbot.waitExposed(window)
    command = window.commands["show_evaluations"]
    assert command.shortcut().toString() == "Ctrl+5"
    command.trigger()
    assert window.current_screen() == "evaluations"
    page = window.evaluations
    assert page is not None and page.report is not None
    assert page.names.count() == 1 and not page.hint.isVisible()
    assert [p.label for p in page.policy_model.records] == ["oracle", "random"]
    assert page.policy_model.records[0].success_rate == 0.75
    assert page.heatmap.rowCount() == 2 and page.heatmap.columnCount() == 2
    assert page.heatmap.item(0, 0).text() == "100% · flip 0.00"
    assert page.heatmap.item(1, 0).text() == "50% · flip 1.00"
    [comparison] = page.comparison_model.records
    assert (comparison.a_only, comparison.b_only) == (3, 0)
    window.grab().save(str(artifacts / "app-evaluations-1280x720.png"))
    window.resize(1920, 1080)
    window.grab().save(str(artifacts / "app-evaluations-1920x1080.png"))
    # a cell double-clicked: that policy's episodes of that task, on Trajectories
    page.heatmap.cellDoubleClicked.emit(1, 0)
    assert window.current_screen() == "trajectories"
    trajectories = window.trajectories
    assert trajectories is not None
    shown = sorted(trajectories.model.episode_id(r) for r in range(len(trajectories.rows)))
    assert shown == ["oracle-t2-0", "oracle-t2-1"]
    # the filter says so, the list is open, and the first of them is open and selected
    bar = trajectories.filter_bar
    assert bar.task.currentText() == "t2"
    assert bar.extra.isVisible() and "eval:smoke" in bar.extra.text() \
        and "policy:oracle" in bar.extra.text()
    assert bar.selection().task_ids == ["t2"] and len(bar.selection().tags) == 2
    assert trajectories.drawer_open()
    button = trajectories.drawer_button  # the list's button says how many, uncut
    assert button.text() == "☰ 2 of 9 episodes"
    assert button.isVisible() and button.width() >= button.sizeHint().width()
    first = trajectories.model.episode_id(0)
    assert trajectories.current_episode_id() == first
    assert trajectories.selected_episode_ids() == [first]
    window.grab().save(str(artifacts / "app-evaluation-cell-episodes-1920x1080.png"))
    bar.clear()  # Clear takes the evaluation's tags away too
    assert len(trajectories.rows) == 9 and not bar.extra.isVisible()
    window.close()


def test_an_empty_workspace_says_how_to_evaluate(qtbot: Any, settings_file: Path,
                                                 tmp_path: Path) -> None:
    window = MainWindow(AppSettings.at(settings_file))
    qtbot.addWidget(window)
    assert window.open_workspace(tmp_path / "empty", create=True)
    window.show_screen("evaluations")
    page = window.evaluations
    assert page is not None and page.report is None and page.names.count() == 0
    hint = page.hint.text()
    assert "workbench --workspace" in hint and str(tmp_path / "empty") in hint
    assert " eval " in hint and "--tasks" in hint
    window.close()


def test_an_evaluation_finished_elsewhere_shows_when_the_screen_opens(
        qtbot: Any, settings_file: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    window, page = open_on_evaluations(qtbot, settings_file, workspace)
    window.show_screen("trajectories")
    build(workspace)  # `workbench eval` finishes in a terminal meanwhile
    window.show_screen("evaluations")  # no F5
    assert page.names.count() == 1 and page.report is not None
    window.close()
