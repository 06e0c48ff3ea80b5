"""Live plots of one training run's metrics (pyqtgraph): reward, success rate, a heatmap
of per-task success, entropy, KL, IS ratio, clip fraction, grad norm, throughput,
environment utilisation and policy version, with a line of the newest values.

The widget holds a `MetricHistory` (workbench.services.training_runs) and redraws from it
when points are added; reading the store is the caller's business (off the GUI thread).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pyqtgraph as pg
from PyQt6.QtCore import QRectF
from PyQt6.QtGui import QFont
from PyQt6.QtWidgets import QLabel, QVBoxLayout, QWidget

from trainer.store.runs import MetricPoint
from workbench.services.training_runs import PLOTS, MetricHistory, PlotSpec

COLUMNS = 4
PENS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
SYMBOLS_BELOW = 40  # draw each point as a dot while a run has few updates
TASK_LABEL_CHARS = 16  # the end of a task id: OSWorld ids are UUIDs


def _short(task_id: str) -> str:
    return task_id if len(task_id) <= TASK_LABEL_CHARS else "…" + task_id[-(TASK_LABEL_CHARS - 1):]


def _format(value: float | None) -> str:
    if value is None:
        return "–"
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.3g}"


class MetricPlots(QWidget):
    """A grid of plots for one run; `set_run` starts over, `add_points` grows it."""

    def __init__(self, specs: Sequence[PlotSpec] = PLOTS, parent: QWidget | None = None
                 ) -> None:
        super().__init__(parent)
        self.specs = tuple(specs)
        self.history = MetricHistory()
        self.summary = QLabel("No run chosen")
        self.summary.setObjectName("metric-summary")
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.plots: dict[str, pg.PlotItem] = {}
        self.curves: dict[str, pg.PlotDataItem] = {}  # by metric name
        self.heatmap = pg.ImageItem()
        self.heatmap.setColorMap(pg.colormap.get("viridis"))
        for index, spec in enumerate(self.specs):
            plot = self.graphics.addPlot(row=index // COLUMNS, col=index % COLUMNS)
            plot.showGrid(x=True, y=True, alpha=0.25)
            plot.setMenuEnabled(False)
            plot.getAxis("bottom").setLabel("update")
            self.plots[spec.title] = plot
            if spec.per_task:
                plot.addItem(self.heatmap)
                font = QFont()
                font.setPointSize(7)
                plot.getAxis("left").setStyle(tickFont=font)
                plot.getAxis("left").setWidth(100)  # longer labels would be hidden
                plot.setYRange(0, 1)
                continue
            if len(spec.names) > 1:
                plot.addLegend(offset=(-4, 4), labelTextSize="7pt")
            for name, label, pen in zip(spec.names, spec.labels or spec.names, PENS,
                                        strict=False):
                self.curves[name] = plot.plot([], [], pen=pg.mkPen(pen, width=2), name=label)
        grid = self.graphics.ci.layout
        for column in range(COLUMNS):  # equal columns, whatever their titles
            grid.setColumnStretchFactor(column, 1)
            grid.setColumnPreferredWidth(column, 10)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.graphics, 1)
        self._redraw()

    @property
    def run_id(self) -> str | None:
        return self.history.run_id

    def set_run(self, run_id: str | None) -> None:
        """Show another run (or none): the plots start empty."""
        self.history = MetricHistory(run_id)
        self._redraw()

    def add_points(self, points: Iterable[MetricPoint]) -> int:
        """Add the run's newer metric rows; returns how many points were new."""
        added = self.history.add(points)
        if added:
            self._redraw()
        return added

    def has_data(self, name: str) -> bool:
        return bool(self.history.series(name)[0])

    # -- drawing --------------------------------------------------------------------------

    def _redraw(self) -> None:
        history = self.history
        for spec in self.specs:
            plot = self.plots[spec.title]
            if spec.per_task:
                shown = self._draw_tasks(plot)
                latest = None
            else:
                shown = False
                for name in spec.names:
                    steps, values = history.series(name)
                    symbol = "o" if 0 < len(steps) < SYMBOLS_BELOW else None
                    self.curves[name].setData(steps, values, symbol=symbol, symbolSize=5,
                                              symbolBrush=self.curves[name].opts["pen"].color())
                    shown = shown or bool(steps)
                latest = history.latest(spec.names[0]) if spec.names else None
            if not shown:
                note = spec.note or "none yet"
                plot.setTitle(f"{spec.title} <span style='color:#888'>({note})</span>",
                              size="9pt")
            elif spec.per_task:
                plot.setTitle(f"{spec.title} <span style='color:#888'>(purple 0, yellow 1)"
                              f"</span>", size="9pt")
            elif latest is not None:
                plot.setTitle(f"{spec.title}: <b>{_format(latest)}</b>", size="9pt")
            else:
                plot.setTitle(spec.title, size="9pt")
        self.summary.setText(self._summary())

    def _draw_tasks(self, plot: pg.PlotItem) -> bool:
        tasks, steps, rows = self.history.task_grid()
        axis = plot.getAxis("left")
        if not tasks or not steps:
            self.heatmap.clear()
            axis.setTicks(None)
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
        axis.setTicks([[(row + 0.5, _short(task)) for row, task in enumerate(tasks)]])
        plot.setYRange(0, len(tasks), padding=0)
        plot.setXRange(first - 0.5, last + 0.5, padding=0)
        return True

    def _summary(self) -> str:
        history = self.history
        if history.run_id is None:
            return "No run chosen"
        if history.last_step is None:
            return f"Run {history.run_id}: no metrics yet"
        parts = [f"Run {history.run_id}", f"update {history.last_step}"]
        for label, name, percent in (("policy v", "policy_version", False),
                                     ("reward ", "reward_mean", False),
                                     ("success ", "success_rate", True),
                                     ("entropy ", "entropy", False), ("KL ", "kl", False)):
            value = history.latest(name)
            if value is None or not math.isfinite(value):
                continue
            if name == "policy_version":
                parts.append(f"{label}{int(value)}")
            else:
                parts.append(f"{label}{value:.0%}" if percent else f"{label}{_format(value)}")
        return " · ".join(parts)
