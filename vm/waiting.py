"""Waiting for a condition: one polling loop with a deadline, shared by the modules that
wait for a window, a process, a file or a job."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(check: Callable[[], T], timeout: float, interval: float, *,
         backoff: float = 1.0, longest: float | None = None) -> T:
    """Call `check` until it returns a true value, and return that value; at the deadline
    (`timeout` seconds on), return the last value it gave (False, None, an empty list).

    `check` runs at least once, and once more when the deadline passes. Between calls the
    loop sleeps `interval` seconds, multiplied by `backoff` after each call up to `longest`
    seconds; the last pause is cut short at the deadline. What `check` raises propagates:
    a check raises to give up early (a process that died)."""
    deadline = time.monotonic() + timeout
    pause = interval
    while True:
        value = check()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            return value
        time.sleep(min(pause, left))
        pause *= backoff
        if longest is not None:
            pause = min(pause, longest)


__all__ = ["poll_until"]
