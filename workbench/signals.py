"""Stopping a long command with SIGTERM as with Ctrl-C.

A service manager's stop, a plain `kill`, or the app's escalation sends SIGTERM, whose
default action ends the process at once: no checkpoint, and the desktops it started
(sandboxes in sessions of their own) left running. `sigterm_as_interrupt` makes a first
SIGTERM raise KeyboardInterrupt in the main thread instead, so the same clean-up as
Ctrl-C runs.

A SIGTERM that comes once a stop is under way (after a Ctrl-C or an earlier SIGTERM)
kills, as SIGTERM does by default: it is an escalation (the app sends it when the grace
period for the clean-up is over), and raising KeyboardInterrupt again in the middle of
that clean-up breaks it half-way (seen: "release unlocked lock", and a run marked
"failed" instead of being left for the app to mark "stopped").
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from types import FrameType


def sigterm_as_interrupt() -> Callable[[], bool]:
    """Install the handlers (main thread only); returns a function that says whether a
    SIGTERM has arrived since. Ctrl-C keeps raising KeyboardInterrupt (unless SIGINT is
    ignored, which stays so); it also counts as the start of a stop."""
    received = False
    stopping = False

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        nonlocal received, stopping
        received = True
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if stopping:
            os.kill(os.getpid(), signal.SIGTERM)  # the default action: the process ends
            return
        stopping = True
        raise KeyboardInterrupt

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigterm)
    return lambda: received
