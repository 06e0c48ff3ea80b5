"""The processes a running sandbox is made of (X server, window manager, namespaces,
network, relays, buses, guest server), as its state file records them: whether they all
live (`health`), and ending them with its applications (`end_sandbox`), from the process
that started it or any other."""

from __future__ import annotations

import logging
import os
import shutil
import signal
from pathlib import Path

from vm.processes import has_argument, kill_sessions, kill_tagged, pid_alive, program_name
from vm.providers.base import Health
from vm.providers.sandbox.accessibility_bus import stop_accessibility_bus
from vm.providers.sandbox.state import SandboxState
from vm.xserver import terminate, x_responds

log = logging.getLogger(__name__)


def health(state: SandboxState | None, guest_server: bool) -> Health:
    """Whether the sandbox `state` records is up, else what is gone."""
    if state is None:
        return Health(False, "not started")
    if not pid_alive(state.xvfb_pid) or not Path(
            f"/tmp/.X11-unix/X{state.display[1:]}").exists():
        return Health(False, f"X server {state.display} (pid {state.xvfb_pid}) is gone")
    if not x_responds(state.display):
        return Health(False, f"X server {state.display} does not answer")
    if state.wm_pid and not pid_alive(state.wm_pid):
        return Health(False, f"window manager (pid {state.wm_pid}) is gone")
    if state.holder_pid and not pid_alive(state.holder_pid):
        return Health(False, f"the sandbox's namespaces (pid {state.holder_pid}) are gone")
    for pid, what in ((state.slirp_pid, "network (slirp4netns)"),
                      (state.forwarder_pid, "relay to its guest server and DevTools"),
                      (state.host_relay_pid, "relay to the host's loopback ports")):
        if pid and not pid_alive(pid):
            return Health(False, f"the sandbox's {what} (pid {pid}) is gone")
    if guest_server and state.guest_pid and not pid_alive(state.guest_pid):
        return Health(False, f"guest server (pid {state.guest_pid}) is gone")
    return Health(True, f"display {state.display}")


def end_sandbox(state: SandboxState) -> None:
    """Kill every process of the sandbox and remove its socket folders. A recorded pid is
    only signalled while it still runs the program recorded (pids are reused)."""
    if state.holder_pid and program_name(state.holder_pid).endswith("bwrap"):
        # the first process of a PID namespace: its end kills everything inside
        try:
            os.kill(state.holder_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if state.container_pid and program_name(state.container_pid).endswith("bwrap"):
        terminate(state.container_pid, grace=1.0)
    for relay in (state.forwarder_pid, state.host_relay_pid):
        if relay and has_argument(relay, b"vm.providers.forwarder"):
            terminate(relay, grace=0.0)
    if state.slirp_pid and program_name(state.slirp_pid) == "slirp4netns":
        terminate(state.slirp_pid, grace=0.0)
    try:
        kill_tagged(state.tag)
        kill_sessions(state.sessions)
    except TimeoutError as exc:
        log.warning("%s", exc)
    for pid in (state.guest_pid, state.wm_pid, state.xvfb_pid):
        if pid:
            terminate(pid, grace=1.0)
    if state.bus_marker:
        try:
            stop_accessibility_bus(state.bus_marker, state.bus_runtime_dir)
        except TimeoutError as exc:
            log.warning("%s", exc)
        for pid in state.bus_pids:
            terminate(pid, grace=0.0)  # killed above: reaps it when it is ours
    for folder in (state.socket_dir, state.sockets_dir):
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
