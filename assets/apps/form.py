"""A contact form: text fields, a dropdown, checkboxes, radio buttons and a confirmation
dialog on Submit.

State ($HOME/.workbench/form.json): "current" (what the form shows now), "submitted" (the
values sent by the last confirmed Submit, or null), "submit_count", "dialog" (the title of
an open dialog, or null). Resumed (appstate.resumed_state), it shows those again, the
confirmation dialog reopened if it was open.
"""

from __future__ import annotations

import sys
from typing import Any

from appstate import StateWriter, show_first_window
from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import (
    QApplication,
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

COUNTRIES = ["(choose)", "Brazil", "Canada", "France", "Germany", "India", "Japan", "Kenya",
             "Mexico", "Norway", "Spain"]
PLANS = ["basic", "pro", "team"]


class FormWindow(QWidget):
    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Contact form")
        self.setObjectName("form_window")
        self.submitted: dict[str, Any] | None = None
        self.submit_count = 0
        self.dialog: str | None = None
        self.state = StateWriter("form", self.fields)

        self.full_name = QLineEdit(objectName="full_name")
        self.email = QLineEdit(objectName="email")
        self.country = QComboBox(objectName="country")
        self.country.addItems(COUNTRIES)
        self.age = QSpinBox(objectName="age")
        self.age.setRange(0, 120)
        self.newsletter = QCheckBox("Send me the newsletter", objectName="newsletter")
        self.terms = QCheckBox("I accept the terms", objectName="terms")
        self.plans = QButtonGroup(self)
        plan_row = QHBoxLayout()
        for i, plan in enumerate(PLANS):
            radio = QRadioButton(plan.capitalize(), objectName=f"plan_{plan}")
            radio.setChecked(i == 0)
            self.plans.addButton(radio, i)
            plan_row.addWidget(radio)
        submit = QPushButton("Submit", objectName="submit")
        clear = QPushButton("Clear", objectName="clear")
        submit.clicked.connect(self.ask_submit)
        clear.clicked.connect(self.clear)

        form = QFormLayout()
        form.addRow("Full name", self.full_name)
        form.addRow("Email", self.email)
        form.addRow("Country", self.country)
        form.addRow("Age", self.age)
        form.addRow("Plan", plan_row)
        form.addRow("", self.newsletter)
        form.addRow("", self.terms)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(clear)
        buttons.addWidget(submit)
        outer = QVBoxLayout(self)
        outer.addLayout(form)
        outer.addLayout(buttons)
        self.resize(520, 360)

        for signal in (self.full_name.textChanged, self.email.textChanged,
                       self.country.currentIndexChanged, self.age.valueChanged,
                       self.newsletter.toggled, self.terms.toggled, self.plans.idToggled):
            signal.connect(lambda *_: self.state.changed())

    def values(self) -> dict[str, Any]:
        return {
            "full_name": self.full_name.text(),
            "email": self.email.text(),
            "country": self.country.currentText() if self.country.currentIndex() > 0 else "",
            "age": self.age.value(),
            "plan": PLANS[max(self.plans.checkedId(), 0)],
            "newsletter": self.newsletter.isChecked(),
            "terms": self.terms.isChecked(),
        }

    def show_values(self, values: dict[str, Any]) -> None:
        """Show `values` (as `values()` gives them)."""
        country = values["country"]
        self.full_name.setText(values["full_name"])
        self.email.setText(values["email"])
        self.country.setCurrentIndex(COUNTRIES.index(country) if country else 0)
        self.age.setValue(values["age"])
        self.plans.button(PLANS.index(values["plan"])).setChecked(True)
        self.newsletter.setChecked(values["newsletter"])
        self.terms.setChecked(values["terms"])

    def restore(self, state: dict[str, Any]) -> None:
        """Take up a resumed app's saved state; an open confirmation dialog opens again
        once the window is up (the event loop runs)."""
        submitted = state["submitted"]
        if submitted is not None:
            self.show_values(submitted)  # raises as "current" would if its fields are wrong
        self.show_values(state["current"])
        self.submitted = submitted
        self.submit_count = int(state["submit_count"])
        if state["dialog"] == "Confirm":
            QTimer.singleShot(0, self.ask_submit)

    def fields(self) -> dict[str, Any]:
        return {"current": self.values(), "submitted": self.submitted,
                "submit_count": self.submit_count, "dialog": self.dialog}

    def ask_submit(self) -> None:
        box = QMessageBox(QMessageBox.Icon.Question, "Confirm", "Send this form?",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                          self)
        box.setObjectName("confirm_dialog")
        box.button(QMessageBox.StandardButton.Yes).setObjectName("confirm_yes")
        box.button(QMessageBox.StandardButton.No).setObjectName("confirm_no")
        box.setDefaultButton(QMessageBox.StandardButton.Yes)
        self.dialog = "Confirm"
        self.state.changed()
        answer = box.exec()
        self.dialog = None
        if answer == QMessageBox.StandardButton.Yes:
            self.submitted = self.values()
            self.submit_count += 1
        self.state.changed()

    def clear(self) -> None:
        self.full_name.clear()
        self.email.clear()
        self.country.setCurrentIndex(0)
        self.age.setValue(0)
        self.plans.button(0).setChecked(True)
        self.newsletter.setChecked(False)
        self.terms.setChecked(False)


def start_window() -> FormWindow:
    """The form on screen: blank, or as it was when the app is being resumed."""
    return show_first_window("form", FormWindow, FormWindow, (380, 160))


def main() -> int:
    app = QApplication(sys.argv)
    _window = start_window()  # held: the window lives as long as this reference
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
