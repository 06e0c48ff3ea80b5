"""New evaluation from the app: the dialog's policies, tasks, seeds and desktops become
the `workbench eval` command; the Evaluations screen runs it in the background and shows
its results as they are stored (a real evaluation: oracle and random on a bundled task)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QDialogButtonBox

from tests.conftest_app import (  # noqa: F401
    open_on_evaluations,
    open_window,
    settings_file_fixture,
)
from workbench.app.widgets.new_evaluation_dialog import NewEvaluationDialog
from workbench.services.evaluation_command import EvaluationRequest, eval_arguments


def test_the_dialog_gives_the_eval_command(qtbot: Any, tmp_path: Path,
                                          artifacts: Path) -> None:
    dialog = NewEvaluationDialog([("run-7", "demo · 11-27 21:00")], {"eval-1"})
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.name.text() == "eval-2"  # eval-1 is taken
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert ok is not None and ok.isEnabled()  # oracle and random by default
    run = dialog.runs.item(0)
    assert run is not None
    run.setCheckState(Qt.CheckState.Checked)
    dialog.openai.setText("qwen@http://localhost:8000/v1")
    dialog.tasks.setText("buttons-* '/data/osworld/evaluation_examples'")
    dialog.seeds.setText("2")
    dialog.desktops.setValue(3)
    dialog.grab().save(str(artifacts / "app-new-evaluation-dialog.png"))
    request = dialog.request()
    assert request == EvaluationRequest(
        "eval-2", ["oracle", "random", "checkpoint:run-7", "openai:qwen@http://localhost:8000/v1"],
        ["buttons-*", "/data/osworld/evaluation_examples"], "2", 3)
    arguments = eval_arguments(tmp_path, request)
    assert arguments[:6] == ["-m", "workbench", "--workspace", str(tmp_path), "eval", "eval-2"]
    assert arguments[arguments.index("--tasks"):] == [
        "--tasks", "buttons-*", "/data/osworld/evaluation_examples"]
    assert arguments.count("--policy") == 4 and "--seeds" in arguments
    # no policy, or a name in use: the dialog says what is missing and cannot run
    dialog.oracle.setChecked(False)
    dialog.random.setChecked(False)
    run.setCheckState(Qt.CheckState.Unchecked)
    dialog.openai.clear()
    assert not ok.isEnabled() and "at least one policy" in dialog.problem.text()
    dialog.oracle.setChecked(True)
    dialog.name.setText("eval-1")
    assert not ok.isEnabled() and "exists" in dialog.problem.text()
    dialog.name.setText("bad name/")
    assert not ok.isEnabled() and "folder" in dialog.problem.text()


@pytest.mark.x11
@pytest.mark.slow
def test_an_evaluation_runs_from_the_app_and_its_results_show(
        qtbot: Any, settings_file: Path, tmp_path: Path, artifacts: Path) -> None:
    workspace = tmp_path / "ws"
    window, page = open_on_evaluations(qtbot, settings_file, workspace)
    lines: list[str] = []
    page.progress.connect(lines.append)
    assert page.start_evaluation(EvaluationRequest("smoke", ["oracle", "random"],
                                                   ["buttons-0"], seeds="1", desktops=1))
    assert not page.new_button.isEnabled() and page.cancel_button.isVisible()
    assert not page.start_evaluation(EvaluationRequest("other", ["oracle"]))  # one at once
    qtbot.waitUntil(lambda: page.process is None, timeout=240_000)
    assert page.output and "exit status" not in page.status.text(), page.output[-20:]
    assert lines  # its progress was shown while it ran
    assert page.status.text() == "Evaluation smoke finished"
    names = page.names.findItems("smoke", Qt.MatchFlag.MatchExactly)
    assert page.names.count() == 1 and len(names) == 1
    report = page.report
    assert report is not None and [p.label for p in report.policies] == ["oracle", "random"]
    assert page.heatmap.rowCount() == 1 and page.heatmap.columnCount() == 2
    cell = page.heatmap.item(0, 0)
    assert cell is not None and cell.text().startswith("100%")
    window.grab().save(str(artifacts / "app-new-evaluation-finished-1280x720.png"))


def test_an_osworld_folder_shows_what_runs_here_and_goes_to_an_evaluation(
        qtbot: Any, settings_file: Path, tmp_path: Path, artifacts: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from PyQt6.QtWidgets import QDialog

    from tests.conftest_app import wait_for_worker
    from workbench.app.widgets.task_suite_dialog import TaskSuiteDialog

    workspace = tmp_path / "ws"
    _window, page = open_on_evaluations(qtbot, settings_file, workspace)
    folder = Path(__file__).parent / "fixtures" / "osworld"  # an evaluation_examples tree
    seen: dict[str, Any] = {}

    def look_and_choose(dialog: TaskSuiteDialog) -> int:
        rows = {dialog.task_table.item(r, 0).text()[:8]: (  # type: ignore[union-attr]
            dialog.task_table.item(r, 2).text(), dialog.task_table.item(r, 3).text())  # type: ignore[union-attr]
            for r in range(dialog.task_table.rowCount())}
        seen["rows"] = rows
        seen["domains"] = [dialog.domain_table.item(r, 0).text()  # type: ignore[union-attr]
                           for r in range(dialog.domain_table.rowCount())]
        seen["summary"] = dialog.summary.text()
        evaluate = dialog.action_button
        assert evaluate is not None and not evaluate.isEnabled()  # nothing chosen yet
        dialog.choose_runnable()
        assert evaluate.isEnabled()
        dialog.resize(1280, 720)
        dialog.show()
        dialog.grab().save(str(artifacts / "app-osworld-suite-1280x720.png"))
        dialog.resize(1920, 1080)
        dialog.grab().save(str(artifacts / "app-osworld-suite-1920x1080.png"))
        return QDialog.DialogCode.Accepted

    def capture(dialog: NewEvaluationDialog) -> int:
        seen["tasks"] = dialog.request().tasks
        return QDialog.DialogCode.Rejected

    monkeypatch.setattr(TaskSuiteDialog, "exec", look_and_choose)
    monkeypatch.setattr(NewEvaluationDialog, "exec", capture)
    wait_for_worker(qtbot, page.open_task_suite(folder))
    assert seen["domains"] == ["multi_apps", "os", "all"]
    assert "3 task(s) in 2 domain(s); 2 run in a sandbox here" in seen["summary"]
    state, why = seen["rows"]["0c825995"]
    assert state == "not supported" and "list_directory_is_empty" in why
    assert {seen["rows"][k][0] for k in ("5ea617a3", "b6781586")} == {"runs in a sandbox"}
    # the chosen (the two that run here) are the new evaluation's tasks, as files
    assert len(seen["tasks"]) == 2 and all(t.endswith(".json") and "/os/" in t
                                           for t in seen["tasks"])
