"""The Environments screen's recording of a person's demonstration of a task
(workbench.services.demo_recorder): choose a task (the bundled suite, or tasks chosen from
an OSWorld suite), Record sets the chosen environment up for it, what the person does on
the live view becomes the episode's steps, Finish or Fail has it scored and stored. Its
set-up, actions and evaluation run one after another on a thread of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtWidgets import (
    QComboBox,
    QCompleter,
    QDialog,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from trainer.store import Store
from vm.actions import Action
from vm.suite import bundled_suite
from vm.tasks import Task
from workbench.app.pages.environments.environment_list import EnvironmentList
from workbench.app.pages.environments.live_panel import LivePanel
from workbench.app.pages.environments.snapshot_panel import SnapshotPanel
from workbench.app.workers import Worker, Workers, in_order
from workbench.services.demo_desktops import DemoDesktops
from workbench.services.demo_recorder import (
    DemoRecorder,
    DemoResult,
    Ending,
    add_to_success_pool,
)
from workbench.services.environments import EnvironmentManager
from workbench.services.progress import TaskState


class DemonstrationPanel(QGroupBox):
    """The task, Record / Finish / Fail / Discard, the instruction and how the last
    demonstration went. `state` is idle, starting, recording or finishing; while it is
    not idle the desktop belongs to the demonstration (`state_changed` says when)."""

    message = pyqtSignal(str)
    state_changed = pyqtSignal()
    tasks_listed = pyqtSignal()
    suite_opened = pyqtSignal(QDialog)  # a task suite's dialog, about to be shown
    recording_started = pyqtSignal(str)  # the demonstration's episode id
    step_recorded = pyqtSignal(int)  # the index of the step an action went into
    finished = pyqtSignal(object)  # DemoResult
    discarded = pyqtSignal(str)  # the episode id
    pooled = pyqtSignal(str)  # the episode id

    def __init__(self, manager: EnvironmentManager, workers: Workers,
                 environment_list: EnvironmentList, live_panel: LivePanel, snapshots: SnapshotPanel,
                 store: Store | None, author: str, parent: QWidget | None = None) -> None:
        super().__init__("Demonstration", parent)
        self.manager = manager
        self.workers = workers
        self.environment_list = environment_list
        self.live_panel = live_panel
        self.snapshots = snapshots
        self.store = store
        self.author = author
        self.demo_workers = in_order(self)  # set-up, actions and evaluation, in order
        self.desktops = DemoDesktops()
        self.tasks: dict[str, Task] = {}
        self.bundled: list[Task] = []  # the bundled suite, by id
        self.suite_tasks: list[Task] = []  # chosen from task suites ("From a suite…")
        self.recorder: DemoRecorder | None = None
        self.state = "idle"  # idle | starting | recording | finishing
        self.last_demo: DemoResult | None = None
        self._control_before = False
        self._build()

    def _build(self) -> None:
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
        self.buttons: dict[str, QPushButton] = {}
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
                 lambda: self.record()),
                ("Finish", "End with DONE: the task's evaluator scores the demonstration "
                 "and it is stored", lambda: self.finish("done")),
                ("Fail", "End with FAIL (the task cannot be done), scored and stored",
                 lambda: self.finish("fail")),
                ("Discard", "Throw the demonstration away", self.discard),
                ("Add to Success Pool", "Put the successful demonstration in its task's "
                 "success pool", self.add_to_pool)):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            self.buttons[text] = button
            if text != "Add to Success Pool":
                bar.addWidget(button)
        self.instruction = QLabel("")
        self.instruction.setWordWrap(True)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        result_bar = QHBoxLayout()
        result_bar.addWidget(self.status, 1)
        result_bar.addWidget(self.buttons["Add to Success Pool"])
        layout = QVBoxLayout(self)
        layout.addLayout(task_bar)
        layout.addLayout(bar)
        layout.addWidget(self.instruction)
        layout.addLayout(result_bar)

    # -- the tasks ----------------------------------------------------------------------

    def load_tasks(self) -> None:
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
        if self.state == "idle":
            task = self.chosen_task()
            self.instruction.setText(f"<b>Instruction:</b> {task.instruction}"
                                     if task is not None else "")
        self.update_buttons()

    # -- recording ----------------------------------------------------------------------

    def update_buttons(self) -> None:
        info = self.environment_list.current_info()
        running = info is not None and info.status == "running"
        idle = self.state == "idle"
        recording = self.state == "recording"
        can_record = (idle and running and self.store is not None
                      and self.chosen_task() is not None)
        self.buttons["Record"].setEnabled(can_record)
        for name in ("Finish", "Fail", "Discard"):
            self.buttons[name].setEnabled(recording)
        self.task_combo.setEnabled(idle)
        self.suite_button.setEnabled(idle)
        last = self.last_demo
        self.buttons["Add to Success Pool"].setEnabled(
            idle and last is not None and last.succeeded and self.store is not None
            and self.store.pool.get(last.episode_id) is None)
        if self.store is None:
            self.buttons["Record"].setToolTip("Open a workspace to record demonstrations")

    def _set_state(self, state: str, status: str | None = None) -> None:
        self.state = state
        if status is not None:
            self.status.setText(status)
        # While the desktop belongs to a demonstration, say so plainly.
        self.status.setStyleSheet("" if state == "idle"
                                  else "color: #b00020; font-weight: bold")
        self.state_changed.emit()

    def record(self, task_id: str | None = None) -> Worker | None:
        """Set the chosen environment up for the task and start recording what is done on
        the live view; None when that cannot start (the reason is shown)."""
        task = self.tasks.get(task_id) if task_id is not None else self.chosen_task()
        info = self.environment_list.current_info()
        store = self.store
        problem = ("no workspace store to record into" if store is None
                   else "choose a task first" if task is None
                   else "choose a running environment first"
                   if info is None or info.status != "running"
                   else "a demonstration is already under way"
                   if self.state != "idle" else "")
        if problem or task is None or info is None or store is None:
            self.message.emit(f"Cannot record: {problem}")
            return None
        name = info.name
        provider = self.manager.provider(name)
        desktops = self.desktops
        self.last_demo = None
        self._control_before = self.live_panel.control_switch.isChecked()
        self.instruction.setText(f"<b>Instruction:</b> {task.instruction}")
        self._set_state("starting", f"setting {name} up for {task.id}…")
        return self.demo_workers.submit(
            f"Setting {name} up for {task.id}",
            lambda state: desktops.start(name, provider, store, task),
            on_done=self._recording_started, on_failed=self._recording_not_started)

    def _recording_started(self, recorder: Any) -> None:
        assert isinstance(recorder, DemoRecorder)
        self.recorder = recorder
        warning = recorder.setup_warning
        self._set_state("recording", f"recording {recorder.task.id}: do the task on "
                        f"the screen, then Finish (or Fail)"
                        + (f". Warning: {warning}" if warning else ""))
        if warning:
            self.message.emit(f"{recorder.task.id}: {warning}")
        self.live_panel.control_switch.setChecked(True)
        self.live_panel.live.set_control(True)
        self.snapshots.refresh()  # the first demonstration takes init_state
        assert recorder.episode_id is not None
        self.recording_started.emit(recorder.episode_id)

    def _recording_not_started(self, error: str) -> None:
        self._set_state("idle", f"could not set the task up: {error}")
        self.message.emit(error)

    def take(self, action: Action) -> None:
        """Record an action the person performed (only while recording: while the task is
        set up or evaluated the desktop is not to be touched)."""
        recorder = self.recorder
        if self.state == "recording" and recorder is not None:
            self.demo_workers.submit("Recording an action",
                                     lambda state: recorder.record(action),
                                     on_done=self._step_recorded,
                                     on_failed=self._recording_broke)

    def _step_recorded(self, index: Any) -> None:
        recorder = self.recorder
        if recorder is not None and self.state == "recording" and recorder.task:
            self.status.setText(f"recording {recorder.task.id}: {recorder.step_count} "
                                f"step(s)")
        self.step_recorded.emit(int(index))

    def _recording_broke(self, error: str) -> None:
        if self.recorder is not None and not self.recorder.recording:
            self._end(f"the demonstration ended with an error: {error}")
        self.message.emit(error)

    def finish(self, ending: Ending = "done") -> Worker | None:
        """End with DONE or FAIL; the evaluator runs on the demonstration's thread."""
        recorder = self.recorder
        if self.state != "recording" or recorder is None:
            return None
        self._set_state("finishing", f"evaluating {recorder.task.id}…")
        return self.demo_workers.submit(f"Evaluating the demonstration of "
                                        f"{recorder.task.id}",
                                        lambda state: recorder.finish(ending),
                                        on_done=self._finished,
                                        on_failed=lambda e: self._end(e))

    def _finished(self, result: Any) -> None:
        assert isinstance(result, DemoResult)
        self.last_demo = result
        if result.status == "done" and result.score is not None:
            verdict = "success" if result.succeeded else "not a success"
            text = (f"{result.task_id}: score {result.score:.2f} ({verdict}), "
                    f"{result.steps} step(s) stored as a human episode")
        else:
            text = f"{result.task_id}: stored with status {result.status}: {result.error}"
        self._end(text)
        self.message.emit(text)
        self.finished.emit(result)

    def discard(self) -> Worker | None:
        recorder = self.recorder
        if self.state != "recording" or recorder is None:
            return None
        self._set_state("finishing", "discarding…")
        return self.demo_workers.submit("Discarding the demonstration",
                                        lambda state: recorder.discard(),
                                        on_done=self._discarded,
                                        on_failed=lambda e: self._end(e))

    def _discarded(self, episode_id: Any) -> None:
        self._end("demonstration discarded")
        self.discarded.emit(str(episode_id))

    def _end(self, status: str) -> None:
        self.recorder = None
        self.live_panel.control_switch.setChecked(self._control_before)
        self.live_panel.live.set_control(self._control_before)
        self._set_state("idle", status)

    def add_to_pool(self) -> Worker | None:
        result, store = self.last_demo, self.store
        if result is None or store is None or not result.succeeded:
            return None
        author = self.author

        def add(state: TaskState) -> str:
            add_to_success_pool(store, result, author)
            return result.episode_id

        return self.workers.submit("Adding the demonstration to the success pool", add,
                                   on_done=self._pooled,
                                   on_failed=lambda error: self.message.emit(error))

    def _pooled(self, episode_id: Any) -> None:
        self.status.setText(f"{self.status.text()} · in the success pool")
        self.update_buttons()
        self.pooled.emit(str(episode_id))

    def wait(self, msecs: int) -> bool:
        """Wait for the demonstration's queued work (closing the window)."""
        return self.demo_workers.wait(msecs)
