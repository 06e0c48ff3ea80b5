"""New evaluation checks what is typed where it is typed (issue 47, item 4): tasks
separated by commas or spaces, each checked against the bundled suite before anything
runs, a bad entry named in the dialog; seeds the same way, a count ("3": seeds 0, 1, 2)
or the seeds themselves ("0, 4 7"); the dialog keeps its last values. And an
evaluation whose policies share no (task, seed) shows no McNemar p (issue 47, item 6)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QDialog, QDialogButtonBox

from agents.trajectory import Episode
from tests.conftest_app import (  # noqa: F401
    open_on_evaluations,
    open_window,
    settings_file_fixture,
)
from trainer.evaluation.plan import EvalPlan, episode_tags, parse_policy, save_plan
from trainer.store import Store
from workbench.app.widgets.new_evaluation_dialog import NewEvaluationDialog
from workbench.services.evaluation_command import (
    DialogValues,
    EvaluationRequest,
    eval_arguments,
    last_values_path,
    load_last_values,
    split_entries,
)

TYPED = "buttons-0, todo-add, terminal-tuch"  # the last one mistyped
FIXED = "buttons-0, todo-add terminal-touch"


def test_tasks_are_split_on_commas_and_spaces() -> None:
    assert split_entries("buttons-0, todo-add, terminal-touch") == [
        "buttons-0", "todo-add", "terminal-touch"]
    assert split_entries("a,b  c,,'/x y/z.json'") == ["a", "b", "c", "/x y/z.json"]
    assert split_entries("a 'still typing") == ["a", "still", "typing"]


def test_a_bad_task_is_named_in_the_dialog_and_the_values_are_kept(
        qtbot: Any, settings_file: Path, tmp_path: Path, artifacts: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    window, page = open_on_evaluations(qtbot, settings_file, tmp_path / "ws")
    assert (window.width(), window.height()) == (1280, 720)
    seen: list[dict[str, Any]] = []

    def first(dialog: NewEvaluationDialog) -> int:
        dialog.show()
        qtbot.waitExposed(dialog)
        ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
        assert ok is not None and ok.isEnabled()  # the defaults run: every bundled task
        qtbot.keyClicks(dialog.tasks, TYPED)
        # the mistyped entry, named, with what was meant; nothing can run
        assert not ok.isEnabled()
        assert "'terminal-tuch'" in dialog.problem.text()
        assert "did you mean terminal-touch" in dialog.problem.text()
        assert "buttons-0" not in dialog.problem.text()  # the good ones are not named
        assert dialog.problem.isVisible() and "terminal-tuch" in dialog.tasks.toolTip()
        # the whole problem in view, not cut by the dialog's edge
        assert dialog.problem.geometry().bottom() < dialog.buttons.geometry().top()
        assert dialog.problem.height() >= dialog.problem.heightForWidth(dialog.problem.width())
        dialog.grab().save(str(artifacts / "app-new-evaluation-bad-task.png"))
        dialog.tasks.clear()
        qtbot.keyClicks(dialog.tasks, FIXED)
        assert ok.isEnabled() and dialog.problem.text() == ""
        assert dialog.request().tasks == ["buttons-0", "todo-add", "terminal-touch"]
        qtbot.keyClicks(dialog.tasks, ", calc-*, nothing-*")  # a pattern matching none
        assert not ok.isEnabled() and "'nothing-*'" in dialog.problem.text()
        qtbot.keyClick(dialog.tasks, Qt.Key.Key_Backspace)
        for _ in ", nothing-":
            qtbot.keyClick(dialog.tasks, Qt.Key.Key_Backspace)
        assert ok.isEnabled() and dialog.tasks.text() == FIXED + ", calc-*"
        # seeds: a count, or the seeds themselves; each bad entry named
        assert dialog.seeds.text() == "3" and dialog.request().seed_list() == (0, 1, 2)
        dialog.seeds.clear()
        qtbot.keyClicks(dialog.seeds, "0, 4 x, -2 4")
        assert not ok.isEnabled()
        for named in ["seed 'x': not a whole number", "seed '-2': a seed is 0 or more",
                      "seed '4': given twice"]:
            assert named in dialog.problem.text() and named in dialog.seeds.toolTip()
        assert "Needs" not in dialog.problem.text()  # named as entries, not as a need
        assert dialog.problem.geometry().bottom() < dialog.buttons.geometry().top()
        dialog.grab().save(str(artifacts / "app-new-evaluation-bad-seeds.png"))
        dialog.seeds.setText(",".join(str(k) for k in range(101)))
        assert not ok.isEnabled() and "101 seeds: at most 100" in dialog.problem.text()
        dialog.seeds.setText("101")
        assert not ok.isEnabled() and "'101'" in dialog.problem.text()
        dialog.seeds.clear()
        qtbot.keyClicks(dialog.seeds, "0, 4 7")
        assert ok.isEnabled() and dialog.problem.text() == ""
        request = dialog.request()
        assert request.seed_list() == (0, 4, 7)
        arguments = eval_arguments(tmp_path, request)
        assert arguments[arguments.index("--seeds") + 1] == "0,4,7"
        dialog.desktops.setValue(3)
        dialog.random.setChecked(False)
        seen.append({"size": dialog.sizeHint()})
        return QDialog.DialogCode.Rejected

    def second(dialog: NewEvaluationDialog) -> int:
        seen.append({"tasks": dialog.tasks.text(), "seeds": dialog.seeds.text(),
                     "desktops": dialog.desktops.value(), "oracle": dialog.oracle.isChecked(),
                     "random": dialog.random.isChecked(), "name": dialog.name.text()})
        return QDialog.DialogCode.Rejected

    monkeypatch.setattr(NewEvaluationDialog, "exec", first)
    page.new_button.click()
    hint = seen[0]["size"]
    assert hint.width() <= 1280 and hint.height() <= 720
    monkeypatch.setattr(NewEvaluationDialog, "exec", second)
    page.new_button.click()  # reopened: as it was left
    assert seen[1] == {"tasks": FIXED + ", calc-*", "seeds": "0, 4 7", "desktops": 3,
                       "oracle": True, "random": False, "name": "eval-1"}
    # the screen refuses a bad entry too, naming it (not the command line's words)
    messages: list[str] = []
    page.message.connect(messages.append)
    assert not page.start_evaluation(EvaluationRequest("x", ["oracle"], ["buttons-0,"]))
    assert page.process is None and "'buttons-0,'" in messages[-1]
    assert "--tasks" not in messages[-1]
    assert not page.start_evaluation(EvaluationRequest("x", ["oracle"], [], seeds="1,y"))
    assert page.process is None and "seed 'y': not a whole number" in messages[-1]


def test_seeds_kept_as_a_count_by_an_older_app_still_open(qtbot: Any, tmp_path: Path) -> None:
    path = last_values_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"policies": ["oracle"], "tasks": "buttons-0", "seeds": 2,
                                "desktops": 1}))  # the spin box's count
    values = load_last_values(tmp_path)
    assert values.seeds == "2"
    dialog = NewEvaluationDialog([], set())
    qtbot.addWidget(dialog)
    dialog.set_values(values)
    assert dialog.seeds.text() == "2" and dialog.request().seed_list() == (0, 1)
    path.write_text(json.dumps({"policies": ["oracle"], "tasks": "", "seeds": [1],
                                "desktops": 1}))  # not what the app writes: the defaults
    assert load_last_values(tmp_path) == DialogValues()


def test_mcnemar_shows_a_dash_without_pairs(qtbot: Any, settings_file: Path,
                                            tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    save_plan(workspace, EvalPlan("apart", [parse_policy("oracle"), parse_policy("random")],
                                  ["t1"], ["t1"], seeds=(0, 1)))
    now = time.time()
    with Store.open(workspace, create=True) as store:
        for seed in range(2):  # oracle scored; random's episodes failed: no pairs
            store.episodes.save(Episode(
                id=f"oracle-{seed}", task_id="t1", instruction="do t1", environment="sandbox",
                source="rollout", status="done", score=1.0, created_at=now + seed,
                tags=list(episode_tags("apart", "oracle", seed)), finished_at=now + seed))
            store.episodes.save(Episode(
                id=f"random-{seed}", task_id="t1", instruction="do t1",
                environment="sandbox", source="rollout", status="error", score=None,
                tags=list(episode_tags("apart", "random", seed)), created_at=now + seed,
                finished_at=now + seed, error="the desktop died"))
    window = open_window(qtbot, settings_file, workspace)
    window.show_screen("evaluations")
    page = window.evaluations
    assert page is not None
    [comparison] = page.comparison_model.records
    assert comparison.pairs == 0
    model = page.comparison_model
    column = [c.title for c in model.columns].index("McNemar p")
    index = model.index(0, column)
    assert model.data(index) == "–"
    assert "no pairs" in model.data(index, Qt.ItemDataRole.ToolTipRole)
