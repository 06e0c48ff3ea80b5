"""A preferences window: checkboxes, dropdowns, a spin box and a slider on two tabs, with
Apply / OK / Cancel. Only applied values count.

State ($HOME/.workbench/settings.json): "shown" (the values on screen), "applied" (the
values last applied), "apply_count", "closed_with" ("ok", "cancel" or null), "tab" (the
open tab's title). Resumed (appstate.resumed_state), it shows those again.
"""

from __future__ import annotations

import sys
from typing import Any

from appstate import StateWriter, show_first_window
from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QPushButton,
    QSlider,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

LANGUAGES = ["English", "Deutsch", "Español", "Français", "Italiano", "Português"]
THEMES = ["Light", "Dark", "High contrast"]
DEFAULTS: dict[str, Any] = {
    "dark_mode": False, "notifications": True, "auto_save": False, "spell_check": True,
    "language": "English", "theme": "Light", "font_size": 12, "volume": 50,
}


class SettingsWindow(QWidget):
    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Preferences")
        self.setObjectName("settings_window")
        self.applied: dict[str, Any] = dict(DEFAULTS)
        self.apply_count = 0
        self.closed_with: str | None = None
        self.state = StateWriter("settings", self.fields)

        self.tabs = QTabWidget(objectName="tabs")
        general = QWidget(objectName="tab_general")
        self.dark_mode = QCheckBox("Dark mode", objectName="dark_mode")
        self.notifications = QCheckBox("Show notifications", objectName="notifications")
        self.auto_save = QCheckBox("Save documents automatically", objectName="auto_save")
        self.spell_check = QCheckBox("Check spelling while typing", objectName="spell_check")
        self.language = QComboBox(objectName="language")
        self.language.addItems(LANGUAGES)
        general_form = QFormLayout(general)
        for box in (self.dark_mode, self.notifications, self.auto_save, self.spell_check):
            general_form.addRow("", box)
        general_form.addRow("Language", self.language)

        appearance = QWidget(objectName="tab_appearance")
        self.theme = QComboBox(objectName="theme")
        self.theme.addItems(THEMES)
        self.font_size = QSpinBox(objectName="font_size")
        self.font_size.setRange(6, 48)
        self.volume = QSlider(Qt.Orientation.Horizontal, objectName="volume")
        self.volume.setRange(0, 100)
        appearance_form = QFormLayout(appearance)
        appearance_form.addRow("Theme", self.theme)
        appearance_form.addRow("Font size", self.font_size)
        appearance_form.addRow("Sound volume", self.volume)
        self.tabs.addTab(general, "General")
        self.tabs.addTab(appearance, "Appearance")
        self.tabs.tabBar().setObjectName("tab_bar")

        ok = QPushButton("OK", objectName="ok")
        apply = QPushButton("Apply", objectName="apply")
        cancel = QPushButton("Cancel", objectName="cancel")
        ok.clicked.connect(self.ok)
        apply.clicked.connect(self.apply)
        cancel.clicked.connect(self.cancel)
        row = QHBoxLayout()
        row.addStretch(1)
        for button in (ok, apply, cancel):
            row.addWidget(button)
        outer = QVBoxLayout(self)
        outer.addWidget(self.tabs)
        outer.addLayout(row)
        self.resize(480, 340)
        self.show_values(self.applied)
        for signal in (self.dark_mode.toggled, self.notifications.toggled,
                       self.auto_save.toggled, self.spell_check.toggled,
                       self.language.currentIndexChanged, self.theme.currentIndexChanged,
                       self.font_size.valueChanged, self.volume.valueChanged,
                       self.tabs.currentChanged):
            signal.connect(lambda *_: self.state.changed())

    def show_values(self, values: dict[str, Any]) -> None:
        self.dark_mode.setChecked(values["dark_mode"])
        self.notifications.setChecked(values["notifications"])
        self.auto_save.setChecked(values["auto_save"])
        self.spell_check.setChecked(values["spell_check"])
        self.language.setCurrentText(values["language"])
        self.theme.setCurrentText(values["theme"])
        self.font_size.setValue(values["font_size"])
        self.volume.setValue(values["volume"])

    def shown(self) -> dict[str, Any]:
        return {
            "dark_mode": self.dark_mode.isChecked(),
            "notifications": self.notifications.isChecked(),
            "auto_save": self.auto_save.isChecked(),
            "spell_check": self.spell_check.isChecked(),
            "language": self.language.currentText(),
            "theme": self.theme.currentText(),
            "font_size": self.font_size.value(),
            "volume": self.volume.value(),
        }

    def fields(self) -> dict[str, Any]:
        return {"shown": self.shown(), "applied": self.applied,
                "apply_count": self.apply_count, "closed_with": self.closed_with,
                "tab": self.tabs.tabText(self.tabs.currentIndex()),
                "tab_rects": self.tab_rects()}

    def restore(self, state: dict[str, Any]) -> None:
        """Take up a resumed app's saved state: the values shown and applied, the open
        tab."""
        self.show_values(state["applied"])  # raises as "shown" would if its fields are wrong
        self.applied = self.shown()
        self.show_values(state["shown"])
        self.apply_count = int(state["apply_count"])
        titles = [self.tabs.tabText(i) for i in range(self.tabs.count())]
        self.tabs.setCurrentIndex(titles.index(state["tab"]))

    def tab_rects(self) -> dict[str, list[int]]:
        bar = self.tabs.tabBar()
        out = {}
        for i in range(bar.count()):
            rect = bar.tabRect(i)
            origin = bar.mapToGlobal(rect.topLeft())
            out[bar.tabText(i)] = [origin.x(), origin.y(), rect.width(), rect.height()]
        return out

    def apply(self) -> None:
        self.applied = self.shown()
        self.apply_count += 1
        self.state.changed()

    def ok(self) -> None:
        self.apply()
        self.closed_with = "ok"
        self.state.write_now()
        self.close()

    def cancel(self) -> None:
        self.show_values(self.applied)
        self.closed_with = "cancel"
        self.state.write_now()
        self.close()


def start_window() -> SettingsWindow:
    """The preferences on screen: the defaults, or as they were when the app is being
    resumed."""
    return show_first_window("settings", SettingsWindow, SettingsWindow, (400, 200))


def main() -> int:
    app = QApplication(sys.argv)
    _window = start_window()  # held: the window lives as long as this reference
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
