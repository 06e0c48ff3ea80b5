"""Named tabs, each with its own buttons, and a Confirm button; records every click in order.

    python tabs.py --layout '{"tabs": [{"name": "red", "color": "#d62728",
                                        "x": 0, "y": 0, "width": 224, "height": 70,
                                        "buttons": [{"name": "blue", ...}, ...]}, ...],
                              "confirm": {"x": 0, "y": 210, "width": 448, "height": 70}}'

A task of three dependent steps: open the named tab (no tab is open at first, so its
buttons are not on screen before), click the named button on it, click Confirm. The window
fills the screen with no frame, so the layout's coordinates are screen coordinates. State
($HOME/.workbench/tabs.json): "tab" (the open tab or null), "clicks" (every click on a
tab, button or Confirm, in order: "tab red", "button blue", "confirm"), "layout". Resumed
(appstate.resumed_state), it shows the saved layout with its clicks and open tab.
"""

from __future__ import annotations

import sys
from typing import Any

from appstate import StateWriter, run_full_screen_app, text_list
from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QPushButton, QWidget

BUTTON_STYLE = "background: {color}; border: none; color: white; font-size: 16px;"
OPEN_TAB_STYLE = "background: {color}; border: 6px solid #111111; color: white; font-size: 16px;"


class TabsWindow(QWidget):
    def __init__(self, layout: dict[str, Any]) -> None:
        super().__init__()
        self.setWindowTitle("Tabs")
        self.setObjectName("tabs_window")
        self.setStyleSheet("QWidget#tabs_window { background: #f0f0f0; }")
        self.layout_spec = layout
        self.clicks: list[str] = []
        self.open_tab: str | None = None
        self.tabs: dict[str, QPushButton] = {}
        self.pages: dict[str, list[QPushButton]] = {}
        self.state = StateWriter("tabs", self.fields)
        for tab in layout["tabs"]:
            name = tab["name"]
            self.tabs[name] = self._button(f"tab_{name}", tab, tab.get("label", name),
                                           lambda n=name: self.open(n))
            self.pages[name] = [
                self._button(f"button_{b['name']}", b, b.get("label", ""),
                             lambda n=b["name"]: self.record(f"button {n}"))
                for b in tab["buttons"]]
            for button in self.pages[name]:
                button.hide()
        confirm = {"color": "#555555", **layout["confirm"]}
        self._button("confirm", confirm, "Confirm", lambda: self.record("confirm"))

    def _button(self, object_name: str, spec: dict[str, Any], label: str,
                on_click: Any) -> QPushButton:
        button = QPushButton(label, self)
        button.setObjectName(object_name)
        button.setGeometry(spec["x"], spec["y"], spec["width"], spec["height"])
        button.setStyleSheet(BUTTON_STYLE.format(color=spec["color"]))
        button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        button.clicked.connect(lambda _=False: on_click())
        return button

    def fields(self) -> dict[str, Any]:
        return {"tab": self.open_tab, "clicks": list(self.clicks), "layout": self.layout_spec}

    def restore(self, state: dict[str, Any]) -> None:
        """Take up the clicks and the open tab of a resumed app's saved state."""
        self.clicks = text_list(state["clicks"], "clicks")
        tab = state["tab"]
        if tab is not None:
            if tab not in self.tabs:
                raise ValueError(f"'tab' is {tab!r}, not a tab of the layout")
            self.show_tab(tab)
        self.state.changed()

    def open(self, name: str) -> None:
        self.show_tab(name)
        self.record(f"tab {name}")

    def show_tab(self, name: str) -> None:
        """Mark tab `name` open and show its buttons (the others' hidden)."""
        self.open_tab = name
        for tab in self.layout_spec["tabs"]:
            shown = tab["name"] == name
            style = OPEN_TAB_STYLE if shown else BUTTON_STYLE
            self.tabs[tab["name"]].setStyleSheet(style.format(color=tab["color"]))
            for button in self.pages[tab["name"]]:
                button.setVisible(shown)

    def record(self, click: str) -> None:
        self.clicks.append(click)
        self.state.changed()


def main(argv: list[str] | None = None) -> int:
    return run_full_screen_app("tabs", TabsWindow, __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
