"""Find and stop the processes that belong to one sandbox.

Every process a sandbox starts carries `WORKBENCH_SANDBOX=<tag>` in its environment, and
children inherit it, so a scan of /proc finds all of them (including what a shell started
in the background) without cgroups or root. Where the caller knows a superset of the
processes to look at (a sandbox's resource group lists all of its processes), `among` gives
it, and only those are read instead of all of /proc.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

TAG_VARIABLE = "WORKBENCH_SANDBOX"


@dataclass(frozen=True)
class TaggedProcess:
    pid: int
    ppid: int
    argv: tuple[str, ...]
    cwd: str


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return needle in data.split(b"\0")


def _ppid_and_state(pid: int) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), fields[0].decode()
    except (OSError, IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as dead)."""
    info = _ppid_and_state(pid)
    return info is not None and info[1] not in ("Z", "X")


def tagged_pids(tag: str, among: Iterable[int] | None = None) -> list[int]:
    """Live (non-zombie) processes whose environment carries this sandbox's tag (of
    `among` only, when given)."""
    return pids_with_environ(f"{TAG_VARIABLE}={tag}", among)


def _all_pids() -> list[int]:
    return [int(item.name) for item in os.scandir("/proc") if item.name.isdigit()]


def pids_with_environ(entry: str, among: Iterable[int] | None = None) -> list[int]:
    """Live (non-zombie) processes, other than this one, whose environment holds `entry`
    ("KEY=VALUE"): of `among` when given, else of all of /proc."""
    needle = entry.encode()
    me = os.getpid()
    return [pid for pid in (_all_pids() if among is None else sorted(among))
            if pid != me and pid_alive(pid) and _environ_has(pid, needle)]


def top_level_processes(tag: str) -> list[TaggedProcess]:
    """Tagged processes whose parent is not tagged: the applications that were launched."""
    return top_level_among(set(tagged_pids(tag)))


def top_level_among(pids: set[int]) -> list[TaggedProcess]:
    """The processes of `pids` whose parent is not among them, in pid order."""
    out = []
    for pid in sorted(pids):
        found = process_of(pid)
        if found is not None and found.ppid not in pids:
            out.append(found)
    return out


def process_of(pid: int) -> TaggedProcess | None:
    """`pid`'s parent, argv and working folder; None once it is gone."""
    info = _ppid_and_state(pid)
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    argv = tuple(a.decode(errors="surrogateescape") for a in raw.split(b"\0") if a)
    if info is None or not argv:
        return None
    return TaggedProcess(pid=pid, ppid=info[0], argv=argv, cwd=cwd)


def command_line(pid: int) -> list[bytes]:
    """`pid`'s arguments as /proc/PID/cmdline holds them ([b""] for a process without
    any; [] once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def program_name(pid: int) -> str:
    """The base name of the program `pid` runs, as its first argument names it ("" when it
    is gone)."""
    argv = command_line(pid)
    return os.path.basename(argv[0].decode(errors="replace")) if argv else ""


def has_argument(pid: int, word: bytes) -> bool:
    """True when `word` is one of the arguments of process `pid`."""
    return word in command_line(pid)


def _stat_fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields after the command name: [state, ppid, pgrp, session, ...]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks after boot): with the pid, names one process."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def session_members(sessions: list[list[int]], among: Iterable[int] | None = None
                    ) -> dict[int, list[int]]:
    """{leader: live processes in its session, other than this one} for the sessions that
    `sessions` ([leader pid, leader start time] each) began and that still have a process;
    one scan of /proc. An application launched in a session of its own that rewrites its
    environment (Chromium's process titles do) loses the sandbox's tag, not its session. A
    leader pid now held by another process (a different start time) names nothing: a pid
    is not reused while a process of its session lives. With `among`, only those are
    looked at."""
    wanted = set()
    for leader, started in sessions:
        now = start_time(leader)
        if now is None or now == started:
            wanted.add(leader)
    if not wanted:
        return {}
    me = os.getpid()
    out: dict[int, list[int]] = {}
    for pid in _all_pids() if among is None else sorted(among):
        if pid == me:
            continue
        fields = _stat_fields(pid)
        try:
            if fields is not None and fields[0] not in (b"Z", b"X") and \
                    int(fields[3]) in wanted:
                out.setdefault(int(fields[3]), []).append(pid)
        except (IndexError, ValueError):
            continue
    return out


def session_pids(sessions: list[list[int]], among: Iterable[int] | None = None
                 ) -> list[int]:
    """Live processes of the sessions `sessions` began (see `session_members`)."""
    return sorted(pid for pids in session_members(sessions, among).values() for pid in pids)


def leaders_and_parents(pids: list[int]) -> dict[int, int]:
    """{pid: parent pid} of the live ones among `pids`."""
    out = {}
    for pid in pids:
        info = _ppid_and_state(pid)
        if info is not None and info[1] not in ("Z", "X"):
            out[pid] = info[0]
    return out


def kill_sessions(sessions: list[list[int]], timeout: float = 3.0,
                  among: Callable[[], Iterable[int] | None] | None = None) -> int:
    """SIGKILL every process of these sessions (see `session_pids`); returns the count.
    `among`, when given, says afresh each round which processes to look at (None: all)."""
    return kill_until_gone(lambda: session_pids(sessions, among() if among else None),
                            f"of sessions {sessions}", timeout)


def kill_tagged(tag: str, timeout: float = 3.0,
                among: Callable[[], Iterable[int] | None] | None = None) -> int:
    """SIGKILL every process of this sandbox's tag; see `kill_pids_with_environ`."""
    return kill_pids_with_environ(f"{TAG_VARIABLE}={tag}", timeout, among)


def kill_pids_with_environ(entry: str, timeout: float = 3.0,
                           among: Callable[[], Iterable[int] | None] | None = None) -> int:
    """SIGKILL every process whose environment holds `entry` (repeating for ones forked
    meanwhile); returns the count.

    The state these processes hold is being thrown away, so there is no polite phase.
    Zombies count as gone; whoever started a process reaps it (never waitpid(-1) here:
    that would steal exit codes from subprocess calls in other threads).
    """
    return kill_until_gone(lambda: pids_with_environ(entry, among() if among else None),
                            f"with {entry}", timeout)


def kill_until_gone(find: Callable[[], list[int]], what: str, timeout: float) -> int:
    """SIGKILL what `find` lists until it lists nothing (processes forked meanwhile
    included); returns how many were killed; TimeoutError naming `what` past `timeout`."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = find()
        if not pids:
            return len(killed)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"processes {what} survived SIGKILL: {pids}")
        time.sleep(0.005)
