"""A screen of coloured buttons at given places; records which one is clicked first.

    python buttons.py --layout '[{"name": "red", "color": "#d62728", "x": 100, "y": 80,
                                  "width": 120, "height": 60}, ...]'

The window fills the screen with no frame, so the layout's coordinates are screen
coordinates. State ($HOME/.workbench/buttons.json): "clicked" (the first button clicked,
or null), "clicks" (every click, in order), "layout". Resumed (appstate.resumed_state),
it shows the saved layout with its clicks.
"""

from __future__ import annotations

import sys
from typing import Any

from appstate import StateWriter, run_full_screen_app, text_list
from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QPushButton, QWidget


class ButtonsWindow(QWidget):
    def __init__(self, layout: list[dict[str, Any]]) -> None:
        super().__init__()
        self.setWindowTitle("Buttons")
        self.setObjectName("buttons_window")
        self.setStyleSheet("QWidget#buttons_window { background: #f0f0f0; }")
        self.layout_spec = layout
        self.clicks: list[str] = []
        self.state = StateWriter("buttons", self.fields)
        for spec in layout:
            button = QPushButton(spec.get("label", ""), self)
            button.setObjectName(f"button_{spec['name']}")
            button.setGeometry(spec["x"], spec["y"], spec["width"], spec["height"])
            button.setStyleSheet(f"background: {spec['color']}; border: none;"
                                 "color: white; font-size: 16px;")
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            button.clicked.connect(lambda _=False, name=spec["name"]: self.clicked(name))

    def fields(self) -> dict[str, Any]:
        return {"clicked": self.clicks[0] if self.clicks else None,
                "clicks": list(self.clicks), "layout": self.layout_spec}

    def restore(self, state: dict[str, Any]) -> None:
        """Take up the clicks of a resumed app's saved state."""
        self.clicks = text_list(state["clicks"], "clicks")
        self.state.changed()

    def clicked(self, name: str) -> None:
        self.clicks.append(name)
        self.state.changed()


def main(argv: list[str] | None = None) -> int:
    return run_full_screen_app("buttons", ButtonsWindow, __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
