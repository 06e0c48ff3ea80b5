"""Plots of training runs' metrics (pyqtgraph), several runs on one chart as in
TensorBoard and W&B: one colour per run (the series of one metric by line style), a
smoothing slider (TensorBoard's debiased moving average, the raw line faint behind), a
crosshair that reads every run's value at the update under the cursor, mouse zoom and
pan with a Fit action, a grid that reflows its columns to the width it is given
(scrolling down, never cut off at the side), and one plot at a time in a window of its
own that can fill the screen (Enlarge…). Long run names and task ids are shortened where
they are drawn and whole on hover.

The widget holds a `MetricHistory` per run (workbench.services.training_runs) and redraws
from them when points are added; reading the store is the caller's business (off the GUI
thread). The first run given is the chosen one: its numbers head the plots and its
per-task successes fill the heatmap.
"""

from __future__ import annotations

import bisect
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyqtgraph as pg
from PyQt6.QtCore import QEvent, QObject, QPointF, QRectF, Qt
from PyQt6.QtGui import QColor, QFont
from PyQt6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from trainer.store.runs import MetricPoint
from workbench.app.widgets.plot_axes import UpdateAxis, short_task
from workbench.app.widgets.plot_window import PlotWindow
from workbench.services.run_comparison import (
    MAX_SMOOTHING,
    format_number,
    nearest_step,
    smooth,
    value_at,
)
from workbench.services.run_names import elide_middle
from workbench.services.training_runs import PLOTS, MetricHistory, PlotSpec

# Run colours: matplotlib's tab10, the palette TensorBoard and W&B users know.
RUN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
               "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
SERIES_STYLES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine)
SERIES_GLYPHS = ("──", "╌╌", "┈┈")  # the same styles as text, for the plot titles
DEFAULT_SMOOTHING = 0.6  # TensorBoard's default
RAW_ALPHA = 70  # the unsmoothed line behind the smoothed one: faint
SYMBOLS_BELOW = 40  # draw each point as a dot while a run has few updates
LEGEND_CHARS = 48  # of a run's name in the legend (the whole name on hover)
COLUMN_WIDTH = 320  # one column of plots per this many pixels of width ...
MAX_COLUMNS = 4  # ... up to this many
PLOT_MIN_WIDTH = 220
PLOT_MIN_HEIGHT = 165


@dataclass
class PlottedRun:
    """One run on the charts: its colour, its metrics, and its two lines per metric."""

    id: str
    label: str
    colour: str
    history: MetricHistory
    raw: dict[str, pg.PlotDataItem] = field(default_factory=dict)  # by metric name
    smoothed: dict[str, pg.PlotDataItem] = field(default_factory=dict)
    values: dict[str, tuple[list[int], list[float], list[float]]] = field(
        default_factory=dict)  # metric: (steps, raw, smoothed) as drawn


