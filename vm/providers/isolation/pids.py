"""The host's pids of a container's processes: the child an nsenter forked, everything in
its PID namespace, and which host pid a pid seen inside is."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from vm.providers.isolation.container import START_TIMEOUT


def child_of(pid: int, timeout: float = START_TIMEOUT) -> int | None:
    """The host pid of the process `pid` (an nsenter) forked; None when `pid` ended first.
    nsenter forks at once, or exits on failure: both happen."""
    deadline = time.monotonic() + timeout
    children = Path(f"/proc/{pid}/task/{pid}/children")
    while time.monotonic() < deadline:
        try:
            found = children.read_text().split()
        except OSError:
            return None
        if found:
            return int(found[0])
        time.sleep(0.002)
    return None


def namespace_pids(holder: int) -> list[int]:
    """Host pids of the processes in the PID namespace of `holder` (one scan of /proc)."""
    try:
        wanted = os.readlink(f"/proc/{holder}/ns/pid")
    except OSError:
        return []
    out = []
    for item in os.scandir("/proc"):
        if item.name.isdigit():
            try:
                if os.readlink(f"/proc/{item.name}/ns/pid") == wanted:
                    out.append(int(item.name))
            except OSError:
                continue
    return out


def host_pids(inside: set[int], candidates: Iterable[int]) -> dict[int, int]:
    """{pid inside: host pid} for the `candidates` (host pids) whose innermost pid is in
    `inside` (an X window's _NET_WM_PID names the pid its program saw)."""
    out: dict[int, int] = {}
    for pid in candidates:
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"NSpid:"):
                        numbers = line.split()[1:]
                        if len(numbers) > 1 and int(numbers[-1]) in inside:
                            out[int(numbers[-1])] = pid
                        break
        except (OSError, ValueError):
            continue
    return out
