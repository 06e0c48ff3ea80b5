"""Opening a file as OSWorld's server does (its /setup/open_file): the desktop's default
application is started, then the call waits for a window whose title shows the file (its
name, or its name without the extension, anywhere in the title) and activates it, so the
agent's first screen has that window in front. OSWorld waits up to 30 minutes and then
fails the setup; the workbench waits OPEN_FILE_WAIT and goes on, saying that no such
window came (a setup warning)."""

from __future__ import annotations

import os
from collections.abc import Iterable

OPEN_FILE_WAIT = 60.0  # s: LibreOffice took 10 to 30 s to show a file on a loaded machine
# how a reply or a provider says the file's window never came (a warning, not a failure)
NO_WINDOW = "no window showing"


def file_window(titles: Iterable[str], path: str) -> str | None:
    """The first of `titles` that shows the file `path` names, as OSWorld's server looks
    for it; None when none does."""
    name = os.path.basename(path.rstrip("/"))
    stem = os.path.splitext(name)[0]
    for title in titles:
        if (name and name in title) or (stem and stem in title):
            return title
    return None


def no_window_note(path: str, wait: float) -> str:
    """What opening `path` says when no window showing it came within `wait` seconds."""
    return (f"opened {path}, but {NO_WINDOW} {os.path.basename(path.rstrip('/'))} came "
            f"within {wait:g} s (OSWorld's server waits up to 1800 s, then fails the setup)")
