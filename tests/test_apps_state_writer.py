"""Our task apps' state writer (assets/apps/appstate.py), in this process under Qt's
offscreen platform: a window's widgets are listed only once the window has been painted,
so an oracle clicking a listed button (and the screenshot it records) sees it drawn."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from PyQt6.QtWidgets import QMessageBox, QWidget

APPS = Path(__file__).resolve().parents[1] / "assets" / "apps"


@pytest.fixture
def appstate(monkeypatch: pytest.MonkeyPatch, qapp: Any, tmp_path: Path) -> Iterator[ModuleType]:
    # The module points Qt at X when DISPLAY is set: keep this process offscreen.
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.syspath_prepend(str(APPS))
    module = importlib.import_module("appstate")
    yield module
    sys.modules.pop("appstate", None)


def test_a_dialog_is_listed_once_painted_not_once_shown(appstate: ModuleType,
                                                       qtbot: Any) -> None:
    window = QWidget()
    window.setObjectName("main")
    qtbot.addWidget(window)
    writer = appstate.StateWriter("probe", dict)
    window.show()
    writer.start()
    qtbot.waitUntil(lambda: "main" in appstate.widget_rects())

    box = QMessageBox(QMessageBox.Icon.Question, "Confirm", "Send?",
                      QMessageBox.StandardButton.Yes, window)
    yes = box.button(QMessageBox.StandardButton.Yes)
    assert yes is not None
    yes.setObjectName("yes")
    box.show()  # shown (and exposed offscreen at once); its paint is still to come
    assert box.property(appstate.PAINTED) is False
    assert "yes" not in appstate.widget_rects()
    qtbot.waitUntil(lambda: "yes" in appstate.widget_rects())
    assert box.property(appstate.PAINTED) is True
    # the write that follows the paint lists the button
    qtbot.waitUntil(lambda: "yes" in writer.snapshot()["widgets"])

    box.hide()
    box.show()  # shown again: not listed until painted again
    assert "yes" not in appstate.widget_rects()
    qtbot.waitUntil(lambda: "yes" in appstate.widget_rects())
    writer.stop()