class MetricPlots(QWidget):
    """A grid of plots for one or more runs; `set_runs` chooses them, `add_points` and
    `add_run_points` grow them."""

    def __init__(self, specs: Sequence[PlotSpec] = PLOTS, parent: QWidget | None = None
                 ) -> None:
        super().__init__(parent)
        self.specs = tuple(specs)
        self.runs: dict[str, PlottedRun] = {}  # in plotting order; the first is chosen
        self.smoothing = DEFAULT_SMOOTHING
        self.hover_step: int | None = None
        self.hover_text = ""  # what the crosshair's label says, as plain text
        self._empty = MetricHistory()
        self._columns = 0
        self._heatmap_auto = True
        self._hover_title: str | None = None

        self.summary = QLabel("No run chosen")
        self.summary.setObjectName("metric-summary")
        self.legend = QLabel("")
        self.legend.setObjectName("run-legend")
        self.legend.setWordWrap(True)
        self.legend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("smoothing")
        self.slider.setRange(0, round(MAX_SMOOTHING * 100))
        self.slider.setValue(round(DEFAULT_SMOOTHING * 100))
        self.slider.setFixedWidth(120)
        tip = ("Smoothing: TensorBoard's exponential moving average (debiased); the raw "
               "line stays faint behind. 0: none")
        self.slider.setToolTip(tip)
        self.slider.valueChanged.connect(lambda value: self.set_smoothing(value / 100))
        self.smoothing_label = QLabel(f"{DEFAULT_SMOOTHING:.2f}")
        self.smoothing_label.setToolTip(tip)
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("Show the whole of every plot again. Drag to pan, wheel "
                                   "or right-drag to zoom, double-click a plot to fit it")
        self.fit_button.clicked.connect(self.fit)
        self.enlarge_button = QPushButton("Enlarge…")
        self.enlarge_button.setToolTip("Show one plot in a window of its own that can fill "
                                       "the screen (Shift+double-click a plot does too; "
                                       "closing the window puts it back)")
        self.enlarge_button.clicked.connect(self._enlarge_clicked)
        tools = QHBoxLayout()
        smoothing_title = QLabel("Smoothing")
        smoothing_title.setToolTip(tip)
        for widget in (smoothing_title, self.slider, self.smoothing_label, self.fit_button,
                       self.enlarge_button):
            tools.addWidget(widget)
        tools.addWidget(self.legend, 1)

        self.plots: dict[str, pg.PlotItem] = {}  # by title
        self.plot_widgets: dict[str, pg.PlotWidget] = {}
        self.crosshairs: dict[str, pg.InfiniteLine] = {}
        self.hover_labels: dict[str, pg.TextItem] = {}
        self.series_keys: dict[str, str] = {}  # title -> which line style is which series
        self.enlarged: str | None = None  # the one plot in a window of its own, if any
        self.plot_window: PlotWindow | None = None
        self.hover_task: str | None = None  # the heatmap's row under the pointer
        self._heatmap_pointer: QPointF | None = None  # its last place over the heatmap
        self.heatmap = pg.ImageItem()
        self.heatmap.setColorMap(pg.colormap.get("viridis"))
        self.grid_widget = QWidget()
        self.grid = QGridLayout(self.grid_widget)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(2)
        for spec in self.specs:
            self._add_plot(spec)
        self.scroll_area = QScrollArea()
        self.scroll_area.setObjectName("metric-plots-scroll")
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll_area.setWidget(self.grid_widget)
        self.scroll_area.setMinimumWidth(PLOT_MIN_WIDTH + 30)
        viewport = self.scroll_area.viewport()
        assert viewport is not None
        viewport.installEventFilter(self)
        self._reflow(1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.summary)
        layout.addLayout(tools)
        layout.addWidget(self.scroll_area, 1)
        self._redraw()

    def _add_plot(self, spec: PlotSpec) -> None:
        widget = pg.PlotWidget(background="w", axisItems={"bottom": UpdateAxis("bottom")})
        widget.setMinimumSize(PLOT_MIN_WIDTH, PLOT_MIN_HEIGHT)
        widget.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        plot = widget.getPlotItem()
        assert plot is not None
        plot.showGrid(x=True, y=True, alpha=0.25)
        plot.setMenuEnabled(False)
        plot.getAxis("bottom").setLabel("update")
        self.plots[spec.title] = plot
        self.plot_widgets[spec.title] = widget
        crosshair = pg.InfiniteLine(angle=90, movable=False,
                                    pen=pg.mkPen("#555", width=1, style=Qt.PenStyle.DotLine))
        crosshair.setVisible(False)
        crosshair.setZValue(50)
        plot.addItem(crosshair, ignoreBounds=True)
        self.crosshairs[spec.title] = crosshair
        label = pg.TextItem(anchor=(0, 0), fill=pg.mkBrush(255, 255, 255, 250),
                            border=pg.mkPen("#555"))
        label.setVisible(False)
        label.setZValue(100)
        plot.addItem(label, ignoreBounds=True)
        self.hover_labels[spec.title] = label
        scene = widget.scene()
        assert scene is not None
        scene.sigMouseMoved.connect(partial(self._mouse_moved, spec.title))
        scene.sigMouseClicked.connect(partial(self._mouse_clicked, spec.title))
        widget.installEventFilter(self)
        if spec.per_task:
            plot.addItem(self.heatmap)
            font = QFont()
            font.setPointSize(7)
            plot.getAxis("left").setStyle(tickFont=font)
            plot.getAxis("left").setWidth(100)  # longer labels would be hidden
            plot.setYRange(0, 1)
            plot.getViewBox().sigRangeChangedManually.connect(self._heatmap_moved)
            return
        if len(spec.names) > 1:  # the series differ by line style: say which is which,
            # in the title above the data (a legend inside covered the newest points)
            self.series_keys[spec.title] = " ".join(
                f"{SERIES_GLYPHS[i % len(SERIES_GLYPHS)]} {html.escape(text)}"
                for i, text in enumerate(spec.labels or spec.names))

    # -- the runs -------------------------------------------------------------------------

    @property
    def run_id(self) -> str | None:
        """The chosen run: the first plotted."""
        return next(iter(self.runs), None)

    @property
    def history(self) -> MetricHistory:
        """The chosen run's metrics (an empty history when none is plotted)."""
        chosen = self.run_id
        return self.runs[chosen].history if chosen is not None else self._empty

    @property
    def curves(self) -> dict[str, pg.PlotDataItem]:
        """The chosen run's unsmoothed lines, by metric name."""
        chosen = self.run_id
        return self.runs[chosen].raw if chosen is not None else {}

    def history_of(self, run_id: str) -> MetricHistory | None:
        run = self.runs.get(run_id)
        return run.history if run is not None else None

    def colour(self, run_id: str) -> str | None:
        run = self.runs.get(run_id)
        return run.colour if run is not None else None

    def set_run(self, run_id: str | None) -> None:
        """Show one run (or none)."""
        self.set_runs([] if run_id is None else [(run_id, run_id)])

    def set_runs(self, runs: Sequence[tuple[str, str]]) -> None:
        """Plot these runs, (id, label) each, the chosen one first. A run plotted already
        keeps its colour and the metrics read so far; a new one starts empty with the
        first colour no plotted run has."""
        wanted = dict(runs)
        for run_id in [r for r in self.runs if r not in wanted]:
            self._remove_curves(self.runs.pop(run_id))
        used = {run.colour for run in self.runs.values()}
        ordered: dict[str, PlottedRun] = {}
        for run_id, label in wanted.items():
            run = self.runs.get(run_id)
            if run is None:
                free = [c for c in RUN_COLOURS if c not in used]
                colour = free[0] if free else RUN_COLOURS[len(used) % len(RUN_COLOURS)]
                used.add(colour)
                run = PlottedRun(run_id, label, colour, MetricHistory(run_id))
                self._add_curves(run)
            run.label = label
            ordered[run_id] = run
        self.runs = ordered
        self._stack_curves()
        self._redraw()

    def add_points(self, points: Iterable[MetricPoint], run_id: str | None = None) -> int:
        """Add a run's (the chosen one's by default) newer metric rows; returns how many
        points were new."""
        target = run_id if run_id is not None else self.run_id
        if target is None or target not in self.runs:
            return 0
        return self.add_run_points({target: list(points)})

    def add_run_points(self, points: Mapping[str, Iterable[MetricPoint]]) -> int:
        """Add several runs' newer rows, then draw once; returns how many were new."""
        added = 0
        for run_id, run_points in points.items():
            run = self.runs.get(run_id)
            if run is not None:
                added += run.history.add(run_points)
        if added:
            self._redraw()
        return added

    def has_data(self, name: str) -> bool:
        return bool(self.history.series(name)[0])

    def set_smoothing(self, weight: float) -> None:
        weight = min(max(weight, 0.0), MAX_SMOOTHING)
        if abs(self.slider.value() - weight * 100) >= 0.5:
            self.slider.blockSignals(True)
            self.slider.setValue(round(weight * 100))
            self.slider.blockSignals(False)
        self.smoothing = weight
        self.smoothing_label.setText(f"{weight:.2f}")
        self._redraw()

    def fit(self) -> None:
        """Undo every zoom and pan: each plot shows all its data again."""
        for title, plot in self.plots.items():
            if title == self._heatmap_title():
                self._heatmap_auto = True
            else:
                plot.enableAutoRange()
        self._draw_tasks_of_chosen()

    # -- curves ---------------------------------------------------------------------------

    def _line_specs(self) -> Iterable[tuple[PlotSpec, str, Qt.PenStyle]]:
        for spec in self.specs:
            if spec.per_task:
                continue
            for name, style in zip(spec.names, SERIES_STYLES, strict=False):
                yield spec, name, style

    def _add_curves(self, run: PlottedRun) -> None:
        faint = QColor(run.colour)
        faint.setAlpha(RAW_ALPHA)
        for spec, name, style in self._line_specs():
            plot = self.plots[spec.title]
            raw = pg.PlotDataItem([], [], pen=pg.mkPen(faint, width=1, style=style))
            line = pg.PlotDataItem([], [], pen=pg.mkPen(run.colour, width=2, style=style))
            plot.addItem(raw)
            plot.addItem(line)
            run.raw[name], run.smoothed[name] = raw, line

    def _remove_curves(self, run: PlottedRun) -> None:
        for spec, name, _ in self._line_specs():
            plot = self.plots[spec.title]
            plot.removeItem(run.raw[name])
            plot.removeItem(run.smoothed[name])

    def _stack_curves(self) -> None:
        """The chosen run's lines on top, the other runs' below, raw lines under all."""
        count = len(self.runs)
        for order, run in enumerate(self.runs.values()):
            for name in run.raw:
                run.raw[name].setZValue(-count - 1)
                run.smoothed[name].setZValue(count - order)

    # -- drawing --------------------------------------------------------------------------

    def _heatmap_title(self) -> str | None:
        return next((s.title for s in self.specs if s.per_task), None)

    def _redraw(self) -> None:
        several = len(self.runs) > 1
        smoothing = self.smoothing
        for spec in self.specs:
            plot = self.plots[spec.title]
            if spec.per_task:
                shown = self._draw_tasks_of_chosen()
            else:
                shown = False
                for name in spec.names:
                    for run in self.runs.values():
                        shown = self._draw_line(run, name, smoothing) or shown
            latest = self.history.latest(spec.names[0]) if spec.names else None
            if not shown:
                note = spec.note or "none yet"
                plot.setTitle(f"{spec.title} <span style='color:#888'>({note})</span>",
                              size="9pt")
            elif spec.per_task:
                whose = f"{html.escape(self.runs[self.run_id].label)}: " \
                    if several and self.run_id is not None else ""
                plot.setTitle(f"{spec.title} <span style='color:#888'>({whose}purple 0, "
                              f"yellow 1)</span>", size="9pt")
            elif latest is not None and not several:
                plot.setTitle(f"{spec.title}: <b>{format_number(latest)}</b>", size="9pt")
            else:
                plot.setTitle(spec.title, size="9pt")
            key = self.series_keys.get(spec.title)
            if key and shown:
                plot.setTitle(f"{plot.titleLabel.text} <span style='color:#555'>· {key}"
                              "</span>", size="9pt")
        self.summary.setText(self._summary())
        self.legend.setText(self._legend())
        self.legend.setToolTip("\n".join(f"{run.label} ({run.id})"
                                          for run in self.runs.values()))
        self._name_heatmap_row()  # rows may have come in under a resting pointer
        if self.hover_step is not None:
            self._show_hover(None, self.hover_step)

    def _draw_line(self, run: PlottedRun, name: str, smoothing: float) -> bool:
        steps, values = run.history.series(name)
        smoothed = smooth(values, smoothing) if smoothing > 0 else list(values)
        run.values[name] = (steps, values, smoothed)
        raw, line = run.raw[name], run.smoothed[name]
        few = 0 < len(steps) < SYMBOLS_BELOW
        raw.setData(steps, values)
        raw.setVisible(smoothing > 0)
        line.setData(steps, smoothed, symbol="o" if few else None, symbolSize=5,
                     symbolPen=None, symbolBrush=run.colour)
        return bool(steps)

    def _draw_tasks_of_chosen(self) -> bool:
        title = self._heatmap_title()
        if title is None:
            return False
        plot = self.plots[title]
        tasks, steps, rows = self.history.task_grid()
        axis = plot.getAxis("left")
        if not tasks or not steps:
            self.heatmap.clear()
            axis.setTicks(None)
            if self._heatmap_auto:
                plot.setXRange(0, 1)
                plot.setYRange(0, 1)
            return False
        first, last = steps[0], steps[-1]
        grid = np.full((last - first + 1, len(tasks)), np.nan)
        for row, values in enumerate(rows):
            for step, value in zip(steps, values, strict=True):
                grid[step - first, row] = value
        self.heatmap.setImage(grid, levels=(0.0, 1.0), autoLevels=False)
        self.heatmap.setRect(QRectF(first - 0.5, 0, last - first + 1, len(tasks)))
        axis.setTicks([[(row + 0.5, short_task(task)) for row, task in enumerate(tasks)]])
        if self._heatmap_auto:  # a zoomed heatmap stays zoomed while new updates come
            plot.setYRange(0, len(tasks), padding=0)
            plot.setXRange(first - 0.5, last + 0.5, padding=0)
        return True

    def _heatmap_moved(self, *_: object) -> None:
        self._heatmap_auto = False

    def _legend(self) -> str:
        parts = []
        for run in self.runs.values():
            parts.append(f"<span style='color:{run.colour}'>&#9632;</span>&nbsp;"
                         f"{html.escape(elide_middle(run.label, LEGEND_CHARS))}")
        return "&nbsp;&nbsp; ".join(parts)

    def _summary(self) -> str:
        history = self.history
        if history.run_id is None:
            return "No run chosen"
        label = self.runs[history.run_id].label if history.run_id in self.runs \
            else history.run_id
        if history.last_step is None:
            return f"Run {label}: no metrics yet"
        warmup = history.warmup()
        if warmup is not None:  # before GRPO's first update: no "update -23"
            done, total = warmup
            loss = history.latest("warmup_nll")
            return " · ".join([f"Run {label}", f"warm-up {done} of {total} (supervised, on "
                               "the demonstrations)"] + (
                [f"NLL {format_number(loss)}"] if loss is not None else []))
        parts = [f"Run {label}", f"update {history.last_step}"]
        for name_label, name, percent in (("policy v", "policy_version", False),
                                          ("reward ", "reward_mean", False),
                                          ("success ", "success_rate", True),
                                          ("entropy ", "entropy", False), ("KL ", "kl", False)):
            value = history.latest(name)
            if value is None or not math.isfinite(value):
                continue
            if name == "policy_version":
                parts.append(f"{name_label}{int(value)}")
            else:
                parts.append(f"{name_label}{value:.0%}" if percent
                             else f"{name_label}{format_number(value)}")
        if len(self.runs) > 1:
            parts.append(f"{len(self.runs)} runs plotted")
        return " · ".join(parts)

    # -- hover: every run's value at the update under the cursor --------------------------

    def hover(self, title: str, x: float) -> str:
        """Put the crosshair at the update nearest `x` on every plot and label it, on the
        plot `title`, with each run's values there; returns the label's text."""
        spec = next(s for s in self.specs if s.title == title)
        steps = sorted({s for run in self.runs.values() for name in spec.names
                        for s in run.values.get(name, ([], [], []))[0]})
        if spec.per_task:
            steps = self.history.task_grid()[1]
        step = nearest_step(steps, x)
        if step is None:
            self.clear_hover()
            return ""
        self._show_hover(title, step)
        return self.hover_text

    def clear_hover(self) -> None:
        self.hover_step = None
        self.hover_text = ""
        self._hover_title = None
        for crosshair in self.crosshairs.values():
            crosshair.setVisible(False)
        for label in self.hover_labels.values():
            label.setVisible(False)

    def _hover_lines(self, spec: PlotSpec, step: int) -> list[tuple[str, str, str]]:
        """(colour, plain text, rich text) per run and series that has a value there."""
        lines = []
        labels = spec.labels or spec.names
        for run in self.runs.values():
            for name, series_label in zip(spec.names, labels, strict=False):
                steps, raw, smoothed = run.values.get(name, ([], [], []))
                value = value_at(steps, smoothed, step)
                if value is None or step > (run.history.last_step or 0):  # after the run
                    continue
                who = run.label if len(spec.names) == 1 else f"{run.label} · {series_label}"
                text = f"{who}: {format_number(value)}"
                raw_value = value_at(steps, raw, step)
                if self.smoothing > 0 and raw_value is not None and raw_value != value:
                    text += f" (raw {format_number(raw_value)})"
                if step not in steps:  # logged every few updates: say when it was
                    text += f" at update {steps[bisect.bisect_right(steps, step) - 1]}"
                lines.append((run.colour, text, html.escape(text)))
        return lines

    def _show_hover(self, title: str | None, step: int) -> None:
        title = title or self._hover_title
        self.hover_step = step
        self._hover_title = title
        for crosshair in self.crosshairs.values():
            crosshair.setPos(step)
            crosshair.setVisible(True)
        for label in self.hover_labels.values():
            label.setVisible(False)
        spec = next((s for s in self.specs if s.title == title), None)
        if spec is None:
            return
        if spec.per_task:
            tasks, steps, rows = self.history.task_grid()
            lines = []
            if step in steps:  # whole task ids, the one under the pointer first
                column = steps.index(step)
                found = sorted(((t, r[column]) for t, r in zip(tasks, rows, strict=True)
                                if math.isfinite(r[column])),
                               key=lambda pair: pair[0] != self.hover_task)
                lines = [("#333", f"{t}: {format_number(v)}",
                          (f"<b>{html.escape(t)}</b>" if t == self.hover_task
                           else html.escape(t)) + f": {format_number(v)}")
                         for t, v in found]
        else:
            lines = self._hover_lines(spec, step)
        self.hover_text = "\n".join([f"update {step}"] + [text for _, text, _ in lines])
        rich = "<br>".join([f"<b>update {step}</b>"] + [
            f"<span style='color:{colour}'>&#9632;</span> {markup}"
            for colour, _, markup in lines])
        label = self.hover_labels[spec.title]
        label.setHtml(f"<div style='font-size:9pt; color:#111'>{rich}</div>")
        plot = self.plots[spec.title]
        box = plot.getViewBox()
        (x_low, x_high), (_, y_high) = box.viewRange()
        left_half = step <= (x_low + x_high) / 2
        label.setAnchor((0, 0) if left_half else (1, 0))
        label.setPos(step, y_high)
        label.setVisible(True)
        self._keep_inside(label, box)

    @staticmethod
    def _keep_inside(label: pg.TextItem, box: pg.ViewBox) -> None:
        """Keep the hover label inside the plot's data area (which clips what it holds):
        wrapped to its width where it is wider, moved back from an edge it would cross
        (a long label was cut)."""
        area = box.sceneBoundingRect().adjusted(2, 2, -2, -2)
        label.setTextWidth(-1)
        if label.boundingRect().width() > area.width():
            label.setTextWidth(area.width() - 4)
        shown = label.sceneBoundingRect()
        dx = max(area.left() - shown.left(), 0.0) + min(area.right() - shown.right(), 0.0)
        dy = max(area.top() - shown.top(), 0.0) + min(area.bottom() - shown.bottom(), 0.0)
        if shown.height() > area.height():
            dy = area.top() - shown.top()  # taller than the plot: its top shown
        if dx or dy:
            position = box.mapViewToScene(label.pos())
            label.setPos(box.mapSceneToView(QPointF(position.x() + dx, position.y() + dy)))

    def heatmap_task_at(self, y: float) -> str | None:
        """The task of the heatmap's row at `y` (in the plot's coordinates)."""
        tasks = self.history.task_ids()
        row = math.floor(y)
        return tasks[row] if 0 <= row < len(tasks) else None

    def _name_heatmap_row(self) -> None:
        """The heatmap's tooltip: the whole id of the row under the pointer's last place
        over it (read again when rows come in while the pointer rests there)."""
        title = self._heatmap_title()
        if title is None or self._heatmap_pointer is None:
            return
        box = self.plots[title].getViewBox()
        self.hover_task = self.heatmap_task_at(box.mapSceneToView(self._heatmap_pointer).y())
        self.plot_widgets[title].setToolTip(self.hover_task or "")

    def _mouse_moved(self, title: str, position: QPointF) -> None:
        plot = self.plots[title]
        box = plot.getViewBox()
        if title == self._heatmap_title():  # over a row or its (cut) label: the whole id
            self._heatmap_pointer = position
            self._name_heatmap_row()
        if not box.sceneBoundingRect().contains(position):
            self.clear_hover()
            return
        self.hover(title, box.mapSceneToView(position).x())

    def set_enlarged(self, title: str | None) -> None:
        """Show the plot `title` in a window of its own, which can fill the screen (None:
        back in the grid). One at a time: another goes back to the grid first."""
        if title is not None and title not in self.plot_widgets:
            raise ValueError(f"no plot {title!r}")
        window = self.plot_window
        if window is not None and window.title == title:
            window.raise_()
            window.activateWindow()
            return
        if window is not None:
            window.close()  # its plot goes back (closed -> _take_back)
        if title is None:
            return
        widget = self.plot_widgets[title]
        self.grid.removeWidget(widget)
        self.enlarged = title
        self.plot_window = PlotWindow(title, widget, self)
        self.plot_window.closed.connect(self._take_back)
        self._relayout()
        self.plot_window.show()

    def _take_back(self, title: str) -> None:
        window = self.plot_window
        if window is None or window.title != title:
            return
        widget = window.release()
        widget.setParent(self.grid_widget)
        self.plot_window, self.enlarged = None, None
        window.deleteLater()
        self._relayout()
        widget.show()

    def _relayout(self) -> None:
        columns = self._columns
        self._columns = 0  # lay the grid out again
        self._reflow(columns)

    def _enlarge_clicked(self) -> None:
        menu = QMenu(self)
        for spec in self.specs:
            action = menu.addAction(spec.title)
            assert action is not None
            action.triggered.connect(lambda _, t=spec.title: self.set_enlarged(t))
        menu.exec(self.enlarge_button.mapToGlobal(self.enlarge_button.rect().bottomLeft()))

    def _mouse_clicked(self, title: str, event: object) -> None:
        double = getattr(event, "double", None)
        modifiers = getattr(event, "modifiers", None)
        if callable(double) and double() and callable(modifiers) \
                and modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.set_enlarged(None if self.enlarged == title else title)  # Shift+double-click
            return
        if callable(double) and double():
            if title == self._heatmap_title():
                self._heatmap_auto = True
                self._draw_tasks_of_chosen()
            else:
                self.plots[title].enableAutoRange()

    # -- layout: as many columns as the width allows ---------------------------------------

    def eventFilter(self, watched: QObject | None, event: QEvent | None) -> bool:
        if event is not None:
            if watched is self.scroll_area.viewport() and event.type() == QEvent.Type.Resize:
                viewport = self.scroll_area.viewport()
                assert viewport is not None
                self._reflow(viewport.width() // COLUMN_WIDTH)
            elif event.type() == QEvent.Type.Leave and watched in self.plot_widgets.values():
                self.clear_hover()
        return False

    @property
    def columns(self) -> int:
        return self._columns

    def _reflow(self, columns: int) -> None:
        columns = min(max(columns, 1), MAX_COLUMNS)
        if columns == self._columns:
            return
        self._columns = columns
        widgets = [self.plot_widgets[spec.title] for spec in self.specs
                   if spec.title != self.enlarged]  # that one is in its own window
        for widget in widgets:
            self.grid.removeWidget(widget)
        for row in range(self.grid.rowCount()):
            self.grid.setRowStretch(row, 0)
        for column in range(self.grid.columnCount()):
            self.grid.setColumnStretch(column, 0)
        for index, widget in enumerate(widgets):
            self.grid.addWidget(widget, index // columns, index % columns)
        rows = (len(widgets) + columns - 1) // columns
        for row in range(rows):
            self.grid.setRowStretch(row, 1)
        for column in range(columns):
            self.grid.setColumnStretch(column, 1)
