"""The Environments screen's snapshots of the chosen environment: take (the dialog says
first what a sandbox snapshot keeps, naming the applications open and those with unsaved
changes), revert with the time it took, rename, delete."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from PyQt6.QtCore import pyqtSignal
from PyQt6.QtWidgets import (
    QDialog,
    QGroupBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vm.providers.base import Snapshot
from workbench.app.models.record_table import Column, RecordTableModel
from workbench.app.pages.environments.environment_list import TRANSITIONS, EnvironmentList
from workbench.app.widgets.record_table import record_table_view
from workbench.app.widgets.snapshot_dialog import SnapshotDialog
from workbench.app.workers import Worker, Workers
from workbench.services.environments import EnvironmentManager, unsupported
from workbench.services.open_applications import OpenApplications, open_applications
from workbench.services.progress import TaskState
from workbench.services.sandboxes import RevertResult, SandboxInfo
from workbench.services.unsaved_changes import UnsavedCheck, unsaved_windows


def _size(size_bytes: int) -> str:
    size = float(size_bytes)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


SNAPSHOT_COLUMNS: tuple[Column[Snapshot], ...] = (
    Column("Name", lambda s: s.name, lambda s: s.description),
    Column("Created", lambda s: datetime.datetime.fromtimestamp(s.created).strftime(
        "%Y-%m-%d %H:%M:%S")),
    Column("Size", lambda s: _size(s.size_bytes), align_right=True),
    Column("Parent", lambda s: s.parent or ""),
    Column("Apps", lambda s: "; ".join(s.extra.get("apps", [])),
           lambda s: "\n".join(s.extra.get("apps", []))),
)

SANDBOX_SNAPSHOT_NOTE = (
    "A sandbox snapshot keeps the home folder's files and which applications are open.\n"
    "What an application has not saved to a file (unsaved edits, browser tabs, dialogs)\n"
    "is not part of it: a revert restarts the applications on the saved files.\n"
    "QEMU VM snapshots keep everything, memory included.")


def snapshot_note(info: SandboxInfo | None) -> str:
    """What the Take snapshot dialog says first: for a sandbox, what a snapshot keeps."""
    if info is not None and info.provider == "sandbox":
        return SANDBOX_SNAPSHOT_NOTE
    return ""


class SnapshotPanel(QGroupBox):
    """The snapshots of the environment chosen in `environment_list`. `reverting` carries
    what the screen says while a revert runs ("" once it is done); after any change the
    list is read again too (its Snapshot column)."""

    message = pyqtSignal(str)
    listed = pyqtSignal()
    reverting = pyqtSignal(str)
    reverted = pyqtSignal(object)  # RevertResult

    def __init__(self, manager: EnvironmentManager, workers: Workers,
                 environment_list: EnvironmentList, parent: QWidget | None = None) -> None:
        super().__init__("Snapshots", parent)
        self.manager = manager
        self.workers = workers
        self.environment_list = environment_list
        self.last_revert: RevertResult | None = None
        self.model: RecordTableModel[Snapshot] = RecordTableModel(SNAPSHOT_COLUMNS, self)
        self.view = record_table_view(self.model)
        self.view.doubleClicked.connect(lambda _: self._revert_clicked())
        self.buttons: dict[str, QPushButton] = {}
        self.tooltips: dict[str, str] = {}
        bar = QHBoxLayout()
        for text, tip, slot in (
                ("Take…", "Save the desktop's state as a snapshot", self._take_clicked),
                ("Revert", "Go back to the chosen snapshot (double-click does too)",
                 self._revert_clicked),
                ("Rename…", "Rename the chosen snapshot", self._rename_clicked),
                ("Delete", "Delete the chosen snapshot", self._delete_clicked)):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            self.buttons[text] = button
            self.tooltips[text] = tip
            bar.addWidget(button)
        self.revert_label = QLabel("")
        layout = QVBoxLayout(self)
        layout.addWidget(self.view)
        layout.addLayout(bar)
        layout.addWidget(self.revert_label)

    def update_buttons(self, busy: bool) -> None:
        """Take and revert need a running desktop, and none while `busy` (a demonstration
        has it); what the kind cannot do says why."""
        info = self.environment_list.current_info()
        running = info is not None and info.status == "running"
        settled = info is not None and info.status not in TRANSITIONS
        enabled = {"Take…": running and not busy, "Revert": running and not busy,
                   "Rename…": settled, "Delete": settled}
        for text, on in enabled.items():
            button = self.buttons[text]
            why = "" if info is None else unsupported(info, "snapshots")
            button.setEnabled(on and not why)
            button.setToolTip(f"Not for {info.name}: {why}" if why and info is not None
                              else self.tooltips[text])

    def _run(self, title: str, work: Callable[[TaskState], Any],
             on_done: Callable[[Any], None] | None = None) -> Worker:
        return self.workers.submit(title, work, on_done=on_done,
                                   on_failed=lambda error: self.message.emit(error))

    # -- the list of snapshots ----------------------------------------------------------

    def current_snapshot(self) -> str | None:
        index = self.view.currentIndex()
        return self.model.record(index.row()).name if index.isValid() else None

    def select_snapshot(self, snapshot: str) -> bool:
        for row, record in enumerate(self.model.records):
            if record.name == snapshot:
                self.view.setCurrentIndex(self.model.index(row, 0))
                return True
        return False

    def clear(self) -> None:
        self.model.set_records([])

    def refresh(self) -> Worker | None:
        name = self.environment_list.current_name()
        if name is None:
            self.clear()
            return None
        return self._run(f"Reading snapshots of {name}",
                         lambda state: self.manager.snapshots(name), self._listed)

    def _listed(self, snapshots: Any) -> None:
        chosen = self.current_snapshot()
        self.model.set_records(snapshots)
        if chosen is not None:
            self.select_snapshot(chosen)
        done = self.last_revert
        if done is not None and (done.sandbox != self.environment_list.current_name()
                                 or done.snapshot not in {s.name for s in snapshots}):
            self.revert_label.setText("")  # never name a snapshot deleted or renamed since
        self.listed.emit()

    # -- changing them ------------------------------------------------------------------

    def take(self, snapshot: str, description: str = "") -> Worker | None:
        name = self.environment_list.current_name()
        if name is None:
            return None
        return self._run(f"Taking snapshot {snapshot} of {name}",
                         lambda state: self.manager.take_snapshot(name, snapshot, description),
                         self._changed(f"snapshot {snapshot} taken"))

    def revert(self, snapshot: str) -> Worker | None:
        name = self.environment_list.current_name()
        if name is None:
            return None
        self.reverting.emit(f"reverting to {snapshot}…")
        return self._run(f"Reverting {name} to {snapshot}",
                         lambda state: self.manager.revert(name, snapshot), self._reverted)

    def _reverted(self, result: Any) -> None:
        assert isinstance(result, RevertResult)
        self.last_revert = result
        text = f"reverted {result.sandbox} to {result.snapshot} in {result.seconds:.2f} s"
        self.revert_label.setText(text)
        self.reverting.emit("")
        self.message.emit(text)
        self.reverted.emit(result)
        self.environment_list.refresh()

    def rename(self, old: str, new: str) -> Worker | None:
        name = self.environment_list.current_name()
        if name is None:
            return None
        return self._run(f"Renaming snapshot {old}",
                         lambda state: self.manager.rename_snapshot(name, old, new),
                         self._changed(f"snapshot {old} renamed to {new}"))

    def delete(self, snapshot: str) -> Worker | None:
        name = self.environment_list.current_name()
        if name is None:
            return None
        return self._run(f"Deleting snapshot {snapshot}",
                         lambda state: self.manager.delete_snapshot(name, snapshot),
                         self._changed(f"snapshot {snapshot} deleted"))

    def _changed(self, text: str) -> Callable[[Any], None]:
        def done(_: Any) -> None:
            self.message.emit(text)
            self.environment_list.refresh()  # the list's Snapshot column too, then these
            self.refresh()
        return done

    # -- the buttons --------------------------------------------------------------------

    def _take_clicked(self) -> None:
        name = self.environment_list.current_name()
        if name is None:
            return
        note = snapshot_note(self.environment_list.current_info())
        if not note:  # a VM snapshot keeps the running applications, unsaved edits too
            self._ask(name, note, (UnsavedCheck(), OpenApplications()))
            return
        # A sandbox snapshot keeps files, not what applications hold: say which windows
        # show unsaved changes and which applications are open before the name is asked.
        provider = self.manager.provider(name)
        self._run(f"Checking {name} for unsaved changes",
                  lambda state: (unsaved_windows(provider), open_applications(provider)),
                  lambda checks: self._ask(name, note, checks))

    def _ask(self, name: str, note: str, checks: tuple[UnsavedCheck, OpenApplications]
             ) -> None:
        unsaved, running = checks
        dialog = SnapshotDialog(name, note, self, unsaved=unsaved.describe(),
                                running=running.describe())
        if dialog.exec() == QDialog.DialogCode.Accepted:
            snapshot, description = dialog.values()
            if snapshot:
                self.take(snapshot, description)

    def _revert_clicked(self) -> None:
        snapshot = self.current_snapshot()
        info = self.environment_list.current_info()
        if snapshot is not None and info is not None and info.status == "running":
            self.revert(snapshot)

    def _rename_clicked(self) -> None:
        old = self.current_snapshot()
        if old is None:
            return
        new, ok = QInputDialog.getText(self, "Rename snapshot", f"New name for {old}:",
                                       text=old)
        if ok and new.strip() and new.strip() != old:
            self.rename(old, new.strip())

    def _delete_clicked(self) -> None:
        snapshot = self.current_snapshot()
        name = self.environment_list.current_name()
        if snapshot is None or name is None:
            return
        answer = QMessageBox.question(
            self, "Delete snapshot",
            f"Delete snapshot {snapshot} of {name}? It cannot be brought back.")
        if answer == QMessageBox.StandardButton.Yes:
            self.delete(snapshot)
