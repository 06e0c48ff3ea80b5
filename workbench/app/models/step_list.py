"""The steps of the episode being viewed, one row each: number, the actions in short, and
the step's label as a coloured mark."""

from __future__ import annotations

from typing import Any

from PyQt6.QtCore import QAbstractListModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PyQt6.QtGui import QColor

from agents.trajectory import Step
from workbench.services.action_overlay import action_text
from workbench.services.review import StepReview
from workbench.services.step_text import split_response

Index = QModelIndex | QPersistentModelIndex
LABEL_COLOURS: dict[str, QColor] = {"correct": QColor("#1b7f3b"), "wrong": QColor("#b3261e"),
                                    "critical": QColor("#e8a200")}


def step_summary(step: Step) -> str:
    if step.actions:
        text = "; ".join(action_text(a).removeprefix("pyautogui.") for a in step.actions)
    elif step.parse_error:
        text = f"parse error: {step.parse_error}"
    else:
        text = split_response(step.response).action or "(no action)"
    return text if len(text) <= 80 else text[:77] + "…"


class StepListModel(QAbstractListModel):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.steps: list[Step] = []
        self.reviews: dict[int, StepReview] = {}

    def set_steps(self, steps: list[Step], reviews: dict[int, StepReview]) -> None:
        self.beginResetModel()
        self.steps = steps
        self.reviews = dict(reviews)
        self.endResetModel()

    def set_review(self, index: int, review: StepReview) -> None:
        self.reviews[index] = review
        if 0 <= index < len(self.steps):
            self.dataChanged.emit(self.index(index), self.index(index))

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.steps)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self.steps):
            return None
        step = self.steps[index.row()]
        review = self.reviews.get(step.index)
        if role == Qt.ItemDataRole.DisplayRole:
            mark = ""
            if review is not None:
                mark = {"correct": " ✓", "wrong": " ✗", "critical": " !"}.get(
                    review.label or "", "")
                if review.corrected_actions is not None:
                    mark += " ◎"  # a target; "⌖" is missing from common fonts
                if review.note:
                    mark += " ✎"
            return f"{step.index + 1:>3}  {step_summary(step)}{mark}"
        if role == Qt.ItemDataRole.ForegroundRole and review is not None and review.label:
            return LABEL_COLOURS.get(review.label)
        if role == Qt.ItemDataRole.ToolTipRole:
            thought = split_response(step.response).thought
            return thought[:500] if thought else None
        if role == Qt.ItemDataRole.UserRole:
            return step.index
        return None
