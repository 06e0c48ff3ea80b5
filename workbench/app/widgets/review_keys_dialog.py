"""The one-key review: which single key accepts, rejects and skips an episode (the
Ctrl+Shift chords keep working), whether a verdict opens the next unreviewed episode, and
the dialog that changes them. A key another command already uses is refused by name."""

from __future__ import annotations

from PyQt6.QtGui import QKeySequence
from PyQt6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QKeySequenceEdit,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from workbench.app.actions import COMMANDS, AppActions
from workbench.app.settings import AppSettings

VERDICT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("accept_episode", "Accept"), ("reject_episode", "Reject"), ("skip_episode", "Skip"))
Native = QKeySequence.SequenceFormat.PortableText


def default_key(command: str) -> str:
    """The command's declared single key (its first shortcut)."""
    declared = next(c for c in COMMANDS if c.name == command)
    return declared.shortcuts[0]


def review_keys(settings: AppSettings) -> dict[str, str]:
    """command -> the single key in use (the setting, else the declared one)."""
    return {name: settings.review_key(name) or default_key(name)
            for name, _ in VERDICT_COMMANDS}


def apply_review_keys(commands: AppActions, keys: dict[str, str]) -> None:
    """Bind each verdict command to its key, keeping its other declared shortcuts."""
    for name, key in keys.items():
        declared = next(c for c in COMMANDS if c.name == name)
        others = [s for s in declared.shortcuts[1:] if s != key]
        commands[name].setShortcuts([QKeySequence(s) for s in (key, *others)])


def key_clash(commands: AppActions, command: str, key: str,
              chosen: dict[str, str] | None = None) -> str | None:
    """The text of another command bound to `key` (among the app's actions and the keys
    chosen beside it in the dialog); None when the key is free."""
    wanted = QKeySequence(key)
    for name, other in (chosen or {}).items():
        if name != command and QKeySequence(other) == wanted:
            return commands[name].text().replace("&", "")
    for name, action in commands.actions.items():
        if name == command or (chosen is not None and name in chosen):
            continue
        if any(s == wanted for s in action.shortcuts()):
            return action.text().replace("&", "")
    return None


class ReviewKeysDialog(QDialog):
    """Three single keys and the advance switch; OK keeps them only when no key clashes."""

    def __init__(self, commands: AppActions, settings: AppSettings,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Review keys")
        self.commands = commands
        self.settings = settings
        self.edits: dict[str, QKeySequenceEdit] = {}
        form = QFormLayout()
        for name, title in VERDICT_COMMANDS:
            edit = QKeySequenceEdit(QKeySequence(review_keys(settings)[name]))
            edit.setMaximumSequenceLength(1)
            edit.setClearButtonEnabled(True)
            self.edits[name] = edit
            form.addRow(title, edit)
        self.advance = QCheckBox("After a verdict, open the next unreviewed episode")
        self.advance.setChecked(settings.advance_after_verdict)
        self.problem = QLabel("")
        self.problem.setStyleSheet("color: #b3261e")
        self.problem.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel
                                   | QDialogButtonBox.StandardButton.RestoreDefaults)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        defaults = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        if defaults is not None:
            defaults.clicked.connect(self.restore_defaults)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("One key each; Ctrl+Shift+A and Ctrl+Shift+R keep working."))
        layout.addLayout(form)
        layout.addWidget(self.advance)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)

    def chosen(self) -> dict[str, str]:
        return {name: edit.keySequence().toString(Native) or default_key(name)
                for name, edit in self.edits.items()}

    def restore_defaults(self) -> None:
        for name, edit in self.edits.items():
            edit.setKeySequence(QKeySequence(default_key(name)))
        self.advance.setChecked(True)

    def problem_text(self) -> str:
        chosen = self.chosen()
        for name, title in VERDICT_COMMANDS:
            clash = key_clash(self.commands, name, chosen[name], chosen)
            if clash is not None:
                return f"{title}: {chosen[name]} is already the key of “{clash}”."
        return ""

    def accept(self) -> None:
        problem = self.problem_text()
        self.problem.setText(problem)
        if problem:
            return
        chosen = self.chosen()
        for name, key in chosen.items():
            self.settings.set_review_key(name, "" if key == default_key(name) else key)
        self.settings.advance_after_verdict = self.advance.isChecked()
        apply_review_keys(self.commands, chosen)
        super().accept()
