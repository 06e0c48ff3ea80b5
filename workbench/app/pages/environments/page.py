"""The Environments screen: the list of the workspace's environments, the chosen one's
snapshots, its screen live with manual control and the recording of demonstrations, put
side by side and kept in step (a demonstration holds the desktop: nothing that changes it
meanwhile); and what quitting the app does to the environments still running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtGui import QHideEvent, QShowEvent
from PyQt6.QtWidgets import QDialog, QMessageBox, QSplitter, QVBoxLayout, QWidget

from trainer.environments import is_run_desktop
from trainer.store import Store
from vm.actions import Action
from vm.tasks import Task
from workbench.app.pages.environments.demonstration_panel import DemonstrationPanel
from workbench.app.pages.environments.environment_list import EnvironmentList
from workbench.app.pages.environments.live_panel import LivePanel
from workbench.app.pages.environments.snapshot_panel import SnapshotPanel
from workbench.app.widgets.live_view import LiveFeed
from workbench.app.workers import Worker, Workers
from workbench.services.environments import EnvironmentManager
from workbench.services.sandboxes import SandboxInfo
from workbench.services.vm_registry import VmKind


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
    """The screen: its four parts, the signals the main window listens to, and the names
    the app and its tests reach the parts by."""

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
        self._shut_down = False
        self.environment_list = EnvironmentList(self.manager, workers)
        self.snapshots = SnapshotPanel(self.manager, workers, self.environment_list)
        self.live_panel = LivePanel(self.manager)
        self.demonstration = DemonstrationPanel(self.manager, workers, self.environment_list,
                                                self.live_panel, self.snapshots, store, author)
        self._build()
        self._connect()
        self.refresh()
        self.demonstration.load_tasks()

    def _build(self) -> None:
        self.live_panel.add_below(self.demonstration)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.environment_list)
        left.addWidget(self.snapshots)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.live_panel)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setSizes([480, 900])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.splitter)
        # The names the app and its tests reach the screen's parts by.
        self.sandbox_model = self.environment_list.model
        self.sandbox_view = self.environment_list.view
        self.sandbox_buttons = self.environment_list.buttons
        self.problem_label = self.environment_list.problem_label
        self.warning_label = self.environment_list.warning_label
        self.list_timer = self.environment_list.timer
        self.snapshot_model = self.snapshots.model
        self.snapshot_buttons = self.snapshots.buttons
        self.revert_label = self.snapshots.revert_label
        self.live = self.live_panel.live
        self.control_switch = self.live_panel.control_switch
        self.task_combo = self.demonstration.task_combo
        self.suite_button = self.demonstration.suite_button
        self.demo_buttons = self.demonstration.buttons
        self.demo_status = self.demonstration.status
        self.instruction = self.demonstration.instruction
        self._update_buttons()

    def _connect(self) -> None:
        for part in (self.environment_list, self.snapshots, self.demonstration):
            part.message.connect(self.message)
        self.environment_list.chosen.connect(self._chosen)
        self.environment_list.listed.connect(self._listed)
        self.environment_list.leaving.connect(self.live_panel.stop_feed)
        self.snapshots.listed.connect(self.snapshots_listed)
        self.snapshots.reverting.connect(self.live_panel.live_status.setText)
        self.snapshots.reverted.connect(self.reverted)
        self.live_panel.live_switch.toggled.connect(lambda _: self._restart_feed())
        self.live_panel.live.action.connect(self.perform)
        demonstration = self.demonstration
        demonstration.state_changed.connect(self._update_buttons)
        demonstration.tasks_listed.connect(self.tasks_listed)
        demonstration.suite_opened.connect(self.suite_opened)
        demonstration.recording_started.connect(self.recording_started)
        demonstration.step_recorded.connect(self.step_recorded)
        demonstration.finished.connect(self.demonstration_finished)
        demonstration.discarded.connect(self.demonstration_discarded)
        demonstration.pooled.connect(self.demonstration_pooled)

    # -- keeping the parts in step ------------------------------------------------------

    def _chosen(self) -> None:
        self._update_buttons()
        self.snapshots.refresh()
        self._restart_feed()

    def _listed(self, chosen_changed: bool) -> None:
        if chosen_changed:
            self._chosen()
        else:
            self._update_buttons()
            info = self.current_info()
            if self.feed is None and info is not None and info.status == "running":
                self._restart_feed()  # e.g. after a restart, which stops the feed
            if info is None:
                self.snapshots.clear()
                self._restart_feed()
        self.sandboxes_listed.emit()

    def _update_buttons(self) -> None:
        busy = self.demo_state != "idle"  # the desktop belongs to the demonstration
        info = self.current_info()
        self.environment_list.update_buttons(busy)
        self.snapshots.update_buttons(busy)
        self.control_switch.setEnabled(info is not None and info.status == "running"
                                       and not busy)
        self.demonstration.update_buttons()

    def _restart_feed(self) -> None:
        self.live_panel.restart_feed(self.current_info(), self.isVisible())

    def perform(self, action: Action) -> None:
        """Send an action to the chosen environment (manual control); while recording a
        demonstration, it is performed and recorded as a step."""
        if self.demo_state != "idle":
            self.demonstration.take(action)  # set up or evaluated: not to be touched
            return
        self.live_panel.perform(action)

    def showEvent(self, event: QShowEvent | None) -> None:
        super().showEvent(event)
        if self.feed is None:
            self._restart_feed()
        self.environment_list.watch(True)

    def hideEvent(self, event: QHideEvent | None) -> None:
        self.environment_list.watch(False)
        self.live_panel.stop_feed()  # no screenshots nobody looks at
        super().hideEvent(event)

    # -- the parts' state and calls, by the screen's names ------------------------------

    @property
    def feed(self) -> LiveFeed | None:
        return self.live_panel.feed

    @property
    def demo_state(self) -> str:
        return self.demonstration.state

    @property
    def tasks(self) -> dict[str, Task]:
        return self.demonstration.tasks

    @property
    def bundled(self) -> list[Task]:
        return self.demonstration.bundled

    def current_name(self) -> str | None:
        return self.environment_list.current_name()

    def current_info(self) -> SandboxInfo | None:
        return self.environment_list.current_info()

    def select(self, name: str) -> bool:
        return self.environment_list.select(name)

    def show_sandbox(self, name: str) -> None:
        """Choose environment `name` (unless a demonstration holds the desktop), now or
        once the list has been read again (one started elsewhere may not be listed yet)."""
        if self.demo_state == "idle":
            self.environment_list.show_environment(name)

    def refresh(self) -> Worker:
        return self.environment_list.refresh()

    def create_sandbox(self, name: str) -> Worker:
        return self.environment_list.create_sandbox(name)

    def add_vm(self, kind: VmKind, table: dict[str, Any]) -> Worker:
        return self.environment_list.add_vm(kind, table)

    def remove_vm(self, name: str) -> Worker:
        return self.environment_list.remove_vm(name)

    def start(self, name: str | None) -> Worker | None:
        return self.environment_list.start(name)

    def stop(self, name: str | None) -> Worker | None:
        return self.environment_list.stop(name)

    def restart(self, name: str | None) -> Worker | None:
        return self.environment_list.restart(name)

    def select_snapshot(self, snapshot: str) -> bool:
        return self.snapshots.select_snapshot(snapshot)

    def take_snapshot(self, snapshot: str, description: str = "") -> Worker | None:
        return self.snapshots.take(snapshot, description)

    def revert(self, snapshot: str) -> Worker | None:
        return self.snapshots.revert(snapshot)

    def rename_snapshot(self, old: str, new: str) -> Worker | None:
        return self.snapshots.rename(old, new)

    def delete_snapshot(self, snapshot: str) -> Worker | None:
        return self.snapshots.delete(snapshot)

    def open_task_suite(self, folder: Path) -> Worker:
        return self.demonstration.open_task_suite(folder)

    def choose_task(self, task_id: str) -> bool:
        return self.demonstration.choose_task(task_id)

    def chosen_task(self) -> Task | None:
        return self.demonstration.chosen_task()

    # -- quitting -----------------------------------------------------------------------

    def confirm_close(self, training_run: str | None = None) -> bool:
        """Before the app quits, say what is still running: the QEMU VMs it runs stop with
        it, sandboxes outlive it unless the person has them stopped. The desktops of
        `training_run`, the run the app's trainer is training, are neither offered nor
        stopped here: the trainer stops as the app closes and stops them itself (its last
        episodes and checkpoint still need them until then). False: do not close."""
        vms = self.manager.running_vms()
        sandboxes = sorted(
            info.name for info in self.manager.sandboxes.all() if info.status == "running"
            and not (training_run is not None and is_run_desktop(info.name, training_run)))
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
        self.environment_list.closed = True
        self.environment_list.watch(False)
        self.live_panel.stop_feed()
        self.demonstration.wait(30_000)
        stopped = self.manager.stop_vms()
        if stopped:
            self.message.emit(f"stopped VM(s) {', '.join(stopped)}")
