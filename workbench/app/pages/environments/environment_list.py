"""The Environments screen's list: the workspace's sandboxes, QEMU VMs and remote OSWorld
VMs with their status, read again every few seconds while shown; start, stop, restart,
create a sandbox, add or remove a VM in environments.toml (what a kind cannot do is
disabled with the reason)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PyQt6.QtCore import QTimer, pyqtSignal
from PyQt6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.app.models.record_table import Column, RecordTableModel
from workbench.app.widgets.add_vm_dialog import AddVmDialog
from workbench.app.widgets.record_table import record_table_view
from workbench.app.workers import Worker, Workers
from workbench.services.environments import EnvironmentManager, Listing, unsupported
from workbench.services.progress import TaskState
from workbench.services.sandboxes import SandboxInfo
from workbench.services.vm_registry import VmKind

LIST_REFRESH_MS = 3000  # the environment list is read again this often while shown
TRANSITIONS = ("starting", "stopping")  # a VM booting or shutting down: hands off
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


class EnvironmentList(QGroupBox):
    """The list and its buttons. `chosen` when the person picks another row; `listed`
    after each reading, True when the chosen environment changed with it (another one,
    or its status or display); `leaving` just before a start, stop or restart, whose
    desktop then goes away for a while."""

    message = pyqtSignal(str)
    chosen = pyqtSignal()
    listed = pyqtSignal(bool)
    leaving = pyqtSignal()

    def __init__(self, manager: EnvironmentManager, workers: Workers,
                 parent: QWidget | None = None) -> None:
        super().__init__("Environments", parent)
        self.manager = manager
        self.workers = workers
        # The periodic re-read runs quietly (not in the status bar). These Workers have no
        # Qt parent on purpose: a running worker keeps its Workers alive, so work still in
        # flight when the screen goes never reports to a deleted object.
        self.quiet_workers = Workers()
        self._listing = False
        self.closed = False  # the window closed: a reading that finishes now is dropped
        self.timer = QTimer(self)
        self.timer.setInterval(LIST_REFRESH_MS)
        self.timer.timeout.connect(self.auto_refresh)
        self._build()

    def _build(self) -> None:
        self.model: RecordTableModel[SandboxInfo] = RecordTableModel(SANDBOX_COLUMNS, self)
        self.view = record_table_view(self.model)
        selection = self.view.selectionModel()
        assert selection is not None
        selection.currentRowChanged.connect(lambda *_: self.chosen.emit())
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
        self.buttons: dict[str, QPushButton] = {}
        create_bar, bar = QHBoxLayout(), QHBoxLayout()
        bar.setSpacing(4)  # its seven buttons and the screen fit 1280 pixels
        create_bar.addWidget(self.new_name, 1)
        self.new_name.returnPressed.connect(self._create_clicked)
        for text, tip, slot in buttons:
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            self.buttons[text] = button
            (create_bar if text in ("Create", "Add VM…") else bar).addWidget(button)
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
        layout = QVBoxLayout(self)
        layout.addWidget(self.problem_label)
        layout.addWidget(self.warning_label)
        layout.addWidget(self.view)
        layout.addLayout(bar)
        layout.addLayout(create_bar)

    # -- the chosen environment ---------------------------------------------------------

    def current_name(self) -> str | None:
        index = self.view.currentIndex()
        if not index.isValid():
            return None
        return self.model.record(index.row()).name

    def current_info(self) -> SandboxInfo | None:
        index = self.view.currentIndex()
        return self.model.record(index.row()) if index.isValid() else None

    def select(self, name: str) -> bool:
        for row, info in enumerate(self.model.records):
            if info.name == name:
                self.view.setCurrentIndex(self.model.index(row, 0))
                return True
        return False

    def show_environment(self, name: str) -> None:
        """Choose environment `name`, now or once the list has been read again (one
        started elsewhere may not be listed yet)."""
        if self.select(name):
            return
        worker = self.refresh()
        worker.signals.done.connect(lambda _: self.select(name))

    def update_buttons(self, busy: bool) -> None:
        """What the chosen environment's kind and status allow; nothing that changes it
        while `busy` (a demonstration has its desktop)."""
        info = self.current_info()
        running = info is not None and info.status == "running"
        settled = info is not None and info.status not in TRANSITIONS
        enabled = {
            "Start": settled and not running,
            "Stop": settled and info is not None and info.status != "stopped",
            "Restart": settled,
            "Remove": info is not None and info.status in ("stopped", "dead"),
        }
        for text, on in enabled.items():
            button = self.buttons[text]
            why = "" if info is None else unsupported(info, text.lower())
            if info is not None and info.provider == "remote" and text == "Remove":
                why, on = "", True  # a remote VM is only an entry: it can always go
            button.setEnabled(on and not why and not busy)
            button.setToolTip(f"Not for {info.name}: {why}" if why and info is not None
                              else self.tooltips[text])
        self.view.setEnabled(not busy)

    # -- reading the list ---------------------------------------------------------------

    def watch(self, on: bool) -> None:
        """Read the list every few seconds (while the screen is shown), or stop."""
        if on:
            self.timer.start()
            self.auto_refresh()  # what changed while the screen was hidden
        else:
            self.timer.stop()

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
        if self.closed:
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
        selection = self.view.selectionModel()
        assert selection is not None
        selection.blockSignals(True)
        try:
            self.model.set_records(infos)
            if chosen is None and infos:
                chosen = next((i.name for i in infos if i.status == "running"),
                              infos[0].name)
            found = chosen is not None and self.select(chosen)
        finally:
            selection.blockSignals(False)
        after = self.current_info()
        self.listed.emit(found and after is not None and (
            before is None or (before.name, before.status, before.display)
            != (after.name, after.status, after.display)))

    # -- changing environments ----------------------------------------------------------

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
        self.leaving.emit()
        return self._run(f"Starting {name}", lambda state: self.manager.start(name),
                         self._then_refresh(f"{name} started"))

    def stop(self, name: str | None) -> Worker | None:
        if name is None:
            return None
        self.leaving.emit()
        return self._run(f"Stopping {name}", lambda state: self.manager.stop(name),
                         self._then_refresh(f"{name} stopped"))

    def restart(self, name: str | None) -> Worker | None:
        if name is None:
            return None
        self.leaving.emit()
        return self._run(f"Restarting {name}", lambda state: self.manager.restart(name),
                         self._then_refresh(f"{name} restarted"))
