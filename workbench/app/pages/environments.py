"""The Environments screen: the workspace's sandboxes, QEMU VMs and remote OSWorld VMs
(workbench.services.environments) with their status (start, stop, restart, create a
sandbox, add or remove a VM in environments.toml; the list is read again every few
seconds while shown; what a kind cannot do is disabled with the reason), the chosen one's
screen live with manual control, its snapshots (take, revert with the time it took,
rename, delete), and the recording of a person's demonstration of a task
(workbench.services.demo_recorder). Everything that may take a moment runs in a worker;
the live view grabs screenshots on a thread of its own; a demonstration's setup, actions
and evaluation run one after another on a thread of their own."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PyQt6.QtCore import QModelIndex, Qt, QThreadPool, QTimer, pyqtSignal
from PyQt6.QtGui import QHideEvent, QImage, QShowEvent
from PyQt6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QCompleter,
    QDialog,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from trainer.store import Store
from vm.actions import Action
from vm.env import DesktopEnv
from vm.providers.base import Provider, Snapshot
from vm.tasks import Task, bundled_suite
from workbench.app.models.record_table import Column, RecordTableModel
from workbench.app.widgets.add_vm_dialog import AddVmDialog
from workbench.app.widgets.live_view import LiveFeed, LiveView
from workbench.app.widgets.record_table import record_table_view
from workbench.app.widgets.snapshot_dialog import SnapshotDialog
from workbench.app.workers import Worker, Workers
from workbench.services.demo_recorder import (
    DemoRecorder,
    DemoResult,
    Ending,
    add_to_success_pool,
)
from workbench.services.environments import EnvironmentManager, Listing, unsupported
from workbench.services.progress import TaskState
from workbench.services.sandboxes import RevertResult, SandboxInfo
from workbench.services.unsaved_changes import UnsavedCheck, unsaved_windows
from workbench.services.vm_registry import VmKind

LIST_REFRESH_MS = 3000  # the environment list is read again this often while shown
TRANSITIONS = ("starting", "stopping")  # a VM booting or shutting down: hands off


def _size(size_bytes: int) -> str:
    size = float(size_bytes)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


WARNING_COLOR = "#b00020"


def warning_lines(infos: list[SandboxInfo]) -> list[str]:
    """One line per warning of each environment (a sandbox without namespaces or without
    its resource limits: SandboxInfo.warnings), named."""
    return [f"⚠ {info.name}: {warning}" for info in infos for warning in info.warnings]


SANDBOX_COLUMNS: tuple[Column[SandboxInfo], ...] = (
    Column("Name", lambda s: f"⚠ {s.name}" if s.warnings else s.name,
           lambda s: "\n".join(s.warnings),
           color=lambda s: WARNING_COLOR if s.warnings else None),
    Column("Status", lambda s: s.status, lambda s: s.detail),
    Column("Provider", lambda s: s.provider),
    Column("Screen", lambda s: f"{s.width}×{s.height}" if s.width else ""),
    Column("Display / URL", lambda s: s.display),
    Column("Snapshot", lambda s: s.snapshot or "", lambda s: f"{s.snapshots} snapshot(s)"),
)
SNAPSHOT_COLUMNS: tuple[Column[Snapshot], ...] = (
    Column("Name", lambda s: s.name, lambda s: s.description),
    Column("Created", lambda s: datetime.datetime.fromtimestamp(s.created).strftime(
        "%Y-%m-%d %H:%M:%S")),
    Column("Size", lambda s: _size(s.size_bytes), align_right=True),
    Column("Parent", lambda s: s.parent or ""),
    Column("Apps", lambda s: "; ".join(s.extra.get("apps", [])),
           lambda s: "\n".join(s.extra.get("apps", []))),
)


def close_question(sandboxes: list[str], vms: list[str]) -> str:
    """What quitting the app does to the environments still running."""
    lines = []
    if vms:
        lines.append(f"{len(vms)} QEMU VM(s) run inside the app: {', '.join(vms)}. "
                     "They shut down when it closes (their snapshots stay).")
    if sandboxes:
        lines.append(f"{len(sandboxes)} sandbox(es) are running: {', '.join(sandboxes)}. "
                     "They keep running after the app closes unless you stop them (a "
                     "training run or the command line may be using some).")
    return "\n\n".join(lines)


class EnvironmentsPage(QWidget):
    message = pyqtSignal(str)
    sandboxes_listed = pyqtSignal()
    snapshots_listed = pyqtSignal()
    reverted = pyqtSignal(object)  # RevertResult
    tasks_listed = pyqtSignal()
    suite_opened = pyqtSignal(QDialog)  # a task suite's dialog, about to be shown
    recording_started = pyqtSignal(str)  # the demonstration's episode id
    step_recorded = pyqtSignal(int)  # the index of the step an action went into
    demonstration_finished = pyqtSignal(object)  # DemoResult
    demonstration_discarded = pyqtSignal(str)  # the episode id
    demonstration_pooled = pyqtSignal(str)  # the episode id

    def __init__(self, workspace: Path, workers: Workers, parent: QWidget | None = None,
                 *, store: Store | None = None, author: str = "") -> None:
        super().__init__(parent)
        self.manager = EnvironmentManager(workspace)
        self.workers = workers
        self.store = store
        self.author = author
        self.feed: LiveFeed | None = None
        self.last_revert: RevertResult | None = None
        # The list's periodic re-read runs quietly (not in the status bar). These Workers
        # have no Qt parent on purpose: a running worker keeps its Workers alive, so work
        # still in flight when the page goes never reports to a deleted object.
        self.quiet_workers = Workers()
        self._listing = False
        self.list_timer = QTimer(self)
        self.list_timer.setInterval(LIST_REFRESH_MS)
        self.list_timer.timeout.connect(self.auto_refresh)
        # A demonstration's setup, actions and evaluation run in order on one thread.
        self.demo_pool = QThreadPool(self)
        self.demo_pool.setMaxThreadCount(1)
        self.demo_workers = Workers(self.demo_pool)
        self.tasks: dict[str, Task] = {}
        self.bundled: list[Task] = []  # the bundled suite, by id
        self.suite_tasks: list[Task] = []  # chosen from task suites ("From a suite…")
        self.recorder: DemoRecorder | None = None
        self.demo_state = "idle"  # idle | starting | recording | finishing
        self.last_demo: DemoResult | None = None
        self._control_before = False
        self._envs: dict[str, DesktopEnv] = {}  # one per sandbox demonstrations ran on
        self._shut_down = False
        self._build()
        self.refresh()
        self._load_tasks()

    # -- layout -------------------------------------------------------------------------

    def _build(self) -> None:
        self.sandbox_model: RecordTableModel[SandboxInfo] = RecordTableModel(SANDBOX_COLUMNS,
                                                                             self)
        self.sandbox_view = record_table_view(self.sandbox_model)
        selection = self.sandbox_view.selectionModel()
        assert selection is not None
        selection.currentRowChanged.connect(self._sandbox_chosen)
        self.new_name = QLineEdit()
        self.new_name.setPlaceholderText("new sandbox name")
        buttons: list[tuple[str, str, Callable[[], object]]] = [
            ("Create", "Create and start a sandbox with this name", self._create_clicked),
            ("Start", "Start the chosen environment", lambda: self.start(self.current_name())),
            ("Stop", "Stop it (a sandbox's home folder, a VM's disk and the snapshots stay)",
             lambda: self.stop(self.current_name())),
            ("Restart", "Stop and start it", lambda: self.restart(self.current_name())),
            ("Refresh", "Read the list again", self.refresh),
            ("Add VM…", "List a QEMU VM or a remote OSWorld VM in the workspace's "
             "environments.toml", self._add_vm_clicked),
            ("Remove", "Take the chosen VM out of environments.toml (its image and files "
             "stay)", self._remove_clicked),
        ]
        self.sandbox_buttons: dict[str, QPushButton] = {}
        create_bar, sandbox_bar = QHBoxLayout(), QHBoxLayout()
        sandbox_bar.setSpacing(4)  # its seven buttons and the screen fit 1280 pixels
        create_bar.addWidget(self.new_name, 1)
        self.new_name.returnPressed.connect(self._create_clicked)
        for text, tip, slot in buttons:
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            self.sandbox_buttons[text] = button
            (create_bar if text in ("Create", "Add VM…") else sandbox_bar).addWidget(button)
        self.tooltips = {text: tip for text, tip, _ in buttons}
        # What is wrong with environments.toml, shown until the file is fixed.
        self.problem_label = QLabel("")
        self.problem_label.setWordWrap(True)
        self.problem_label.setStyleSheet("color: #b00020")
        self.problem_label.hide()
        # Every sandbox that runs without namespaces or without its limits, said plainly.
        self.warning_label = QLabel("")
        self.warning_label.setWordWrap(True)
        self.warning_label.setStyleSheet(f"color: {WARNING_COLOR}; font-weight: bold")
        self.warning_label.hide()
        sandbox_box = QGroupBox("Environments")
        sandbox_layout = QVBoxLayout(sandbox_box)
        sandbox_layout.addWidget(self.problem_label)
        sandbox_layout.addWidget(self.warning_label)
        sandbox_layout.addWidget(self.sandbox_view)
        sandbox_layout.addLayout(sandbox_bar)
        sandbox_layout.addLayout(create_bar)

        self.snapshot_model: RecordTableModel[Snapshot] = RecordTableModel(SNAPSHOT_COLUMNS,
                                                                           self)
        self.snapshot_view = record_table_view(self.snapshot_model)
        self.snapshot_view.doubleClicked.connect(lambda _: self._revert_clicked())
        self.snapshot_buttons: dict[str, QPushButton] = {}
        snapshot_bar = QHBoxLayout()
        for text, tip, slot in (
                ("Take…", "Save the desktop's state as a snapshot", self._take_clicked),
                ("Revert", "Go back to the chosen snapshot (double-click does too)",
                 self._revert_clicked),
                ("Rename…", "Rename the chosen snapshot", self._rename_clicked),
                ("Delete", "Delete the chosen snapshot", self._delete_clicked)):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            self.snapshot_buttons[text] = button
            self.tooltips[text] = tip
            snapshot_bar.addWidget(button)
        self.revert_label = QLabel("")
        snapshot_box = QGroupBox("Snapshots")
        snapshot_layout = QVBoxLayout(snapshot_box)
        snapshot_layout.addWidget(self.snapshot_view)
        snapshot_layout.addLayout(snapshot_bar)
        snapshot_layout.addWidget(self.revert_label)

        self.live = LiveView()
        self.live_switch = QCheckBox("Live")
        self.live_switch.setChecked(True)
        self.live_switch.setToolTip("Show the screen as it changes")
        self.live_switch.toggled.connect(lambda _: self._restart_feed())
        self.control_switch = QCheckBox("Control")
        self.control_switch.setToolTip("Mouse and keyboard on the picture go to the "
                                       "environment as actions")
        self.control_switch.toggled.connect(self.live.set_control)
        self.live.action.connect(self.perform)
        self.rate = QLabel("")
        self.live_status = QLabel("")
        live_bar = QHBoxLayout()
        live_bar.addWidget(self.live_switch)
        live_bar.addWidget(self.control_switch)
        live_bar.addStretch(1)
        live_bar.addWidget(self.live_status)
        live_bar.addWidget(self.rate)
        live_box = QGroupBox("Screen")
        live_layout = QVBoxLayout(live_box)
        live_layout.addLayout(live_bar)
        live_layout.addWidget(self.live, 1)
        live_layout.addWidget(self._build_demo_box())

        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(sandbox_box)
        left.addWidget(snapshot_box)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(live_box)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setSizes([480, 900])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.splitter)
        self._update_buttons()

    # -- the list -----------------------------------------------------------------------

    def current_name(self) -> str | None:
        index = self.sandbox_view.currentIndex()
        if not index.isValid():
            return None
        return self.sandbox_model.record(index.row()).name

    def current_info(self) -> SandboxInfo | None:
        index = self.sandbox_view.currentIndex()
        return self.sandbox_model.record(index.row()) if index.isValid() else None

    def select(self, name: str) -> bool:
        for row, info in enumerate(self.sandbox_model.records):
            if info.name == name:
                self.sandbox_view.setCurrentIndex(self.sandbox_model.index(row, 0))
                return True
        return False

    def show_sandbox(self, name: str) -> None:
        """Choose sandbox `name`, now or once the list has been read again (one started
        elsewhere may not be listed yet)."""
        if self.demo_state != "idle" or self.select(name):
            return
        worker = self.refresh()
        worker.signals.done.connect(lambda _: self.select(name))

    def refresh(self) -> Worker:
        return self._run("Reading environments", lambda state: self.manager.listing(),
                         self._listed)

    def auto_refresh(self) -> Worker | None:
        """Read the list again quietly (the timer's call); None while a read is under way."""
        if self._listing:
            return None
        self._listing = True
        return self.quiet_workers.submit("Reading environments",
                                         lambda state: self.manager.listing(),
                                         on_done=self._auto_listed,
                                         on_failed=self._auto_list_failed)

    def _auto_listed(self, listing: Any) -> None:
        self._listing = False
        self._listed(listing)

    def _auto_list_failed(self, error: str) -> None:
        self._listing = False
        self.message.emit(error)

    def _listed(self, listing: Any) -> None:
        if self._shut_down:
            return  # a read that finished after the window closed (and its store with it)
        assert isinstance(listing, Listing)
        infos = listing.environments
        self.problem_label.setText(listing.problem)
        self.problem_label.setVisible(bool(listing.problem))
        warnings = warning_lines(infos)
        self.warning_label.setText("\n".join(warnings))
        self.warning_label.setVisible(bool(warnings))
        before = self.current_info()
        chosen = before.name if before is not None else None
        selection = self.sandbox_view.selectionModel()
        assert selection is not None
        selection.blockSignals(True)
        try:
            self.sandbox_model.set_records(infos)
            if chosen is None and infos:
                chosen = next((i.name for i in infos if i.status == "running"),
                              infos[0].name)
            found = chosen is not None and self.select(chosen)
        finally:
            selection.blockSignals(False)
        after = self.current_info()
        if found and after is not None and (
                before is None or (before.name, before.status, before.display)
                != (after.name, after.status, after.display)):
            self._sandbox_chosen(self.sandbox_view.currentIndex(), QModelIndex())
        else:
            self._update_buttons()
            if self.feed is None and after is not None and after.status == "running":
                self._restart_feed()  # e.g. after a restart, which stops the feed
            if after is None:
                self.snapshot_model.set_records([])
                self._restart_feed()
        self.sandboxes_listed.emit()

    def _sandbox_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self._update_buttons()
        self.refresh_snapshots()
        self._restart_feed()

    def _update_buttons(self) -> None:
        info = self.current_info()
        running = info is not None and info.status == "running"
        settled = info is not None and info.status not in TRANSITIONS
        enabled = {
            "Start": settled and not running,
            "Stop": settled and info is not None and info.status != "stopped",
            "Restart": settled,
            "Remove": info is not None and info.status in ("stopped", "dead"),
            "Take…": running, "Revert": running,
            "Rename…": settled, "Delete": settled,
        }
        for text, on in enabled.items():
            button = self.sandbox_buttons.get(text) or self.snapshot_buttons[text]
            why = "" if info is None else unsupported(
                info, "snapshots" if text in self.snapshot_buttons else text.lower())
            if info is not None and info.provider == "remote" and text == "Remove":
                why, on = "", True  # a remote VM is only an entry: it can always go
            button.setEnabled(on and not why)
            button.setToolTip(f"Not for {info.name}: {why}" if why and info is not None
                              else self.tooltips[text])
        self.control_switch.setEnabled(running and self.demo_state == "idle")
        busy = self.demo_state != "idle"  # the desktop belongs to the demonstration
        self.sandbox_view.setEnabled(not busy)
        for name in ("Start", "Stop", "Restart", "Remove"):
            if busy:
                self.sandbox_buttons[name].setEnabled(False)
        for name in ("Take…", "Revert"):
            if busy:
                self.snapshot_buttons[name].setEnabled(False)
        self._update_demo_buttons()

    # -- work in the background ---------------------------------------------------------

    def _run(self, title: str, work: Callable[[TaskState], Any],
             on_done: Callable[[Any], None] | None = None) -> Worker:
        return self.workers.submit(title, work, on_done=on_done,
                                   on_failed=lambda error: self.message.emit(error))

    def _then_refresh(self, text: str) -> Callable[[Any], None]:
        def done(_: Any) -> None:
            self.message.emit(text)
            self.refresh()
        return done

    def create_sandbox(self, name: str) -> Worker:
        return self._run(f"Creating sandbox {name}", lambda state: self.manager.create(name),
                         self._created)

    def _created(self, info: Any) -> None:
        assert isinstance(info, SandboxInfo)
        self.message.emit(f"sandbox {info.name} started on {info.display}")
        self.new_name.clear()
        worker = self.refresh()
        worker.signals.done.connect(lambda _: self.select(info.name))

    def _create_clicked(self) -> None:
        name = self.new_name.text().strip()
        if not name:
            self.message.emit("Type a name for the new sandbox first")
            return
        self.create_sandbox(name)

    def add_vm(self, kind: VmKind, table: dict[str, Any]) -> Worker:
        """List a new VM in environments.toml (refused with the reason in the status bar
        when a field is wrong or the name is taken)."""
        return self._run(f"Adding VM {table.get('name', '')}",
                         lambda state: self.manager.add_vm(kind, table), self._vm_added)

    def _vm_added(self, info: Any) -> None:
        assert isinstance(info, SandboxInfo)
        self.message.emit(f"{info.provider} VM {info.name} added to environments.toml")
        worker = self.refresh()
        worker.signals.done.connect(lambda _: self.select(info.name))

    def remove_vm(self, name: str) -> Worker:
        return self._run(f"Removing VM {name}", lambda state: self.manager.remove_vm(name),
                         self._then_refresh(f"{name} removed from environments.toml (its "
                                            "image and files stay)"))

    def _add_vm_clicked(self) -> None:
        dialog = AddVmDialog(self)
        if dialog.exec() == AddVmDialog.DialogCode.Accepted:
            self.add_vm(dialog.kind(), dialog.table())

    def _remove_clicked(self) -> None:
        info = self.current_info()
        if info is None or info.provider == "sandbox":
            return
        answer = QMessageBox.question(
            self, "Remove VM", f"Take {info.provider} VM {info.name} out of "
            "environments.toml? Its disk image is not touched"
            + (f" and its snapshots stay in vms/{info.name}/." if info.provider == "qemu"
               else "."))
        if answer == QMessageBox.StandardButton.Yes:
            self.remove_vm(info.name)

    def start(self, name: str | None) -> Worker | None:
        if name is None:
            return None
        self._stop_feed()
        return self._run(f"Starting {name}", lambda state: self.manager.start(name),
                         self._then_refresh(f"{name} started"))

    def stop(self, name: str | None) -> Worker | None:
        if name is None:
            return None
        self._stop_feed()
        return self._run(f"Stopping {name}", lambda state: self.manager.stop(name),
                         self._then_refresh(f"{name} stopped"))

    def restart(self, name: str | None) -> Worker | None:
        if name is None:
            return None
        self._stop_feed()
        return self._run(f"Restarting {name}", lambda state: self.manager.restart(name),
                         self._then_refresh(f"{name} restarted"))

    # -- snapshots ----------------------------------------------------------------------

    def current_snapshot(self) -> str | None:
        index = self.snapshot_view.currentIndex()
        return self.snapshot_model.record(index.row()).name if index.isValid() else None

    def select_snapshot(self, snapshot: str) -> bool:
        for row, record in enumerate(self.snapshot_model.records):
            if record.name == snapshot:
                self.snapshot_view.setCurrentIndex(self.snapshot_model.index(row, 0))
                return True
        return False

    def refresh_snapshots(self) -> Worker | None:
        name = self.current_name()
        if name is None:
            self.snapshot_model.set_records([])
            return None
        return self._run(f"Reading snapshots of {name}",
                         lambda state: self.manager.snapshots(name), self._snapshots_listed)

    def _snapshots_listed(self, snapshots: Any) -> None:
        chosen = self.current_snapshot()
        self.snapshot_model.set_records(snapshots)
        if chosen is not None:
            self.select_snapshot(chosen)
        done = self.last_revert
        if done is not None and (done.sandbox != self.current_name() or done.snapshot
                                 not in {s.name for s in snapshots}):
            self.revert_label.setText("")  # never name a snapshot deleted or renamed since
        self.snapshots_listed.emit()

    def take_snapshot(self, snapshot: str, description: str = "") -> Worker | None:
        name = self.current_name()
        if name is None:
            return None
        return self._run(f"Taking snapshot {snapshot} of {name}",
                         lambda state: self.manager.take_snapshot(name, snapshot, description),
                         self._snapshot_changed(f"snapshot {snapshot} taken"))

    def revert(self, snapshot: str) -> Worker | None:
        name = self.current_name()
        if name is None:
            return None
        self.live_status.setText(f"reverting to {snapshot}…")
        return self._run(f"Reverting {name} to {snapshot}",
                         lambda state: self.manager.revert(name, snapshot), self._reverted)

    def _reverted(self, result: Any) -> None:
        assert isinstance(result, RevertResult)
        self.last_revert = result
        text = f"reverted {result.sandbox} to {result.snapshot} in {result.seconds:.2f} s"
        self.revert_label.setText(text)
        self.live_status.setText("")
        self.message.emit(text)
        self.reverted.emit(result)
        self.refresh()

    def rename_snapshot(self, old: str, new: str) -> Worker | None:
        name = self.current_name()
        if name is None:
            return None
        return self._run(f"Renaming snapshot {old}",
                         lambda state: self.manager.rename_snapshot(name, old, new),
                         self._snapshot_changed(f"snapshot {old} renamed to {new}"))

    def delete_snapshot(self, snapshot: str) -> Worker | None:
        name = self.current_name()
        if name is None:
            return None
        return self._run(f"Deleting snapshot {snapshot}",
                         lambda state: self.manager.delete_snapshot(name, snapshot),
                         self._snapshot_changed(f"snapshot {snapshot} deleted"))

    def _snapshot_changed(self, text: str) -> Callable[[Any], None]:
        def done(_: Any) -> None:
            self.message.emit(text)
            self.refresh()  # the list's Snapshot column too, then the snapshots
            self.refresh_snapshots()
        return done

    def _take_clicked(self) -> None:
        name = self.current_name()
        if name is None:
            return
        note = snapshot_note(self.current_info())
        if not note:  # a VM snapshot keeps the running applications, unsaved edits too
            self._ask_snapshot(name, note, UnsavedCheck())
            return
        # A sandbox snapshot keeps files, not what applications hold: say which windows
        # show unsaved changes before the name is asked.
        provider = self.manager.provider(name)
        self._run(f"Checking {name} for unsaved changes",
                  lambda state: unsaved_windows(provider),
                  lambda check: self._ask_snapshot(name, note, check))

    def _ask_snapshot(self, name: str, note: str, check: UnsavedCheck) -> None:
        dialog = SnapshotDialog(name, note, self, unsaved=check.describe())
        if dialog.exec() == QDialog.DialogCode.Accepted:
            snapshot, description = dialog.values()
            if snapshot:
                self.take_snapshot(snapshot, description)

    def _revert_clicked(self) -> None:
        snapshot = self.current_snapshot()
        info = self.current_info()
        if snapshot is not None and info is not None and info.status == "running":
            self.revert(snapshot)

    def _rename_clicked(self) -> None:
        old = self.current_snapshot()
        if old is None:
            return
        new, ok = QInputDialog.getText(self, "Rename snapshot", f"New name for {old}:",
                                       text=old)
        if ok and new.strip() and new.strip() != old:
            self.rename_snapshot(old, new.strip())

    def _delete_clicked(self) -> None:
        snapshot = self.current_snapshot()
        name = self.current_name()
        if snapshot is None or name is None:
            return
        answer = QMessageBox.question(
            self, "Delete snapshot",
            f"Delete snapshot {snapshot} of {name}? It cannot be brought back.")
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_snapshot(snapshot)

    # -- the live view ------------------------------------------------------------------

    def _restart_feed(self) -> None:
        self._stop_feed()
        info = self.current_info()
        if info is None:
            self.live.set_image(None, "no environment chosen")
            return
        if info.status != "running":
            self.live.set_image(None, f"{info.name} is {info.status}")
            self.control_switch.setChecked(False)
            return
        if not self.live_switch.isChecked() or not self.isVisible():
            return
        self.feed = LiveFeed(self.manager.provider(info.name), parent=self)
        self.feed.frame.connect(self._frame)
        self.feed.error.connect(self.live_status.setText)
        self.feed.start()

    def _stop_feed(self) -> None:
        if self.feed is not None:
            self.feed.stop()
            self.feed.deleteLater()
            self.feed = None
            self.rate.setText("")

    def _frame(self, image: QImage) -> None:
        self.live.set_image(image)
        if self.feed is not None:
            self.rate.setText(f"{self.feed.rate():.1f} frames/s")
        if "failed" in self.live_status.text():
            self.live_status.setText("")  # the desktop answers again

    def perform(self, action: Action) -> None:
        """Send an action to the chosen environment (manual control); while recording a
        demonstration, it is performed and recorded as a step."""
        if self.demo_state == "recording" and self.recorder is not None:
            recorder = self.recorder
            self.demo_workers.submit("Recording an action",
                                     lambda state: recorder.record(action),
                                     on_done=self._step_recorded,
                                     on_failed=self._recording_broke)
            return
        if self.demo_state != "idle":
            return  # setting up or evaluating: the desktop is not to be touched
        if self.feed is not None:
            self.feed.perform(action)

    def showEvent(self, event: QShowEvent | None) -> None:
        super().showEvent(event)
        if self.feed is None:
            self._restart_feed()
        self.list_timer.start()
        self.auto_refresh()  # what changed while the screen was hidden

    def hideEvent(self, event: QHideEvent | None) -> None:
        self.list_timer.stop()
        self._stop_feed()  # no screenshots nobody looks at
        super().hideEvent(event)

    def confirm_close(self) -> bool:
        """Before the app quits, say what is still running: the QEMU VMs it runs stop with
        it, sandboxes outlive it unless the person has them stopped. False: do not
        close."""
        vms = self.manager.running_vms()
        sandboxes = sorted(info.name for info in self.manager.sandboxes.all()
                           if info.status == "running")
        if not vms and not sandboxes:
            return True
        choice = self.ask_close(sandboxes, vms)
        if choice == "stop":
            for name in sandboxes:
                try:
                    self.manager.stop(name)
                except Exception as exc:  # stopped meanwhile, or it will not stop
                    self.message.emit(f"{name}: could not stop: {exc}")
        return choice != "cancel"

    def ask_close(self, sandboxes: list[str], vms: list[str]) -> str:
        """"stop" (the sandboxes, then close), "leave" (close, sandboxes keep running)
        or "cancel". With no screen a person sees (offscreen), nobody can answer:
        "leave", as before the question existed."""
        from PyQt6.QtGui import QGuiApplication

        if QGuiApplication.platformName() in ("offscreen", "minimal"):
            return "leave"
        box = QMessageBox(QMessageBox.Icon.Question, "Environments are running",
                          close_question(sandboxes, vms), parent=self)
        stop = box.addButton("Stop the sandboxes and close",
                             QMessageBox.ButtonRole.AcceptRole) if sandboxes else None
        leave = box.addButton("Leave them running and close" if sandboxes else "Close",
                              QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        clicked = box.clickedButton()
        if stop is not None and clicked is stop:
            return "stop"
        return "leave" if clicked is leave else "cancel"

    def shutdown(self) -> None:
        """Stop watching; wait for a demonstration's queued work (an unfinished one is
        left to the store, which marks it incomplete when it closes); shut the QEMU VMs
        down (they are the app's child processes; sandboxes outlive it)."""
        if self._shut_down:
            return  # once is enough (the page may be gone by a second call)
        self._shut_down = True
        self.list_timer.stop()
        self._stop_feed()
        self.demo_pool.waitForDone(30_000)
        stopped = self.manager.stop_vms()
        if stopped:
            self.message.emit(f"stopped VM(s) {', '.join(stopped)}")

    # -- demonstrations -----------------------------------------------------------------

    def _build_demo_box(self) -> QGroupBox:
        self.task_combo = QComboBox()
        self.task_combo.setEditable(True)
        self.task_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.task_combo.setMinimumContentsLength(28)
        # long task ids never widen the window (the list drops down at its own width)
        self.task_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.task_combo.setToolTip("The task to demonstrate: type to search ids and "
                                   "instructions")
        line = self.task_combo.lineEdit()
        assert line is not None
        line.setPlaceholderText("search tasks…")
        completer = self.task_combo.completer()
        assert completer is not None
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        self.task_combo.currentTextChanged.connect(lambda _: self._task_changed())
        self.demo_buttons: dict[str, QPushButton] = {}
        task_bar, bar = QHBoxLayout(), QHBoxLayout()  # two rows: a 1024-pixel window fits
        task_bar.addWidget(QLabel("Task:"))
        task_bar.addWidget(self.task_combo, 1)
        self.suite_button = QPushButton("From a suite…")
        self.suite_button.setToolTip("Demonstrate tasks of an OSWorld evaluation_examples "
                                     "folder: see which run here, choose some; they join "
                                     "this list")
        self.suite_button.clicked.connect(self.ask_task_suite)
        task_bar.addWidget(self.suite_button)
        for text, tip, slot in (
                ("Record", "Set the desktop up for the task (back to its init_state "
                 "snapshot, then the task's setup) and record what you do on the screen",
                 lambda: self.record_demonstration()),
                ("Finish", "End with DONE: the task's evaluator scores the demonstration "
                 "and it is stored", lambda: self.finish_demonstration("done")),
                ("Fail", "End with FAIL (the task cannot be done), scored and stored",
                 lambda: self.finish_demonstration("fail")),
                ("Discard", "Throw the demonstration away", self.discard_demonstration),
                ("Add to Success Pool", "Put the successful demonstration in its task's "
                 "success pool", self.add_demonstration_to_pool)):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            self.demo_buttons[text] = button
            if text != "Add to Success Pool":
                bar.addWidget(button)
        self.instruction = QLabel("")
        self.instruction.setWordWrap(True)
        self.demo_status = QLabel("")
        self.demo_status.setWordWrap(True)
        result_bar = QHBoxLayout()
        result_bar.addWidget(self.demo_status, 1)
        result_bar.addWidget(self.demo_buttons["Add to Success Pool"])
        box = QGroupBox("Demonstration")
        layout = QVBoxLayout(box)
        layout.addLayout(task_bar)
        layout.addLayout(bar)
        layout.addWidget(self.instruction)
        layout.addLayout(result_bar)
        return box

    def _load_tasks(self) -> None:
        self.workers.submit("Reading the bundled tasks",
                            lambda state: sorted(bundled_suite().tasks.values(),
                                                 key=lambda t: t.id),
                            on_done=self._tasks_loaded,
                            on_failed=lambda error: self.message.emit(error))

    def _tasks_loaded(self, tasks: Any) -> None:
        self.bundled = list(tasks)
        self._list_tasks()
        self.tasks_listed.emit()

    def _list_tasks(self, chosen: str | None = None) -> None:
        """The task list: tasks chosen from suites first, then the bundled suite; the
        `chosen` id shown (else none)."""
        self.tasks = {task.id: task for task in [*self.suite_tasks, *self.bundled]}
        self.task_combo.blockSignals(True)
        self.task_combo.clear()
        for task in self.tasks.values():
            self.task_combo.addItem(f"{task.id} — {task.instruction}", task.id)
        self.task_combo.setCurrentIndex(self.task_combo.findData(chosen) if chosen else -1)
        self.task_combo.blockSignals(False)
        self._task_changed()

    def ask_task_suite(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "OSWorld evaluation_examples folder")
        if folder:
            self.open_task_suite(Path(folder))

    def open_task_suite(self, folder: Path) -> Worker:
        """Audit the folder's tasks in the background, then show them (suite_opened); the
        tasks chosen there join the task list, the first one chosen."""
        from workbench.app.suite_audit import audit_in_background

        return audit_in_background(self.workers, folder, self.show_task_suite,
                                   self.message.emit, self.manager.workspace)

    def show_task_suite(self, folder: Path, domains: Any, tasks: Any) -> None:
        from workbench.app.widgets.task_suite_dialog import TaskSuiteDialog
        from workbench.services.task_suite import load_chosen

        dialog = TaskSuiteDialog(folder, domains, tasks, self,
                                 action="Demonstrate the chosen")
        self.suite_opened.emit(dialog)
        if dialog.exec() != QDialog.DialogCode.Accepted or not dialog.chosen():
            return
        chosen = dialog.chosen()
        self.workers.submit(f"Reading {len(chosen)} task(s) of {folder.name}",
                            lambda state: load_chosen(chosen),
                            on_done=self._suite_tasks_loaded,
                            on_failed=lambda error: self.message.emit(error))

    def _suite_tasks_loaded(self, tasks: Any) -> None:
        ids = {task.id for task in tasks}
        self.suite_tasks = [*tasks, *(t for t in self.suite_tasks if t.id not in ids)]
        self._list_tasks(chosen=tasks[0].id if tasks else None)
        self.tasks_listed.emit()

    def choose_task(self, task_id: str) -> bool:
        index = self.task_combo.findData(task_id)
        if index < 0:
            return False
        self.task_combo.setCurrentIndex(index)
        return True

    def chosen_task(self) -> Task | None:
        text = self.task_combo.currentText().strip()
        index = self.task_combo.findText(text)
        if index >= 0:
            return self.tasks.get(self.task_combo.itemData(index))
        return self.tasks.get(text.split(" — ", 1)[0].strip())

    def _task_changed(self) -> None:
        if self.demo_state == "idle":
            task = self.chosen_task()
            self.instruction.setText(f"<b>Instruction:</b> {task.instruction}"
                                     if task is not None else "")
        self._update_demo_buttons()

    def _update_demo_buttons(self) -> None:
        if not hasattr(self, "demo_buttons"):
            return
        info = self.current_info()
        running = info is not None and info.status == "running"
        idle = self.demo_state == "idle"
        recording = self.demo_state == "recording"
        can_record = (idle and running and self.store is not None
                      and self.chosen_task() is not None)
        self.demo_buttons["Record"].setEnabled(can_record)
        for name in ("Finish", "Fail", "Discard"):
            self.demo_buttons[name].setEnabled(recording)
        self.task_combo.setEnabled(idle)
        self.suite_button.setEnabled(idle)
        last = self.last_demo
        self.demo_buttons["Add to Success Pool"].setEnabled(
            idle and last is not None and last.succeeded and self.store is not None
            and self.store.pool.get(last.episode_id) is None)
        if self.store is None:
            self.demo_buttons["Record"].setToolTip("Open a workspace to record demonstrations")

    def _set_demo_state(self, state: str, status: str | None = None) -> None:
        self.demo_state = state
        if status is not None:
            self.demo_status.setText(status)
        # While the desktop belongs to a demonstration, say so plainly.
        self.demo_status.setStyleSheet("" if state == "idle"
                                       else "color: #b00020; font-weight: bold")
        self._update_buttons()

    def record_demonstration(self, task_id: str | None = None) -> Worker | None:
        """Set the chosen sandbox up for the task and start recording what is done on
        the live view; None when that cannot start (the reason is shown)."""
        task = self.tasks.get(task_id) if task_id is not None else self.chosen_task()
        info = self.current_info()
        store = self.store
        problem = ("no workspace store to record into" if store is None
                   else "choose a task first" if task is None
                   else "choose a running environment first"
                   if info is None or info.status != "running"
                   else "a demonstration is already under way"
                   if self.demo_state != "idle" else "")
        if problem or task is None or info is None or store is None:
            self.message.emit(f"Cannot record: {problem}")
            return None
        name = info.name
        provider = self.manager.provider(name)
        self.last_demo = None
        self._control_before = self.control_switch.isChecked()
        self.instruction.setText(f"<b>Instruction:</b> {task.instruction}")
        self._set_demo_state("starting", f"setting {name} up for {task.id}…")

        def start(state: TaskState) -> DemoRecorder:
            recorder = DemoRecorder(self._env_for(name, provider), store,
                                    environment=getattr(provider, "kind", "sandbox"))
            recorder.start(task)
            return recorder

        return self.demo_workers.submit(f"Setting {name} up for {task.id}", start,
                                        on_done=self._recording_started,
                                        on_failed=self._recording_not_started)

    def _env_for(self, name: str, provider: Provider) -> DesktopEnv:
        """The DesktopEnv demonstrations use on environment `name`, of any kind (runs on
        the demo thread; a remote one has no init_state snapshot to go back to). It is
        never closed here: closing a DesktopEnv stops its desktop."""
        env = self._envs.get(name)
        if env is None or env.provider is not provider or env.dead_reason is not None:
            env = DesktopEnv(provider)  # takes (or reverts to) the init_state snapshot
            self._envs[name] = env
        return env

    def _recording_started(self, recorder: Any) -> None:
        assert isinstance(recorder, DemoRecorder)
        self.recorder = recorder
        self._set_demo_state("recording", f"recording {recorder.task.id}: do the task on "
                             f"the screen, then Finish (or Fail)")
        self.control_switch.setChecked(True)
        self.live.set_control(True)
        self.refresh_snapshots()  # the first demonstration takes init_state
        assert recorder.episode_id is not None
        self.recording_started.emit(recorder.episode_id)

    def _recording_not_started(self, error: str) -> None:
        self._set_demo_state("idle", f"could not set the task up: {error}")
        self.message.emit(error)

    def _step_recorded(self, index: Any) -> None:
        recorder = self.recorder
        if recorder is not None and self.demo_state == "recording" and recorder.task:
            self.demo_status.setText(f"recording {recorder.task.id}: {recorder.step_count} "
                                     f"step(s)")
        self.step_recorded.emit(int(index))

    def _recording_broke(self, error: str) -> None:
        if self.recorder is not None and not self.recorder.recording:
            self._end_demo(f"the demonstration ended with an error: {error}")
        self.message.emit(error)

    def finish_demonstration(self, ending: Ending = "done") -> Worker | None:
        """End with DONE or FAIL; the evaluator runs on the demonstration's thread."""
        recorder = self.recorder
        if self.demo_state != "recording" or recorder is None:
            return None
        self._set_demo_state("finishing", f"evaluating {recorder.task.id}…")
        return self.demo_workers.submit(f"Evaluating the demonstration of "
                                        f"{recorder.task.id}",
                                        lambda state: recorder.finish(ending),
                                        on_done=self._demonstration_finished,
                                        on_failed=lambda e: self._end_demo(e))

    def _demonstration_finished(self, result: Any) -> None:
        assert isinstance(result, DemoResult)
        self.last_demo = result
        if result.status == "done" and result.score is not None:
            verdict = "success" if result.succeeded else "not a success"
            text = (f"{result.task_id}: score {result.score:.2f} ({verdict}), "
                    f"{result.steps} step(s) stored as a human episode")
        else:
            text = f"{result.task_id}: stored with status {result.status}: {result.error}"
        self._end_demo(text)
        self.message.emit(text)
        self.demonstration_finished.emit(result)

    def discard_demonstration(self) -> Worker | None:
        recorder = self.recorder
        if self.demo_state != "recording" or recorder is None:
            return None
        self._set_demo_state("finishing", "discarding…")
        return self.demo_workers.submit("Discarding the demonstration",
                                        lambda state: recorder.discard(),
                                        on_done=self._discarded,
                                        on_failed=lambda e: self._end_demo(e))

    def _discarded(self, episode_id: Any) -> None:
        self._end_demo("demonstration discarded")
        self.demonstration_discarded.emit(str(episode_id))

    def _end_demo(self, status: str) -> None:
        self.recorder = None
        self.control_switch.setChecked(self._control_before)
        self.live.set_control(self._control_before)
        self._set_demo_state("idle", status)

    def add_demonstration_to_pool(self) -> Worker | None:
        result, store = self.last_demo, self.store
        if result is None or store is None or not result.succeeded:
            return None
        author = self.author

        def add(state: TaskState) -> str:
            add_to_success_pool(store, result, author)
            return result.episode_id

        return self._run("Adding the demonstration to the success pool", add,
                         self._pooled)

    def _pooled(self, episode_id: Any) -> None:
        self.demo_status.setText(f"{self.demo_status.text()} · in the success pool")
        self._update_demo_buttons()
        self.demonstration_pooled.emit(str(episode_id))


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
