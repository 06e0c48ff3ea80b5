"""The run form: the common knobs of a run configuration as widgets, an "Advanced: edit
TOML" view of the whole file, and the configuration error (naming the field) beside them.

The form edits a `RunConfig`; knobs it does not show keep the values of the configuration
it was given. Every value goes through the same typed loading as a TOML file
(trainer.config_io), so the form refuses exactly what `workbench train` would refuse, with
the same message; the text it produces is the file the command line reads.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from PyQt6.QtCore import QEvent, QObject, Qt, pyqtSignal
from PyQt6.QtGui import QFontDatabase
from PyQt6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from trainer.config import ConfigError, RunConfig, parse_run_config, run_config_toml
from trainer.config_io import from_dict
from workbench.services.training_runs import error_field

FORM_WHERE = "form"  # how errors name the form's values: "form.grpo.beta: ..."
ERROR_STYLE = "border: 1px solid #c0392b;"


@dataclass(frozen=True)
class FormField:
    """One knob on the form: its dotted path in the run configuration and its label; the
    widget follows from the field's type (text, whole number, number, switch, choice,
    list of names)."""

    path: str
    label: str
    minimum: int = 0  # whole numbers: lowest value the spin box offers
    folder: bool = False  # a folder path: with a Browse button
    choose_tasks: bool = False  # task ids: with "Choose…" (the suite folder's tasks)


SECTIONS: tuple[tuple[str, tuple[FormField, ...]], ...] = (
    ("Run", (FormField("run.name", "Name"), FormField("run.seed", "Seed"))),
    ("Model", (FormField("model.path", "Model folder", folder=True),
               FormField("model.finetune", "Fine-tuning"),
               FormField("model.lora.r", "LoRA r", minimum=0),
               FormField("model.lora.alpha", "LoRA alpha", minimum=0))),
    ("GRPO", (FormField("grpo.num_generations", "Group size", minimum=1),
              FormField("grpo.loss_type", "Loss type"),
              FormField("grpo.epsilon", "Epsilon (low clip)"),
              FormField("grpo.epsilon_high", "Epsilon high"),
              FormField("grpo.beta", "KL coefficient (beta)"),
              FormField("training.sample_level", "Samples"))),
    ("Training", (FormField("training.learning_rate", "Learning rate"),
                  FormField("training.updates", "Updates", minimum=0),
                  FormField("training.tasks_per_update", "Task groups per update"),
                  FormField("training.checkpoint_every", "Checkpoint every"))),
    ("Tasks", (FormField("tasks.suite", "Suite folder", folder=True),
               FormField("tasks.ids", "Task ids", choose_tasks=True),
               FormField("tasks.buttons", "Buttons tasks"))),
    ("Rollouts", (FormField("environments.count", "Environments"),
                  FormField("rollout.max_steps", "Max steps", minimum=1),
                  FormField("runtime.asynchronous", "Asynchronous runtime"),
                  FormField("runtime.mode", "Roles run"))),
    ("Curation", (FormField("curation.replay", "Experience replay (ARPO)"),
                  FormField("curation.task_filter", "Task filter (DART)"),
                  FormField("curation.dynamic_rollouts", "Dynamic rollout count"),
                  FormField("curation.dynamic_step_budget", "Dynamic step budget"),
                  FormField("curation.precollected", "Pre-collected successes"))),
)
FIELDS: tuple[FormField, ...] = tuple(f for _, fields in SECTIONS for f in fields)
SPIN_MAXIMUM = 1_000_000_000


class WheelNeedsFocus(QObject):
    """Lets a spin box or combo box take the wheel only while it has the keyboard focus:
    otherwise the wheel passes to the scrolling form, so scrolling past a field never
    changes its value."""

    def eventFilter(self, watched: QObject | None, event: QEvent | None) -> bool:
        if (event is not None and event.type() == QEvent.Type.Wheel
                and isinstance(watched, QWidget) and not watched.hasFocus()):
            event.ignore()  # unaccepted, the event goes on to the parent: the scroll area
            return True
        return False


def field_info(path: str) -> tuple[Any, str]:
    """(the type annotation, the one-line help) of a dotted run-configuration field."""
    cls: Any = RunConfig
    annotation: Any = None
    help_text = ""
    for name in path.split("."):
        hints = typing.get_type_hints(cls)
        if name not in hints:
            raise KeyError(f"{path}: no field {name!r} in {cls.__name__}")
        annotation = hints[name]
        help_text = next(str(f.metadata.get("help", "")) for f in dataclasses.fields(cls)
                         if f.name == name)
        cls = annotation
    return annotation, help_text


def value_at(config: Any, path: str) -> Any:
    for name in path.split("."):
        config = getattr(config, name)
    return config


def plain(value: Any) -> Any:
    """A configuration as TOML would give it: tables as dicts, arrays as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


