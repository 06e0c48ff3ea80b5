"""Keys a person did not mean as text never become text (issue 47, item 2): 260 random
keys at 1280x720 on the demo workspace, with the focus moved at random (a click on a
widget in view, focus the app itself moves, a dialog opened and cancelled: Ctrl+Q asks
as a running trainer does, exports ask for a folder), and no note, score or text field
may change unless the person opened that field (a click, Tab, or N/Shift+N) and sees it.

The oracle watches every focus change: a text field counts as opened from a FocusIn by
the mouse, Tab or a command until it loses the focus; a field the window hands the focus
back to (after a dialog) is not opened. Typing is allowed only into the field holding the
focus that is opened and in view (its middle not covered or scrolled away). After each
key, any text field whose text changed must be that field, or show what is stored (the
note of the step or episode shown, the score override), and every note and score in the
store must be what it was or a text typed where it was allowed. Seeded: the same keys,
focus moves and dialogs each run; the loop waits on conditions, never on a clock."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from PyQt6.QtCore import QEvent, QObject, Qt
from PyQt6.QtGui import QFocusEvent
from PyQt6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDialog,
    QDoubleSpinBox,
    QLineEdit,
    QWidget,
)

from tests.cancelled_dialogs import ask_before_quitting, cancel_file_dialogs
from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    open_active_window,
    open_window,
    settings_file_fixture,
)
from workbench.services.review import Reviewer

KEYS_PRESSED = 260
SEED = int(os.environ.get("RANDOM_KEYS_SEED", "47"))  # another seed: another run
Key, Mod, Reason = Qt.Key, Qt.KeyboardModifier, Qt.FocusReason
OPENING = (Reason.MouseFocusReason, Reason.TabFocusReason, Reason.BacktabFocusReason,
           Reason.ShortcutFocusReason)  # a person put the keys there (a click, Tab, N)
LETTERS = [getattr(Key, f"Key_{c}") for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
OTHER_KEYS = [Key.Key_0, Key.Key_1, Key.Key_2, Key.Key_3, Key.Key_Space, Key.Key_Return,
              Key.Key_Escape, Key.Key_Tab, Key.Key_Backspace, Key.Key_Left, Key.Key_Right,
              Key.Key_Up, Key.Key_Down, Key.Key_Home, Key.Key_End, Key.Key_Question,
              Key.Key_F1, Key.Key_Minus, Key.Key_Plus]
DIALOG_CHORDS = [(Key.Key_Q, Mod.ControlModifier),  # quit: asked, cancelled
                 (Key.Key_E, Mod.ControlModifier)]  # export: a folder asked for, cancelled
CHORDS = [(Key.Key_D, Mod.ControlModifier),  # compare
          (Key.Key_A, Mod.ControlModifier | Mod.ShiftModifier),
          (Key.Key_R, Mod.ControlModifier | Mod.ShiftModifier),
          (Key.Key_N, Mod.ShiftModifier)]


def text_of(widget: QWidget | None) -> QLineEdit | None:
    """The line a key typed into `widget` would change, if it is a text field."""
    if isinstance(widget, QLineEdit):
        return None if widget.isReadOnly() else widget
    if isinstance(widget, QAbstractSpinBox) or (isinstance(widget, QComboBox)
                                                and widget.isEditable()):
        return widget.lineEdit()
    return None


def seen(widget: QWidget) -> bool:
    """The test's own view of "a person sees it": shown in the active window, its middle
    not covered by another widget nor scrolled out of its scroll area."""
    window = widget.window()
    if not widget.isVisible() or window is None or QApplication.activeWindow() is not window:
        return False
    hit = window.childAt(widget.mapTo(window, widget.rect().center()))
    return hit is not None and (hit is widget or widget.isAncestorOf(hit))


class FocusWatch(QObject):
    """Which text field a person opened: set by a FocusIn for a reason in OPENING, gone
    when it loses the focus."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: QWidget | None = None

    def eventFilter(self, watched: QObject | None, event: QEvent | None) -> bool:
        if event is None or not isinstance(watched, QWidget) \
                or not isinstance(event, QFocusEvent):
            return False
        if event.type() == QEvent.Type.FocusIn:
            if watched is not QApplication.focusWidget():
                return False  # a window shown but not active: the keys stay where they were
            opened = event.reason() in OPENING and text_of(watched) is not None
            self.opened = watched if opened else None
        elif event.type() == QEvent.Type.FocusOut and watched is self.opened:
            self.opened = None
        return False


Stored = dict[tuple[str, int | None], tuple[str, float | None]]


def stored(reviewer: Reviewer, ids: list[str]) -> Stored:
    """Every note and score override in the store, by (episode, step or None)."""
    out: Stored = {}
    for episode_id in ids:
        episode = reviewer.episode(episode_id)
        out[(episode_id, None)] = (episode.note, episode.score_override)
        for index, step in reviewer.steps(episode_id).items():
            out[(episode_id, index)] = (step.note, None)
    return out


def texts(window: QWidget) -> dict[int, tuple[QLineEdit, str]]:
    return {id(line): (line, line.text()) for line in window.findChildren(QLineEdit)}


