"""What a revert kills besides a sandbox's applications: every process of the sandbox that
is not one of its own services, whatever its environment or session (a `setsid env -i`
daemon loses both the tag and the session a revert looks for first)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from vm.processes import kill_until_gone, leaders_and_parents

# What the buses start on their own: the accessibility bus and its registry (activated)
BUS_PROGRAMS = frozenset({"dbus-daemon", "at-spi-bus-launcher", "at-spi2-registryd"})


@dataclass(frozen=True)
class Services:
    """The sandbox's own processes, as its state file names them (host pids)."""

    container: int | None  # bwrap
    holder: int | None  # the namespaces' first process (bwrap as their init)
    programs: tuple[int, ...]  # nsenters of the window manager, guest server, relay
    buses: tuple[int, ...]  # nsenters of the session bus and the accessibility launcher


def _program(pid: int) -> str:
    """The base name of the file `pid` runs (its executable: not its argv, which a
    process may write as it likes; the files under /usr are read-only inside)."""
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def _inner_pid(pid: int) -> int | None:
    """The pid `pid` has in its innermost PID namespace."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def leftovers(members: Iterable[int], services: Services) -> list[int]:
    """The pids among `members` (the sandbox's processes) that are none of `services`:
    the window manager, guest server and relay programs are kept but not what they
    started (terminals, commands); the buses with what they activated of the
    accessibility stack; the container, its init and its holding command."""
    parents = leaders_and_parents(sorted(set(members)))
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    keep = {pid for pid in (services.container, services.holder) if pid}
    if services.holder:
        keep.update(child for child in children.get(services.holder, [])
                    if _inner_pid(child) == 2)  # `sleep infinity`, its first child
    for pid in services.programs:
        keep.add(pid)
        keep.update(children.get(pid, []))  # the program nsenter forked
    # the buses: at-spi-bus-launcher leaves its nsenter for the namespaces' init
    below = [child for pid in (*services.buses, services.holder or 0)
             for child in children.get(pid, []) if _program(child) in BUS_PROGRAMS]
    keep.update(services.buses)
    while below:
        child = below.pop()
        if _program(child) in BUS_PROGRAMS:
            keep.add(child)
            below.extend(children.get(child, []))
    return [pid for pid in parents if pid not in keep]


def kill_leftovers(members: Callable[[], Iterable[int]], services: Services,
                   timeout: float = 3.0) -> int:
    """SIGKILL the leftovers (those forked meanwhile too) until none is left; returns how
    many were killed; TimeoutError naming them past `timeout`."""
    return kill_until_gone(lambda: leftovers(members(), services),
                            "left in the sandbox", timeout)


__all__ = ["Services", "kill_leftovers", "leftovers"]
