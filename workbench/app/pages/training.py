"""The Training screen: the run form (saved as the TOML file `workbench train` reads),
start, stop and resume of the trainer as a separate process, live plots of the shown
run's metrics beside any other runs ticked for comparison, a table comparing those runs'
settings and final figures, the trainer's log tail, a Ray run's nodes and actors, and the
past runs with their checkpoints (filtered, and renamed: a run's display name is kept in
the store).

The trainer is `python -m workbench train CONFIG --run-id RUN` under QProcess in a
session of its own (workbench.app.trainer_process); Stop sends it SIGINT (it saves a
checkpoint and exits 130) and terminates it only after a grace period. The screen follows
runs through the store: a timer reads, off the GUI thread, only the metric rows newer
than the last step seen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from PyQt6.QtCore import QModelIndex, Qt, QTimer, pyqtSignal
from PyQt6.QtGui import QFontDatabase, QShowEvent
from PyQt6.QtWidgets import (
    QDialog,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from trainer.config import ConfigError, RunConfig, load_run_config, parse_run_config
from trainer.store import Store, StoreError
from trainer.store.runs import Checkpoint
from workbench.app.pages.training_cluster import ClusterPanel
from workbench.app.trainer_process import (
    KILL_AFTER_S,
    STOP_GRACE_S,
    TrainerExit,
    TrainerProcess,
)
from workbench.app.widgets.metric_plots import MetricPlots
from workbench.app.widgets.run_comparison_table import RunComparisonTable
from workbench.app.widgets.run_form import RunForm
from workbench.app.widgets.run_list import RunList, checkpoint_table
from workbench.app.workers import Worker, Workers, in_order
from workbench.services.run_comparison import ComparedRun
from workbench.services.run_names import rename_run
from workbench.services.training_runs import (
    STOPPED_EXIT_CODE,
    RunRow,
    RunsSnapshot,
    check_run_workspace,
    config_for_resume,
    configs_folder,
    episodes_outcome,
    exit_summary,
    finish_abandoned_run,
    new_run_id,
    next_run_name,
    poll_runs,
    read_tail,
    run_config_path,
    save_run_config,
    stop_run_sandboxes,
    terminal_lines,
    trainer_command,
    trainer_log_path,
    with_run_name,
)

POLL_INTERVAL_MS = 1000
LOG_LINES = 2000  # the log view keeps this many lines; the run's log file keeps all


class TrainingPage(QWidget):
    message = pyqtSignal(str)  # for the status bar
    polled = pyqtSignal()  # a read of the store reached the screen
    trainer_ended = pyqtSignal(object)  # TrainerExit, once the store says how it ended
    suite_opened = pyqtSignal(QDialog)  # a task suite's dialog, about to be shown

    def __init__(self, store: Store, workspace: Path, parent: QWidget | None = None,
                 workers: Workers | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.workspace = Path(workspace)
        self.workers = workers if workers is not None else Workers(parent=self)
        self.stop_grace_s = STOP_GRACE_S
        self.trainer = TrainerProcess(self)
        self.trainer.output.connect(self._output)
        self.trainer.finished.connect(self._trainer_finished)
        self.live_run_id: str | None = None
        self.last_exit: TrainerExit | None = None
        self._follow_live = False  # select the live run once the store lists it
        self._opened_on_a_run = False  # the newest run chosen at the first listing
        self._log_run_id: str | None = None
        self._started_names: dict[str, str] = {}  # runs started here: id -> name
        # The screen's reads of the store, one at a time; not the app's Workers, whose
        # work the status bar lists: it shows what a person started, not a timer's poll.
        self.reads = in_order(self)
        self._polling = False
        self._closed = False
        self._build()
        self._prefill_form()
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_INTERVAL_MS)
        self.timer.timeout.connect(self.poll)
        self.timer.start()
        self.poll()

    # -- tasks of an OSWorld suite --------------------------------------------------------

    def choose_suite_tasks(self, folder: str = "") -> Worker | None:
        """The form's "Choose…" beside Task ids: audit the suite folder (asked for when the
        form names none), then show its tasks; those chosen become the run's tasks."""
        path = Path(folder).expanduser() if folder else None
        if path is None or not path.is_dir():
            answer = QFileDialog.getExistingDirectory(
                self, "OSWorld evaluation_examples folder", folder)
            if not answer:
                return None
            path = Path(answer)
        return self.open_task_suite(path)

    def open_task_suite(self, folder: Path) -> Worker:
        from workbench.app.suite_audit import audit_in_background

        return audit_in_background(self.workers, folder, self.show_task_suite,
                                   self.message.emit, self.workspace)

    def show_task_suite(self, folder: Path, domains: Any, tasks: Any) -> None:
        """The suite's tasks (those the form trains on already ticked); the chosen become
        the form's Suite folder and Task ids."""
        from workbench.app.widgets.task_suite_dialog import TaskSuiteDialog

        dialog = TaskSuiteDialog(folder, domains, tasks, self, action="Train on the chosen")
        named = Path(str(self.form.widget_value("tasks.suite"))).expanduser()
        if str(self.form.widget_value("tasks.suite")) and named.resolve() == folder.resolve():
            dialog.choose(self.form.widget_value("tasks.ids"))
        self.suite_opened.emit(dialog)
        if dialog.exec() != QDialog.DialogCode.Accepted or not dialog.chosen():
            return
        chosen = [task.id for task in dialog.chosen()]
        if self.form.set_suite_tasks(str(folder), chosen):
            buttons = int(self.form.widget_value("tasks.buttons"))
            self.message.emit(f"The run trains on {len(chosen)} task(s) of {folder}"
                              + (f" and {buttons} generated buttons task(s) (set Buttons "
                                 f"tasks to 0 to train on these alone)" if buttons else ""))
        else:
            self.message.emit("Fix the error in the TOML view first; the tasks were not "
                              "set")

    # -- layout -------------------------------------------------------------------------

    def _build(self) -> None:
        self.form = RunForm()
        self.form.validity_changed.connect(lambda _: self._update_buttons())
        self.form.suite_tasks_wanted.connect(self.choose_suite_tasks)
        self.buttons: dict[str, QPushButton] = {}
        file_bar, run_bar = QHBoxLayout(), QHBoxLayout()
        for text, tip, slot, bar in (
                ("Open…", "Load a run configuration file (TOML) into the form",
                 self._open_clicked, file_bar),
                ("Save as…", "Save the form as a run configuration file for "
                 "`workbench train`", self._save_clicked, file_bar),
                ("Defaults", "Every knob at its default", self._defaults_clicked, file_bar),
                ("Start", "Save the configuration under runs/<run>/ and start the trainer",
                 self.start, run_bar),
                ("Stop", "Stop the trainer: it saves a checkpoint and marks the run "
                 "stopped", self.stop, run_bar)):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(lambda _, s=slot: s())
            bar.addWidget(button)
            self.buttons[text] = button
        self.state_label = QLabel("No trainer running")
        self.state_label.setObjectName("trainer-state")
        self.state_label.setWordWrap(True)
        left = QGroupBox("Run configuration")
        left_layout = QVBoxLayout(left)
        left_layout.addLayout(file_bar)
        left_layout.addWidget(self.form, 1)
        left_layout.addLayout(run_bar)
        left_layout.addWidget(self.state_label)

        self.plots = MetricPlots()

        self.runs_list = RunList()
        self.run_model = self.runs_list.run_model
        self.run_model.colour_of = self.plots.colour
        self.run_model.checked_changed.connect(self._update_plotted)
        self.run_model.renamed.connect(self.rename_run)
        self.run_view = self.runs_list.run_view
        selection = self.run_view.selectionModel()
        assert selection is not None
        selection.currentRowChanged.connect(self._run_chosen)
        self.checkpoint_model, self.checkpoint_view = checkpoint_table(self)
        for text, slot in (("Resume", self.resume),
                           ("Use its configuration", self._use_configuration)):
            button = self.runs_list.buttons[text]
            button.clicked.connect(lambda _, s=slot: s())
            self.buttons[text] = button

        self.log = QPlainTextEdit()
        self.log.setObjectName("trainer-log")
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(LOG_LINES)
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.log_box = QWidget()
        log_layout = QVBoxLayout(self.log_box)
        log_layout.setContentsMargins(0, 0, 0, 0)
        log_layout.addWidget(self.log)

        self.compare_table = RunComparisonTable()

        self.lower_tabs = QTabWidget()
        self.lower_tabs.addTab(self.log_box, "Log")
        self.lower_tabs.addTab(self.compare_table, "Compare runs")
        self.lower_tabs.addTab(self.checkpoint_view, "Checkpoints")
        self.lower_tabs.setTabToolTip(2, "The chosen run's saved policy versions")
        self.cluster_panel = ClusterPanel()  # shown for a Ray run only
        self._cluster_tab = self.lower_tabs.addTab(self.cluster_panel, "Cluster")
        self.lower_tabs.setTabVisible(self._cluster_tab, False)
        lower = QSplitter(Qt.Orientation.Horizontal)
        lower.addWidget(self.runs_list)
        lower.addWidget(self.lower_tabs)
        lower.setSizes([520, 480])
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.plots)
        right.addWidget(lower)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        right.setSizes([600, 400])
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([340, 1000])
        self._configs: dict[str, str] = {}  # run configurations of plotted runs, by id
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.splitter)
        self._update_buttons()

    def _prefill_form(self) -> None:
        """The newest run's configuration, a good start for the next one; else defaults.
        Either way under a name no run has yet."""
        runs = [r for r in self.store.runs.all() if r.kind == "train" and r.config.strip()]
        for run in runs[:1]:
            try:
                self.form.set_config(parse_run_config(run.config, f"run {run.id}"),
                                     run.config)
            except ConfigError:
                pass
        self.name_form_afresh(always=True)

    def _taken_names(self) -> set[str]:
        try:
            return {name for run in self.store.runs.all() for name in (run.name, run.id)
                    if name}
        except StoreError:
            return set()

    def name_form_afresh(self, always: bool = False, taken: Iterable[str] = ()
                         ) -> str | None:
        """Give the form's run a default name no run of the workspace has: the next number
        of its name ("run #3"). Only when the name is taken, unless `always`; the name
        given, or None (the form does not hold a valid configuration). `taken`: names
        the store does not list yet (a run just started)."""
        try:
            text = self.form.toml_text()
            config = parse_run_config(text, "form")
        except ConfigError:
            return None
        taken = self._taken_names() | set(taken)
        if not always and config.run.name and config.run.name not in taken:
            return config.run.name
        name = next_run_name(config.run.name, taken)
        text = with_run_name(text, name)
        self.form.set_config(parse_run_config(text, "form"), text)
        return name

    def _update_buttons(self) -> None:
        running = self.trainer.is_running()
        chosen = self.current_run()
        self.buttons["Start"].setEnabled(not running and self.form.is_valid())
        self.buttons["Stop"].setEnabled(running and not self.trainer.stopping)
        self.buttons["Resume"].setEnabled(not running and chosen is not None
                                          and chosen.resumable)
        self.buttons["Use its configuration"].setEnabled(chosen is not None
                                                         and chosen.kind == "train")
        self.runs_list.buttons["Rename…"].setEnabled(chosen is not None)
        if running:
            verb = "stopping" if self.trainer.stopping else "running"
            self.state_label.setText(f"Trainer {verb}: run {self.live_run_id}")
        elif self.last_exit is not None:
            self.state_label.setText(f"Run {self.last_exit.run_id}: {self.last_exit.message}")

    # -- the runs table -----------------------------------------------------------------

    def current_run(self) -> RunRow | None:
        index = self.run_view.currentIndex()
        return self.run_model.record(index.row()) if index.isValid() else None

    def select_run(self, run_id: str) -> bool:
        for row, record in enumerate(self.run_model.records):
            if record.id == run_id:
                self.run_view.setCurrentIndex(self.run_model.index(row, 0))
                return True
        return False

    def rename_run(self, run_id: str, name: str) -> bool:
        """Give a run a display name of its own (kept in the store; "" shows its id)."""
        try:
            stored = rename_run(self.store, run_id, name)
        except StoreError as exc:
            self.message.emit(str(exc))
            return False
        self._started_names.pop(run_id, None)
        records = [dataclasses.replace(r, name=stored) if r.id == run_id else r
                   for r in self.run_model.records]
        chosen = self.current_run()
        selection = self.run_view.selectionModel()
        assert selection is not None
        selection.blockSignals(True)  # the same run stays chosen: nothing to reload
        try:
            self.run_model.set_records(records)
            if chosen is not None:
                self.select_run(chosen.id)
        finally:
            selection.blockSignals(False)
        self.runs_list.apply_filter()
        self._update_plotted()
        self._update_comparison()
        self.message.emit(f"run {run_id} is now called {stored or run_id}")
        self.poll(force=True)
        return True

    @property
    def shown_run_id(self) -> str | None:
        """The run the plots, checkpoints and log show: the chosen one, else the live one."""
        chosen = self.current_run()
        return chosen.id if chosen is not None else self.live_run_id

    def _run_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self._update_buttons()
        self._show(self.shown_run_id)

    def _show(self, run_id: str | None) -> None:
        if run_id != self.plots.run_id:
            self._show_checkpoints([])
        self._update_plotted()
        if run_id != self._log_run_id:
            self._show_log(run_id)

    def plotted_run_ids(self) -> list[str]:
        """The runs on the plots: the shown one first, then the ticked ones."""
        shown = self.shown_run_id
        listed = {r.id for r in self.run_model.records}
        ticked = [r for r in self.run_model.checked if r in listed and r != shown]
        return ([shown] if shown is not None else []) + ticked

    def compare_runs(self, run_ids: list[str]) -> None:
        """Tick these runs for the plots and the comparison table."""
        self.run_model.set_checked(run_ids)

    def run_title(self, run_id: str) -> str:
        """The run's name as shown: distinct where runs share one; a run just started
        and not listed yet has the name it was started with."""
        return self.run_model.titles.get(run_id) or self._started_names.get(run_id) \
            or run_id

    def _update_plotted(self) -> None:
        wanted = [(run_id, self.run_title(run_id)) for run_id in self.plotted_run_ids()]
        if wanted == [(run.id, run.label) for run in self.plots.runs.values()]:
            return
        self.plots.set_runs(wanted)
        self.run_model.refresh_colours()
        self._update_comparison()
        self.poll(force=True)

    def _update_comparison(self) -> None:
        rows = {r.id: r for r in self.run_model.records}
        runs = []
        for run_id, plotted in self.plots.runs.items():
            listed = rows.get(run_id)
            runs.append(ComparedRun(run_id, plotted.label, listed.status if listed else "",
                                    self._configs.get(run_id, ""), plotted.history))
        self.compare_table.show_runs(runs, {run_id: run.colour for run_id, run
                                            in self.plots.runs.items()})

    def _show_checkpoints(self, checkpoints: list[Checkpoint]) -> None:
        self.checkpoint_model.set_records(checkpoints)
        self.lower_tabs.setTabText(2, f"Checkpoints ({len(checkpoints)})")

    def _show_log(self, run_id: str | None) -> None:
        self._log_run_id = run_id
        self.lower_tabs.setTabText(0, "Log" if run_id is None else f"Log of run {run_id}")
        text = read_tail(trainer_log_path(self.workspace, run_id)) if run_id else ""
        self.log.setPlainText("\n".join(terminal_lines(text.rstrip("\n"))))
        self._scroll_log()

    def _scroll_log(self) -> None:
        bar = self.log.verticalScrollBar()
        if bar is not None:
            bar.setValue(bar.maximum())

    # -- reading the store --------------------------------------------------------------

    def poll(self, force: bool = False) -> bool:
        """Read the runs and the shown run's new metrics in the background (one read at a
        time; `force` also reads while the screen is hidden). False: no read started."""
        if self._closed or self._polling:
            return False
        if not force and not self.isVisible() and not self.trainer.is_running():
            return False
        run_id = self.shown_run_id
        after = {plotted: run.history.last_step for plotted, run in self.plots.runs.items()}
        store = self.store
        self._polling = True
        self.reads.submit("Reading the runs", lambda state: poll_runs(store, run_id, after),
                          on_done=self._poll_done, on_failed=self._poll_failed)
        return True

    def _read_failed(self, error: str) -> None:
        self.message.emit(f"Training screen: {error}")

    def _poll_failed(self, error: str) -> None:
        self._polling = False
        self._read_failed(error)

    def _poll_done(self, result: Any) -> None:
        self._polling = False
        if not self._closed:
            self._polled(result)

    def _polled(self, snapshot: RunsSnapshot) -> None:
        if snapshot.runs != self.run_model.records:
            chosen = self.current_run()
            selection = self.run_view.selectionModel()
            assert selection is not None
            selection.blockSignals(True)
            try:
                self.run_model.set_records(snapshot.runs)
                if chosen is not None:
                    self.select_run(chosen.id)
            finally:
                selection.blockSignals(False)
            self.runs_list.apply_filter()
        if self._follow_live and self.live_run_id is not None \
                and self.select_run(self.live_run_id):
            self._follow_live = False  # selected once; the person may choose another
        if not self._opened_on_a_run and self.run_model.records:
            # the screen opens on the newest run rather than on empty plots
            self._opened_on_a_run = True
            if self.current_run() is None and self.live_run_id is None:
                newest = max(self.run_model.records, key=lambda r: r.created_at)
                self.select_run(newest.id)
        self._update_buttons()
        self._update_plotted()
        self._configs.update(snapshot.configs)
        fresh = {run_id: points for run_id, points in snapshot.points.items()
                 if run_id in self.plots.runs and run_id in snapshot.after
                 and self.plots.runs[run_id].history.last_step == snapshot.after[run_id]}
        self.plots.add_run_points(fresh)
        self._update_comparison()
        if snapshot.run_id != self.shown_run_id \
                or set(snapshot.after) != set(self.plots.runs):
            self.poll(force=True)  # the choice changed while reading: read for the new one
            self.polled.emit()
            return
        if snapshot.checkpoints != self.checkpoint_model.records:
            self._show_checkpoints(snapshot.checkpoints)
        self.lower_tabs.setTabVisible(self._cluster_tab,
                                      self.cluster_panel.show_reading(snapshot.cluster))
        self.polled.emit()

    # -- the run form's files -----------------------------------------------------------

    def _open_clicked(self) -> None:
        folder = configs_folder(self.workspace)
        name, _ = QFileDialog.getOpenFileName(self, "Open a run configuration",
                                              str(folder if folder.is_dir()
                                                  else self.workspace),
                                              "Run configuration (*.toml)")
        if name:
            self.load_config(Path(name))

    def load_config(self, path: Path) -> bool:
        try:
            config, text = load_run_config(path)
        except ConfigError as exc:
            self.message.emit(str(exc))
            self.form.set_toml(path.read_text(encoding="utf-8", errors="replace")
                               if path.is_file() else "")
            return False
        self.form.set_config(config, text)
        self.name_form_afresh()
        self.message.emit(f"loaded {path}")
        return True

    def _save_clicked(self) -> None:
        folder = configs_folder(self.workspace)
        folder.mkdir(parents=True, exist_ok=True)
        name, _ = QFileDialog.getSaveFileName(self, "Save the run configuration",
                                              str(folder / "run.toml"),
                                              "Run configuration (*.toml)")
        if name:
            self.save_config(Path(name))

    def save_config(self, path: Path) -> bool:
        try:
            save_run_config(path, self.form.toml_text())
        except ConfigError as exc:
            self.message.emit(str(exc))
            return False
        self.message.emit(f"saved {path}; run it with `workbench train {path}`")
        return True

    def _defaults_clicked(self) -> None:
        self.form.set_config(RunConfig())
        self.name_form_afresh(always=True)

    def _use_configuration(self) -> None:
        chosen = self.current_run()
        if chosen is None:
            return
        try:
            text = self.store.runs.get(chosen.id).config
            self.form.set_config(parse_run_config(text, f"run {chosen.id}"), text)
        except (ConfigError, StoreError) as exc:
            self.message.emit(str(exc))
            return
        self.name_form_afresh(always=True)

    # -- start, stop, resume ------------------------------------------------------------

    def start(self) -> str | None:
        """Save the form under runs/<new run>/ and start the trainer on it; the run id, or
        None (the reason is shown) when the form does not fit or a trainer runs."""
        if self.trainer.is_running():
            self.message.emit(f"run {self.live_run_id} is still training; stop it first")
            return None
        run_id = new_run_id()
        path = run_config_path(self.workspace, run_id)
        try:
            text = self.form.toml_text()
            config = parse_run_config(text, str(path))
            taken = self._taken_names()
            if not config.run.name or config.run.name in taken:  # two runs, one name: no
                name = next_run_name(config.run.name, taken)
                text = with_run_name(text, name)
                config = parse_run_config(text, str(path))
            check_run_workspace(config, self.workspace, str(path))
            save_run_config(path, text)
        except ConfigError as exc:
            self.form.show_error(str(exc))
            self.message.emit(str(exc))
            return None
        except OSError as exc:
            self.message.emit(f"{path}: cannot write the run configuration: {exc}")
            return None
        self._started_names[run_id] = config.run.name  # its legend, until it is listed
        self._launch(run_id, path, resume=False)
        self.form.set_config(config, text)
        self.name_form_afresh(always=True, taken=[config.run.name])  # for the next run
        return run_id

    def resume(self, run_id: str | None = None) -> bool:
        """Continue a stopped run (the chosen one by default) from its newest checkpoint."""
        if self.trainer.is_running():
            self.message.emit(f"run {self.live_run_id} is still training; stop it first")
            return False
        if run_id is None:
            chosen = self.current_run()
            if chosen is None or not chosen.resumable:
                self.message.emit("Choose a stopped training run to resume")
                return False
            run_id = chosen.id
        try:
            path = config_for_resume(self.store, run_id)
            config = load_run_config(path)[0]
            check_run_workspace(config, self.workspace, str(path))
        except (ConfigError, StoreError, OSError) as exc:
            self.message.emit(str(exc))
            return False
        self._launch(run_id, path, resume=True)
        return True

    def _launch(self, run_id: str, config: Path, *, resume: bool) -> None:
        command = trainer_command(self.workspace, config, run_id, resume=resume)
        self.live_run_id = run_id
        self.last_exit = None
        self._follow_live = not self.select_run(run_id)
        if self._follow_live:  # a new run: not listed yet; show it while it appears
            self.run_view.clearSelection()
            self.run_view.setCurrentIndex(QModelIndex())
        self._show(run_id)
        self.trainer.start(command, run_id, trainer_log_path(self.workspace, run_id))
        self.message.emit(f"{'resuming' if resume else 'started'} run {run_id}")
        self._update_buttons()
        self.poll(force=True)

    def stop(self) -> bool:
        """Ask the trainer to stop; it saves a checkpoint and the run becomes "stopped"."""
        stopping = self.trainer.stop(self.stop_grace_s)
        if stopping:
            self.message.emit(f"stopping run {self.live_run_id}: saving a checkpoint")
        self._update_buttons()
        return stopping

    def _output(self, line: str) -> None:
        if self._log_run_id == self.trainer.run_id:
            self.log.appendPlainText(line)

    def _trainer_finished(self, run_id: str, exit_code: int, crashed: bool,
                          forced: bool) -> None:
        """Settle the run in the store: a trainer that was killed (or died in its set-up)
        could not record how it ended, nor stop its sandboxes."""
        status = "done" if exit_code == 0 and not crashed else (
            "stopped" if forced or exit_code == STOPPED_EXIT_CODE else "failed")
        workspace, store, grace = self.workspace, self.store, self.stop_grace_s

        def settle() -> TrainerExit:
            marked = bool(run_id) and finish_abandoned_run(store, run_id, status)
            sandboxes = stop_run_sandboxes(workspace, run_id) if run_id else []
            try:
                final = store.runs.get(run_id).status
            except StoreError:  # it died before the store knew the run
                final = status
            words = [f"the trainer did not stop within {grace:.0f} s and was terminated"
                     if forced else exit_summary(exit_code, crashed)]
            if run_id and exit_code == 0 and not crashed:
                outcome = episodes_outcome(store, run_id)  # e.g. every task's setup failed
                if outcome:
                    words[0] = f"{words[0]}, {outcome}"
            if marked:
                words.append(f"run marked {status}")
            if sandboxes:
                words.append(f"stopped its sandboxes {', '.join(sandboxes)}")
            return TrainerExit(run_id, exit_code, crashed, forced, final, "; ".join(words))

        self._update_buttons()
        self.reads.submit(f"Settling run {run_id}", lambda state: settle(),
                          on_done=self._settled, on_failed=self._read_failed)

    def _settled(self, ended: TrainerExit) -> None:
        self.last_exit = ended
        self.message.emit(f"run {ended.run_id}: {ended.message}")
        if self._closed:
            return
        self._update_buttons()
        self.poll(force=True)
        self.trainer_ended.emit(ended)

    # -- closing ------------------------------------------------------------------------

    def confirm_close(self) -> bool:
        """Before the app quits: a running trainer is stopped cleanly if the person agrees.
        False: do not close."""
        if not self.trainer.is_running():
            return True
        answer = QMessageBox.question(
            self, "A training run is in progress",
            f"Run {self.live_run_id} is training. Stop it (a checkpoint is saved; it can "
            f"be resumed later) and close?")
        return answer == QMessageBox.StandardButton.Yes

    def shutdown(self) -> None:
        """The workspace closes: stop the trainer cleanly (events keep running while it
        saves), settle its run, and finish every read of the store."""
        self.timer.stop()
        if self.trainer.is_running():
            self.stop()
            self.trainer.wait(self.stop_grace_s + KILL_AFTER_S + 5)
        self.reads.wait(60_000)  # the settling of the run, the last read
        self._closed = True

    def showEvent(self, event: QShowEvent | None) -> None:
        super().showEvent(event)
        self.poll()
