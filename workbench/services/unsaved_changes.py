"""Which applications on a desktop show unsaved changes, asked before a snapshot that keeps
files but not what the applications hold in memory: a window title with a modified marker
(gedit's "*notes.txt", VS Code's "● app.py", Kate's "notes.txt * — Kate", "[Modified]"),
read from the window list where the provider has one, else from the accessibility tree's
frames."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Any

# A title that says its document has unsaved changes.
MODIFIED = re.compile(
    r"^\s*[*●•]"  # a leading marker: gedit, mousepad, VS Code, Sublime
    r"|\s\*(\s|$)"  # a lone star after the name: Kate, KWrite, LibreOffice's older builds
    r"|[\[(](modified|unsaved|changed)[\])]"  # [Modified], (unsaved)
    r"|\bmodified\s*[-—–]"  # "… - Modified - …"
    , re.IGNORECASE)
FRAME_TAGS = ("frame", "window", "dialog")  # where the accessibility tree names windows


@dataclass(frozen=True)
class UnsavedCheck:
    """The titles that show unsaved changes; `problem` when the desktop could not say."""

    titles: list[str] = field(default_factory=list)
    problem: str = ""

    def describe(self) -> str:
        """One sentence for the snapshot dialog ("" when nothing is unsaved)."""
        if self.problem:
            return f"Could not check the open applications for unsaved changes ({self.problem})."
        if not self.titles:
            return ""
        shown = ", ".join(f"“{t}”" for t in self.titles[:5])
        more = f" and {len(self.titles) - 5} more" if len(self.titles) > 5 else ""
        return (f"Unsaved changes now: {shown}{more} show a modified marker. This snapshot "
                "keeps the files on disk, not what the applications hold unsaved: save "
                "first to keep those edits.")


def is_modified_title(title: str) -> bool:
    return bool(MODIFIED.search(title))


def frame_names(tree: str) -> list[str]:
    """The names of the windows in an accessibility tree (OSWorld's XML layout)."""
    try:
        root = ElementTree.fromstring(tree)
    except ElementTree.ParseError:
        return []
    names = []
    for element in root.iter():
        tag = element.tag.rsplit("}", 1)[-1]
        name = element.attrib.get("name", "")
        if name and (tag in FRAME_TAGS or tag.endswith("-frame")):
            names.append(name)
    return names


def window_titles(provider: Any) -> list[str]:
    """The titles of the desktop's windows: the window list where the provider has one
    (a sandbox), else the accessibility tree's frames."""
    windows = getattr(provider, "windows", None)
    if callable(windows):
        return [w.title for w in windows() if getattr(w, "title", "")]
    tree = provider.accessibility_tree()
    return frame_names(tree) if tree else []


def unsaved_windows(provider: Any) -> UnsavedCheck:
    """The windows that show unsaved changes; never raises (a desktop that cannot be asked
    gives a check with its problem, and the snapshot can still be taken)."""
    try:
        titles = window_titles(provider)
    except Exception as exc:  # any failure of the desktop is reported, never raised
        return UnsavedCheck(problem=str(exc) or type(exc).__name__)
    seen: list[str] = []
    for title in titles:
        if is_modified_title(title) and title not in seen:
            seen.append(title)
    return UnsavedCheck(seen)