def test_random_keys_never_type_into_a_field_nobody_opened(
        qtbot: Any, demo: DemoWorkspace, settings_file: Path, monkeypatch: Any) -> None:
    window = open_active_window(qtbot, settings_file, demo.path, (1280, 720))
    page = window.trajectories
    assert page is not None
    question = ask_before_quitting(monkeypatch, qtbot, window)
    exports = cancel_file_dialogs(monkeypatch, qtbot, window)
    reviewer = Reviewer(demo.store)
    ids = [demo.rollout, demo.failed, demo.human, demo.error, demo.imported]
    watch = FocusWatch()
    app = QApplication.instance()
    assert app is not None
    app.installEventFilter(watch)
    rng = random.Random(SEED)
    typed: set[str] = {""}  # every text typed where typing was allowed
    scores: set[float | None] = {None}
    problems: list[str] = []
    events: list[str] = []
    typed_keys = 0  # keys pressed into a field opened and in view

    def focusable() -> list[QWidget]:
        return [w for w in page.findChildren(QWidget)
                if w.focusPolicy() != Qt.FocusPolicy.NoFocus and w.isEnabled() and seen(w)
                and not isinstance(w, QAbstractButton)]

    def move_focus() -> None:
        """Where the focus goes between keys: a click on a widget in view (a text field
        clicked is opened), or the app moving it (never into a text field)."""
        widgets = focusable()
        if not widgets:
            return
        widget = rng.choice(widgets)
        if rng.random() < 0.5:
            widget.setFocus(Reason.MouseFocusReason)
            events.append(f"click {type(widget).__name__}")
        elif text_of(widget) is None:
            widget.setFocus(Reason.OtherFocusReason)
            events.append(f"focus {type(widget).__name__}")

    def settle() -> None:
        """No dialog left open, a window active, play paused, the search applied."""
        for player in (page.player, *page.compare_view.players):
            player.pause()  # stepping on a clock would make the run depend on timing
        dialog = QApplication.activeModalWidget() or QApplication.activeWindow()
        if isinstance(dialog, QDialog) and dialog is not window:
            dialog.reject()  # the key list (?, F1), shut as Esc would
            qtbot.waitUntil(lambda: not dialog.isVisible())
            window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is not None
                        and QApplication.focusWidget() is not None)
        qtbot.waitUntil(lambda: page.rows.selection.text
                        == page.filter_bar.search.text().strip())
        if window.current_screen() != "trajectories":
            window.show_screen("trajectories")
        focus = QApplication.focusWidget()
        if focus is not None and focus.window() is window and not page.isAncestorOf(focus):
            page.player.before.setFocus(Reason.OtherFocusReason)  # not the screen list
            qtbot.waitUntil(page.player.before.hasFocus)

    def check(key_text: str, allowed: QLineEdit | None,
              before_texts: dict[int, tuple[QLineEdit, str]], before_store: Stored) -> None:
        after_store = stored(reviewer, ids)
        notes = {note for note, _ in after_store.values()}
        overrides = {score for _, score in after_store.values()}
        for key, (line, text) in texts(window).items():
            old = before_texts.get(key, (line, text))[1]
            if text == old:
                continue
            if line is allowed:
                typed.add(text.strip())
                continue
            shows_stored = text.strip() in notes | typed or text in ("", "any", "none")
            spin = line.parentWidget()
            if isinstance(spin, QDoubleSpinBox):  # the score override shown
                shows_stored = shows_stored or any(
                    o is not None and abs(spin.value() - o) < 1e-9 for o in overrides)
            if not shows_stored:
                problems.append(f"{key_text}: {line.objectName() or type(line.parentWidget())}"
                                f" changed {old!r} -> {text!r}, not the field opened and in view")
        typed_in = allowed.parentWidget() if allowed is not None else None
        if isinstance(typed_in, QDoubleSpinBox):
            scores.add(round(typed_in.value(), 2))
        for place, (note, score) in after_store.items():
            old_note, old_score = before_store.get(place, ("", None))
            if note != old_note and note not in typed:
                problems.append(f"{key_text}: the note of {place} became {note!r}, typed "
                                "where nobody opened a field")
            if score != old_score and score not in scores:
                problems.append(f"{key_text}: the score override of {place} became {score}")

    settle()
    for number in range(KEYS_PRESSED):
        if rng.random() < 0.2:
            move_focus()
        roll = rng.random()
        if roll < 0.05:
            key, modifier = rng.choice(DIALOG_CHORDS)
        elif roll < 0.1:
            key, modifier = rng.choice(CHORDS)
        elif roll < 0.7:
            key, modifier = rng.choice(LETTERS), Mod.NoModifier
        else:
            key, modifier = rng.choice(OTHER_KEYS), Mod.NoModifier
        focus = QApplication.focusWidget()
        assert focus is not None
        line = text_of(focus)
        allowed = line if line is not None and watch.opened is focus and seen(focus) else None
        key_text = f"key {number} {Qt.Key(key).name}+{modifier} into " \
                   f"{type(focus).__name__}{' (typing allowed)' if allowed else ''}"
        events.append(key_text)
        typed_keys += allowed is not None
        before_texts, before_store = texts(window), stored(reviewer, ids)
        qtbot.keyClick(focus, key, modifier)
        settle()
        check(key_text, allowed, before_texts, before_store)
        if problems:
            break
    app.removeEventFilter(watch)
    question.asking = False
    assert not problems, "\n".join([*problems, "the keys and focus moves before:",
                                     *events[-14:]])
    # not a run that never typed: fields were opened and typed in, dialogs cancelled
    assert typed_keys >= 10 and question.asked >= 1 and len(exports) >= 1, \
        (typed_keys, question.asked, exports)
