"""The applications open on a desktop, named for the Take snapshot dialog. A sandbox
snapshot keeps the home folder's files and each application's command line and folder;
a revert starts the applications again on those files, so whatever they hold only in
memory (unsaved edits, open tabs, undo history, a half-filled dialog) is not kept. Read
from the desktop's window list (the provider's `windows()`: a sandbox has one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SHOWN = 6  # applications named in the dialog; the rest are counted


@dataclass(frozen=True)
class OpenApplication:
    """One application: its name (the window class, e.g. "Mousepad") and its windows'
    titles."""

    name: str
    titles: tuple[str, ...] = ()

    def describe(self) -> str:
        shown = ", ".join(f"“{t}”" for t in self.titles if t)
        return f"{self.name} ({shown})" if shown else self.name


@dataclass(frozen=True)
class OpenApplications:
    """The applications with a window open, in the order their first window opened;
    `problem` when the desktop could not say."""

    applications: list[OpenApplication] = field(default_factory=list)
    problem: str = ""

    def describe(self) -> str:
        """One sentence for the snapshot dialog ("" when no application is open)."""
        if self.problem:
            return f"Could not list the open applications ({self.problem})."
        if not self.applications:
            return ""
        named = [app.describe() for app in self.applications[:SHOWN]]
        rest = len(self.applications) - SHOWN
        more = f" and {rest} more" if rest > 0 else ""
        return (f"Open now: {'; '.join(named)}{more}. This snapshot keeps their files and "
                "starts them again on revert, not what they hold in memory: unsaved "
                "edits, open tabs, undo history and dialogs are lost (the workbench's "
                "own task apps excepted: they save all they show to a file and show it "
                "again).")


def application_name(window: Any) -> str:
    """An application's name from its window: the class of "instance.Class" (WM_CLASS),
    else the instance, else the title."""
    instance, _, klass = str(getattr(window, "wm_class", "") or "").partition(".")
    return klass or instance or str(getattr(window, "title", "") or "") or "an application"


def open_applications(provider: Any) -> OpenApplications:
    """The applications with a window on the desktop of `provider`, one per program (a
    program's windows together); none where the provider has no window list. Never
    raises: a desktop that cannot be asked gives its problem."""
    windows = getattr(provider, "windows", None)
    if not callable(windows):
        return OpenApplications()
    try:
        found = list(windows())
    except Exception as exc:  # any failure of the desktop is reported, never raised
        return OpenApplications(problem=str(exc) or type(exc).__name__)
    groups: dict[tuple[Any, str], list[str]] = {}
    for window in found:
        name = application_name(window)
        pid = getattr(window, "pid", None)
        titles = groups.setdefault((pid if pid else name, name), [])
        title = str(getattr(window, "title", "") or "")
        if title and title not in titles:
            titles.append(title)
    return OpenApplications([OpenApplication(name, tuple(titles))
                             for (_, name), titles in groups.items()])
