"""What the training plots' axes say: updates as whole numbers, and task ids cut to their
end where a heatmap's row labels are drawn (OSWorld ids are UUIDs; whole on hover)."""

from __future__ import annotations

import math

import pyqtgraph as pg

TASK_LABEL_CHARS = 16  # the end of a task id


def short_task(task_id: str) -> str:
    return task_id if len(task_id) <= TASK_LABEL_CHARS else "…" + task_id[-(TASK_LABEL_CHARS - 1):]


class UpdateAxis(pg.AxisItem):
    """An x axis of updates: whole numbers only (no tick at update 2.5)."""

    def tickValues(self, minVal: float, maxVal: float, size: float
                   ) -> list[tuple[float, list[float]]]:
        levels = [(spacing, [v for v in values if float(v).is_integer()])
                  for spacing, values in super().tickValues(minVal, maxVal, size)
                  if spacing >= 1]
        if not levels:  # zoomed in to less than one update
            levels = [(1.0, [float(v) for v in range(math.ceil(minVal),
                                                     math.floor(maxVal) + 1)])]
        return levels
