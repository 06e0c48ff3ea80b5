"""Two episodes side by side (e.g. the same task before and after training), stepping,
zooming and panning together or apart."""

from __future__ import annotations

from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from trainer.store import EpisodeFilter, EpisodeSummary, Store
from workbench.app.frame_images import FrameImages
from workbench.app.widgets.episode_player import EpisodePlayer
from workbench.app.widgets.screenshot_view import ZoomLink

CANDIDATES = 200  # episodes of the task offered in each side's chooser


def _choice_text(summary: EpisodeSummary) -> str:
    score = "–" if summary.score is None else f"{summary.score:.2f}"
    # No policy version: a person's demonstration, an oracle or an import (the source
    # says which), not necessarily a human's.
    version = "" if summary.policy_version is None else f" · v{summary.policy_version}"
    return f"{summary.id[:10]} · {summary.source}{version} · score {score}"


class CompareView(QWidget):
    def __init__(self, store: Store, images: FrameImages, parent: QWidget | None = None
                 ) -> None:
        super().__init__(parent)
        self.store = store
        self.players = (EpisodePlayer(store, images, compact=True),
                        EpisodePlayer(store, images, compact=True))
        self.choosers = (QComboBox(), QComboBox())
        for chooser in self.choosers:  # long ids and sources never widen the window
            chooser.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            chooser.setMinimumContentsLength(12)
        self.linked = QCheckBox("Step together")
        self.linked.setChecked(True)
        self.linked.setToolTip("Both sides step, zoom and pan together")
        # the same part of both screens, at the same zoom
        self.zoom_link = ZoomLink([p.before for p in self.players], self)
        self.linked.toggled.connect(lambda on: setattr(self.zoom_link, "enabled", on))
        self.title = QLabel("Select two episodes (or one) in the table and press Compare.")
        # long task names are cut (the whole title is its tooltip), never wider
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        # in the right side's place when the task has no other episode: why it is empty
        self.alone = QLabel("")
        self.alone.setObjectName("compare-alone")
        self.alone.setWordWrap(True)
        self.alone.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.alone.setStyleSheet("padding: 24px; background: #fff8e1; color: #3a3a3a")
        self.alone.hide()
        splitter = QSplitter(Qt.Orientation.Horizontal)
        for side, (player, chooser) in enumerate(zip(self.players, self.choosers,
                                                     strict=True)):
            box = QWidget()
            layout = QVBoxLayout(box)
            layout.setContentsMargins(0, 0, 0, 0)
            layout.addWidget(chooser)
            layout.addWidget(player, 1)
            if side == 1:
                layout.addWidget(self.alone, 1)
            splitter.addWidget(box)
            chooser.currentIndexChanged.connect(lambda _, s=side: self._chosen(s))
            player.step_changed.connect(lambda index, s=side: self._follow(s, index))
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.linked)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)
        self._following = False

    def compare(self, left: str, right: str | None = None) -> None:
        """Show `left` and `right` (default: the newest other episode of left's task)."""
        found = self.store.queries.summaries([left])
        if not found:
            return
        task = found[0].task_id
        candidates = self.store.queries.page(EpisodeFilter(task_ids=[task]),
                                             limit=CANDIDATES)
        ids = [c.id for c in candidates]
        for wanted in (left, right):
            if wanted is not None and wanted not in ids:
                candidates += self.store.queries.summaries([wanted])
                ids.append(wanted)
        alone = right is None and len(ids) == 1  # nothing to put beside it
        if right is None:
            right = next((i for i in ids if i != left), left)
        right_task = next(c.task_id for c in candidates if c.id == right)
        tasks = len({c.task_id for c in candidates})
        episodes = f"{len(candidates)} episode" + ("" if len(candidates) == 1 else "s")
        if alone:
            self.title.setText(f"<b>{task}</b> · its only episode: nothing to compare it "
                               "with yet")
        else:
            self.title.setText(f"<b>{task}</b>" + (f" vs <b>{right_task}</b>"
                                                   if right_task != task else "")
                               + f" · {episodes} of "
                               + ("this task" if tasks == 1 else f"{tasks} tasks")
                               + " to choose from")
        self.title.setToolTip(self.title.text())
        self.alone.setText(
            f"{left} is the only episode of {task} in this workspace, so there is nothing "
            "to compare it with. Compare shows two episodes of one task side by side "
            "(before and after training, a model and a person): run the task again "
            "(Evaluations, Training) or record a demonstration of it (Environments), "
            "then compare." if alone else "")
        self.alone.setVisible(alone)
        self.players[1].setVisible(not alone)
        self.choosers[1].setVisible(not alone)
        for chooser, chosen in zip(self.choosers, (left, right), strict=True):
            chooser.blockSignals(True)
            chooser.clear()
            for summary in candidates:
                chooser.addItem(_choice_text(summary), summary.id)
            chooser.setCurrentIndex(chooser.findData(chosen))
            chooser.blockSignals(False)
        self.players[0].load(left)
        if alone:
            self.players[1].clear()
        else:
            self.players[1].load(right)

    def episode_ids(self) -> tuple[str | None, str | None]:
        return tuple(p.episode.id if p.episode else None  # type: ignore[return-value]
                     for p in self.players)

    def focused_player(self) -> EpisodePlayer:
        """The side the step keys drive: the one holding the keyboard focus, else the
        left (with "Step together" on, the other side follows)."""
        focus = QApplication.focusWidget()
        for player in self.players:
            if focus is not None and player.isAncestorOf(focus):
                return player
        return self.players[0]

    def _chosen(self, side: int) -> None:
        episode_id = self.choosers[side].currentData()
        if episode_id:
            self.players[side].load(str(episode_id), index=self.players[1 - side].index)

    def _follow(self, side: int, index: int) -> None:
        if not self.linked.isChecked() or self._following:
            return
        self._following = True
        try:
            self.players[1 - side].go(index)
        finally:
            self._following = False
