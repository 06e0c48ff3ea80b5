"""One episode, step by step: the screenshot with the step's actions drawn on it (and the
screen after it, beside it, when asked, zooming and panning together), the actions as
text in the same colours, the model's thought and raw response, a step list, per-step
metrics, and play at a speed. The screenshots zoom, pan and open full screen."""

from __future__ import annotations

import datetime
import html
import statistics
from collections.abc import Callable

from PyQt6.QtCore import QItemSelectionModel, Qt, QTimer, pyqtSignal
from PyQt6.QtGui import QGuiApplication
from PyQt6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListView,
    QPlainTextEdit,
    QSizePolicy,
    QSlider,
    QSplitter,
    QStyle,
    QTabWidget,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from agents.trajectory import FAILED_COMMANDS_INFO, Episode, Step
from trainer.store import Store
from workbench.app.frame_images import FrameImages
from workbench.app.models.step_list import StepListModel
from workbench.app.widgets.prompt_view import PromptView
from workbench.app.widgets.screenshot_view import ScreenshotView, ZoomLink
from workbench.app.widgets.screenshot_window import ScreenshotWindow
from workbench.services.action_overlay import (
    ActionLine,
    Mark,
    corrected_point,
    overlay,
    pointer_after,
)
from workbench.services.playback import PLAY_SPEEDS, Playback
from workbench.services.review import StepReview
from workbench.services.step_text import split_response


def failed_command_lines(info: object) -> list[str]:
    """The setup and postconfig commands that failed, as an episode's info keeps them."""
    records = info.get(FAILED_COMMANDS_INFO) if isinstance(info, dict) else None
    if not records:
        return []
    from vm.tasks.setup_report import described  # vm.tasks: only for such an episode

    return described(records)


def _time(value: float | None) -> str:
    if value is None:
        return "–"
    return datetime.datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def step_metrics(step: Step) -> list[tuple[str, str]]:
    """What is known about a step, as (name, value) rows."""
    rows = [("reward", f"{step.reward:g}"), ("done", "yes" if step.done else "no")]
    for name, seconds in step.timings.items():
        rows.append((f"time: {name}", f"{seconds:.3f} s"))
    if step.token_ids is not None:
        rows.append(("response tokens", str(len(step.token_ids))))
    if step.entropies:
        rows.append(("entropy (mean)", f"{statistics.fmean(step.entropies):.3f}"))
        rows.append(("entropy (max)", f"{max(step.entropies):.3f}"))
    if step.logprobs:
        finite = [v for v in step.logprobs if v != float("-inf")]
        if finite:
            rows.append(("log-prob (mean)", f"{statistics.fmean(finite):.3f}"))
    if step.parse_error:
        rows.append(("parse error", step.parse_error))
    if step.timestamp is not None:
        rows.append(("acted at", _time(step.timestamp)))
    return rows


def actions_html(lines: list[ActionLine]) -> str:
    if not lines:
        return "<i>no actions</i>"
    out = []
    for line in lines:
        out.append(f'<div><span style="color:{line.colour}; font-size:large">■</span> '
                   f'<code style="color:{line.colour}">{html.escape(line.text)}</code></div>')
    return "".join(out)


SIDE_WIDTH = 340  # pixels: the column of steps, text and review beside the screenshot
NARROW_SIDE_WIDTH = 256  # pixels: that column on a screen 1280 pixels wide
VERDICT_BADGES = {  # the verdict at the head of the episode: text, colours
    "accept": ("✓ accepted", "#ffffff", "#2e7d32"),
    "reject": ("✗ rejected", "#ffffff", "#b3261e"),
    None: ("unreviewed", "#5f6368", "#e8eaed")}


