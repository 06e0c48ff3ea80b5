"""The episode table's filter: instruction search, task, source, status, run, policy
version, tag, score range, annotated or not, in the success pool or not. Emits the
EpisodeFilter the store understands (typing in the search box waits a moment first)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PyQt6.QtCore import Qt, QTimer, pyqtSignal
from PyQt6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QWidget,
)

from trainer.store import EpisodeFilter
from workbench.services.filter_choices import FilterChoices

ANY = "any"
SEARCH_DELAY_MS = 250
NO_BOUND = -0.01  # a score spin box's "any" value


def _combo(tip: str) -> QComboBox:
    combo = QComboBox()
    combo.setToolTip(tip)
    combo.setMinimumContentsLength(6)  # three rows of them fit a 1024-pixel window
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    return combo


def _fill(combo: QComboBox, values: Sequence[Any], keep: Any = None) -> None:
    combo.blockSignals(True)
    combo.clear()
    combo.addItem(ANY, None)
    for value in values:
        combo.addItem(str(value), value)
    index = combo.findData(keep) if keep is not None else 0
    combo.setCurrentIndex(max(index, 0))
    combo.blockSignals(False)


REVIEW_CHOICES = (("accepted", "accept"), ("rejected", "reject"), ("reviewed", "reviewed"),
                  ("unreviewed", "unreviewed"))


class FilterBar(QWidget):
    changed = pyqtSignal(object)  # EpisodeFilter

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search instructions…")
        self.search.setClearButtonEnabled(True)
        self.task = _combo("Task")
        self.task.setEditable(True)  # type to jump among thousands of tasks
        self.source = _combo("Source: rollout, human, import, replay")
        self.status = _combo("Status")
        self.run = _combo("Run")
        self.version = _combo("Policy version")
        self.tag = _combo("Tag")
        self.annotated = _combo("Review: annotated or not, or the episode's verdict")
        self.pool = _combo("In the success pool or not")
        self.reviewer = _combo("Episodes this person annotated")
        for combo, choices in ((self.annotated, ("annotated", "not annotated")),
                               (self.pool, ("in pool", "not in pool"))):
            combo.addItem(ANY, None)
            combo.addItem(choices[0], True)
            combo.addItem(choices[1], False)
        for text, verdict in REVIEW_CHOICES:  # the review queue's filters
            self.annotated.addItem(text, verdict)
        self.min_score = self._score_box("Lowest score")
        self.max_score = self._score_box("Highest score")
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Show every episode")
        self.clear_button.clicked.connect(self.clear)
        self.count = QLabel("")
        # Tags the tag box cannot hold (an evaluation's cell: its evaluation and policy),
        # shown in a line of their own and kept in the filter until cleared.
        self.extra_tags: list[str] = []
        self.extra = QLabel("")
        self.extra.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.extra.setStyleSheet("color: #1a4f8b; font-weight: bold")
        self.extra.hide()

        # Two fields a row, the search above them: the bar fits the episode list's
        # drawer, a column 400 pixels wide beside the screenshot.
        layout = QGridLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.search, 0, 0, 1, 3)
        layout.addWidget(self.clear_button, 0, 3)
        fields: tuple[tuple[str, QWidget], ...] = (
            ("task", self.task), ("source", self.source), ("status", self.status),
            ("run", self.run), ("reviewer", self.reviewer), ("version", self.version),
            ("tag", self.tag), ("review", self.annotated), ("score ≥", self.min_score),
            ("≤", self.max_score), ("pool", self.pool))
        for i, (text, widget) in enumerate(fields):
            row, column = 1 + i // 2, 2 * (i % 2)
            layout.addWidget(QLabel(text), row, column)
            layout.addWidget(widget, row, column + 1)
        below = 2 + (len(fields) - 1) // 2
        # the count (and review progress) grows with the numbers: cut, never wider
        self.count.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.count.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.extra, below, 0, 1, 4)
        layout.addWidget(self.count, below + 1, 0, 1, 4)
        for column in (1, 3):
            layout.setColumnStretch(column, 1)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SEARCH_DELAY_MS)
        self._timer.timeout.connect(self._emit)
        self.search.textChanged.connect(lambda _: self._timer.start())
        for combo in (self.task, self.source, self.status, self.run, self.version, self.tag,
                      self.annotated, self.pool, self.reviewer):
            combo.currentIndexChanged.connect(self._emit)
        for box in (self.min_score, self.max_score):
            box.valueChanged.connect(self._emit)

    def _score_box(self, tip: str) -> QDoubleSpinBox:
        box = QDoubleSpinBox()
        box.setRange(NO_BOUND, 1.0)
        box.setSingleStep(0.1)
        box.setDecimals(2)
        box.setSpecialValueText(ANY)
        box.setValue(NO_BOUND)
        box.setKeyboardTracking(False)
        box.setToolTip(tip)
        return box

    def set_choices(self, choices: FilterChoices) -> None:
        """Offer the values in use, keeping what is chosen when it still exists."""
        for combo, values in ((self.task, choices.tasks), (self.source, choices.sources),
                              (self.status, choices.statuses), (self.run, choices.runs),
                              (self.version, choices.versions), (self.tag, choices.tags),
                              (self.reviewer, choices.reviewers)):
            _fill(combo, values, combo.currentData())

    def selection(self) -> EpisodeFilter:
        def one(combo: QComboBox) -> list[Any]:
            value = combo.currentData()
            return [] if value is None else [value]

        def bound(box: QDoubleSpinBox) -> float | None:
            return None if box.value() <= NO_BOUND + 1e-9 else box.value()

        version = self.version.currentData()
        review = self.annotated.currentData()  # True/False: annotated; a str: a verdict
        task = self.task.currentData()
        if task is None and self.task.currentText() not in ("", ANY):
            task = self.task.currentText()  # typed, not picked
        return EpisodeFilter(
            task_ids=[task] if task is not None else [], sources=one(self.source),
            statuses=one(self.status), run_ids=one(self.run),
            min_version=version, max_version=version,
            tags=one(self.tag) + [t for t in self.extra_tags if t not in one(self.tag)],
            min_score=bound(self.min_score), max_score=bound(self.max_score),
            annotated=review if isinstance(review, bool) else None,
            verdict=review if isinstance(review, str) else None,
            reviewer=self.reviewer.currentData(), in_pool=self.pool.currentData(),
            text=self.search.text().strip())

    def set_value(self, name: str, value: Any) -> None:
        """Choose a value in one field (e.g. "task", "source", "annotated")."""
        combo = getattr(self, name)
        assert isinstance(combo, QComboBox)
        index = combo.findData(value)
        if index < 0:
            raise ValueError(f"filter {name}: no choice {value!r}")
        combo.setCurrentIndex(index)

    def set_extra_tags(self, tags: Sequence[str]) -> None:
        """Also require these tags (shown as "also tagged …"; Clear removes them)."""
        self.extra_tags = list(tags)
        text = " · ".join(self.extra_tags)
        self.extra.setText(f"also tagged {text}" if text else "")
        self.extra.setToolTip(text)
        self.extra.setVisible(bool(text))
        self._emit()

    def clear(self) -> None:
        self.blockSignals(True)
        self.extra_tags = []
        self.extra.setText("")
        self.extra.hide()
        self.search.clear()
        for combo in (self.task, self.source, self.status, self.run, self.version, self.tag,
                      self.annotated, self.pool, self.reviewer):
            combo.setCurrentIndex(0)
        for box in (self.min_score, self.max_score):
            box.setValue(NO_BOUND)
        self.blockSignals(False)
        self._timer.stop()
        self._emit()

    def _emit(self) -> None:
        self._timer.stop()
        self.changed.emit(self.selection())
