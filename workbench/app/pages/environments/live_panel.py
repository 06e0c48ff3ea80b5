"""The Environments screen's live view: the chosen environment's screen as it changes
(screenshots grabbed on a thread of their own, LiveFeed) with its frame rate, and manual
control: mouse and keyboard on the picture go to the desktop as actions."""

from __future__ import annotations

from PyQt6.QtGui import QImage
from PyQt6.QtWidgets import QCheckBox, QGroupBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from vm.actions import Action
from workbench.app.widgets.live_view import LiveFeed, LiveView
from workbench.services.environments import EnvironmentManager
from workbench.services.sandboxes import SandboxInfo


class LivePanel(QGroupBox):
    """The screen of one environment at a time; its feed runs only while someone can see
    it. `live.action` carries what the person does on the picture while control is on."""

    def __init__(self, manager: EnvironmentManager, parent: QWidget | None = None) -> None:
        super().__init__("Screen", parent)
        self.manager = manager
        self.feed: LiveFeed | None = None
        self.live = LiveView()
        self.live_switch = QCheckBox("Live")
        self.live_switch.setChecked(True)
        self.live_switch.setToolTip("Show the screen as it changes")
        self.control_switch = QCheckBox("Control")
        self.control_switch.setToolTip("Mouse and keyboard on the picture go to the "
                                       "environment as actions")
        self.control_switch.toggled.connect(self.live.set_control)
        self.rate = QLabel("")
        self.live_status = QLabel("")
        bar = QHBoxLayout()
        bar.addWidget(self.live_switch)
        bar.addWidget(self.control_switch)
        bar.addStretch(1)
        bar.addWidget(self.live_status)
        bar.addWidget(self.rate)
        self._layout = QVBoxLayout(self)
        self._layout.addLayout(bar)
        self._layout.addWidget(self.live, 1)

    def add_below(self, widget: QWidget) -> None:
        """Put `widget` under the picture (the demonstration's controls)."""
        self._layout.addWidget(widget)

    def restart_feed(self, info: SandboxInfo | None, shown: bool) -> None:
        """Watch `info`'s screen: a new feed when it runs, the Live switch is on and the
        screen is `shown`; else the picture says why there is none."""
        self.stop_feed()
        if info is None:
            self.live.set_image(None, "no environment chosen")
            return
        if info.status != "running":
            self.live.set_image(None, f"{info.name} is {info.status}")
            self.control_switch.setChecked(False)
            return
        if not self.live_switch.isChecked() or not shown:
            return
        self.feed = LiveFeed(self.manager.provider(info.name), parent=self)
        self.feed.frame.connect(self._frame)
        self.feed.error.connect(self.live_status.setText)
        self.feed.start()

    def stop_feed(self) -> None:
        if self.feed is not None:
            self.feed.stop()
            self.feed.deleteLater()
            self.feed = None
            self.rate.setText("")

    def _frame(self, image: QImage) -> None:
        self.live.set_image(image)
        if self.feed is not None:
            self.rate.setText(f"{self.feed.rate():.1f} frames/s")
        if "failed" in self.live_status.text():
            self.live_status.setText("")  # the desktop answers again

    def perform(self, action: Action) -> None:
        """Send `action` to the desktop being watched (none: dropped)."""
        if self.feed is not None:
            self.feed.perform(action)
