"""Runs told apart by name (issue 47, item 5): a display name a person gives a run, kept
in the store and shown in the runs table, the legends and the Compare runs headers (cut
in the middle, whole on hover); a filter over the runs; a new run's legend names it, not
its id; the per-task heatmap's task ids whole on hover. At 1280x720."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtCore import QPoint, QPointF, Qt
from PyQt6.QtWidgets import QApplication, QLineEdit

from tests.conftest_app import open_window, settings_file_fixture  # noqa: F401
from trainer.config import RunConfig, run_config_toml
from trainer.store import Store
from workbench.app.main_window import MainWindow
from workbench.app.pages.training import TrainingPage
from workbench.services.run_names import elide_middle

NAME = "demo: tiny model learns to click the button in the middle of the screen"
TASKS = ("0c825995-5b70-4526-b663-113f4c999dd2", "5ea617a3-0e86-4ba6-aab2-dac9aa2e8d57")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """Two runs of one long name (run-new has per-task successes of two UUID tasks) and a
    third, "baseline", stopped."""
    path = tmp_path / "ws"
    with Store.open(path, fsync_frames=False) as store:
        for run_id, name, status in (("run-old", NAME, "done"), ("run-new", NAME, "done"),
                                     ("run-base", "baseline", "stopped")):
            store.runs.create(run_id, name=name, config="")
            for step in range(1, 5):
                store.runs.log_metrics(run_id, step, {
                    "reward_mean": step / 10, "success_rate": step / 4,
                    f"success_rate/{TASKS[0]}": step / 4,
                    f"success_rate/{TASKS[1]}": 1 - step / 4})
            store.runs.set_status(run_id, status)
    return path


@pytest.fixture
def screen(qtbot: Any, settings_file: Path, workspace: Path
           ) -> Iterator[tuple[MainWindow, TrainingPage]]:
    window = open_window(qtbot, settings_file, workspace, (1280, 720))
    qtbot.waitExposed(window)
    window.show_screen("training")
    page = window.training
    assert page is not None
    qtbot.waitUntil(lambda: len(page.run_model.records) == 3, timeout=10_000)
    yield window, page
    window.close()


def _row(page: TrainingPage, run_id: str) -> int:
    return next(r for r, run in enumerate(page.run_model.records) if run.id == run_id)


def test_a_run_renamed_in_place_everywhere_and_kept(
        qtbot: Any, screen: tuple[MainWindow, TrainingPage], workspace: Path,
        settings_file: Path, artifacts: Path) -> None:
    window, page = screen
    model, view = page.run_model, page.run_view
    assert view.textElideMode() == Qt.TextElideMode.ElideMiddle
    titles = [model.data(model.index(r, 0)) for r in range(3)]
    assert len(set(titles)) == 3  # the two of one name told apart
    tip = model.data(model.index(_row(page, "run-old"), 0), Qt.ItemDataRole.ToolTipRole)
    assert NAME in tip and "run-old" in tip  # whole on hover

    # chosen, then Rename…: the name edited where it is shown; Enter keeps it
    assert page.select_run("run-old")
    page.compare_runs(["run-new"])
    qtbot.waitUntil(lambda: list(page.plots.runs) == ["run-old", "run-new"], timeout=10_000)
    page.runs_list.buttons["Rename…"].click()
    editor = QApplication.focusWidget()
    assert isinstance(editor, QLineEdit) and view.isAncestorOf(editor)
    assert editor.text() == NAME
    editor.selectAll()
    qtbot.keyClicks(editor, "old tiny model, lr 1e-6")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: page.plots.runs["run-old"].label == "old tiny model, lr 1e-6")
    with Store.open(workspace) as store:
        assert store.runs.get("run-old").name == "old tiny model, lr 1e-6"  # kept
    assert model.data(model.index(_row(page, "run-old"), 0)) == "old tiny model, lr 1e-6"
    assert "old tiny model, lr 1e-6" in page.plots.legend.text()
    assert page.current_run() is not None and page.current_run().id == "run-old"  # type: ignore[union-attr]
    # the other run of that name needs no date after it any more
    assert model.data(model.index(_row(page, "run-new"), 0)) == NAME
    header = page.compare_table.horizontalHeader()
    assert header is not None and header.textElideMode() == Qt.TextElideMode.ElideMiddle
    first = page.compare_table.horizontalHeaderItem(0)
    second = page.compare_table.horizontalHeaderItem(1)
    assert first is not None and first.text() == "old tiny model, lr 1e-6"
    assert second is not None and NAME in second.toolTip() and "run-new" in second.toolTip()
    # the legend cuts a long name in the middle (both ends tell runs apart), whole on hover
    legend = page.plots.legend.text()
    short = elide_middle(NAME, 48)
    assert "…" in short and short.replace("…", "") != NAME
    assert short in legend and NAME not in legend and NAME in page.plots.legend.toolTip()
    page.lower_tabs.setCurrentWidget(page.compare_table)
    window.grab().save(str(artifacts / "app-training-run-renamed-1280x720.png"))
    # Esc in the editor keeps the name as it was
    view.setCurrentIndex(model.index(_row(page, "run-base"), 0))
    assert page.runs_list.rename_current()
    editor = QApplication.focusWidget()
    assert isinstance(editor, QLineEdit)
    qtbot.keyClicks(editor, " not this")
    qtbot.keyClick(editor, Qt.Key.Key_Escape)
    assert model.data(model.index(_row(page, "run-base"), 0)) == "baseline"
    window.close()

    again = open_window(qtbot, settings_file, workspace, (1280, 720))
    again.show_screen("training")
    training = again.training
    assert training is not None
    qtbot.waitUntil(lambda: any(r.name == "old tiny model, lr 1e-6"
                                for r in training.run_model.records), timeout=10_000)
    again.close()


def test_the_runs_filter(qtbot: Any, screen: tuple[MainWindow, TrainingPage]) -> None:
    _, page = screen
    runs = page.runs_list
    qtbot.keyClicks(runs.filter, "baseline")
    assert runs.shown_run_ids() == ["run-base"] and runs.shown.text() == "1 of 3"
    runs.filter.clear()
    qtbot.keyClicks(runs.filter, "DONE tiny")  # every word, any case: name and status
    assert sorted(runs.shown_run_ids()) == ["run-new", "run-old"]
    runs.filter.setText("run-old")  # by id too
    assert runs.shown_run_ids() == ["run-old"]
    runs.filter.setText("nothing like it")
    assert runs.shown_run_ids() == [] and runs.shown.text() == "0 of 3"
    runs.filter.clear()
    assert len(runs.shown_run_ids()) == 3 and runs.shown.text() == ""
    # a run ticked and then filtered out stays on the plots
    page.compare_runs(["run-base"])
    runs.filter.setText("tiny")
    qtbot.waitUntil(lambda: "run-base" in page.plots.runs, timeout=10_000)
    page.poll(force=True)
    qtbot.waitUntil(lambda: not page._polling, timeout=10_000)
    assert "run-base" in page.plots.runs and runs.shown_run_ids() != []
    assert "run-base" not in runs.shown_run_ids()


def test_heatmap_task_ids_whole_on_hover(qtbot: Any,
                                         screen: tuple[MainWindow, TrainingPage]) -> None:
    _, page = screen
    plots = page.plots
    qtbot.waitUntil(lambda: plots.history.last_step == 4, timeout=10_000)
    title = "Per-task success"
    widget = plots.plot_widgets[title]
    plot = plots.plots[title]
    axis = plot.getAxis("left")
    labels = [text for _, text in axis._tickLevels[0]]
    assert all(len(text) <= 16 for text in labels)  # cut where drawn
    plots.scroll_area.ensureWidgetVisible(widget)
    qtbot.waitUntil(lambda: widget.isVisible() and axis.sceneBoundingRect().width() > 0)
    # the pointer over the second row's label, left of the heatmap: its whole id
    box = plot.getViewBox()

    def over_label() -> QPoint:  # recomputed: the layout may settle after a poll
        row = box.mapViewToScene(QPointF(2, 1.5))
        return widget.mapFromScene(QPointF(axis.sceneBoundingRect().center().x(), row.y()))

    nudge = [0]

    def hovered(where: Any, condition: Any) -> bool:
        """Move the pointer to where() (again, if the plot moved or its run's metrics were
        read again) and check. Qt drops a move to where the pointer already is, so each try
        lands a pixel off the one before: every retry is a real move the plot sees."""
        if condition():
            return True
        nudge[0] ^= 1
        qtbot.mouseMove(widget.viewport(), where() + QPoint(0, nudge[0]))
        return bool(condition())

    qtbot.waitUntil(lambda: hovered(over_label, lambda: widget.toolTip() == TASKS[1]))
    # over the cells: the crosshair's label names every task whole, that row's first
    qtbot.waitUntil(lambda: hovered(
        lambda: widget.mapFromScene(box.mapViewToScene(QPointF(3, 0.5))),
        lambda: widget.toolTip() == TASKS[0] and plots.hover_step == 3))
    lines = plots.hover_text.splitlines()
    assert lines[0] == "update 3" and lines[1].startswith(TASKS[0] + ": ")
    assert any(line.startswith(TASKS[1] + ": ") for line in lines)


@pytest.mark.slow
def test_a_new_runs_legend_names_it(qtbot: Any, screen: tuple[MainWindow, TrainingPage],
                                    tmp_path: Path) -> None:
    _, page = screen
    default = RunConfig()
    config = dataclasses.replace(  # no model there: the trainer stops at once
        default, run=dataclasses.replace(default.run, name="fresh attempt"),
        model=dataclasses.replace(default.model, path=str(tmp_path / "no-model-here")))
    page.form.set_toml(run_config_toml(config))
    run_id = page.start()
    assert run_id is not None
    plotted = page.plots.runs[run_id]  # before the store lists it: its name, not its id
    assert plotted.label == "fresh attempt" and run_id not in page.plots.legend.text()
    assert "fresh attempt" in page.plots.legend.text()
    qtbot.waitUntil(lambda: not page.trainer.is_running() and page.last_exit is not None,
                    timeout=120_000)
    assert page.plots.runs.get(run_id) is None or \
        page.plots.runs[run_id].label.startswith("fresh attempt")
