"""Take a snapshot: its name, an optional description (kept with it, shown in the list),
and for a sandbox what a snapshot keeps and what it does not, the applications open now
named."""

from __future__ import annotations

from PyQt6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

MIN_WIDTH = 460  # the title and the note are read whole


class SnapshotDialog(QDialog):
    """`unsaved`: what the open applications hold unsaved now (said before the name is
    asked, so that the person can cancel and save first); `running`: the applications
    open now, whose memory the snapshot does not keep."""

    def __init__(self, environment: str, note: str = "", parent: QWidget | None = None,
                 unsaved: str = "", running: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Take a snapshot of {environment}")
        self.setMinimumWidth(max(MIN_WIDTH, self.fontMetrics().horizontalAdvance(
            self.windowTitle()) + 160))  # window managers add buttons beside the title
        self.note = QLabel(note)
        self.note.setWordWrap(True)
        self.note.setVisible(bool(note))
        self.unsaved = QLabel(unsaved)
        self.unsaved.setWordWrap(True)
        self.unsaved.setStyleSheet("color: #b3261e; font-weight: bold")
        self.unsaved.setVisible(bool(unsaved))
        self.running = QLabel(running)
        self.running.setWordWrap(True)
        self.running.setVisible(bool(running))
        self.name = QLineEdit()
        self.name.setPlaceholderText("e.g. calc-ready")
        self.description = QPlainTextEdit()
        self.description.setPlaceholderText("what is on the desktop (optional)")
        self.description.setFixedHeight(self.fontMetrics().lineSpacing() * 4)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.name.textChanged.connect(self._name_changed)
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("Description", self.description)
        layout = QVBoxLayout(self)
        layout.addWidget(self.unsaved)
        layout.addWidget(self.note)
        layout.addWidget(self.running)
        layout.addLayout(form)
        layout.addWidget(self.buttons)
        self._name_changed(self.name.text())

    def _name_changed(self, text: str) -> None:
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        if ok is not None:
            ok.setEnabled(bool(text.strip()))

    def values(self) -> tuple[str, str]:
        """(name, description), stripped."""
        return self.name.text().strip(), self.description.toPlainText().strip()
