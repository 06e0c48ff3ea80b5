"""Which windows show unsaved changes, said before a sandbox snapshot (which keeps files,
not what applications hold): modified markers in titles, from the window list or the
accessibility tree, and the snapshot dialog's warning."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.services.unsaved_changes import (
    UnsavedCheck,
    frame_names,
    is_modified_title,
    unsaved_windows,
)


def test_modified_markers_in_window_titles() -> None:
    modified = ("*notes.txt - gedit", "● app.py - project - Visual Studio Code",
                "• draft.md", "notes.txt * — Kate", "report.odt [Modified] - LibreOffice",
                "todo (unsaved) - Editor", "*Untitled 1 - Mousepad")
    clean = ("notes.txt - gedit", "Terminal", "app.py - Visual Studio Code",
             "a*b.txt - Mousepad", "Modified files - Files", "")
    assert [t for t in modified if not is_modified_title(t)] == []
    assert [t for t in clean if is_modified_title(t)] == []


@dataclass
class Window:
    title: str


class WindowListDesktop:
    def windows(self) -> list[Window]:
        return [Window("*notes.txt - gedit"), Window("Terminal"), Window(""),
                Window("*notes.txt - gedit")]


class TreeDesktop:
    """A desktop known only through its accessibility tree (a QEMU or remote VM)."""

    def accessibility_tree(self) -> str:
        return ('<desktop-frame xmlns:st="uri:st"><application name="gedit">'
                '<frame name="*todo.txt - gedit" st:showing="true"><panel name="*not a'
                ' window"/></frame></application><application name="code">'
                '<frame name="main.py - Visual Studio Code"/></application></desktop-frame>')


class BrokenDesktop:
    def windows(self) -> list[Any]:
        raise ConnectionError("the desktop stopped answering")


def test_unsaved_windows_from_the_window_list_or_the_tree() -> None:
    assert unsaved_windows(WindowListDesktop()) == UnsavedCheck(["*notes.txt - gedit"])
    assert frame_names(TreeDesktop().accessibility_tree()) == [
        "*todo.txt - gedit", "main.py - Visual Studio Code"]
    check = unsaved_windows(TreeDesktop())
    assert check.titles == ["*todo.txt - gedit"]
    assert "“*todo.txt - gedit”" in check.describe() and "save first" in check.describe()
    broken = unsaved_windows(BrokenDesktop())  # the snapshot can still be taken
    assert broken.titles == [] and "stopped answering" in broken.describe()
    assert UnsavedCheck().describe() == ""
    assert frame_names("not xml <") == []


def test_the_snapshot_dialog_warns_before_the_name(qtbot: Any) -> None:
    from workbench.app.widgets.snapshot_dialog import SnapshotDialog

    check = unsaved_windows(WindowListDesktop())
    dialog = SnapshotDialog("sb", "a sandbox snapshot keeps files", unsaved=check.describe())
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.unsaved.isVisible() and "*notes.txt - gedit" in dialog.unsaved.text()
    assert dialog.unsaved.geometry().top() < dialog.name.geometry().top()
    quiet = SnapshotDialog("sb", "", unsaved="")
    qtbot.addWidget(quiet)
    quiet.show()
    assert not quiet.unsaved.isVisible()
