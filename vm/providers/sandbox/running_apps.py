"""The applications running in a sandbox, found in /proc: which they are and which of them
show a window (what a snapshot relaunches), the sessions they were launched in (what finds
one that rewrote its environment, and so its tag), and killing them for a revert.

`among`, where given, is every process of the sandbox (its resource group's list): only
those are read instead of all of /proc."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from vm.processes import (
    TaggedProcess,
    kill_sessions,
    kill_tagged,
    leaders_and_parents,
    process_of,
    session_members,
    session_pids,
    start_time,
    tagged_pids,
    top_level_among,
)
from vm.providers.sandbox.apps import HELPER_PROGRAMS
from vm.providers.sandbox.state import SandboxState


def applications(state: SandboxState, window_pids: Iterable[int],
                 among: list[int] | None) -> tuple[dict[int, TaggedProcess], set[int]]:
    """The sandbox's applications ({pid: process}) and those of them showing a window
    (`window_pids`: the host pids on its windows)."""
    # a tagged process in the session of a launched app is part of that app (Chromium's
    # crash handlers, re-parented away from it): relaunching the app brings it back
    in_sessions = set(session_pids(state.sessions, among))
    members = in_sessions - {leader for leader, _ in state.sessions}
    own = set(tagged_pids(state.tag, among))
    processes = {p.pid: p for p in top_level_among(own) if p.pid not in members
                 and os.path.basename(p.argv[0]) not in HELPER_PROGRAMS}
    for leader, _started in state.sessions:  # launched apps that lost their tag
        if leader in in_sessions and leader not in processes and leader not in own:
            found = process_of(leader)
            if found is not None:
                processes[leader] = found
    # a window counts for the application it descends from (xdg-open -> soffice.bin)
    parents = leaders_and_parents(sorted(own | in_sessions))
    with_window = set()
    for pid in window_pids:
        seen = 0
        while pid not in processes and pid in parents and seen < 64:
            pid, seen = parents[pid], seen + 1
        if pid in processes:
            with_window.add(pid)
    return processes, with_window


def launched_sessions(pids: list[int]) -> list[list[int]]:
    """[pid, start time] of the sessions these just-launched programs lead (those still
    running)."""
    return [[pid, started] for pid in pids if (started := start_time(pid)) is not None]


def live_sessions(sessions: list[list[int]], among: list[int] | None) -> list[list[int]]:
    """The sessions of `sessions` that still have a process."""
    alive = session_members(sessions, among)
    return [session for session in sessions if session[0] in alive]


def kill_applications(state: SandboxState,
                      members: Callable[[], list[int] | None]) -> None:
    """Kill every application of the sandbox: tagged processes, then whatever is left in
    the sessions it launched (`members`: the sandbox's processes, asked afresh each
    round)."""
    kill_tagged(state.tag, among=members)
    kill_sessions(state.sessions, among=members)
    state.sessions = []
