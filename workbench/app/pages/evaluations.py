"""The Evaluations screen: the workspace's `workbench eval` runs, each as a policy table
with 95% intervals, a policy x task heatmap of success (flip rates across seeds in each
cell) and the paired comparisons; double-clicking a cell shows its episodes.

Reports are rebuilt from the store when shown, so an evaluation still running (or
resumed from the command line) shows what has finished so far.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PyQt6.QtCore import QProcess, Qt, QTimer, pyqtSignal
from PyQt6.QtGui import QColor, QShowEvent
from PyQt6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from trainer.evaluation import Comparison, EvalReport, PolicyResult
from trainer.evaluation.plan import PlanError, count_of, describe_seeds
from trainer.evaluation.report import success_rgb
from trainer.evaluation.stored import current_report, evaluation_names
from trainer.store import Store
from trainer.store.queries import EpisodeFilter
from workbench.app.models.record_table import Column, RecordTableModel
from workbench.app.widgets.record_table import record_table_view
from workbench.app.workers import Worker, Workers
from workbench.services.evaluation_command import (
    EvaluationRequest,
    bundled_task_ids,
    eval_arguments,
    join_entries,
    load_last_values,
    save_last_values,
)

RESULTS_EVERY_MS = 2000  # how often a running evaluation's stored results are read


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _interval(interval: tuple[float, float] | None) -> str:
    return "–" if interval is None else f"{interval[0]:.0%} – {interval[1]:.0%}"


def _mcnemar(comparison: Comparison) -> str:
    """No pairs, no test: "–" rather than the p = 1 the formula gives for 0 of 0."""
    return "–" if comparison.pairs == 0 else f"{comparison.mcnemar_p:.3g}"


def _mcnemar_tip(comparison: Comparison) -> str:
    if comparison.pairs == 0:
        return ("no pairs yet: no task and seed that both policies have a scored "
                "episode of")
    return (f"exact McNemar test on the {comparison.a_only + comparison.b_only} pair(s) "
            "where only one policy succeeded")


POLICY_COLUMNS: tuple[Column[PolicyResult], ...] = (
    Column("Policy", lambda p: p.label),
    Column("Success", lambda p: _pct(p.success_rate),
           lambda p: f"{p.successes} of {p.episodes} scored episodes", align_right=True),
    Column("95% (Wilson)", lambda p: _interval(p.interval), align_right=True),
    Column("Task mean", lambda p: _pct(p.task_mean), align_right=True),
    Column("95% (bootstrap over tasks)", lambda p: _interval(p.task_mean_interval),
           align_right=True),
    Column("Episodes", lambda p: str(p.episodes), align_right=True),
    Column("Errors", lambda p: str(p.errors),
           lambda p: "episodes the desktop or model server failed (not counted)",
           align_right=True),
    Column("Setup failed", lambda p: str(p.setup_failed),
           lambda p: "scored episodes whose setup had a command that failed (not one that "
                     "needs the web or fails on OSWorld's image too): they did not start "
                     "from the task's state", align_right=True),
)
COMPARISON_COLUMNS: tuple[Column[Comparison], ...] = (
    Column("A vs B", lambda c: f"{c.a} vs {c.b}"),
    Column("Pairs", lambda c: str(c.pairs), lambda c: "same task and seed, both scored",
           align_right=True),
    Column("Only A", lambda c: str(c.a_only), align_right=True),
    Column("Only B", lambda c: str(c.b_only), align_right=True),
    Column("McNemar p", lambda c: _mcnemar(c), lambda c: _mcnemar_tip(c), align_right=True),
    Column("Difference", lambda c: "–" if c.difference is None else f"{c.difference:+.0%}",
           align_right=True),
    Column("95% (paired bootstrap)", lambda c: _interval(c.difference_interval),
           align_right=True),
)


def success_colour(rate: float | None) -> QColor:
    return QColor(*success_rgb(rate))


class EvaluationsPage(QWidget):
    show_episodes = pyqtSignal(object)  # an EpisodeFilter: a heatmap cell's episodes
    message = pyqtSignal(str)
    progress = pyqtSignal(str)  # a line of the running evaluation's output
    finished = pyqtSignal(int)  # the running evaluation's exit status
    suite_opened = pyqtSignal(QDialog)  # a task suite's dialog, about to be shown
    new_dialog_opened = pyqtSignal(QDialog)  # the New evaluation dialog, about to be shown

    def __init__(self, store: Store, workspace: Path, parent: QWidget | None = None,
                 workers: Workers | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.workspace = workspace
        self.workers = workers if workers is not None else Workers(parent=self)
        self.report: EvalReport | None = None
        self._suite_ids: list[str] | None = None
        self.names = QListWidget()
        self.names.setMaximumWidth(220)
        self.names.currentTextChanged.connect(self.show_evaluation)
        refresh = QPushButton("Refresh")
        refresh.setToolTip("Read the workspace's evaluations again (F5)")
        refresh.clicked.connect(self.refresh)
        self.new_button = QPushButton("New evaluation…")
        self.new_button.setToolTip("Choose policies, tasks, seeds and desktops; it runs in "
                                   "the background and its results show as they arrive")
        self.new_button.clicked.connect(lambda: self.ask_new_evaluation())
        self.suite_button = QPushButton("Open task suite…")
        self.suite_button.setToolTip("An OSWorld evaluation_examples folder: which tasks "
                                     "run here and why the others do not; evaluate the "
                                     "ones you choose")
        self.suite_button.clicked.connect(self.ask_task_suite)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the running evaluation (its episodes so far "
                                      "stay)")
        self.cancel_button.clicked.connect(self.cancel_evaluation)
        self.cancel_button.hide()
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.process: QProcess | None = None
        self.running_name = ""
        self.output: list[str] = []  # the running evaluation's lines so far
        self._pending = ""
        self._results_timer = QTimer(self)
        self._results_timer.setInterval(RESULTS_EVERY_MS)
        self._results_timer.timeout.connect(self._show_running)
        self.title = QLabel("")
        self.title.setObjectName("evaluation-title")
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.hint = QLabel(evaluation_hint(workspace, store))
        # wrapped where the window is narrow (a copied command comes out whole)
        self.hint.setWordWrap(True)
        self.hint.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.policy_model: RecordTableModel[PolicyResult] = RecordTableModel(POLICY_COLUMNS,
                                                                             self)
        self.policy_view = record_table_view(self.policy_model)
        self.heatmap = QTableWidget()
        self.heatmap.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.heatmap.setToolTip("Success per task and policy; flip: share of pairs of seeds "
                                "with different outcomes. Double-click: the episodes")
        self.heatmap.cellDoubleClicked.connect(self._cell_chosen)
        self.comparison_model: RecordTableModel[Comparison] = RecordTableModel(
            COMPARISON_COLUMNS, self)
        self.comparison_view = record_table_view(self.comparison_model)

        left = QVBoxLayout()
        left.addWidget(QLabel("Evaluations"))
        left.addWidget(self.names, 1)
        left.addWidget(self.new_button)
        left.addWidget(self.suite_button)
        left.addWidget(self.cancel_button)
        left.addWidget(refresh)
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.policy_view)
        right.addWidget(self.heatmap)
        right.addWidget(self.comparison_view)
        right.setSizes([140, 360, 120])
        body = QVBoxLayout()
        body.addWidget(self.title)
        body.addWidget(self.status)
        body.addWidget(self.hint)
        body.addWidget(right, 1)
        layout = QHBoxLayout(self)
        layout.addLayout(left)
        layout.addLayout(body, 1)
        self.refresh()

    # -- a new evaluation, run in the background ----------------------------------------

    def ask_task_suite(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "OSWorld evaluation_examples folder")
        if folder:
            self.open_task_suite(Path(folder))

    def open_task_suite(self, folder: Path) -> Worker:
        """Audit the folder's tasks in the background, then show them (suite_opened)."""
        from workbench.app.suite_audit import audit_in_background

        return audit_in_background(self.workers, folder, self.show_task_suite,
                                   self.message.emit, self.workspace)

    def show_task_suite(self, folder: Path, domains: Any, tasks: Any) -> None:
        from workbench.app.widgets.task_suite_dialog import TaskSuiteDialog

        dialog = TaskSuiteDialog(folder, domains, tasks, self)
        self.suite_opened.emit(dialog)
        if dialog.exec() == QDialog.DialogCode.Accepted and dialog.chosen_files():
            self.ask_new_evaluation(dialog.chosen_files())

    def suite_ids(self) -> list[str]:
        """The bundled suite's task ids, which the dialog checks task entries against
        (read once)."""
        if self._suite_ids is None:
            self._suite_ids = bundled_task_ids()
        return self._suite_ids

    def ask_new_evaluation(self, tasks: Sequence[str] = ()) -> bool:
        """The New evaluation dialog as it was last left (with `tasks` filled in), then
        its run."""
        from workbench.app.widgets.new_evaluation_dialog import NewEvaluationDialog
        from workbench.services.training_runs import distinct_titles, list_runs

        runs = [r for r in list_runs(self.store) if r.checkpoints]
        titles = distinct_titles(runs)
        dialog = NewEvaluationDialog([(r.id, titles[r.id]) for r in runs],
                                     evaluation_names(self.workspace), self,
                                     suite_ids=self.suite_ids())
        dialog.set_values(load_last_values(self.workspace))
        if tasks:
            dialog.tasks.setText(join_entries(list(tasks)))
        self.new_dialog_opened.emit(dialog)
        answer = dialog.exec()
        try:
            save_last_values(self.workspace, dialog.values())
        except OSError as exc:  # kept for the next opening only: not worth a failure
            self.message.emit(f"New evaluation: its values were not kept: {exc}")
        if answer != QDialog.DialogCode.Accepted:
            return False
        return self.start_evaluation(dialog.request())

    def start_evaluation(self, request: EvaluationRequest) -> bool:
        """Run `workbench eval` for `request` in the background; its results show as the
        episodes are stored. False when one is running already or the request is not
        complete (the reason is in the status bar)."""
        problems = request.problems(evaluation_names(self.workspace), self.suite_ids())
        if self.process is not None or problems:
            self.message.emit(f"An evaluation is running: {self.running_name}"
                              if self.process is not None
                              else "New evaluation needs " + "; ".join(problems))
            return False
        process = QProcess(self)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        process.readyReadStandardOutput.connect(self._read_output)
        process.finished.connect(self._evaluation_finished)
        self.process, self.running_name, self.output, self._pending = (
            process, request.name, [], "")
        self.status.setText(f"Evaluation {request.name}: starting "
                            f"({count_of(len(request.policies), 'policy', 'policies')}, "
                            f"{describe_seeds(request.seed_list())})…")
        self.new_button.setEnabled(False)
        self.cancel_button.show()
        process.start(sys.executable, eval_arguments(self.workspace, request))
        self._results_timer.start()
        return True

    def cancel_evaluation(self) -> None:
        if self.process is not None:
            self.status.setText(f"Evaluation {self.running_name}: stopping…")
            self.process.terminate()

    def shutdown(self) -> None:
        """Stop a running evaluation (the app is closing)."""
        process = self.process
        if process is not None:
            process.terminate()
            if not process.waitForFinished(10_000):
                process.kill()
                process.waitForFinished(5_000)

    def _read_output(self) -> None:
        if self.process is None:
            return
        text = self._pending + bytes(self.process.readAllStandardOutput().data()).decode(
            "utf-8", "replace")
        *lines, self._pending = text.split("\n")
        lines = [line.rstrip() for line in lines if line.strip()]
        self.output += lines
        if lines:
            self.status.setText(f"Evaluation {self.running_name}: {lines[-1]}")
            self.progress.emit(lines[-1])

    def _show_running(self) -> None:
        """The running evaluation's results so far (its plan is saved as it starts)."""
        names = evaluation_names(self.workspace)
        if self.running_name not in names:
            return
        listed = [item.text() for i in range(self.names.count())
                  if (item := self.names.item(i)) is not None]
        self.refresh()  # keeps the evaluation chosen
        if self.running_name not in listed:  # it just appeared: show it, once
            self.select_evaluation(self.running_name)

    def select_evaluation(self, name: str) -> bool:
        found = self.names.findItems(name, Qt.MatchFlag.MatchExactly)
        if not found:
            return False
        self.names.setCurrentItem(found[0])
        return True

    def _evaluation_finished(self, exit_code: int, _status: QProcess.ExitStatus) -> None:
        self._read_output()
        self._results_timer.stop()
        name = self.running_name
        process, self.process = self.process, None
        if process is not None:
            process.deleteLater()
        self.new_button.setEnabled(True)
        self.cancel_button.hide()
        self.refresh()
        self.select_evaluation(name)
        if exit_code == 0:
            text = f"Evaluation {name} finished"
        else:
            last = self.output[-1] if self.output else "no output"
            text = f"Evaluation {name} ended with exit status {exit_code}: {last}"
        self.status.setText(text)
        self.message.emit(text)
        self.finished.emit(exit_code)

    def showEvent(self, event: QShowEvent | None) -> None:
        """An evaluation finished on the command line shows when the screen is opened
        (no F5 needed)."""
        super().showEvent(event)
        listed = [item.text() for i in range(self.names.count())
                  if (item := self.names.item(i)) is not None]
        if evaluation_names(self.workspace) != listed:
            self.refresh()

    def refresh(self) -> None:
        chosen = self.names.currentItem()
        keep = chosen.text() if chosen is not None else None
        names = evaluation_names(self.workspace)
        self.names.blockSignals(True)
        self.names.clear()
        self.names.addItems(names)
        self.names.blockSignals(False)
        self.hint.setVisible(not names)
        if names:
            self.names.setCurrentRow(names.index(keep) if keep in names else 0)
            self.show_evaluation(self.names.currentItem().text())  # type: ignore[union-attr]
        else:
            self.show_evaluation("")

    def show_evaluation(self, name: str) -> None:
        report = None
        if name:
            try:
                report = current_report(self.workspace, self.store, name)
            except PlanError as exc:
                self.message.emit(str(exc))
        self.report = report
        self.policy_model.set_records(report.policies if report else [])
        self.comparison_model.set_records(report.comparisons if report else [])
        self._fill_heatmap(report)
        for view in (self.policy_view, self.comparison_view):
            view.resizeColumnsToContents()
        self.title.setText("" if report is None else
                           f"<b>{report.name}</b>: {count_of(len(report.tasks), 'task')} × "
                           f"{describe_seeds(report.seeds)} × "
                           f"{count_of(len(report.policies), 'policy', 'policies')}")

    def _fill_heatmap(self, report: EvalReport | None) -> None:
        self.heatmap.clear()
        if report is None:
            self.heatmap.setRowCount(0)
            self.heatmap.setColumnCount(0)
            return
        labels = [p.label for p in report.policies]
        self.heatmap.setRowCount(len(report.tasks))
        self.heatmap.setColumnCount(len(labels))
        self.heatmap.setHorizontalHeaderLabels(labels)
        self.heatmap.setVerticalHeaderLabels(report.tasks)
        cells = {(t.task_id, t.policy): t for t in report.per_task}
        for row, task_id in enumerate(report.tasks):
            for column, label in enumerate(labels):
                result = cells[(task_id, label)]
                flips = "" if result.flip_rate is None else f" · flip {result.flip_rate:.2f}"
                item = QTableWidgetItem(f"{_pct(result.success_rate)}{flips}")
                item.setBackground(success_colour(result.success_rate))
                item.setForeground(QColor("#000000"))
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                item.setToolTip(f"{label} on {task_id}: {result.successes} of "
                                f"{result.episodes} scored episodes")
                self.heatmap.setItem(row, column, item)
        self.heatmap.resizeColumnsToContents()

    def cell_filter(self, row: int, column: int) -> EpisodeFilter | None:
        """The episodes of one heatmap cell: the evaluation, the policy, the task."""
        report = self.report
        if report is None or not (0 <= row < len(report.tasks)
                                  and 0 <= column < len(report.policies)):
            return None
        return EpisodeFilter(task_ids=[report.tasks[row]],
                             tags=[f"eval:{report.name}",
                                   f"policy:{report.policies[column].label}"])

    def _cell_chosen(self, row: int, column: int) -> None:
        selection = self.cell_filter(row, column)
        if selection is not None:
            self.show_episodes.emit(selection)


def evaluation_hint(workspace: Path, store: Store) -> str:
    """What to run for a first evaluation of this workspace: the command with its
    --workspace and --tasks (without --tasks the whole bundled suite runs)."""
    import shlex

    tasks = [t.id for t in store.tasks.all()][:3] or ["TASK_ID"]
    return ("No evaluation in this workspace yet: New evaluation… runs one here, or from "
            "a terminal:\n"
            f"  workbench --workspace {shlex.quote(str(workspace))} eval first "
            f"--policy oracle --policy random --seeds 3 --tasks {' '.join(tasks)}\n"
            "--tasks names bundled task ids or task files; without it every bundled "
            "task runs. See workbench eval --help.")