class EpisodePlayer(QWidget):
    step_changed = pyqtSignal(int)
    episode_loaded = pyqtSignal(str)
    playing_changed = pyqtSignal(bool)
    full_screen_opened = pyqtSignal(QWidget)  # the full-screen window, just shown

    def __init__(self, store: Store, images: FrameImages, *, compact: bool = False,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.images = images
        self.episode: Episode | None = None
        self.reviews: dict[int, StepReview] = {}
        self.playback = Playback()
        self.pointers: list[tuple[int, int] | None] = []  # pointer before each step
        self.show_after = False
        self.current_marks: list[Mark] = []
        self.current_lines: list[ActionLine] = []
        self.full_screen: ScreenshotWindow | None = None
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._tick)
        self._build(compact)

    # -- layout -------------------------------------------------------------------------

    def _build(self, compact: bool) -> None:
        # The episode's verdict first in the header row, whole (the header after it is
        # cut when long); shown once a verdict is set (set_verdict).
        self.verdict = QLabel("")
        self.verdict.setToolTip("The episode's verdict (A accepts, R rejects, S skips)")
        self.verdict.hide()
        self.header = QLabel("Choose an episode in the table.")
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.instruction = QLabel("")
        self.instruction.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Long text never widens the window: the header is cut, the instruction wraps.
        self.header.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.instruction.setWordWrap(True)

        self.before_title = QLabel("Before")
        self.before = ScreenshotView()
        self.after_title = QLabel("After")
        self.after = ScreenshotView()
        before_box, after_box = QWidget(), QWidget()
        for box, title, view in ((before_box, self.before_title, self.before),
                                 (after_box, self.after_title, self.after)):
            layout = QVBoxLayout(box)
            layout.setContentsMargins(0, 0, 0, 0)
            layout.addWidget(title)
            layout.addWidget(view, 1)
        for title in (self.before_title, self.after_title):  # long titles are cut
            title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.after_box = after_box
        after_box.setVisible(False)
        self.before_title.setVisible(False)  # a title only beside After (its height: picture)
        self.zoom_link = ZoomLink((self.before, self.after), self)
        for view in (self.before, self.after):
            view.full_screen_requested.connect(self.open_full_screen)
            view.content_changed.connect(self._sync_full_screen)
        self.before.zoom_changed.connect(self._show_zoom)
        views = QHBoxLayout()
        views.setContentsMargins(0, 0, 0, 0)
        views.addWidget(before_box, 1)
        views.addWidget(after_box, 1)

        style = self.style()
        assert style is not None
        self.first_button = self._button(QStyle.StandardPixmap.SP_MediaSkipBackward,
                                         "First step (Home)", self.first)
        self.previous_button = self._button(QStyle.StandardPixmap.SP_MediaSeekBackward,
                                            "Previous step (Left)", self.previous)
        self.play_button = self._button(QStyle.StandardPixmap.SP_MediaPlay,
                                        "Play/pause (Space)", self.toggle_play)
        self.next_button = self._button(QStyle.StandardPixmap.SP_MediaSeekForward,
                                        "Next step (Right)", self.next)
        self.last_button = self._button(QStyle.StandardPixmap.SP_MediaSkipForward,
                                        "Last step (End)", self.last)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setMinimum(0)
        self.slider.valueChanged.connect(self.go)
        self.position = QLabel("–")
        self.position.setMinimumWidth(self.position.fontMetrics().horizontalAdvance("9999 / 9999"))
        self.position.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.speed = QComboBox()
        self.speed.setToolTip("Play speed (steps per second)")
        for speed in PLAY_SPEEDS:
            self.speed.addItem(f"{speed:g} step/s", speed)
        self.speed.setCurrentIndex(PLAY_SPEEDS.index(1.0))
        self.speed.currentIndexChanged.connect(self._speed_changed)
        controls = QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        for button in (self.first_button, self.previous_button, self.play_button,
                       self.next_button, self.last_button):
            controls.addWidget(button)
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.position)
        controls.addWidget(self.speed)
        controls.addSpacing(8)
        self.zoom_out_button = self._text_button("−", "Zoom out (−, Ctrl+wheel)",
                                                 self.zoom_out)
        self.zoom_label = QLabel("–")
        self.zoom_label.setToolTip("The screenshot's zoom. Ctrl+wheel zooms about the "
                                   "pointer; drag or scroll to pan a zoomed screenshot")
        self.zoom_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.zoom_label.setMinimumWidth(
            self.zoom_label.fontMetrics().horizontalAdvance("Fit 100%") + 8)
        self.zoom_in_button = self._text_button("+", "Zoom in (+, Ctrl+wheel)", self.zoom_in)
        self.fit_button = self._text_button("Fit", "Fit the screenshot to the view (W)",
                                            self.zoom_fit)
        self.actual_button = self._text_button("1:1", "100%: one screen pixel per pixel (Z)",
                                               self.zoom_actual)
        self.full_screen_button = self._button(
            QStyle.StandardPixmap.SP_TitleBarMaxButton,
            "Full screen: the screenshot at full size in a window of its own "
            "(F or double-click; Esc closes)", self.open_full_screen)
        # The zoom controls share the header's row: in the row of step controls they
        # made the window wider than 1280 pixels.
        header_row = QHBoxLayout()
        header_row.setContentsMargins(0, 0, 0, 0)
        header_row.addWidget(self.verdict)
        header_row.addWidget(self.header, 1)
        for widget in (self.zoom_out_button, self.zoom_label, self.zoom_in_button,
                       self.fit_button, self.actual_button, self.full_screen_button):
            header_row.addWidget(widget)

        centre = QWidget()
        centre_layout = QVBoxLayout(centre)
        centre_layout.setContentsMargins(0, 0, 0, 0)
        centre_layout.addLayout(views, 1)
        centre_layout.addLayout(controls)

        self.step_model = StepListModel(self)
        self.step_list = QListView()
        self.step_list.setModel(self.step_model)
        self.step_list.setUniformItemSizes(True)
        self.step_list.setMinimumWidth(150)
        selection = self.step_list.selectionModel()
        assert selection is not None
        selection.currentRowChanged.connect(lambda current, _: self.go(current.row())
                                            if current.isValid() else None)

        self.actions_text = QTextBrowser()
        self.actions_text.setMinimumHeight(50)
        self.thought = QPlainTextEdit()
        self.thought.setReadOnly(True)
        self.thought.setPlaceholderText("the model's thought")
        self.raw = QPlainTextEdit()
        self.raw.setReadOnly(True)
        self.metrics = QTextBrowser()
        self.episode_info = QTextBrowser()
        self.details = QTabWidget()
        # short titles, all shown: tabs hidden behind scroll arrows are never found
        self.details.setUsesScrollButtons(False)
        self.details.addTab(self.thought, "Thought")
        self.details.addTab(self.raw, "Raw")
        self.prompt_view = PromptView(self.images)
        self.details.addTab(self.prompt_view, "Prompt")
        # The step's numbers and the episode's in one tab: four short tabs fit the
        # narrow column of a 1280-pixel screen, all in view.
        info = QSplitter(Qt.Orientation.Vertical)
        info.addWidget(self.metrics)
        info.addWidget(self.episode_info)
        self.details.addTab(info, "Info")
        for index, tip in enumerate(("The model's thought", "The model's whole response",
                                     "The chat the model received at this step",
                                     "Timings, tokens and rewards of this step, then the "
                                     "whole episode")):
            self.details.setTabToolTip(index, tip)
        self.details.currentChanged.connect(lambda _: self._show_prompt())
        text = QSplitter(Qt.Orientation.Vertical)
        actions_box = QWidget()
        actions_layout = QVBoxLayout(actions_box)
        actions_layout.setContentsMargins(0, 0, 0, 0)
        actions_layout.addWidget(QLabel("Actions"))
        actions_layout.addWidget(self.actions_text)
        text.addWidget(actions_box)
        text.addWidget(self.details)
        text.setStretchFactor(1, 2)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header_row)
        if compact:
            layout.addWidget(self.instruction)
            self.step_list.setMinimumWidth(90)
            # short as well: two sides and the table fit a window 768 pixels high
            self.step_list.setMinimumHeight(40)
            self.actions_text.setMinimumHeight(24)
            self.details.setMinimumHeight(60)
            # side by side in Compare: the tabs scroll rather than widen each side
            self.details.setUsesScrollButtons(True)
            lower = QSplitter(Qt.Orientation.Horizontal)
            lower.addWidget(self.step_list)
            lower.addWidget(text)
            self.side = lower
            self.splitter = QSplitter(Qt.Orientation.Vertical)
            self.splitter.addWidget(centre)
            self.splitter.addWidget(lower)
            self.splitter.setStretchFactor(0, 3)
            self.splitter.setStretchFactor(1, 1)
        else:
            # The screenshot takes the width; the steps, the text and (add_side) the
            # review share one column beside it.
            self.step_list.setMinimumHeight(60)
            # The instruction heads the column, wrapped: the screenshot keeps the
            # height a line above it would take.
            steps = QWidget()
            steps_layout = QVBoxLayout(steps)
            steps_layout.setContentsMargins(0, 0, 0, 0)
            steps_layout.addWidget(self.instruction)
            steps_layout.addWidget(self.step_list, 1)
            self.instruction.setStyleSheet("font-weight: bold")
            self.side = QSplitter(Qt.Orientation.Vertical)
            self.side.setChildrenCollapsible(False)
            self.side.addWidget(steps)
            self.side.addWidget(text)
            self.splitter = QSplitter(Qt.Orientation.Horizontal)
            self.splitter.addWidget(centre)
            self.splitter.addWidget(self.side)
            self.splitter.setStretchFactor(0, 1)
            self.splitter.setStretchFactor(1, 0)
            self.splitter.setSizes([900, SIDE_WIDTH])
        layout.addWidget(self.splitter, 1)
        self._enable(False)

    def add_side(self, widget: QWidget) -> None:
        """Put `widget` (the review panel) at the foot of the column beside the
        screenshot."""
        self.side.addWidget(widget)

    def _button(self, icon: QStyle.StandardPixmap, tip: str,
                slot: Callable[[], None]) -> QToolButton:
        button = QToolButton()
        style = self.style()
        assert style is not None
        button.setIcon(style.standardIcon(icon))
        button.setToolTip(tip)
        button.setAutoRaise(True)
        button.clicked.connect(slot)
        return button

    def _text_button(self, text: str, tip: str, slot: Callable[[], None]) -> QToolButton:
        button = QToolButton()
        button.setText(text)
        button.setToolTip(tip)
        button.setAutoRaise(True)
        button.clicked.connect(slot)
        return button

    def _enable(self, enabled: bool) -> None:
        for widget in (self.first_button, self.previous_button, self.play_button,
                       self.next_button, self.last_button, self.slider, self.speed,
                       self.zoom_out_button, self.zoom_in_button, self.fit_button,
                       self.actual_button, self.full_screen_button):
            widget.setEnabled(enabled)

    # -- loading ------------------------------------------------------------------------

    def load(self, episode_id: str, reviews: dict[int, StepReview] | None = None,
             index: int = 0) -> None:
        self.pause()
        episode = self.store.episodes.load(episode_id)
        if self.episode is None or self.episode.id != episode.id:
            self.before.zoom_fit()  # another episode: the whole screen first
        self.episode = episode
        self.reviews = dict(reviews or {})
        pointer: tuple[int, int] | None = None
        self.pointers = []
        for step in episode.steps:
            self.pointers.append(pointer)
            pointer = pointer_after(step.actions, pointer)
        self.playback.load(len(episode.steps), index)
        self.step_model.set_steps(episode.steps, self.reviews)
        self.slider.blockSignals(True)
        self.slider.setMaximum(max(len(episode.steps) - 1, 0))
        self.slider.blockSignals(False)
        self._enable(bool(episode.steps))
        self.header.setText(self._header_html(episode))
        self.header.setToolTip(self.header.text())
        self.instruction.setText(episode.instruction or "(no instruction)")
        self.instruction.setToolTip(episode.instruction)
        self.episode_info.setHtml(self._episode_html(episode))
        self._show()
        self.episode_loaded.emit(episode.id)

    def clear(self) -> None:
        self.pause()
        self.episode = None
        self.playback.load(0)
        self.step_model.set_steps([], {})
        self.header.setText("Choose an episode in the table.")
        self.instruction.setText("")
        for view in (self.before, self.after):
            view.set_image(None, "")
            view.set_marks([])
        for widget in (self.thought, self.raw):
            widget.setPlainText("")
        self.actions_text.setHtml("")
        self.metrics.setHtml("")
        self.episode_info.setHtml("")
        self._enable(False)

    def set_reviews(self, reviews: dict[int, StepReview]) -> None:
        self.reviews = dict(reviews)
        for index, review in reviews.items():
            self.step_model.set_review(index, review)
        self._show_marks()

    def set_review(self, index: int, review: StepReview) -> None:
        self.reviews[index] = review
        self.step_model.set_review(index, review)
        if index == self.playback.index:
            self._show_marks()

    def set_verdict(self, verdict: str | None) -> None:
        """Show the episode's verdict ("accept", "reject" or None) at the head."""
        text, colour, background = VERDICT_BADGES.get(verdict, VERDICT_BADGES[None])
        self.verdict.setText(text)
        self.verdict.setStyleSheet(f"color: {colour}; background: {background}; "
                                   "font-weight: bold; padding: 1px 6px; border-radius: 3px")
        self.verdict.show()

    @staticmethod
    def _header_html(episode: Episode) -> str:
        score = "unscored" if episode.score is None else f"score {episode.score:.2f}"
        bits = [episode.status, score, episode.source]
        if episode.policy_version is not None:
            bits.append(f"policy v{episode.policy_version}")
        if episode.run_id:
            bits.append(f"run {episode.run_id}")
        if episode.tags:
            bits.append("tags " + ", ".join(episode.tags))
        return f"<b>{html.escape(episode.task_id)}</b> · {html.escape(' · '.join(bits))}"

    @staticmethod
    def _episode_html(episode: Episode) -> str:
        rows = [("episode", episode.id), ("task", episode.task_id), ("status", episode.status),
                ("score", "–" if episode.score is None else f"{episode.score:g}"),
                ("source", episode.source), ("environment", episode.environment or "–"),
                ("policy version", "–" if episode.policy_version is None
                 else str(episode.policy_version)),
                ("run", episode.run_id or "–"), ("tags", ", ".join(episode.tags) or "–"),
                ("steps", str(len(episode.steps))), ("started", _time(episode.created_at)),
                ("finished", _time(episode.finished_at)),
                ("error" if episode.status != "done" else "note", episode.error or "–")]
        rows += [("command failed", line) for line in failed_command_lines(episode.info)]
        body = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>"
                       for k, v in rows)
        return f"<table cellspacing=4>{body}</table>"

    # -- stepping -----------------------------------------------------------------------

    @property
    def index(self) -> int:
        return self.playback.index

    def go(self, index: int) -> None:
        if self.episode is None:
            return
        if self.playback.go(index):
            self._show()

    def next(self) -> None:
        if self.playback.next():
            self._show()

    def previous(self) -> None:
        if self.playback.previous():
            self._show()

    def first(self) -> None:
        if self.playback.first():
            self._show()

    def last(self) -> None:
        if self.playback.last():
            self._show()

    def toggle_play(self) -> None:
        if self.playback.playing:
            self.pause()
            return
        if self.playback.toggle():
            self._show()
            self._timer.start(self.playback.interval_ms)
            self._play_icon(True)
            self.playing_changed.emit(True)

    def pause(self) -> None:
        was = self._timer.isActive()
        self.playback.playing = False
        self._timer.stop()
        self._play_icon(False)
        if was:
            self.playing_changed.emit(False)

    @property
    def playing(self) -> bool:
        return self.playback.playing

    def set_speed(self, speed: float) -> None:
        nearest = min(PLAY_SPEEDS, key=lambda s: abs(s - speed))
        self.speed.setCurrentIndex(PLAY_SPEEDS.index(nearest))

    def _speed_changed(self) -> None:
        self.playback.speed = float(self.speed.currentData())
        if self._timer.isActive():
            self._timer.start(self.playback.interval_ms)

    def _tick(self) -> None:
        if self.playback.tick():
            self._show()
        if not self.playback.playing:
            self.pause()

    def _play_icon(self, playing: bool) -> None:
        style = self.style()
        assert style is not None
        self.play_button.setIcon(style.standardIcon(
            QStyle.StandardPixmap.SP_MediaPause if playing else QStyle.StandardPixmap.SP_MediaPlay))

    def set_show_after(self, show: bool) -> None:
        self.show_after = show
        self.after_box.setVisible(show)
        self.before_title.setVisible(show)
        self._show_after_frame()
        self._sync_full_screen()

    # -- zoom and full screen -----------------------------------------------------------

    def zoom_in(self) -> None:
        self.before.zoom_in()  # the After pane follows through the link

    def zoom_out(self) -> None:
        self.before.zoom_out()

    def zoom_fit(self) -> None:
        self.before.zoom_fit()

    def zoom_actual(self) -> None:
        self.before.zoom_actual()

    def _show_zoom(self) -> None:
        self.zoom_label.setText(self.before.zoom_text())

    def open_full_screen(self) -> None:
        """The step's screenshot (and the one after it, when shown) at full size in a
        window of its own; it follows the steps until it is closed."""
        if self.full_screen is not None:
            self.full_screen.raise_()
            self.full_screen.activateWindow()
            return
        if self.current_step() is None:
            return
        window = ScreenshotWindow(self)
        window.step_requested.connect(self._step_from_full_screen)
        window.closed.connect(self._full_screen_closed)
        self.full_screen = window
        self._sync_full_screen()
        # Where the person zoomed in: that part, else the whole screen fitted (W there
        # fits, Z shows 100%).
        window.start_at(self.before.zoom_state())
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is not None:
            window.setGeometry(screen.geometry())
        window.showFullScreen()
        window.activateWindow()
        window.setFocus(Qt.FocusReason.ActiveWindowFocusReason)
        self.full_screen_opened.emit(window)

    def close_full_screen(self) -> None:
        if self.full_screen is not None:
            self.full_screen.close()

    def _full_screen_closed(self) -> None:
        self.full_screen = None
        window = self.window()
        if window is not None:
            window.activateWindow()  # the keys go back to the step view

    def _step_from_full_screen(self, command: str) -> None:
        {"previous": self.previous, "next": self.next, "first": self.first,
         "last": self.last, "play": self.toggle_play}[command]()

    def _sync_full_screen(self) -> None:
        window = self.full_screen
        if window is None:
            return
        panes = [(self.before_title.text(), self.before)]
        if self.show_after:
            panes.append((self.after_title.text(), self.after))
        episode = self.episode
        caption = "" if episode is None else (
            f"<b>{html.escape(episode.task_id)}</b> · step {self.playback.index + 1} / "
            f"{len(episode.steps)} · {html.escape(episode.instruction or '')}")
        window.show_panes(panes, caption)

    # -- showing a step -----------------------------------------------------------------

    def current_step(self) -> Step | None:
        if self.episode is None or not self.episode.steps:
            return None
        return self.episode.steps[self.playback.index]

    def _show(self) -> None:
        episode = self.episode
        step = self.current_step()
        if episode is None or step is None:
            if episode is not None:
                self.before.set_image(None, "this episode has no steps")
                self.position.setText("0 steps")
            return
        index = self.playback.index
        image, problem = self.images.image(step.frame)
        self.before.set_image(image, problem)
        self.before_title.setText(f"Step {index + 1}: the screen the model saw")
        self._show_marks()
        self._show_after_frame()
        parts = split_response(step.response)
        self.thought.setPlainText(parts.thought)
        self.raw.setPlainText(step.response)
        self._show_prompt()
        self.metrics.setHtml("<table cellspacing=4>" + "".join(
            f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>"
            for k, v in step_metrics(step)) + "</table>")
        self.position.setText(f"{index + 1} / {len(episode.steps)}")
        self.slider.blockSignals(True)
        self.slider.setValue(index)
        self.slider.blockSignals(False)
        selection = self.step_list.selectionModel()
        if selection is not None and selection.currentIndex().row() != index:
            # Signals stay on: the list repaints the rows it deselects from them (and
            # its currentRowChanged comes back to go(), which sees no move).
            selection.setCurrentIndex(self.step_model.index(index),
                                      QItemSelectionModel.SelectionFlag.ClearAndSelect)
            self.step_list.scrollTo(self.step_model.index(index))
        if index + 1 < len(episode.steps):
            self.images.prefetch(episode.steps[index + 1].frame)
        self.step_changed.emit(index)

    def _show_prompt(self) -> None:
        """The Prompt tab, built only while it is the one shown (it decodes screens)."""
        if self.details.currentWidget() is self.prompt_view:
            self.prompt_view.show_step(self.episode, self.playback.index)

    def _show_marks(self) -> None:
        step = self.current_step()
        if step is None:
            return
        marks, lines = overlay(step.actions, self.pointers[self.playback.index])
        self.current_marks, self.current_lines = marks, lines
        review = self.reviews.get(step.index)
        correction = corrected_point(review.corrected_actions) if review else None
        self.before.set_marks(marks, correction)
        self.actions_text.setHtml(actions_html(lines) + (
            f'<div style="color:#00a344">corrected to ({correction[0]}, {correction[1]})</div>'
            if correction else ""))

    def _show_after_frame(self) -> None:
        if not self.show_after or self.episode is None:
            return
        index = self.playback.index
        steps = self.episode.steps
        if index + 1 < len(steps):
            sha = steps[index + 1].frame
            self.after_title.setText(f"After: the screen at step {index + 2}")
        else:
            sha = self.episode.final_frame
            self.after_title.setText("After: the final screen")
        image, problem = self.images.image(sha)
        self.after.set_image(image, problem or "no screen recorded after this step")
