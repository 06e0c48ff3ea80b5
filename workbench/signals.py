"""Stopping a long command with SIGTERM as with Ctrl-C.

A service manager's stop, a plain `kill`, or the app's escalation sends SIGTERM, whose
default action ends the process at once: no checkpoint, and the desktops it started
(sandboxes in sessions of their own) left running. `sigterm_as_interrupt` makes the first
SIGTERM raise KeyboardInterrupt in the main thread instead, so the same clean-up as
Ctrl-C runs; a second SIGTERM kills as before.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType


def sigterm_as_interrupt() -> Callable[[], bool]:
    """Install the handler (main thread only); returns a function that says whether a
    SIGTERM has arrived since."""
    received = False

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        nonlocal received
        received = True
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    return lambda: received
