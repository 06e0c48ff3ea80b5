"""The Take snapshot dialog says what a sandbox snapshot keeps (issue 47, item 8): it names
the applications open now, whose memory the snapshot does not keep (it keeps their files
and starts them again on revert), read from the desktop's window list; with none open it
names none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtWidgets import QDialog

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    open_window,
    settings_file_fixture,
    wait_for_worker,
)
from vm.x11 import WindowInfo
from workbench.app.widgets.snapshot_dialog import SnapshotDialog
from workbench.services.open_applications import OpenApplication, open_applications

NAME = "keeps"


class Desktop:
    """A desktop's window list, as a sandbox gives it (or a failure to give it)."""

    def __init__(self, windows: list[WindowInfo] | Exception) -> None:
        self._windows = windows

    def windows(self) -> list[WindowInfo]:
        if isinstance(self._windows, Exception):
            raise self._windows
        return self._windows


def test_open_applications_are_named_one_per_program() -> None:
    found = open_applications(Desktop([
        WindowInfo(1, "*notes.txt - Mousepad", "mousepad.Mousepad", 40),
        WindowInfo(2, "Find", "mousepad.Mousepad", 40),
        WindowInfo(3, "typed-here", "xterm.XTerm", 41),
        WindowInfo(4, "", "", None)]))
    assert found.applications == [
        OpenApplication("Mousepad", ("*notes.txt - Mousepad", "Find")),
        OpenApplication("XTerm", ("typed-here",)),
        OpenApplication("an application")]
    text = found.describe()
    assert text.startswith("Open now: Mousepad (“*notes.txt - Mousepad”, “Find”); "
                           "XTerm (“typed-here”); an application.")
    assert "not what they hold in memory" in text
    assert open_applications(Desktop([])).describe() == ""
    broken = open_applications(Desktop(ConnectionError("the desktop stopped answering")))
    assert broken.describe() == ("Could not list the open applications (the desktop "
                                 "stopped answering).")
    assert open_applications(object()).describe() == ""  # no window list: nothing said


@pytest.mark.x11
@pytest.mark.slow
def test_take_snapshot_names_the_open_applications_whose_memory_is_not_kept(
        qtbot: Any, demo: DemoWorkspace, settings_file: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    window = open_window(qtbot, settings_file, demo.path, (1280, 720))
    window.show_screen("environments")
    page = window.environments
    assert page is not None
    try:
        wait_for_worker(qtbot, page.create_sandbox(NAME), timeout=60_000)
        qtbot.waitUntil(lambda: page.current_name() == NAME, timeout=10_000)
        qtbot.waitUntil(lambda: page.snapshot_buttons["Take…"].isEnabled(), timeout=10_000)
        shown: list[tuple[str, str]] = []
        name = ""

        def answer(dialog: SnapshotDialog) -> int:
            shown.append((dialog.running.text() if dialog.running.isVisibleTo(dialog)
                          else "", dialog.note.text()))
            if not name:
                return QDialog.DialogCode.Rejected
            dialog.name.setText(name)
            return QDialog.DialogCode.Accepted

        monkeypatch.setattr(SnapshotDialog, "exec", answer)
        page.snapshot_buttons["Take…"].click()
        qtbot.waitUntil(lambda: len(shown) == 1, timeout=15_000)
        assert shown[0][0] == ""  # nothing open: no application named

        provider = page.manager.provider(NAME)
        provider.launch(["xterm", "-T", "typed-here", "-geometry", "40x5"])
        qtbot.waitUntil(lambda: any(w.title == "typed-here" for w in provider.windows()),
                        timeout=15_000)
        name = "with-xterm"
        page.snapshot_buttons["Take…"].click()
        qtbot.waitUntil(lambda: len(shown) == 2, timeout=15_000)
        running, note = shown[1]
        assert running.startswith("Open now: XTerm (“typed-here”).")
        assert "not what they hold in memory" in running
        assert "QEMU VM snapshots keep everything" in note
        # what the dialog named is what the snapshot starts again on revert
        qtbot.waitUntil(lambda: name in [s.name for s in page.snapshot_model.records],
                        timeout=60_000)
        taken = next(s for s in page.snapshot_model.records if s.name == name)
        assert [app for app in taken.extra["apps"] if "typed-here" in app]
    finally:
        page.shutdown()
        page.manager.provider(NAME).stop()
