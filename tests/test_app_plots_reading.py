"""The Training screen's plots read as they should (issue 35, item 6): which line is which
said above the data, not on it; the crosshair's label readable and inside the plot; one
chart opened large; runs of the same name told apart, the whole name on hover; the screen
opens on the newest run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest_app import open_window, settings_file_fixture, show_at  # noqa: F401
from trainer.store import Store
from workbench.app.main_window import MainWindow
from workbench.app.pages.training import TrainingPage
from workbench.services.training_runs import RunRow, distinct_titles

NAME = "demo: tiny model learns to click the button"


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    """Two runs of the same (long) name; the newer one, run-new, has a held-out point."""
    path = tmp_path / "ws"
    with Store.open(path, fsync_frames=False) as store:
        for run_id in ("run-old", "run-new"):
            store.runs.create(run_id, name=NAME, config="")
            for step in range(1, 9):
                store.runs.log_metrics(run_id, step, {
                    "reward_mean": step / 10, "success_rate": step / 8,
                    "policy_version": float(step)})
            store.runs.set_status(run_id, "done")
        store.runs.log_metrics("run-new", 8, {"heldout/success_rate": 0.5})
    yield path


@pytest.fixture
def page(qtbot: Any, settings_file: Path, workspace: Path) -> Iterator[TrainingPage]:
    window: MainWindow = open_window(qtbot, settings_file, workspace, (1280, 720))
    qtbot.waitExposed(window)
    window.show_screen("training")
    training = window.training
    assert training is not None
    yield training
    window.close()


def test_the_training_screen_opens_on_the_newest_run_with_distinct_names(
        qtbot: Any, page: TrainingPage, artifacts: Path) -> None:
    # no "No run chosen": the newest run is chosen and plotted
    qtbot.waitUntil(lambda: page.plots.run_id == "run-new", timeout=10_000)
    qtbot.waitUntil(lambda: page.plots.runs["run-new"].history.last_step == 8,
                    timeout=10_000)
    page.compare_runs(["run-old"])
    qtbot.waitUntil(lambda: list(page.plots.runs) == ["run-new", "run-old"], timeout=10_000)
    labels = [run.label for run in page.plots.runs.values()]
    assert len(set(labels)) == 2 and all(label.startswith(NAME) for label in labels)
    assert "run-old" in page.plots.legend.toolTip() and NAME in page.plots.legend.toolTip()
    header = page.compare_table.horizontalHeaderItem(0)
    assert header is not None and NAME in header.toolTip() and "run-new" in header.toolTip()
    window = page.window()
    assert window is not None
    window.grab().save(str(artifacts / "app-training-plots-1280x720.png"))
    show_at(window, (1920, 1080))
    qtbot.waitUntil(lambda: window.width() == 1920 and page.plots.runs["run-new"]
                    .history.last_step == 8, timeout=10_000)
    window.grab().save(str(artifacts / "app-training-plots-1920x1080.png"))


def test_legend_above_the_data_hover_inside_and_a_chart_enlarged(
        qtbot: Any, page: TrainingPage, artifacts: Path) -> None:
    plots = page.plots
    qtbot.waitUntil(lambda: plots.run_id == "run-new"
                    and plots.runs["run-new"].history.last_step == 8, timeout=10_000)
    success = plots.plots["Success rate"]
    assert success.legend is None  # nothing drawn over the data
    title = success.titleLabel.text
    assert "training" in title and "held-out" in title

    widget = plots.plot_widgets["Success rate"]
    box = success.getViewBox()
    # the plot drawn with its newest point (the pointer hovers over what is painted)
    qtbot.waitUntil(lambda: box.viewRange()[0][1] >= 8 and widget.isVisible())
    plots.hover("Success rate", 8)  # the newest point, at the right edge
    label = plots.hover_labels["Success rate"]
    assert label.isVisible() and "update 8" in plots.hover_text
    # inside the plot's data area, which clips it (wrapped to its width), not cut
    inside = box.sceneBoundingRect()
    shown = label.sceneBoundingRect()
    assert inside.adjusted(-1, -1, 1, 1).contains(shown), (inside, shown)
    assert label.textItem.toPlainText().startswith("update 8")

    # Enlarge: the plot in a window of its own, over most of the screen, maximisable
    window = page.window()
    assert window is not None
    plots.set_enlarged("Success rate")
    enlarged = plots.plot_window
    assert enlarged is not None and enlarged.isWindow() and enlarged is not window
    qtbot.waitExposed(enlarged)
    assert widget.window() is enlarged and widget.isVisible()  # the plot itself moved
    others = [w for t, w in plots.plot_widgets.items() if t != "Success rate"]
    assert all(w.isVisible() and w.window() is window for w in others)  # the rest stay
    room = enlarged.screen().availableGeometry()
    assert enlarged.width() >= 0.8 * room.width() and enlarged.height() >= 0.8 * room.height()
    enlarged.showMaximized()
    qtbot.waitUntil(lambda: enlarged.width() >= room.width() - 20)
    qtbot.waitUntil(lambda: widget.width() >= room.width() - 40)  # the plot fills it
    assert widget.width() > window.width() // 2
    enlarged.grab().save(str(artifacts / "app-training-plot-enlarged-window.png"))
    window.grab().save(str(artifacts / "app-training-plot-enlarged-1280x720.png"))
    enlarged.close()  # back in the grid
    qtbot.waitUntil(lambda: plots.plot_window is None and widget.window() is window
                    and widget.isVisible())
    assert plots.enlarged is None and all(w.isVisible() for w in others)
    # Shift+double-click (or the menu) again: a window again; another plot replaces it
    plots.set_enlarged("Reward")
    assert plots.plot_window is not None and plots.plot_window.title == "Reward"
    plots.set_enlarged("Success rate")
    assert plots.plot_window is not None and plots.plot_window.title == "Success rate"
    assert plots.plot_widgets["Reward"].window() is window
    plots.set_enlarged(None)
    assert plots.plot_window is None and widget.window() is window


def test_runs_of_the_same_name_get_distinct_titles() -> None:
    def row(run_id: str, name: str, created: float) -> RunRow:
        return RunRow(run_id, name, "train", "done", created, None, None, 0)

    at = time.mktime((2026, 11, 27, 21, 0, 0, 0, 0, -1))
    titles = distinct_titles([row("a", "demo", at), row("b", "demo", at + 3600),
                              row("c", "other", at), row("d", "", at),
                              row("e", "twin", at), row("f", "twin", at)])
    assert titles["a"] == "demo · 11-27 21:00" and titles["b"] == "demo · 11-27 22:00"
    assert titles["c"] == "other" and titles["d"] == "d"  # no name: the id
    assert titles["e"] == "twin · 11-27 21:00 · e" and titles["f"].endswith("· f")


def test_the_warm_up_shows_as_warm_up(qtbot: Any) -> None:
    from trainer.store.runs import MetricPoint
    from workbench.app.widgets.metric_plots import MetricPlots

    plots = MetricPlots()
    qtbot.addWidget(plots)
    plots.set_run("run-w")
    # the trainer logs a 25-step warm-up at updates -25 .. -1
    plots.add_points([MetricPoint("warmup_nll", step, 2.0 + step / 25, 0.0)
                      for step in range(-25, -22)])
    assert "warm-up 3 of 25" in plots.summary.text()
    assert "update -23" not in plots.summary.text() and "NLL 1.08" in plots.summary.text()
    plots.add_points([MetricPoint("reward_mean", 0, 0.5, 0.0)])  # GRPO's first update
    assert "update 0" in plots.summary.text() and "warm-up" not in plots.summary.text()


def test_the_heatmap_names_the_row_under_a_resting_pointer_when_rows_come_in(
        qtbot: Any) -> None:
    """The tooltip (a row's whole task id) follows new rows without a mouse move: a task
    that sorts first arrives and the row under the pointer is another task."""
    from PyQt6.QtCore import QPointF

    from trainer.store.runs import MetricPoint
    from workbench.app.widgets.metric_plots import MetricPlots

    plots = MetricPlots()
    qtbot.addWidget(plots)
    plots.resize(1280, 720)
    plots.show()
    qtbot.waitExposed(plots)
    plots.set_run("run-h")
    first, second, newcomer = "task-b-" + "x" * 30, "task-c-" + "y" * 30, "task-a-" + "z" * 30
    plots.add_points([MetricPoint(f"success_rate/{task}", step, 0.5, 0.0)
                      for task in (first, second) for step in (1, 2)])
    title = next(spec.title for spec in plots.specs if spec.per_task)
    widget, box = plots.plot_widgets[title], plots.plots[title].getViewBox()
    resting = box.mapViewToScene(QPointF(1.5, 0.5))  # over the first row
    widget.scene().sigMouseMoved.emit(resting)
    assert widget.toolTip() == first
    plots.add_points([MetricPoint(f"success_rate/{newcomer}", 3, 1.0, 0.0)])
    under = plots.heatmap_task_at(box.mapSceneToView(resting).y())
    assert under is not None and under != first  # the rows moved under the pointer
    assert widget.toolTip() == under
