"""New evaluation: which policies (oracle, random, a run's checkpoint, a model folder, an
OpenAI-compatible server), on which tasks (bundled ids or patterns, task files, an OSWorld
evaluation_examples folder), which seeds and how many desktops. Gives an EvaluationRequest;
the Evaluations screen runs it. Tasks and seeds are typed separated by commas or spaces and
checked as they are typed: a bad entry is named here, before anything runs."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from workbench.services.evaluation_command import (
    MOST_SEEDS,
    DialogValues,
    EvaluationRequest,
    join_entries,
    next_evaluation_name,
    split_entries,
    task_entry_problem,
)

BAD_FIELD_STYLE = "QLineEdit { border: 1px solid #b3261e; }"
SEEDS_TIP = ("One episode per policy, task and seed: a count N alone means seeds 0..N-1 "
             "(3: seeds 0, 1, 2); otherwise the seeds themselves, by commas or spaces "
             f"(0, 4 7; one seed k: \"k,\"); at most {MOST_SEEDS}")


class NewEvaluationDialog(QDialog):
    def __init__(self, checkpoints: Sequence[tuple[str, str]], taken: Collection[str],
                 parent: QWidget | None = None,
                 suite_ids: Collection[str] | None = None) -> None:
        """`checkpoints`: (run id, the run's title) of the runs with a checkpoint;
        `taken`: the evaluations' names already used; `suite_ids`: the bundled suite's
        task ids, to check each task entry against (None: not checked)."""
        super().__init__(parent)
        self.setWindowTitle("New evaluation")
        self.setMinimumWidth(520)
        self.taken = set(taken)
        self.suite_ids = None if suite_ids is None else frozenset(suite_ids)
        self.name = QLineEdit(next_evaluation_name(self.taken))
        self.oracle = QCheckBox("oracle (the task's scripted solution: what a perfect "
                                "policy scores)")
        self.oracle.setChecked(True)
        self.random = QCheckBox("random (random clicks and keys: the floor)")
        self.random.setChecked(True)
        self.runs = QListWidget()
        self.runs.setToolTip("A run's newest checkpoint (checkpoint:RUN)")
        for run_id, title in checkpoints:
            item = QListWidgetItem(f"{title} ({run_id})")
            item.setData(Qt.ItemDataRole.UserRole, run_id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
            self.runs.addItem(item)
        self.runs.setMaximumHeight(90)
        self.runs.setVisible(bool(checkpoints))
        self.model = QLineEdit()
        self.model.setPlaceholderText("a model folder (model:PATH), optional")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_model)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model, 1)
        model_row.addWidget(browse)
        self.openai = QLineEdit()
        self.openai.setPlaceholderText("MODEL@http://host:8000/v1 (an OpenAI-compatible "
                                       "server), optional")
        self.tasks = QLineEdit()
        self.tasks.setPlaceholderText("bundled ids or patterns (buttons-*), task files or "
                                      "folders, by commas or spaces; empty: every "
                                      "bundled task")
        files = QPushButton("Task files…")
        files.clicked.connect(self._add_files)
        folder = QPushButton("OSWorld folder…")
        folder.setToolTip("An evaluation_examples folder (its examples/ tree)")
        folder.clicked.connect(self._add_folder)
        task_row = QHBoxLayout()
        task_row.addWidget(self.tasks, 1)
        task_row.addWidget(files)
        task_row.addWidget(folder)
        self.seeds = QLineEdit("3")
        self.seeds.setPlaceholderText("a count (3: seeds 0, 1, 2) or the seeds, by commas or "
                                      "spaces (0, 4 7)")
        self.seeds.setToolTip(SEEDS_TIP)
        self.desktops = QSpinBox()
        self.desktops.setRange(1, 16)
        self.desktops.setValue(1)
        self.desktops.setToolTip("Sandboxes run at once")
        self.problem = QLabel("")
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b3261e")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        if ok is not None:
            ok.setText("Run")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

        policies = QVBoxLayout()
        for widget in (self.oracle, self.random):
            policies.addWidget(widget)
        if checkpoints:
            policies.addWidget(QLabel("checkpoints of the workspace's runs:"))
            policies.addWidget(self.runs)
        policies.addLayout(model_row)
        policies.addWidget(self.openai)
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("Policies", policies)
        form.addRow("Tasks", task_row)
        form.addRow("Seeds", self.seeds)
        form.addRow("Desktops", self.desktops)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(self.buttons)
        for line in (self.name, self.model, self.openai, self.tasks, self.seeds):
            line.textChanged.connect(self._check)
        for box in (self.oracle, self.random):
            box.toggled.connect(self._check)
        self.runs.itemChanged.connect(self._check)
        self._check()

    def request(self) -> EvaluationRequest:
        policies = [name for name, box in (("oracle", self.oracle), ("random", self.random))
                    if box.isChecked()]
        for row in range(self.runs.count()):
            item = self.runs.item(row)
            if item is not None and item.checkState() == Qt.CheckState.Checked:
                policies.append(f"checkpoint:{item.data(Qt.ItemDataRole.UserRole)}")
        if self.model.text().strip():
            policies.append(f"model:{self.model.text().strip()}")
        if self.openai.text().strip():
            policies.append(f"openai:{self.openai.text().strip()}")
        return EvaluationRequest(self.name.text().strip(), policies,
                                 split_entries(self.tasks.text()), self.seeds.text().strip(),
                                 self.desktops.value())

    def task_problems(self) -> list[str]:
        """What is wrong with each task entry, naming it ("task 'x': ...")."""
        if self.suite_ids is None:
            return []
        return [problem for entry in split_entries(self.tasks.text())
                if (problem := task_entry_problem(entry, self.suite_ids))]

    def _check(self) -> None:
        request = self.request()
        bad_seeds = request.seed_problems()
        needs = [need for need in request.problems(self.taken) if need not in bad_seeds]
        bad_tasks = self.task_problems()
        lines = (["Needs " + "; ".join(needs)] if needs else []) + bad_seeds + bad_tasks
        self.problem.setText("\n".join(lines))
        self.tasks.setStyleSheet(BAD_FIELD_STYLE if bad_tasks else "")
        self.tasks.setToolTip("\n".join(bad_tasks))
        self.seeds.setStyleSheet(BAD_FIELD_STYLE if bad_seeds else "")
        self.seeds.setToolTip("\n".join(bad_seeds) if bad_seeds else SEEDS_TIP)
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        if ok is not None:
            ok.setEnabled(not lines)
        layout = self.layout()
        if layout is not None:  # taller where the problems need it: never cut off
            layout.activate()
            wanted = layout.totalHeightForWidth(self.width()) \
                if layout.hasHeightForWidth() else self.sizeHint().height()
            if wanted > self.height():
                self.resize(self.width(), wanted)

    # -- the values kept for the next opening ------------------------------------------

    def values(self) -> DialogValues:
        request = self.request()
        return DialogValues(request.policies, self.tasks.text().strip(), request.seeds,
                            request.desktops)

    def set_values(self, values: DialogValues) -> None:
        """Fill the dialog in as it was left (a run no longer listed is left out)."""
        policies = set(values.policies)
        self.oracle.setChecked("oracle" in policies)
        self.random.setChecked("random" in policies)
        for row in range(self.runs.count()):
            item = self.runs.item(row)
            if item is not None:
                ticked = f"checkpoint:{item.data(Qt.ItemDataRole.UserRole)}" in policies
                item.setCheckState(Qt.CheckState.Checked if ticked
                                   else Qt.CheckState.Unchecked)
        for line, prefix in ((self.model, "model:"), (self.openai, "openai:")):
            line.setText(next((p[len(prefix):] for p in values.policies
                                if p.startswith(prefix)), ""))
        self.tasks.setText(values.tasks)
        self.seeds.setText(values.seeds)
        self.desktops.setValue(values.desktops)

    def _append_tasks(self, paths: Sequence[str]) -> None:
        current = self.tasks.text().strip()
        self.tasks.setText(" ".join([current, join_entries(list(paths))]).strip())

    def _browse_model(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Model folder")
        if folder:
            self.model.setText(folder)

    def _add_files(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Task files", "", "Task JSON (*.json)")
        self._append_tasks(paths)

    def _add_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "OSWorld evaluation_examples folder")
        if folder:
            self._append_tasks([folder])
