"""The Trajectories screen: the episode view with its review panel, the episode table
(filter, sort, search) in a drawer over it, the comparison of two episodes, and the
success pool. Notes are typed in a box over the screenshot; a verdict can open the next
unreviewed episode. Exports run in workers with progress and cancel."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from PyQt6.QtCore import QByteArray, QItemSelectionModel, QModelIndex, QRect, Qt, pyqtSignal
from PyQt6.QtGui import QResizeEvent, QShowEvent
from PyQt6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from trainer.store import EpisodeFilter, Store
from workbench.app.frame_images import FrameImages
from workbench.app.models.episode_table import EpisodeTableModel
from workbench.app.pages.compare import CompareView
from workbench.app.pages.pool import PoolView
from workbench.app.text_fields import TextFieldKeys
from workbench.app.widgets.episode_drawer import EpisodeDrawer, episode_table
from workbench.app.widgets.episode_player import NARROW_SIDE_WIDTH, SIDE_WIDTH, EpisodePlayer
from workbench.app.widgets.filter_bar import FilterBar
from workbench.app.widgets.note_box import NoteBox
from workbench.app.widgets.review_panel import ReviewPanel
from workbench.app.workers import Worker, Workers
from workbench.services.episode_rows import EpisodeRows
from workbench.services.exports import (
    ExportResult,
    export_html_pages,
    export_jsonl,
    export_osworld,
)
from workbench.services.filter_choices import filter_choices
from workbench.services.progress import TaskState
from workbench.services.review import EpisodeReview, Reviewer, StepReview

EMPTY_HINT = (
    "No episodes in this workspace yet. Episodes come from:\n"
    "  • a demonstration: Environments (Ctrl+1), choose a sandbox and a task, press Record;\n"
    "  • rollouts: workbench --workspace DIR rollout --oracle|--model MODEL_DIR "
    "--tasks TASKS --envs N;\n"
    "  • a training run: Training (Ctrl+3), or workbench --workspace DIR train RUN.toml;\n"
    "  • OSWorld result folders: workbench --workspace DIR import osworld RESULTS_DIR\n"
    "For a workspace with examples of each, run: workbench demo --workspace demo-workspace")
DRAWER_OPEN_FROM = 1000  # screen pixels high: below, the episode list starts closed
SIDE_SIZES = [110, 220, 330]  # the steps, the text and the review beside the screenshot
COMPARE_SIZES = [600, 110]  # each compared side: the screenshot, then steps and text
WIDE_FROM = 1600  # screen pixels wide: from here the column beside the screenshot is wide


class TrajectoriesPage(QWidget):
    message = pyqtSignal(str)  # for the status bar
    export_finished = pyqtSignal(object)  # ExportResult

    def __init__(self, store: Store, workers: Workers, author: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.workers = workers
        self.reviewer = Reviewer(store, author)
        self.images = FrameImages(store)
        self.rows = EpisodeRows(store.queries)
        self.model = EpisodeTableModel(self.rows, self)

        self.filter_bar = FilterBar()
        self.filter_bar.changed.connect(self.apply_filter)
        self.table = episode_table(self.model, author)
        selection = self.table.selectionModel()
        assert selection is not None
        selection.currentRowChanged.connect(self._current_row_changed)

        self.player = EpisodePlayer(store, self.images)
        self.review = ReviewPanel(self.reviewer)
        self.player.step_changed.connect(self._step_changed)
        self.player.before.point_picked.connect(self.review.set_corrected_point)
        self.player.before.pick_cancelled.connect(lambda: self.set_picking(False))
        self.review.picking_changed.connect(self.player.before.set_picking)
        self.review.step_review_changed.connect(self._step_review_changed)
        self.review.episode_review_changed.connect(self._episode_review_changed)
        self.review.verdict_given.connect(self._verdict_given)
        self.review.skip_requested.connect(self.skip_episode)
        self.advance_after_verdict = True  # a verdict opens the next unreviewed episode
        self._note_for: tuple[str | None, int | None] = (None, None)  # the note box's
        self.note_box = NoteBox(self.player.before, self._drawer_over_screenshot)
        self.note_box.saved.connect(self._save_note)
        # scrolled in a short window rather than making the window taller than the screen
        review_scroll = self.review_scroll = QScrollArea()
        review_scroll.setWidget(self.review)
        review_scroll.setWidgetResizable(True)
        review_scroll.setFrameShape(QFrame.Shape.NoFrame)
        review_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.player.add_side(review_scroll)

        self.compare_view = CompareView(store, self.images)
        self.pool_view = PoolView()
        self.pool_view.store = store  # filled by self.refresh() below, once
        self.pool_view.open_episode.connect(self.open_episode)
        self.pool_view.show_task.connect(self.show_task)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)  # no frame: its pixels go to the screenshot
        self.tabs.addTab(self.player, "Episode")
        self.tabs.addTab(self.compare_view, "Compare")
        self.tabs.addTab(self.pool_view, "Success pool")
        self.tabs.currentChanged.connect(
            lambda _: self.pool_view.refresh_if_stale()
            if self.tabs.currentWidget() is self.pool_view else None)

        # An empty workspace says how episodes get here.
        self.empty_hint = QLabel(EMPTY_HINT)
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.empty_hint.setStyleSheet("padding: 12px; background: #fff8e1; color: #3a3a3a")
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        # in the table's place, no taller than it: a small window cuts it, never grows
        self.empty_hint.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        self.empty_hint.hide()
        # The episode list and its filter: a drawer over the right of the episode (the
        # column beside the screenshot), closed by default on a small screen; L or the
        # button opens it, and the screenshot stays where it was, mostly in view.
        self.drawer = EpisodeDrawer(self)
        self.drawer.add(self.filter_bar)
        self.drawer.add(self.empty_hint, 1)
        self.drawer.add(self.table, 1)
        self.drawer.close_requested.connect(lambda: self.set_drawer_open(False))
        self.drawer.hide()
        self.drawer_button = QToolButton()
        self.drawer_button.setCheckable(True)
        self.drawer_button.setChecked(False)
        self.drawer_button.setAutoRaise(True)
        self.drawer_button.setToolTip("Show or hide the episode list and its filter (L; "
                                      "Esc in the list closes it)")
        self.drawer_button.toggled.connect(self.set_drawer_open)
        self.tabs.setCornerWidget(self.drawer_button, Qt.Corner.TopRightCorner)
        self.tabs.currentChanged.connect(lambda _: self._place_drawer())
        self.focus_mode = False
        self._drawer_before_focus = False  # whether the drawer was open (focus mode)
        self.layout_box = QVBoxLayout(self)
        self.layout_box.setContentsMargins(2, 2, 2, 2)
        self.layout_box.addWidget(self.tabs)
        # Esc leaves a text field, Enter saves and leaves it: the keys review again.
        self.text_keys = TextFieldKeys(lambda: self.stepping_player().before, self)
        self.text_keys.watch(self.review.step_note, self.review.revert_step_note)
        self.text_keys.watch(self.review.episode_note, self.review.revert_episode_note)
        self.text_keys.watch(self.review.score)
        self.text_keys.watch(self.filter_bar.search)
        self.text_keys.watch(self.filter_bar.task)  # editable: typed to find a task
        self._selecting = False  # True while the table follows the open episode
        self.refresh(requery=False)  # enabling sorting above has just read the ids
        if len(self.rows):  # something to look at from the start: the newest episode
            self.open_episode(self.model.episode_id(0))

    # -- the table ----------------------------------------------------------------------

    def refresh(self, *, requery: bool = True) -> None:
        """Read the workspace again: filter choices, the table, the pool."""
        current = self.current_episode_id()
        self.filter_bar.set_choices(filter_choices(self.store))
        if requery:
            self.model.search(self.filter_bar.selection())
        self._show_count()
        self.pool_view.refresh()
        if current is not None:
            self.select_episode(current, open_it=False)

    def apply_filter(self, selection: EpisodeFilter) -> None:
        self.model.search(selection)
        self.table.scrollToTop()
        self._show_count()

    def show_episodes(self, selection: EpisodeFilter) -> None:
        """Show these episodes (an evaluation's heatmap cell): the filter bar says which
        (the task in its box, the tags in a line of their own), the list opens, and the
        first of them is open."""
        bar = self.filter_bar
        bar.blockSignals(True)
        try:
            bar.clear()
            for task in selection.task_ids[:1]:
                index = bar.task.findData(task)
                if index >= 0:
                    bar.task.setCurrentIndex(index)
                else:
                    bar.task.setEditText(task)  # typed, as a person may
            bar.set_extra_tags(selection.tags)
        finally:
            bar.blockSignals(False)
        self.apply_filter(bar.selection())
        self.set_drawer_open(True)
        self.tabs.setCurrentIndex(0)
        if len(self.rows):
            self.open_episode(self.model.episode_id(0))

    def show_task(self, task_id: str) -> None:
        self.filter_bar.clear()
        self.filter_bar.set_value("task", task_id)
        self.tabs.setCurrentIndex(0)

    def _show_count(self) -> None:
        total = self.store.queries.count()
        self.empty_hint.setVisible(total == 0)
        self.table.setVisible(total > 0)
        if total == 0:
            self.set_drawer_open(True)  # the hint says where episodes come from
        shown = len(self.rows)
        text = (f"{shown:,} of {total:,} episodes" if shown != total
                else f"{total:,} episodes")
        self.filter_bar.count.setText(f"{text} · {self.reviewed_count():,} of {shown:,} "
                                      f"reviewed")
        button_text = f"☰ {text}"
        if self.drawer_button.text() != button_text:
            self.drawer_button.setText(button_text)
            # the corner is laid out when set: again, for the new width (never cut)
            self.drawer_button.adjustSize()
            self.tabs.setCornerWidget(self.drawer_button, Qt.Corner.TopRightCorner)
            self.drawer_button.show()  # setting a corner widget hides the one it replaces

    # -- layout -------------------------------------------------------------------------

    def drawer_open(self) -> bool:
        return not self.drawer.isHidden()

    def set_drawer_open(self, open_it: bool) -> None:
        """Show or hide the episode list and filter over the episode (Up/Down browse it
        while it is open; Esc or L closes it and the keys review again)."""
        if self.drawer_button.isChecked() != open_it:
            self.drawer_button.setChecked(open_it)  # comes back here through toggled
            return
        if open_it == self.drawer_open():
            return
        if open_it:
            self._place_drawer()
        self.drawer.setVisible(open_it)
        if open_it and self.isVisible():
            self.table.setFocus(Qt.FocusReason.ShortcutFocusReason)  # Up/Down browse
        elif not open_it and self.isVisible():
            self.player.before.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def drawer_area(self) -> QRect:
        """Where the drawer may lie: over the episode view, from the top to the foot of
        the screenshot (its header and step controls stay in view)."""
        bar = self.tabs.tabBar()
        top = self.tabs.y() + (bar.height() if bar is not None and bar.isVisible() else 0)
        bottom = self.tabs.y() + self.tabs.height()
        views = self.player.before.parentWidget()
        if self.tabs.currentWidget() is self.player and views is not None \
                and views.isVisible():
            corner = views.mapTo(self, views.rect().topLeft())
            top, bottom = corner.y(), corner.y() + views.height()
        return QRect(self.tabs.x(), top, self.tabs.width(), bottom - top)

    def _place_drawer(self) -> None:
        self.drawer.place(self.drawer_area())

    def _drawer_over_screenshot(self) -> QRect | None:
        """The open drawer in the screenshot's coordinates (the note box keeps clear)."""
        if not self.drawer_open():
            return None
        view = self.player.before
        geometry = self.drawer.geometry()
        return QRect(view.mapFrom(self, geometry.topLeft()), geometry.size())

    def resizeEvent(self, event: QResizeEvent | None) -> None:
        super().resizeEvent(event)
        self.layout_box.activate()  # the tabs' new box now, for the drawer to follow
        self._place_drawer()

    def showEvent(self, event: QShowEvent | None) -> None:
        super().showEvent(event)
        self._place_drawer()

    def set_focus_mode(self, on: bool) -> None:
        """The screenshot and its step controls only: no list, no tabs, no side column
        (the review keys still work). Off: back as it was."""
        if on == self.focus_mode:
            return
        self.focus_mode = on
        if on:
            self._drawer_before_focus = self.drawer_open()
            self.set_drawer_open(False)
        else:
            self.set_drawer_open(self._drawer_before_focus)
        self.player.side.setVisible(not on)
        for player in self.compare_view.players:
            player.side.setVisible(not on)
        bar = self.tabs.tabBar()
        if bar is not None:
            bar.setVisible(not on)
        corner = self.tabs.cornerWidget(Qt.Corner.TopRightCorner)
        if corner is not None:
            corner.setVisible(not on)
        # A splitter places its children again only when the layout request that hiding
        # or showing one of them posts arrives (the next pass of the event loop): until
        # then the screenshot kept its old box. They are placed now, as M returns.
        self.layout_box.activate()
        for splitter in (self.player.splitter,
                         *(player.splitter for player in self.compare_view.players)):
            splitter.refresh()

    def layout_state(self) -> dict[str, QByteArray | bool]:
        """What `restore_layout` brings back: the splitters and whether the drawer is
        open."""
        return {"drawer_open": self.drawer_open() if not self.focus_mode
                else self._drawer_before_focus,
                "player": self.player.splitter.saveState(),
                "side": self.player.side.saveState(),
                "compare": self.compare_view.players[0].splitter.saveState()}

    def restore_layout(self, state: dict[str, QByteArray | bool]) -> None:
        for name, splitter in (("player", self.player.splitter), ("side", self.player.side)):
            saved = state.get(name)
            if isinstance(saved, QByteArray):
                splitter.restoreState(saved)
        saved = state.get("compare")
        if isinstance(saved, QByteArray):
            for player in self.compare_view.players:
                player.splitter.restoreState(saved)
        self.set_drawer_open(bool(state.get("drawer_open")) or not len(self.rows))

    def default_layout(self, height: int, width: int | None = None) -> None:
        """The layout for a screen `height` pixels high (and `width` wide: the screen's
        when not given): the screenshot first. Below DRAWER_OPEN_FROM pixels the episode
        list starts closed; below WIDE_FROM the column beside the screenshot is narrow."""
        self.set_focus_mode(False)
        if width is None:
            screen = self.screen()
            width = screen.availableGeometry().width() if screen is not None else WIDE_FROM
        side = SIDE_WIDTH if width >= WIDE_FROM else NARROW_SIDE_WIDTH
        self.player.splitter.setSizes([max(width - side, 300), side])
        self.player.side.setSizes(SIDE_SIZES)
        for player in self.compare_view.players:
            player.splitter.setSizes(COMPARE_SIZES)
        self.set_drawer_open(height >= DRAWER_OPEN_FROM or not len(self.rows))

    def reviewed_count(self) -> int:
        """How many of the episodes shown have a verdict (the review queue's progress)."""
        return self.store.queries.count(replace(self.rows.selection, verdict="reviewed"))

    def next_unreviewed(self) -> bool:
        """Open the next episode after the current one (in table order, wrapping round)
        that has no verdict; False when every episode shown has one."""
        current = self.current_episode_id()
        start = self.model.row_of(current) if current is not None else None
        count = len(self.rows)
        for offset in range(1, count + 1):
            row = ((start if start is not None else -1) + offset) % count
            summary = self.rows.summary(row)
            if summary is not None and summary.verdict is None:
                self.open_episode(summary.id)
                return True
        self.message.emit("Every episode shown has a verdict")
        return False

    def selected_episode_ids(self) -> list[str]:
        """The selected rows' episodes in table order (ids only: no row is read)."""
        selection = self.table.selectionModel()
        rows = sorted({i.row() for i in selection.selectedRows()}) if selection else []
        return [self.model.episode_id(r) for r in rows]

    def select_episode(self, episode_id: str, open_it: bool = True) -> bool:
        row = self.model.row_of(episode_id)
        if row is None:
            return False
        selection = self.table.selectionModel()
        assert selection is not None
        # Signals stay on (the view repaints the rows it deselects from them): one row
        # highlighted, the open episode's. The flag keeps the move from opening it again.
        self._selecting = not open_it
        try:
            selection.setCurrentIndex(self.model.index(row, 0),
                                      QItemSelectionModel.SelectionFlag.ClearAndSelect
                                      | QItemSelectionModel.SelectionFlag.Rows)
        finally:
            self._selecting = False
        self.table.scrollTo(self.model.index(row, 0))
        return True

    def _current_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid() and not self._selecting:
            self.open_episode(self.model.episode_id(current.row()), select=False)

    # -- the episode --------------------------------------------------------------------

    def current_episode_id(self) -> str | None:
        return self.player.episode.id if self.player.episode is not None else None

    def open_episode(self, episode_id: str, select: bool = True) -> None:
        if select and not self.select_episode(episode_id, open_it=False):
            self.filter_bar.clear()  # filtered out: show everything, then select it
            self.select_episode(episode_id, open_it=False)
        self.note_box.commit()  # a note being typed belongs to the episode it was for
        self.player.load(episode_id, self.reviewer.steps(episode_id))
        episode = self.player.episode
        assert episode is not None
        self.review.show_episode(episode_id, episode.status)
        self.player.set_verdict(self.review.episode_review.verdict)
        self._step_changed(self.player.index)
        self.tabs.setCurrentIndex(0)
        focus = QApplication.focusWidget()
        if focus is not self.table and self.isVisible():
            # The keys review the episode just opened (from the pool, U, a filter): not
            # a note field that happens to be next in line. Up/Down in the table stay.
            self.player.before.setFocus(Qt.FocusReason.OtherFocusReason)

    def stepping_player(self) -> EpisodePlayer:
        """The player the step and play keys drive: the Episode tab's, or on the Compare
        tab the compared side with the focus."""
        if self.tabs.currentWidget() is self.compare_view:
            return self.compare_view.focused_player()
        return self.player

    def _step_changed(self, index: int) -> None:
        if self.player.episode is not None and self.player.episode.steps:
            self.review.show_step(index, self.player.reviews.get(index, StepReview()))

    def _step_review_changed(self, index: int, review: StepReview) -> None:
        self.player.set_review(index, review)
        self._episode_changed()

    def _episode_review_changed(self, review: EpisodeReview) -> None:
        self.player.set_verdict(review.verdict)
        self._episode_changed()

    def _episode_changed(self) -> None:
        episode_id = self.current_episode_id()
        if episode_id is not None:
            self.model.refresh_episodes([episode_id])
            self.pool_view.refresh()
            self._show_count()  # the review progress

    # commands (the QActions call these)

    def label_step(self, label: str | None) -> None:
        self.review.set_label(label)

    def set_picking(self, picking: bool) -> None:
        self.review.pick_button.setChecked(picking)
        if picking:  # the arrow keys move the point, Enter sets it
            self.player.before.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def edit_note(self, which: str) -> None:
        """Type the step's ("step") or the episode's note in a box over the screenshot,
        in view whatever else is open (Enter saves, Esc drops the edit)."""
        if self.review.episode_id is None or (which == "step"
                                              and self.review.step_index is None):
            return
        self.tabs.setCurrentIndex(0)
        title = (f"Step {self.player.index + 1} note" if which == "step"
                 else "Episode note")
        self._note_for = (self.review.episode_id, self.review.step_index)
        self.note_box.open(which, title, self.review.note(which))

    def _save_note(self, which: str, text: str) -> None:
        """The note box closed with `text`: stored for the episode and step it was opened
        on (a click on another step closes it first)."""
        episode_id, step_index = self._note_for
        if episode_id is None:
            return
        if (episode_id, step_index) == (self.review.episode_id, self.review.step_index):
            if text != self.review.note(which):
                self.review.save_note(which, text)
        elif which == "step" and step_index is not None:
            self._step_review_changed(step_index, self.reviewer.set_step_note(
                episode_id, step_index, text))
        elif which == "episode" and episode_id == self.review.episode_id:
            self.review.save_note(which, text)

    def toggle_verdict(self, verdict: str) -> None:
        """A verdict key: the verdict (or none, when it was the verdict already); then,
        when `advance_after_verdict`, the next unreviewed episode."""
        before = self.review.episode_review.verdict
        self.review.toggle_verdict(verdict)
        if self.review.episode_review.verdict == verdict != before:
            self._verdict_given(verdict)

    def _verdict_given(self, verdict: str) -> None:
        if not self.advance_after_verdict:
            return
        done = self.current_episode_id()
        word = "accepted" if verdict == "accept" else "rejected"
        if self.next_unreviewed():
            self.message.emit(f"{done} {word}; now {self.current_episode_id()}")

    def skip_episode(self) -> bool:
        """No verdict for now: the next unreviewed episode (S)."""
        return self.next_unreviewed()

    def set_in_pool(self, in_pool: bool) -> None:
        self.review.pool.setChecked(in_pool)
        self.review.set_in_pool(in_pool)

    def compare(self) -> bool:
        ids = self.selected_episode_ids()
        if not ids and self.current_episode_id():
            ids = [str(self.current_episode_id())]
        if not ids:
            self.message.emit("Select one or two episodes to compare")
            return False
        self.compare_view.compare(ids[0], ids[1] if len(ids) > 1 else None)
        self.tabs.setCurrentWidget(self.compare_view)
        return True

    # -- exports ------------------------------------------------------------------------

    def export_ids(self) -> list[str]:
        ids = self.selected_episode_ids()
        current = self.current_episode_id()
        return ids or ([current] if current else [])

    def _export(self, title: str, work: Callable[[TaskState], ExportResult]) -> Worker:
        def done(result: Any) -> None:
            assert isinstance(result, ExportResult)
            self.message.emit(f"{title}: {result.summary()}")
            self.export_finished.emit(result)

        return self.workers.submit(
            title, work, on_done=done,
            on_cancelled=lambda: self.message.emit(f"{title}: cancelled"),
            on_failed=lambda error: self.message.emit(error))

    def export_html(self, folder: Path, ids: Sequence[str] | None = None) -> Worker:
        chosen = list(ids if ids is not None else self.export_ids())
        return self._export(f"HTML export of {len(chosen)} episode(s)",
                            lambda state: export_html_pages(self.store, chosen, folder, state))

    def export_osworld(self, root: Path, ids: Sequence[str] | None = None) -> Worker:
        chosen = list(ids if ids is not None else self.export_ids())
        return self._export(f"OSWorld export of {len(chosen)} episode(s)",
                            lambda state: export_osworld(self.store, chosen, root, state))

    def export_jsonl(self, path: Path, ids: Sequence[str] | None = None) -> Worker:
        chosen = list(ids if ids is not None else self.export_ids())
        return self._export(f"JSONL export of {len(chosen)} episode(s)",
                            lambda state: export_jsonl(self.store, chosen, path, state))

    def ask_export(self, kind: str) -> Worker | None:
        """Ask where to write, then export the selection in the background."""
        if not self.export_ids():
            self.message.emit("Select episodes in the table to export")
            return None
        if kind == "jsonl":
            path, _ = QFileDialog.getSaveFileName(self, "Export as JSONL", "episodes.jsonl",
                                                  "JSON Lines (*.jsonl)")
            return self.export_jsonl(Path(path)) if path else None
        folder = QFileDialog.getExistingDirectory(
            self, "Export as HTML pages into" if kind == "html"
            else "Export as OSWorld results under")
        if not folder:
            return None
        return self.export_html(Path(folder)) if kind == "html" \
            else self.export_osworld(Path(folder))