class RunForm(QWidget):
    """Edits one run configuration; `config()` and `toml_text()` give it back."""

    changed = pyqtSignal()  # after any edit, valid or not
    validity_changed = pyqtSignal(bool)
    # "Choose…" beside the task ids: the suite folder typed in the form ("" when none);
    # the screen audits it and gives the chosen back through set_suite_tasks
    suite_tasks_wanted = pyqtSignal(str)

    def __init__(self, config: RunConfig | None = None, parent: QWidget | None = None
                 ) -> None:
        super().__init__(parent)
        self.widgets: dict[str, QWidget] = {}
        self.kinds: dict[str, str] = {}
        self.error = ""
        self.error_path: str | None = None
        self._base = RunConfig()
        self._text = ""  # the TOML view's text ...
        self._text_config: RunConfig | None = None  # ... and what it parses to
        self._loading = False
        self._wheel_needs_focus = WheelNeedsFocus(self)
        self._build()
        self.set_config(config or RunConfig())

    # -- layout -------------------------------------------------------------------------

    def _build(self) -> None:
        form_page = QWidget()
        columns = QVBoxLayout(form_page)
        columns.setContentsMargins(4, 4, 4, 4)
        for title, fields in SECTIONS:
            box = QGroupBox(title)
            layout = QFormLayout(box)
            layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
            for item in fields:
                layout.addRow(item.label, self._field_widget(item))
            columns.addWidget(box)
        columns.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(form_page)

        self.editor = QPlainTextEdit()
        self.editor.setObjectName("run-config-toml")
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.editor.textChanged.connect(self._text_edited)
        self.tabs = QTabWidget()
        self.tabs.addTab(scroll, "Run form")
        self.tabs.addTab(self.editor, "Advanced: edit TOML")
        self.tabs.currentChanged.connect(self._tab_changed)
        self._tab = 0

        self.error_label = QLabel("")
        self.error_label.setObjectName("run-config-error")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c0392b;")
        self.error_label.setVisible(False)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.tabs, 1)
        outer.addWidget(self.error_label)

    def _field_widget(self, item: FormField) -> QWidget:
        annotation, help_text = field_info(item.path)
        widget: QWidget
        if annotation is bool:
            box = QCheckBox()
            box.toggled.connect(self._edited)
            widget, kind = box, "bool"
        elif get_origin(annotation) is Literal:
            combo = QComboBox()
            combo.addItems([str(choice) for choice in get_args(annotation)])
            combo.currentIndexChanged.connect(self._edited)
            widget, kind = combo, "choice"
        elif annotation is int:
            spin = QSpinBox()
            spin.setRange(item.minimum, SPIN_MAXIMUM)
            spin.valueChanged.connect(self._edited)
            widget, kind = spin, "int"
        elif annotation in (str, float) or get_origin(annotation) is tuple:
            line = QLineEdit()
            line.textChanged.connect(self._edited)
            kind = {str: "str", float: "float"}.get(annotation, "names")
            if kind == "names":
                line.setPlaceholderText("comma-separated; empty: none")
            widget = line
        else:
            raise TypeError(f"{item.path}: the form has no widget for {annotation!r}")
        if isinstance(widget, (QComboBox, QSpinBox)):
            widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # the wheel gives no focus
            widget.installEventFilter(self._wheel_needs_focus)
        widget.setToolTip(f"{item.path}: {help_text}")
        widget.setObjectName(item.path)
        self.widgets[item.path] = widget
        self.kinds[item.path] = kind
        if not (item.folder or item.choose_tasks):
            return widget
        assert isinstance(widget, QLineEdit)
        row = QWidget()
        row_layout = QHBoxLayout(row)
        row_layout.setContentsMargins(0, 0, 0, 0)
        row_layout.addWidget(widget, 1)
        if item.folder:
            browse = QPushButton("Browse…")
            browse.clicked.connect(lambda _, line=widget: self._browse(line))
            row_layout.addWidget(browse)
        if item.choose_tasks:
            self.choose_tasks_button = QPushButton("Choose…")
            self.choose_tasks_button.setToolTip(
                "The tasks of the Suite folder (an OSWorld evaluation_examples folder; "
                "asked for when empty): see which run here and choose the ones to train on")
            self.choose_tasks_button.clicked.connect(lambda _: self.suite_tasks_wanted.emit(
                str(self.widget_value("tasks.suite"))))
            row_layout.addWidget(self.choose_tasks_button)
        return row

    def _browse(self, line: QLineEdit) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Choose a folder", line.text())
        if folder:
            line.setText(folder)

    # -- values -------------------------------------------------------------------------

    def widget_value(self, path: str) -> Any:
        """A widget's value as a TOML file would hold it (unchecked: a number field may
        hold any text, which the configuration then refuses by name)."""
        widget, kind = self.widgets[path], self.kinds[path]
        if isinstance(widget, QCheckBox):
            return widget.isChecked()
        if isinstance(widget, QComboBox):
            return widget.currentText()
        if isinstance(widget, QSpinBox):
            return widget.value()
        assert isinstance(widget, QLineEdit)
        text = widget.text().strip()
        if kind == "float":
            try:
                return float(text)
            except ValueError:
                return text
        if kind == "names":
            return [part for part in text.replace(",", " ").split() if part]
        return text

    def set_widget_value(self, path: str, value: Any) -> None:
        widget, kind = self.widgets[path], self.kinds[path]
        if isinstance(widget, QCheckBox):
            widget.setChecked(bool(value))
        elif isinstance(widget, QComboBox):
            widget.setCurrentIndex(max(0, widget.findText(str(value))))
        elif isinstance(widget, QSpinBox):
            widget.setValue(int(value))
        elif isinstance(widget, QLineEdit):
            if kind == "names":
                widget.setText(", ".join(value))
            elif kind == "float":
                widget.setText(repr(float(value)))
            else:
                widget.setText(str(value))

    def form_config(self) -> RunConfig:
        """The configuration the form's widgets describe (ConfigError names the field)."""
        data = plain(self._base)
        for path in self.widgets:
            *tables, name = path.split(".")
            table = data
            for key in tables:
                table = table[key]
            table[name] = self.widget_value(path)
        return from_dict(RunConfig, data, FORM_WHERE)

    def config(self) -> RunConfig:
        """The configuration being edited, from whichever view is shown."""
        if self.tabs.currentIndex() == 1:
            return parse_run_config(self.editor.toPlainText(), FORM_WHERE)
        return self.form_config()

    def toml_text(self) -> str:
        """The run configuration file's text; the TOML view's own text (comments and all)
        while it describes the same configuration. ConfigError when it does not fit."""
        config = self.config()
        if self.tabs.currentIndex() == 1 or config == self._text_config:
            text = self.editor.toPlainText()
        else:
            text = run_config_toml(config)
        parse_run_config(text, FORM_WHERE)  # the command line will read exactly this
        return text

    def set_config(self, config: RunConfig, text: str | None = None) -> None:
        """Show `config` (and `text`, its file, in the TOML view; else it is written)."""
        self._loading = True
        try:
            self._base = config
            for path in self.widgets:
                self.set_widget_value(path, value_at(config, path))
            self._set_text(text if text is not None else run_config_toml(config), config)
        finally:
            self._loading = False
        self._sync_enabled()
        self._validate()

    def set_suite_tasks(self, folder: str, task_ids: Sequence[str]) -> bool:
        """Train on these tasks of the suite `folder`: the form's Suite folder and Task
        ids (shown on the form). False, changing nothing, while the TOML view holds an
        error (it stays shown until fixed)."""
        self.tabs.setCurrentIndex(0)
        if self.tabs.currentIndex() != 0:
            return False
        self.set_widget_value("tasks.suite", folder)
        self.set_widget_value("tasks.ids", list(task_ids))
        return True

    def set_toml(self, text: str) -> None:
        """Show this file's text in the TOML view (and, when it is valid, in the form)."""
        self.tabs.setCurrentIndex(1)
        self.editor.setPlainText(text)

    def _set_text(self, text: str, config: RunConfig | None) -> None:
        self.editor.blockSignals(True)
        self.editor.setPlainText(text)
        self.editor.blockSignals(False)
        self._text, self._text_config = text, config

    # -- validation ---------------------------------------------------------------------

    def is_valid(self) -> bool:
        return not self.error

    def show_error(self, message: str) -> None:
        """Show a problem found outside the form (e.g. by the screen that starts the run);
        the next edit checks again."""
        self._show_error(message)

    def _edited(self) -> None:
        if self._loading:
            return
        self._sync_enabled()
        self._validate()
        self.changed.emit()

    def _text_edited(self) -> None:
        text = self.editor.toPlainText()
        try:
            config = parse_run_config(text, FORM_WHERE)
        except ConfigError as exc:
            self._show_error(str(exc))
        else:
            self._text, self._text_config = text, config
            self._loading = True
            try:  # the form follows a valid file
                self._base = config
                for path in self.widgets:
                    self.set_widget_value(path, value_at(config, path))
            finally:
                self._loading = False
            self._sync_enabled()
            self._show_error("")
        self.changed.emit()

    def _validate(self) -> None:
        try:
            self.config()
        except ConfigError as exc:
            self._show_error(str(exc))
        else:
            self._show_error("")

    def _show_error(self, message: str) -> None:
        was_valid = not self.error
        self.error = message
        self.error_label.setText(message)
        self.error_label.setVisible(bool(message))
        previous = self.error_path
        self.error_path = error_field(message, list(self.widgets)) if message else None
        if previous is not None and previous != self.error_path:
            self.widgets[previous].setStyleSheet("")
        if self.error_path is not None:
            self.widgets[self.error_path].setStyleSheet(ERROR_STYLE)
        if was_valid != (not message):
            self.validity_changed.emit(not message)

    def _sync_enabled(self) -> None:
        lora = self.widget_value("model.finetune") == "lora"
        for path in ("model.lora.r", "model.lora.alpha"):
            self.widgets[path].setEnabled(lora)

    def _tab_changed(self, index: int) -> None:
        """Switching views carries the configuration across; a view with an error keeps
        the focus until it is fixed, so no edit is dropped silently."""
        if index == self._tab:
            return
        try:
            if index == 1:
                config = self.form_config()
                if config != self._text_config:  # keep the file's own text (comments)
                    self._set_text(run_config_toml(config), config)
            else:
                parse_run_config(self.editor.toPlainText(), FORM_WHERE)
        except ConfigError as exc:
            self._show_error(str(exc))
            self.tabs.blockSignals(True)
            self.tabs.setCurrentIndex(self._tab)
            self.tabs.blockSignals(False)
            return
        self._tab = index
        self._validate()
