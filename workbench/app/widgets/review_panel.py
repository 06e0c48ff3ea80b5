"""The review of the episode being viewed: the current step's label, corrected point and
note; the episode's verdict, score override, note and place in the success pool.

Every change goes to the store at once (through workbench.services.review) and is
announced with `changed` so the table and step list show it."""

from __future__ import annotations

from PyQt6.QtCore import pyqtSignal
from PyQt6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from trainer.store import StoreError
from workbench.services.action_overlay import action_text, corrected_point
from workbench.services.review import (
    EPISODE_VERDICTS,
    STEP_LABELS,
    EpisodeReview,
    Reviewer,
    StepReview,
)

NO_OVERRIDE = -0.01  # the score spin box's "none" value
VERDICT_STYLE = {  # a chosen verdict in its colour, not a button that looks pressed in
    "accept": "QPushButton:checked { background: #2e7d32; color: white; font-weight: bold }",
    "reject": "QPushButton:checked { background: #b3261e; color: white; font-weight: bold }"}


def _narrow(button: QPushButton) -> QPushButton:
    """As narrow as its text: the style's 80-pixel minimum would widen the side column."""
    button.setMinimumWidth(button.fontMetrics().horizontalAdvance(button.text()) + 16)
    return button


class ReviewPanel(QWidget):
    step_review_changed = pyqtSignal(int, object)  # step index, StepReview
    episode_review_changed = pyqtSignal(object)  # EpisodeReview
    picking_changed = pyqtSignal(bool)
    verdict_given = pyqtSignal(str)  # a verdict button chosen (not one cleared)
    skip_requested = pyqtSignal()  # the Skip button: the next unreviewed episode

    def __init__(self, reviewer: Reviewer, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.reviewer = reviewer
        self.episode_id: str | None = None
        self.episode_status = ""
        self.step_index: int | None = None
        self.step_review = StepReview()
        self.episode_review = EpisodeReview()
        self._build()
        self.setEnabled(False)

    def _build(self) -> None:
        step_box = QGroupBox("This step")
        self.label_buttons: dict[str, QPushButton] = {}
        self.label_group = QButtonGroup(self)
        self.label_group.setExclusive(False)
        labels = QHBoxLayout()
        for number, label in enumerate(STEP_LABELS, start=1):
            button = _narrow(QPushButton(f"{number} {label}"))
            button.setCheckable(True)
            button.setToolTip(f"Label this step {label} (key {number}; 0 clears)")
            button.clicked.connect(lambda checked, lb=label: self.set_label(lb if checked
                                                                            else None))
            self.label_buttons[label] = button
            labels.addWidget(button)
        self.pick_button = _narrow(QPushButton("Set corrected point"))
        self.pick_button.setCheckable(True)
        self.pick_button.setToolTip("Then click on the screenshot where the step should have "
                                    "acted (key C)")
        self.pick_button.toggled.connect(self.picking_changed.emit)
        self.clear_correction_button = _narrow(QPushButton("Clear"))
        self.clear_correction_button.clicked.connect(self.clear_correction)
        correction = QHBoxLayout()
        correction.addWidget(self.pick_button)
        correction.addWidget(self.clear_correction_button)
        self.correction_label = QLabel("no correction")
        self.step_note = QLineEdit()
        self.step_note.setPlaceholderText("note on this step (Enter saves)")
        self.step_note.editingFinished.connect(self._save_step_note)
        step_layout = QVBoxLayout(step_box)
        step_layout.addLayout(labels)
        step_layout.addLayout(correction)
        step_layout.addWidget(self.correction_label)
        step_layout.addWidget(self.step_note)

        episode_box = QGroupBox("This episode")
        self.verdict_buttons: dict[str, QPushButton] = {}
        verdicts = QHBoxLayout()
        for verdict in EPISODE_VERDICTS:
            button = _narrow(QPushButton(verdict.capitalize()))
            button.setCheckable(True)
            button.setStyleSheet(VERDICT_STYLE.get(verdict, ""))
            button.clicked.connect(lambda checked, v=verdict: self._verdict_clicked(v,
                                                                                    checked))
            self.verdict_buttons[verdict] = button
            verdicts.addWidget(button)
        self.skip_button = _narrow(QPushButton("Skip"))
        self.skip_button.setToolTip("No verdict for now: the next unreviewed episode")
        self.skip_button.clicked.connect(self.skip_requested.emit)
        verdicts.addWidget(self.skip_button)
        self.score = QDoubleSpinBox()
        self.score.setRange(NO_OVERRIDE, 1.0)
        self.score.setSingleStep(0.1)
        self.score.setDecimals(2)
        self.score.setSpecialValueText("none")
        self.score.setValue(NO_OVERRIDE)
        self.score.setKeyboardTracking(False)
        self.score.setToolTip("Override the evaluator's score (the model's score is kept)")
        self.score.valueChanged.connect(self._save_score)
        self.episode_note = QLineEdit()
        self.episode_note.setPlaceholderText("note on this episode (Enter saves)")
        self.episode_note.editingFinished.connect(self._save_episode_note)
        self.pool = QCheckBox("In the success pool of its task")
        self.pool.clicked.connect(self.set_in_pool)
        form = QFormLayout(episode_box)
        form.addRow(verdicts)
        form.addRow("Score override", self.score)
        form.addRow(self.episode_note)
        form.addRow(self.pool)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #b3261e")

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(step_box)
        layout.addWidget(episode_box)
        layout.addWidget(self.message)
        layout.addStretch(1)

    # -- what is shown ------------------------------------------------------------------

    def show_episode(self, episode_id: str | None, status: str = "") -> None:
        self.episode_id = episode_id
        self.episode_status = status
        self.step_index = None
        self.setEnabled(episode_id is not None)
        self.message.setText("")
        self.episode_review = (self.reviewer.episode(episode_id) if episode_id
                               else EpisodeReview())
        self._show_episode_review()

    def show_step(self, index: int, review: StepReview) -> None:
        self._save_step_note()  # an edit in progress belongs to the step it was typed for
        self.step_index = index
        self.step_review = review
        self._show_step_review()

    def _show_step_review(self) -> None:
        review = self.step_review
        for label, button in self.label_buttons.items():
            button.setChecked(review.label == label)
        point = corrected_point(review.corrected_actions)
        if review.corrected_actions is None:
            self.correction_label.setText("no correction")
            self.correction_label.setToolTip("")
        else:
            where = f" to ({point[0]}, {point[1]})" if point else ""
            self.correction_label.setText(f"corrected{where}")
            self.correction_label.setToolTip("\n".join(action_text(a)
                                                       for a in review.corrected_actions))
        self.clear_correction_button.setEnabled(review.corrected_actions is not None)
        self.step_note.setText(review.note)

    def _show_episode_review(self) -> None:
        review = self.episode_review
        for verdict, button in self.verdict_buttons.items():
            button.setChecked(review.verdict == verdict)
        self.score.blockSignals(True)
        self.score.setValue(NO_OVERRIDE if review.score_override is None
                            else review.score_override)
        self.score.blockSignals(False)
        self.episode_note.setText(review.note)
        self.pool.setChecked(review.in_pool)
        self.pool.setEnabled(self.episode_status == "done" or review.in_pool)
        self.pool.setToolTip("" if self.pool.isEnabled() else
                             "only finished (status done) episodes can be successes")

    # -- changes ------------------------------------------------------------------------

    def _step_changed(self, review: StepReview) -> None:
        self.step_review = review
        self._show_step_review()
        assert self.step_index is not None
        self.step_review_changed.emit(self.step_index, review)

    def revert_step_note(self) -> None:
        """Show the stored note again (Esc drops an edit in progress)."""
        self.step_note.setText(self.step_review.note)

    def revert_episode_note(self) -> None:
        self.episode_note.setText(self.episode_review.note)

    def note(self, which: str) -> str:
        """The stored note of the step ("step") or of the episode ("episode")."""
        return self.step_review.note if which == "step" else self.episode_review.note

    def save_note(self, which: str, text: str) -> None:
        """Store `text` as the current step's or the episode's note (the note box)."""
        field = self.step_note if which == "step" else self.episode_note
        field.setText(text)
        if which == "step":
            self._save_step_note()
        else:
            self._save_episode_note()

    def set_label(self, label: str | None) -> None:
        if self.episode_id is None or self.step_index is None:
            return
        self._step_changed(self.reviewer.set_label(self.episode_id, self.step_index, label))

    def set_corrected_point(self, x: int, y: int) -> None:
        if self.episode_id is None or self.step_index is None:
            return
        self._step_changed(self.reviewer.set_corrected_point(self.episode_id,
                                                             self.step_index, x, y))
        self.pick_button.setChecked(False)

    def clear_correction(self) -> None:
        if self.episode_id is None or self.step_index is None:
            return
        self._step_changed(self.reviewer.clear_correction(self.episode_id, self.step_index))

    def _save_step_note(self) -> None:
        if self.episode_id is None or self.step_index is None:
            return
        note = self.step_note.text().strip()
        if note != self.step_review.note:
            self._step_changed(self.reviewer.set_step_note(self.episode_id, self.step_index,
                                                           note))

    def _episode_changed(self, review: EpisodeReview) -> None:
        self.episode_review = review
        self._show_episode_review()
        self.episode_review_changed.emit(review)

    def set_verdict(self, verdict: str | None) -> None:
        if self.episode_id is None:
            return
        self._episode_changed(self.reviewer.set_verdict(self.episode_id, verdict))

    def _verdict_clicked(self, verdict: str, checked: bool) -> None:
        self.set_verdict(verdict if checked else None)
        if checked:
            self.verdict_given.emit(verdict)

    def toggle_verdict(self, verdict: str) -> None:
        self.set_verdict(None if self.episode_review.verdict == verdict else verdict)

    def set_score_override(self, score: float | None) -> None:
        if self.episode_id is None:
            return
        self._episode_changed(self.reviewer.set_score_override(self.episode_id, score))

    def _save_score(self, value: float) -> None:
        score = None if value <= NO_OVERRIDE + 1e-9 else round(value, 2)
        if score != self.episode_review.score_override:
            self.set_score_override(score)

    def _save_episode_note(self) -> None:
        if self.episode_id is None:
            return
        note = self.episode_note.text().strip()
        if note != self.episode_review.note:
            self._episode_changed(self.reviewer.set_episode_note(self.episode_id, note))

    def set_in_pool(self, in_pool: bool) -> None:
        if self.episode_id is None:
            return
        try:
            self._episode_changed(self.reviewer.set_in_pool(self.episode_id, in_pool))
        except StoreError as exc:
            self.pool.setChecked(not in_pool)
            self.message.setText(str(exc))
