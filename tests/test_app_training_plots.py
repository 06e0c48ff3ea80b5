"""The Training screen's plots as TensorBoard and W&B users expect them: two runs on one
chart in their own colours, smoothing by the debiased moving average, the crosshair's
values of both runs, zoom and Fit, the format-error rate, the comparison table, distinct
default run names, and a screen that fits 1280x720."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtCore import QPoint, QPointF, Qt

from tests.conftest_app import open_window, settings_file_fixture  # noqa: F401
from trainer.config import RunConfig, parse_run_config, run_config_toml
from trainer.store import Store
from workbench.app.main_window import MainWindow
from workbench.app.pages.training import TrainingPage
from workbench.app.widgets.metric_plots import PLOT_MIN_HEIGHT, PLOT_MIN_WIDTH
from workbench.services.training_runs import next_run_name, with_run_name

# Two runs with different settings and metrics; B stopped after three updates.
A_REWARD = [0.1, 0.4, 0.2, 0.5]
A_SUCCESS = [0.0, 0.25, 0.5, 0.5]
A_FORMAT = [0.5, 0.25, 0.25, 0.0]
B_REWARD = [0.3, 0.6, 0.9]
B_SUCCESS = [0.25, 0.5, 0.75]
B_FORMAT = [0.2, 0.1, 0.0]
A_CONFIG = """[run]
name = "baseline"
[model]
path = "/models/qwen25-vl-3b"
finetune = "lora"
[grpo]
num_generations = 4
[training]
learning_rate = 1e-06
updates = 4
[environments]
count = 2
"""
B_CONFIG = """[run]
name = "bigger groups"
[model]
path = "/models/qwen25-vl-3b"
finetune = "full"
[grpo]
num_generations = 8
[training]
learning_rate = 5e-06
updates = 10
[curation]
replay = true
[environments]
count = 4
"""


def _log(store: Store, run_id: str, config: str, reward: list[float],
         success: list[float], format_errors: list[float], status: str) -> None:
    store.runs.create(run_id, name=parse_run_config(config).run.name, config=config)
    store.runs.set_status(run_id, "running")
    for step, values in enumerate(zip(reward, success, format_errors, strict=True), 1):
        store.runs.log_metrics(run_id, step, {
            "reward_mean": values[0], "success_rate": values[1],
            "format_error_rate": values[2], "error_rate": 0.0, "entropy": 1.0 / step,
            "policy_version": float(step), "success_rate/task-a": values[1]})
    store.runs.set_status(run_id, status)


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[tuple[Path, Store]]:
    path = tmp_path / "ws"
    store = Store.open(path, fsync_frames=False)
    _log(store, "run-a", A_CONFIG, A_REWARD, A_SUCCESS, A_FORMAT, "done")
    _log(store, "run-b", B_CONFIG, B_REWARD, B_SUCCESS, B_FORMAT, "stopped")
    store.runs.log_metrics("run-b", 2, {"heldout/success_rate": 0.5})
    yield path, store
    store.close()


@pytest.fixture
def screen(qtbot: Any, settings_file: Path, workspace: tuple[Path, Store]
           ) -> Iterator[tuple[MainWindow, TrainingPage]]:
    """The Training screen at 1280x720 with run A chosen and run B ticked beside it."""
    window = open_window(qtbot, settings_file, workspace[0], (1280, 720))
    qtbot.waitExposed(window)
    window.show_screen("training")
    page = window.training
    assert page is not None
    qtbot.waitUntil(lambda: {r.id for r in page.run_model.records} == {"run-a", "run-b"},
                    timeout=10_000)
    assert page.select_run("run-a")
    page.compare_runs(["run-b"])
    qtbot.waitUntil(lambda: list(page.plots.runs) == ["run-a", "run-b"]
                    and page.plots.runs["run-a"].history.last_step == 4
                    and page.plots.runs["run-b"].history.last_step == 3, timeout=10_000)
    yield window, page
    window.close()


def _line(page: TrainingPage, run_id: str, name: str) -> tuple[list[float], list[float]]:
    x, y = page.plots.runs[run_id].smoothed[name].getData()
    return ([] if x is None else x.tolist()), ([] if y is None else y.tolist())


def test_two_runs_on_one_chart_with_their_colours(
        qtbot: Any, screen: tuple[MainWindow, TrainingPage], artifacts: Path) -> None:
    window, page = screen
    plots = page.plots
    plots.set_smoothing(0.0)
    assert plots.smoothing_label.text() == "0.00" and plots.slider.value() == 0
    reward = plots.plots["Reward"]
    a_line = plots.runs["run-a"].smoothed["reward_mean"]
    b_line = plots.runs["run-b"].smoothed["reward_mean"]
    assert a_line in reward.listDataItems() and b_line in reward.listDataItems()
    assert _line(page, "run-a", "reward_mean") == ([1, 2, 3, 4], pytest.approx(A_REWARD))
    assert _line(page, "run-b", "reward_mean") == ([1, 2, 3], pytest.approx(B_REWARD))
    assert _line(page, "run-b", "success_rate") == ([1, 2, 3], pytest.approx(B_SUCCESS))
    # run B's held-out success on the same chart, dashed
    assert _line(page, "run-b", "heldout/success_rate") == ([2], [0.5])
    colours = {plots.colour("run-a"), plots.colour("run-b")}
    assert len(colours) == 2 and None not in colours
    assert a_line.opts["pen"].color().name() == plots.colour("run-a")
    assert b_line.opts["pen"].color().name() == plots.colour("run-b")
    # the legend names both runs in their colours; the runs list shows the same colours
    legend = plots.legend.text()
    assert "baseline" in legend and "bigger groups" in legend
    assert all(str(c) in legend for c in colours)
    decoration = page.run_model.data(page.run_model.index_of("run-b"),
                                     Qt.ItemDataRole.DecorationRole)
    assert decoration.name() == plots.colour("run-b")
    # the chosen run's numbers head the plots
    assert "baseline" in plots.summary.text() and "2 runs plotted" in plots.summary.text()

    # the format-error rate is plotted for both runs
    assert "Error rates" in plots.plots
    assert _line(page, "run-a", "format_error_rate") == ([1, 2, 3, 4],
                                                          pytest.approx(A_FORMAT))
    assert _line(page, "run-b", "format_error_rate") == ([1, 2, 3], pytest.approx(B_FORMAT))

    # unticked, run B leaves the plots; run A keeps its colour and its points
    colour_a = plots.colour("run-a")
    page.compare_runs([])
    qtbot.waitUntil(lambda: list(plots.runs) == ["run-a"], timeout=10_000)
    assert b_line not in reward.listDataItems()
    assert plots.colour("run-a") == colour_a and plots.history.last_step == 4
    # ticked again with a click on its check box: back on the plots
    view = page.run_view
    rect = view.visualRect(page.run_model.index_of("run-b"))
    viewport = view.viewport()
    assert viewport is not None
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton,
                     pos=QPoint(rect.left() + rect.height() // 2, rect.center().y()))
    assert page.run_model.checked == ["run-b"]
    qtbot.waitUntil(lambda: list(plots.runs) == ["run-a", "run-b"]
                    and plots.runs["run-b"].history.last_step == 3, timeout=10_000)

    plots.set_smoothing(0.6)
    page.lower_tabs.setCurrentIndex(1)
    window.grab().save(str(artifacts / "app-training-compare-1280x720.png"))
    window.resize(1920, 1080)
    qtbot.waitUntil(lambda: plots.columns == 4, timeout=10_000)
    window.grab().save(str(artifacts / "app-training-compare-1920x1080.png"))


def test_smoothing_is_the_debiased_moving_average(
        qtbot: Any, screen: tuple[MainWindow, TrainingPage]) -> None:
    _, page = screen
    plots = page.plots
    plots.slider.setValue(60)  # the slider, as a person moves it
    assert plots.smoothing == pytest.approx(0.6)
    # by hand, weight 0.6: m_t = 0.6 m_(t-1) + 0.4 x_t from m_0 = 0, divided by 1 - 0.6^t
    m1 = 0.4 * 0.1
    m2 = 0.6 * m1 + 0.4 * 0.4
    m3 = 0.6 * m2 + 0.4 * 0.2
    m4 = 0.6 * m3 + 0.4 * 0.5
    expected = [m1 / 0.4, m2 / (1 - 0.36), m3 / (1 - 0.216), m4 / (1 - 0.1296)]
    assert expected == pytest.approx([0.1, 0.2875, 0.242857, 0.361029], abs=1e-6)
    assert _line(page, "run-a", "reward_mean")[1] == pytest.approx(expected)
    # the raw line stays behind, faint
    raw = plots.runs["run-a"].raw["reward_mean"]
    assert raw.isVisible() and raw.getData()[1].tolist() == pytest.approx(A_REWARD)
    assert raw.opts["pen"].color().alpha() < 128
    assert raw.zValue() < plots.runs["run-a"].smoothed["reward_mean"].zValue()
    # run B on its own average
    b1 = 0.4 * 0.3
    b2 = 0.6 * b1 + 0.4 * 0.6
    assert _line(page, "run-b", "reward_mean")[1][:2] == pytest.approx([b1 / 0.4,
                                                                          b2 / 0.64])
    # more smoothing flattens more; none draws the raw values and hides the faint line
    plots.slider.setValue(99)
    assert _line(page, "run-a", "reward_mean")[1][-1] < expected[-1]
    plots.slider.setValue(0)
    assert _line(page, "run-a", "reward_mean")[1] == pytest.approx(A_REWARD)
    assert not raw.isVisible()


def test_hover_shows_every_runs_value_and_zoom_fits_back(
        qtbot: Any, screen: tuple[MainWindow, TrainingPage]) -> None:
    _, page = screen
    plots = page.plots
    plots.set_smoothing(0.0)
    widget = plots.plot_widgets["Reward"]
    plots.scroll_area.ensureWidgetVisible(widget)
    box = plots.plots["Reward"].getViewBox()
    qtbot.waitUntil(lambda: box.viewRange()[0][1] >= 4, timeout=10_000)

    # the mouse over update 2 (a little off it: the crosshair snaps to the update)
    y = sum(box.viewRange()[1]) / 2
    point = widget.mapFromScene(box.mapViewToScene(QPointF(2.2, y)))
    viewport = widget.viewport()
    assert viewport is not None
    qtbot.mouseMove(viewport, QPoint(point.x(), point.y()))
    qtbot.waitUntil(lambda: plots.hover_step == 2, timeout=10_000)
    lines = plots.hover_text.splitlines()
    assert lines == ["update 2", "baseline: 0.4", "bigger groups: 0.6"]
    assert plots.hover_labels["Reward"].isVisible()
    for title, crosshair in plots.crosshairs.items():  # the same update on every plot
        assert crosshair.isVisible() and crosshair.value() == 2, title

    # smoothed: both values and the raw ones beside them
    plots.set_smoothing(0.6)
    assert plots.hover_text.splitlines()[1] == "baseline: 0.288 (raw 0.4)"
    # a plot with two series names each line; after run B's last update only A speaks
    text = plots.hover("Success rate", 4.0)
    assert text.splitlines() == ["update 4", "baseline · training: 0.409 (raw 0.5)"]
    assert "bigger groups · held-out: 0.5" in plots.hover("Success rate", 2)
    assert "bigger groups · held-out: 0.5 at update 2" in plots.hover("Success rate", 3)
    plots.clear_hover()
    assert not any(c.isVisible() for c in plots.crosshairs.values())

    # zoom in (as the wheel does), then Fit shows all of it again
    box.scaleBy((0.2, 0.2))
    qtbot.waitUntil(lambda: box.viewRange()[0][1] - box.viewRange()[0][0] < 1.5,
                    timeout=10_000)
    plots.fit_button.click()
    qtbot.waitUntil(lambda: box.viewRange()[0][0] <= 1 and box.viewRange()[0][1] >= 4,
                    timeout=10_000)


def test_the_comparison_table(qtbot: Any, screen: tuple[MainWindow, TrainingPage]) -> None:
    _, page = screen
    table = page.compare_table

    def cells() -> dict[str, list[str]]:
        found = {}
        for row in range(table.rowCount()):
            header = table.verticalHeaderItem(row)
            assert header is not None
            found[header.text()] = [table.item(row, c).text()  # type: ignore[union-attr]
                                    for c in range(table.columnCount())]
        return found

    qtbot.waitUntil(lambda: cells().get("Model") == ["qwen25-vl-3b", "qwen25-vl-3b"],
                    timeout=10_000)
    headers = [table.horizontalHeaderItem(c).text()  # type: ignore[union-attr]
               for c in range(table.columnCount())]
    assert headers == ["baseline", "bigger groups"]
    found = cells()
    assert found["Run id"] == ["run-a", "run-b"]
    assert found["Fine-tuning"] == ["lora (r 16)", "full"]
    assert found["Group size"] == ["4", "8"]
    assert found["Learning rate"] == ["1e-06", "5e-06"]
    assert found["Replay"] == ["off", "on"]
    assert found["Updates planned"] == ["4", "10"]
    assert found["Environments"] == ["2 sandbox", "4 sandbox"]
    assert found["Status"] == ["done", "stopped"]
    assert found["Updates done"] == ["4", "3"]
    assert found["Success (last)"] == ["50%", "75%"]
    assert found["Success (best)"] == ["50%", "75%"]
    assert found["Held-out success (last)"] == ["–", "50%"]
    assert found["Reward (last)"] == ["0.5", "0.9"]
    assert found["Format errors (last)"] == ["0%", "0%"]
    # rows where the runs differ stand out; the same model does not
    labels = [table.verticalHeaderItem(r).text()  # type: ignore[union-attr]
              for r in range(table.rowCount())]
    assert table.item(labels.index("Group size"), 0).font().bold()  # type: ignore[union-attr]
    assert not table.item(labels.index("Model"), 0).font().bold()  # type: ignore[union-attr]
    assert not table.item(labels.index("Run id"), 0).font().bold()  # type: ignore[union-attr]


def test_default_run_names_are_distinct(
        qtbot: Any, screen: tuple[MainWindow, TrainingPage], workspace: tuple[Path, Store],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, page = screen
    store = workspace[1]
    assert next_run_name("", []) == "run #1"
    assert next_run_name("run #1", ["run #1", "run-a"]) == "run #2"
    assert next_run_name("sweep", ["sweep", "sweep #2"]) == "sweep #3"
    assert next_run_name("lr sweep #3", ["lr sweep #3"]) == "lr sweep #4"
    commented = "# my notes\n[run]\nname = \"x\"  # who\nseed = 1\n[grpo]\nbeta = 0.1\n"
    renamed = with_run_name(commented, "x #2")
    assert renamed == commented.replace('"x"', '"x #2"')  # comments kept
    assert parse_run_config(with_run_name("[grpo]\nbeta = 0.1\n", "y")).run.name == "y"

    # the form opens on the newest run's settings under a name no run has
    taken = {"baseline", "bigger groups"}
    assert page.form.config().run.name == "bigger groups #2"  # the first was #1
    page.buttons["Defaults"].click()
    assert page.form.config().run.name == "run #1"
    assert page.select_run("run-a")
    page.buttons["Use its configuration"].click()
    assert page.form.config().run.name == "baseline #2"
    assert page.form.config().grpo.num_generations == 4

    # two runs started one after the other get different names (the trainer, which would
    # record the run, is replaced by the store write it makes)
    def launch(run_id: str, config: Path, *, resume: bool) -> None:
        store.runs.create(run_id, name=parse_run_config(config.read_text()).run.name,
                          config=config.read_text())

    monkeypatch.setattr(page, "_launch", launch)
    page.form.set_config(RunConfig(), run_config_toml(RunConfig()))
    names = []
    for _ in range(3):
        assert page.start() is not None
        names.append(store.runs.all()[0].name)
    assert names == ["run #1", "run #2", "run #3"]
    assert page.form.config().run.name == "run #4"
    assert not taken & set(names)
    # a name typed by hand that a run has already is numbered, not repeated
    page.form.set_widget_value("run.name", "baseline")
    assert page.start() is not None
    assert store.runs.all()[0].name == "baseline #2"


def test_the_screen_fits_1280x720(qtbot: Any, screen: tuple[MainWindow, TrainingPage]
                                  ) -> None:
    window, page = screen
    # the screen asks for less than the window's width beside the navigation list
    assert page.minimumSizeHint().width() <= 1280 - window.navigation.width() - 20
    assert page.minimumSizeHint().height() <= 720 - 120  # the menu and status bars
    plots = page.plots
    assert plots.isVisible() and plots.columns >= 2
    viewport = plots.scroll_area.viewport()
    assert viewport is not None
    grid = plots.grid_widget
    assert grid.width() <= viewport.width()  # nothing cut off at the side
    first_row = [plots.plot_widgets[s.title] for s in plots.specs[:plots.columns]]
    for widget in first_row:
        top_left = widget.mapTo(viewport, QPoint(0, 0))
        assert top_left.x() >= 0 and top_left.x() + widget.width() <= viewport.width()
        assert top_left.y() >= 0 and top_left.y() + widget.height() <= viewport.height()
        assert widget.width() >= PLOT_MIN_WIDTH and widget.height() >= PLOT_MIN_HEIGHT
        assert widget.isVisible()
    # the rest is a scroll away, never squeezed below a readable size
    for widget in plots.plot_widgets.values():
        assert widget.width() >= PLOT_MIN_WIDTH and widget.height() >= PLOT_MIN_HEIGHT
