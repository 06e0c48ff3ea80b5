"""The embedded default desktop: a private Xvfb display with a window manager, real
applications, a home folder of its own and our guest server, with no VM at all.

A persistent sandbox outlives the process that started it (its processes run in their own
sessions and its state is a JSON file in the workspace), so `workbench env up` can start
one and later commands (or the app) attach to it by name; any other ends with the process
that started it, however it dies (vm.providers.sandbox_watchdog).

A snapshot is the home folder's files plus the applications to relaunch (argv and working
directory); revert kills every process of the sandbox, restores the files and relaunches
the applications, waiting for their windows.

Everything that runs on the desktop (window manager, guest server, applications, terminals,
commands) runs in the sandbox's own namespaces as an unprivileged `user` at /home/user
(vm.providers.isolation); the X server and the accessibility bus stay outside, their
sockets bound in. `isolation="none"` runs them on the host instead, as the invoking user.

With a network of its own (`network = "user"`, the default, or "none") the sandbox's
loopback is its own: the workbench reaches its guest server and its browser's DevTools
through Unix sockets in a 0700 folder (`SandboxState.sockets_dir`), relayed inside by
vm.providers.forwarder, and host loopback ports reach it only when listed
(`host_loopback_ports`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import secrets
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vm.accessibility_bus import (
    accessibility_environment,
    bus_available,
    start_accessibility_bus,
    stop_accessibility_bus,
    wait_for_accessibility_bus,
)
from vm.actions import Action
from vm.atomic_write import write_atomic
from vm.errors import EnvironmentDead, SnapshotError
from vm.guest.atspi_client import BusAccess
from vm.guest.config import write_token_file
from vm.processes import (
    TAG_VARIABLE,
    TaggedProcess,
    kill_sessions,
    kill_tagged,
    leaders_and_parents,
    pid_alive,
    process_of,
    session_members,
    session_pids,
    start_time,
    tagged_pids,
    top_level_among,
)
from vm.providers.base import CommandResult, Health, Snapshot
from vm.providers.beneath import Beneath, clear_set_id_bits
from vm.providers.isolation import (
    HOST_NETWORK,
    INSIDE_HOME,
    INSIDE_TMP,
    INSIDE_UID,
    INSIDE_WORKBENCH,
    NAMESPACES,
    NO_ISOLATION,
    USER_NETWORK,
    IsolationUnavailable,
    Namespaces,
    child_of,
    host_pids,
    inside_environment,
    isolation_mode,
    namespace_pids,
    network_mode,
    open_entry,
    overflow_uid,
    relay_argv,
    require_namespaces,
    write_account_files,
    write_bus_configs,
)
from vm.providers.isolation import host_loopback_ports as host_loopback_ports_setting
from vm.providers.sandbox_apps import (
    CHROME_PORT,
    DEVTOOLS_PORT,
    HELPER_PROGRAMS,
    AppMissing,
    NeedsVM,
    SandboxApps,
    free_port,
    remove_stale_locks,
    window_find_timeout,
    window_matches,
)
from vm.providers.sandbox_identity import (
    HostIdentity,
    give_to,
    give_tree_to,
    sandbox_identity,
)
from vm.providers.sandbox_image import (
    HOME_FOLDERS,
    image_overlays,
    make_home_folders,
    runtime_links,
    write_image,
    write_inside_terminal_launcher,
    write_terminal_launcher,
    write_window_manager_config,
)
from vm.providers.sandbox_limits import (
    LimitsError,
    SandboxBounds,
    SandboxLimits,
    replace_home_files,
)
from vm.providers.sandbox_sweep import Services, kill_leftovers
from vm.providers.sandbox_watchdog import (
    Watchdog,
    owner_record,
    reclaim_orphans,
    sandbox_lock,
)
from vm.providers.user_network import (
    resolv_conf_text,
    start_user_network,
    user_network_unavailable,
)
from vm.unix_http import MAX_PATH as MAX_SOCKET_PATH
from vm.unix_http import unix_url
from vm.xserver import (
    XServer,
    start_xvfb,
    terminate,
    wait_for_window_manager,
    write_xauthority,
    x_responds,
    xauthority_env,
)

log = logging.getLogger(__name__)

# Memory and processes are bounded by default; the home's size only when asked for
# ($WORKBENCH_SANDBOX_HOME_MB): a capped home is a loop-mounted volume, and a revert onto
# it copies files instead of renaming them.
SANDBOX_DEFAULT_LIMITS = SandboxLimits(home_mb=0)

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
GUEST_START_TIMEOUT = 20.0
WINDOW_WAIT_TIMEOUT = 5.0
# how long activate_window/close_window wait for a window to appear: OSWorld's tasks
# activate an application's window right after launching it (its wmctrl call never fails)
WINDOW_FIND_TIMEOUT = 10.0
OSWORLD_HOME = INSIDE_HOME  # OSWorld images' user home: the sandbox home
GUEST_READY_FILE = ".workbench-guest-ready.json"  # in the sandbox's /tmp
WINDOW_MANAGER_CACHE = "/tmp/.window-manager-cache"  # openbox's log, inside
INSIDE_BUS_FOLDER = ".accessibility-bus"  # in the sandbox's /tmp: its buses' sockets
# on a loopback of its own (a network namespace of its own), the guest server listens on
# OSWorld's guest port, and the browser's DevTools on OSWorld's 9222
INSIDE_GUEST_PORT = 5000
FORWARDER_READY_TIMEOUT = 10.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValueError(f"{what} {name!r}: use 1-64 letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit")
    return name


def _write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2))


def _copy_live_home(home: Path, destination: Path) -> int:
    """Copy a running sandbox's home for a snapshot, from descriptors only (cp resolves
    paths by name: a folder the agent swaps for a link mid-copy would bring host files
    in). Files deleted mid-copy and FIFOs, sockets and devices are left out, and logged.
    Returns the bytes of file data copied."""
    with Beneath(home) as tree:
        report = tree.copy_tree(destination)
    for what, left_out in (("vanished while copying", report.vanished),
                           ("not files, folders or links", report.skipped)):
        if left_out:
            log.info("copying %s: %d entr%s left out, %s (%s)", home, len(left_out),
                     "y" if len(left_out) == 1 else "ies", what, ", ".join(left_out[:3]))
    return report.bytes


# what cp says of a file that was listed and then vanished before it was copied
_VANISHED = re.compile(r"^cp: cannot (?:stat|open) '(?P<path>.+?)'(?: for reading)?: "
                       r"No such file or directory$")


def vanished_only(stderr: str, src: Path) -> list[str]:
    """The files under `src` that cp reports as vanished mid-copy, when those are all it
    complains about; [] when it reports anything else (a real failure)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    paths = [match["path"] for match in map(_VANISHED.match, lines) if match]
    inside = [path for path in paths if path.startswith(f"{src}/")]
    return paths if lines and len(paths) == len(lines) == len(inside) else []


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy a folder with its metadata (cp -a is several times faster than copytree). A
    live home changes while it is copied: a file an application deleted between cp's
    listing and its copy (a journal, a lock) is gone from the home too, so the copy
    stands without it, as a snapshot taken a moment later would; anything else fails."""
    result = subprocess.run(["cp", "-a", "--reflink=auto", "--", str(src), str(dst)],
                            capture_output=True, text=True,
                            env={**os.environ, "LC_ALL": "C"})  # messages as parsed
    if result.returncode == 0:
        return
    vanished = vanished_only(result.stderr, src)
    if vanished:
        log.info("copying %s: %d file(s) vanished while copying (%s)", src, len(vanished),
                 ", ".join(vanished[:3]))
        return
    raise SnapshotError(f"copying {src} to {dst} failed: {result.stderr.strip()}")


@dataclass
class AppRecord:
    """An application to relaunch on revert."""

    argv: list[str]
    cwd: str
    had_window: bool = False


@dataclass
class SandboxState:
    """What another process needs to attach to a running sandbox (state.json)."""

    name: str
    display: str
    width: int
    height: int
    xvfb_pid: int
    wm_pid: int | None
    guest_pid: int | None
    guest_url: str | None
    token: str
    tag: str
    started: float
    current_snapshot: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # the sandbox's D-Bus session bus with AT-SPI (None where dbus/at-spi2-core is missing)
    bus_address: str | None = None
    bus_marker: str | None = None  # environment entry of every bus process
    bus_runtime_dir: str | None = None
    bus_pids: list[int] = field(default_factory=list)  # the ones started here, to reap
    # the loopback port of this sandbox's browser DevTools (OSWorld's guest port 9222)
    devtools_port: int | None = None
    socket_dir: str | None = None  # a short folder for sockets of apps (Chromium's)
    # [pid, start time] of each application launched here, in a session of its own: what
    # finds an application that rewrote its environment (and so its tag), like Chromium
    sessions: list[list[int]] = field(default_factory=list)
    # "namespaces" or "none" (vm.providers.isolation); state files written before
    # sandboxes had namespaces ran without
    isolation: str = NO_ISOLATION
    holder_pid: int | None = None  # the first process of its namespaces (host pid)
    container_pid: int | None = None  # the bwrap that started them
    # "user", "none" (a network namespace of its own) or "host" (vm.providers.isolation);
    # state files written before "user" existed: "host" or "none"
    network: str = HOST_NETWORK
    # relays the sockets below to its own loopback ("user", "none")
    forwarder_pid: int | None = None
    slirp_pid: int | None = None  # its outbound access ("user"): slirp4netns
    # a 0700 folder of the workbench's user holding the Unix sockets of its guest server
    # and DevTools (and of the host loopback ports it may reach)
    sockets_dir: str | None = None
    guest_socket: str | None = None
    devtools_socket: str | None = None
    # host loopback ports reachable inside at the same port, and the relay on the host
    # side that connects to them
    host_loopback_ports: list[int] = field(default_factory=list)
    host_relay_pid: int | None = None
    # its resource bounds (vm.providers.sandbox_limits.SandboxBounds.record()); None: none
    # were applied (isolation = "none", or a state file from before limits)
    limits: dict[str, Any] | None = None
    # the host uid/gid the inside user `user` is (vm.providers.sandbox_identity); None: a
    # state file from before identities (host root as root)
    host_uid: int | None = None
    host_gid: int | None = None
    identity_separate: bool = False
    # False: it ends with the process that started it, its owner (a watchdog process,
    # vm.providers.sandbox_watchdog); the owner's pid, start time and host and PID
    # namespace; None: a state file from before owners (left alone)
    persistent: bool = False
    owner_pid: int | None = None
    owner_start_time: int | None = None
    owner_where: str | None = None


class SandboxProvider:
    """One sandbox desktop. See the module docstring."""

    kind = "sandbox"

    def __init__(self, name: str, workspace: str | Path, screen_size: tuple[int, int] = (1280, 800),
                 guest_server: bool = True, guest_host: str = "127.0.0.1",
                 guest_port: int = 0, isolation: str | None = None,
                 network: str | None = None, limits: SandboxLimits | None = None,
                 host_loopback_ports: tuple[int, ...] | None = None,
                 persistent: bool = False) -> None:
        self.name = check_name(name, "sandbox name")
        # True: it outlives the process that starts it (`workbench env up`, the app); False:
        # it ends with that process, however it dies (vm.providers.sandbox_watchdog)
        self.persistent = persistent
        self._watchdog = Watchdog()
        # "namespaces" (default) or "none"; None: $WORKBENCH_SANDBOX_ISOLATION
        self.isolation = isolation_mode(isolation)
        # "user" (default with namespaces), "none" or "host"; None:
        # $WORKBENCH_SANDBOX_NETWORK
        self.network = network_mode(network, self.isolation)
        if self.network != HOST_NETWORK and self.isolation != NAMESPACES:
            raise ValueError(f"sandbox {self.name}: network = \"{self.network}\" needs "
                             "isolation = \"namespaces\" (a network namespace of its own)")
        # host loopback ports reachable inside (None: $WORKBENCH_SANDBOX_HOST_PORTS)
        self.host_loopback_ports = host_loopback_ports_setting(host_loopback_ports)
        self.workspace = Path(workspace).resolve()
        self.width, self.height = screen_size
        self.guest_server = guest_server
        self.guest_host = guest_host
        self.guest_port = guest_port
        self.root = self.workspace / "sandboxes" / self.name
        self.home = self.root / "home"
        self.logs = self.root / "logs"
        self.state_file = self.root / "state.json"
        self.xauthority = self.root / "xauthority"
        self.tmp = self.root / "tmp"
        # shown read-only at INSIDE_WORKBENCH: passwd, X cookie, terminal launcher, rc.xml
        self.workbench_dir = self.root / "workbench"
        self.snapshot_root = self.workspace / "snapshots" / self.name
        self.state: SandboxState | None = None
        self._display: Any = None  # vm.x11.X11Display, created lazily
        self._children: list[subprocess.Popen[bytes]] = []
        self._lock = threading.RLock()
        # memory, processes and home size (None: the defaults and $WORKBENCH_SANDBOX_*,
        # read at start); applied with namespaces only
        self._limits = limits
        self._bounds: SandboxBounds | None = None
        # the host identity of the inside user (set at start, or from the state file):
        # files the workbench makes in the home or /tmp are given to it
        self.identity: HostIdentity | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def attach(cls, name: str, workspace: str | Path) -> SandboxProvider:
        """A handle on a sandbox started earlier (possibly by another process)."""
        provider = cls(name, workspace)
        if not provider.state_file.exists():
            raise EnvironmentDead(f"sandbox {name!r} is not running in {provider.workspace} "
                                  f"(no {provider.state_file})")
        try:
            data = json.loads(provider.state_file.read_text())
            provider.state = SandboxState(**data)
        except (ValueError, TypeError) as exc:
            raise EnvironmentDead(f"{provider.state_file}: unreadable sandbox state: {exc}"
                                  ) from exc
        provider.width, provider.height = provider.state.width, provider.state.height
        provider.isolation = provider.state.isolation
        provider.network = provider.state.network
        provider.host_loopback_ports = tuple(provider.state.host_loopback_ports)
        provider.persistent = provider.state.persistent
        if provider.state.host_uid is not None and provider.state.host_gid is not None:
            provider.identity = HostIdentity(provider.state.host_uid, provider.state.host_gid,
                                             provider.state.identity_separate)
        return provider

    @classmethod
    def running(cls, workspace: str | Path) -> list[SandboxProvider]:
        """Handles on every sandbox of the workspace that has a state file."""
        folder = Path(workspace).resolve() / "sandboxes"
        out = []
        for state in sorted(folder.glob("*/state.json")):
            try:
                out.append(cls.attach(state.parent.name, workspace))
            except EnvironmentDead as exc:
                log.warning("%s", exc)
        return out

    @property
    def private_network(self) -> bool:
        """True when the sandbox has a network namespace (a loopback) of its own."""
        return self.isolated and self.network != HOST_NETWORK

    @property
    def isolated(self) -> bool:
        """True when the desktop's programs run in the sandbox's namespaces."""
        return self.isolation == NAMESPACES

    def start(self) -> None:
        """Start the desktop (nothing while it runs). Unless `persistent`, it ends with this
        process: a watchdog stops it when this process dies (vm.providers.sandbox_watchdog)."""
        reclaim_orphans(self.workspace, skip=self.name)
        with sandbox_lock(self.root):
            before = self.state
            self._start()
            if self.state is not before and not self.persistent:
                self._watch_owner()

    def _watch_owner(self) -> None:
        """Start the watchdog that stops this sandbox when this process dies; without one
        it would outlive this process, so it is stopped."""
        state = self._require_state()
        try:
            self._watchdog.start(self.name, self.workspace, state.tag,
                                 self.logs / "watchdog.log")
        except BaseException:
            self._teardown()
            raise

    def _start(self) -> None:
        with self._lock:
            if self.state is not None and self.health().alive:
                return
            if self.isolated:
                require_namespaces()  # IsolationUnavailable naming the fix
            if self.isolated and self.network == USER_NETWORK:
                missing = user_network_unavailable()
                if missing is not None:
                    raise IsolationUnavailable(f"sandbox {self.name}: network = \"user\" "
                                               f"cannot run here: {missing}")
            if self.state_file.exists():
                # Leftovers of an earlier run of this name (crashed, or killed): clean up.
                try:
                    SandboxProvider.attach(self.name, self.workspace)._teardown()
                except EnvironmentDead:
                    pass
            self.identity = sandbox_identity(self.workspace, self.name) \
                if self.isolated else None
            self._make_folders()
            owner = self._owner
            bounds = None
            if self.isolated:  # before the home is filled and the first process runs
                bounds = SandboxBounds.apply(self.workspace, self.name, self.home,
                                             self.limits, owner=owner, tmp=self.tmp)
                self._bounds = bounds
            try:
                make_home_folders(self.home, owner)
                # bound in, read by the inside user, whose machine name is the sandbox's
                write_xauthority(self.xauthority, hostnames=(self.name,))
                give_to(self.xauthority, self.identity, 0o600)
            except BaseException:
                self._close_bounds()
                raise
            tag = f"{self.name}-{secrets.token_hex(4)}"
            if self.isolated:
                terminal_launcher = self.workbench_dir / "terminal"
                window_manager_config = write_window_manager_config(
                    self.workbench_dir / "rc.xml", Path(INSIDE_WORKBENCH) / "terminal")
            else:
                terminal_launcher = self.root / "bin" / "terminal"
                window_manager_config = write_window_manager_config(
                    self.root / "openbox" / "rc.xml", terminal_launcher)
            xserver = start_xvfb(self.width, self.height, log_dir=self.logs,
                                 xauthority=self.xauthority,
                                 window_manager=not self.isolated,
                                 window_manager_config=window_manager_config,
                                 authorization=True)
            self.state = SandboxState(
                name=self.name, display=xserver.display, width=self.width,
                height=self.height, xvfb_pid=xserver.pid, wm_pid=xserver.wm_pid,
                guest_pid=None, guest_url=None, token=secrets.token_urlsafe(24), tag=tag,
                started=time.time(),
                devtools_port=DEVTOOLS_PORT if self.private_network else free_port(),
                socket_dir=None if self.isolated else tempfile.mkdtemp(prefix="wb-sbx-"),
                isolation=self.isolation, network=self.network,
                host_loopback_ports=list(self.host_loopback_ports)
                if self.private_network else [],
                limits=None if bounds is None else bounds.record(),
                persistent=self.persistent, **owner_record(),
                host_uid=None if self.identity is None else self.identity.uid,
                host_gid=None if self.identity is None else self.identity.gid,
                identity_separate=self._separate_identity,
            )
            try:
                if self.isolated:
                    self._start_namespaces()
                if self.private_network:
                    self._start_forwarder()
                self._start_accessibility_bus()
                if self.isolated:
                    write_inside_terminal_launcher(terminal_launcher, tag)
                    self._start_window_manager(Path(INSIDE_WORKBENCH) / "rc.xml")
                else:
                    write_terminal_launcher(terminal_launcher, self.app_env(), self.home)
                if self.guest_server:
                    self._start_guest_server()
            except BaseException:
                self._teardown()
                raise
            _write_json_atomic(self.state_file, asdict(self.state))
            log.info("sandbox %s up on %s; %s", self.name, xserver.display,
                     self.limits_description())

    def _make_folders(self) -> None:
        """The sandbox's folders on the host: every one of them 0700, so no other local
        user reaches its files (the workspace's sandboxes/ and snapshots/ too); its home and
        /tmp belong to the inside user's host identity (a home of an older start, made
        before identities, is given to it: links are changed, never followed)."""
        for folder in (self.workspace / "sandboxes", self.root, self.logs,
                       self.workspace / "snapshots", self.snapshot_root):
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o700)
        # shown read-only at INSIDE_WORKBENCH: the inside user reads it, nobody else can
        # reach it (the sandbox's folder above is 0700)
        self.workbench_dir.mkdir(exist_ok=True)
        self.workbench_dir.chmod(0o755)
        # /tmp starts empty, as after a boot (nothing an agent planted there last time)
        if self.tmp.is_dir() and not self.tmp.is_symlink():
            shutil.rmtree(self.tmp, ignore_errors=True)
        for folder in (self.home, self.tmp):
            folder.mkdir(exist_ok=True)
            if self.identity is not None and self.identity.owner() is not None:
                info = folder.stat()
                if (info.st_uid, info.st_gid) != self.identity.owner():
                    give_tree_to(folder, self.identity)
            folder.chmod(0o700)

    @property
    def limits(self) -> SandboxLimits:
        """What this sandbox may use (vm.providers.sandbox_limits): given, else
        SANDBOX_DEFAULT_LIMITS with what $WORKBENCH_SANDBOX_MEMORY_MB, _PIDS, _HOME_MB and
        _HOME_FILESYSTEM set."""
        if self._limits is None:
            self._limits = SandboxLimits.from_environment(SANDBOX_DEFAULT_LIMITS)
        return self._limits

    def bounds(self) -> SandboxBounds | None:
        """The bounds in effect (also for a handle attached from another process)."""
        if self._bounds is None and self.state is not None and self.state.limits:
            self._bounds = SandboxBounds.from_record(self.state.limits,
                                                     where=str(self.state_file))
        return self._bounds

    def limits_description(self) -> str:
        """One line for `workbench env up` and the app: each limit, or why it is not."""
        bounds = self.bounds()
        if bounds is not None:
            return bounds.describe()
        if not self.isolated:
            return "limits: none (memory, processes and home size are bounded only with " \
                   "isolation = \"namespaces\")"
        return "limits: none (a sandbox started before limits existed)"

    def _bounded(self, argv: list[str]) -> list[str]:
        """`argv` started inside the sandbox's resource group."""
        bounds = self.bounds()
        return bounds.command(argv) if bounds is not None else argv

    def _namespaces(self) -> Namespaces:
        state = self._require_state()
        resolv_conf = None
        if self.network == USER_NETWORK:  # slirp4netns's DNS
            resolv_conf = self.workbench_dir / "resolv.conf"
            write_atomic(resolv_conf, resolv_conf_text().encode())
            resolv_conf.chmod(0o644)
        return Namespaces(name=self.name, home=self.home, tmp=self.tmp,
                          workbench=self.workbench_dir, display=state.display,
                          hidden=(self.workspace,), private_network=self.private_network,
                          xauthority=self.xauthority, resolv_conf=resolv_conf,
                          identity=self.identity,
                          accessibility_config=self._bus_configs()[1],
                          overlays=image_overlays(self.workbench_dir),
                          links=runtime_links(f"{INSIDE_TMP}/{INSIDE_BUS_FOLDER}"))

    @property
    def _owner(self) -> tuple[int, int] | None:
        """(uid, gid) the files the workbench makes in the home or /tmp are given to; None
        when they are the invoking user's anyway (or the sandbox has no identity)."""
        return self.identity.owner() if self.identity is not None else None

    @property
    def _separate_identity(self) -> bool:
        """True when the inside user is a host uid of its own (the workbench runs as root)."""
        return self.identity is not None and self.identity.separate

    def _bus_configs(self) -> tuple[Path | None, Path | None]:
        """The buses' configurations (session, accessibility) for a sandbox whose inside
        user is a separate identity (see isolation.write_bus_configs); (None, None) else."""
        if not self._separate_identity:
            return None, None
        return (self.workbench_dir / "session-bus.conf",
                self.workbench_dir / "accessibility-bus.conf")

    def _start_namespaces(self) -> None:
        """The container holding the sandbox's namespaces (vm.providers.isolation), and
        for network = "user" its outbound access (vm.providers.user_network)."""
        state = self._require_state()
        write_account_files(self.workbench_dir)
        write_image(self.workbench_dir, self._chrome_argv())
        if self._separate_identity:
            write_bus_configs(self.workbench_dir)
        if self.network != USER_NETWORK:
            state.container_pid, state.holder_pid = self._namespaces().start(
                self.logs / "bwrap.log", wrap=self._bounded)
            return
        # slirp4netns ends when the holder does: the pipe's write end lives in it only
        exit_read, exit_write = os.pipe()
        try:
            try:
                state.container_pid, state.holder_pid = self._namespaces().start(
                    self.logs / "bwrap.log", wrap=self._bounded, keep_fds=(exit_write,))
            finally:
                os.close(exit_write)
            proc = start_user_network(state.holder_pid, exit_read,
                                      self.logs / "slirp4netns.log")
        finally:
            os.close(exit_read)
        self._children.append(proc)
        state.slirp_pid = proc.pid

    def _chrome_argv(self) -> list[str] | None:
        """What the sandbox runs for google-chrome; None when Chromium is missing."""
        try:
            return self.apps().chrome_argv([])
        except AppMissing:
            return None

    @property
    def _guest_over_tcp(self) -> bool:
        """True when the caller asked for the guest server on a TCP port of the host (a
        port, or an address other than the loopback), besides its Unix socket."""
        return bool(self.guest_port) or self.guest_host not in LOOPBACK_HOSTS

    def _start_forwarder(self) -> None:
        """Unix sockets in a 0700 folder for the guest server and DevTools, relayed to
        the sandbox's own loopback, and the host loopback ports it may reach relayed in
        (vm.providers.forwarder)."""
        state = self._require_state()
        assert state.holder_pid is not None
        folder = Path(tempfile.mkdtemp(prefix="wb-net-"))  # 0700, this user's
        state.sockets_dir = str(folder)
        longest = folder / "host-65535.sock"
        if len(os.fsencode(longest)) > MAX_SOCKET_PATH:
            raise EnvironmentDead(f"sandbox {self.name}: socket paths in {folder} would be "
                                  f"longer than {MAX_SOCKET_PATH} bytes (a Unix socket's "
                                  "limit); set TMPDIR to a shorter folder")
        listeners: list[socket.socket] = []
        inside: list[str] = []  # rules of the relay in the sandbox's network namespace
        outside: list[str] = []  # rules of the relay on the host (loopback ports)

        def unix_listener(name: str) -> socket.socket:
            sock = _unix_listener(folder / name)
            listeners.append(sock)
            return sock

        try:
            devtools = unix_listener("devtools.sock")
            state.devtools_socket = str(folder / "devtools.sock")
            inside.append(f"fd:{devtools.fileno()}=tcp:{state.devtools_port}")
            if self.guest_server:
                guest = unix_listener("guest.sock")
                state.guest_socket = str(folder / "guest.sock")
                inside.append(f"fd:{guest.fileno()}=tcp:{INSIDE_GUEST_PORT}")
                if self._guest_over_tcp:
                    exposed = _listener(self.guest_host, self.guest_port)
                    listeners.append(exposed)
                    inside.append(f"fd:{exposed.fileno()}=tcp:{INSIDE_GUEST_PORT}")
                    self.guest_port = exposed.getsockname()[1]
            for port in state.host_loopback_ports:
                path = folder / f"host-{port}.sock"
                outside.append(f"fd:{unix_listener(path.name).fileno()}=tcp:{port}")
                inside.append(f"tcp:{port}=unix:{path}")
            fds = [sock.fileno() for sock in listeners]
            if outside:
                relay = self._start_relay(relay_argv(outside), fds, wait=False)
                state.host_relay_pid = relay.pid
            # a listener made here queues connections until the relay takes them; one the
            # relay makes inside (a host loopback port) must be there before any app starts
            with open_entry(state.holder_pid) as entry:
                proc = self._start_relay(entry.relay(inside), [*fds, *entry.fds],
                                         wait=bool(outside))
            state.forwarder_pid = proc.pid
        finally:
            for sock in listeners:
                sock.close()

    def _start_relay(self, argv: list[str], fds: list[int], wait: bool
                     ) -> subprocess.Popen[bytes]:
        """Start a forwarder; with `wait`, return once it says `ready` (every listener
        set)."""
        with open(self.logs / "forwarder.log", "ab") as logf:
            proc = subprocess.Popen(argv, env=self._infra_env(), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE if wait else subprocess.DEVNULL,
                                    stderr=logf, pass_fds=fds, start_new_session=True)
        self._children.append(proc)
        if not wait:
            return proc
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], FORWARDER_READY_TIMEOUT)
        line = proc.stdout.readline() if ready else b""
        proc.stdout.close()
        if line.strip() != b"ready":
            if proc.poll() is None:
                proc.kill()
            proc.wait(5)
            raise EnvironmentDead(f"sandbox {self.name}: the relay {' '.join(argv[-3:])} "
                                  f"did not start (status {proc.returncode}); see "
                                  f"{self.logs / 'forwarder.log'}")
        return proc

    def _start_window_manager(self, config: Path) -> None:
        """openbox inside, its config `config` (a path inside); returns once it frames
        windows."""
        state = self._require_state()
        with open(self.logs / "openbox.log", "ab") as logf:
            # its log in /tmp: the home holds only what its applications put there
            proc, _pid = self._popen_inside(
                ["env", f"XDG_CACHE_HOME={WINDOW_MANAGER_CACHE}", "openbox", "--sm-disable",
                 "--config-file", str(config)], tagged=False, stdout=logf, stderr=logf)
        self._children.append(proc)
        state.wm_pid = proc.pid
        wait_for_window_manager(state.display, proc, self.xauthority)

    def _popen_inside(self, argv: list[str], *, tagged: bool, stdout: Any, stderr: Any,
                      cwd: str = INSIDE_HOME, new_session: bool = True,
                      pass_fds: tuple[int, ...] = (), find_child: bool = True
                      ) -> tuple[subprocess.Popen[bytes], int]:
        """Start `argv` in the sandbox's namespaces; returns the nsenter process and the
        host pid of the program (which leads a session of its own when `new_session`; with
        `find_child` False, nsenter's pid: the caller finds the program with `child_of`)."""
        state = self._require_state()
        assert state.holder_pid is not None
        extra = {TAG_VARIABLE: state.tag} if tagged else {}
        with open_entry(state.holder_pid) as entry:
            proc = subprocess.Popen(
                self._bounded(entry.command(argv, cwd, extra, new_session,
                                            network=self.private_network)),
                env=self._inside_env(), stdin=subprocess.DEVNULL, stdout=stdout,
                stderr=stderr, start_new_session=True, pass_fds=(*pass_fds, *entry.fds))
        pid = child_of(proc.pid) if new_session and find_child else None
        return proc, pid if pid is not None else proc.pid

    def _inside_env(self) -> dict[str, str]:
        """The environment of programs inside (untagged: the tag goes on the program)."""
        state = self._require_state()
        extra = accessibility_environment(state.bus_address) if state.bus_address else {}
        extra = dict(extra)
        if "LANG" not in os.environ:
            extra["LANG"] = "C.UTF-8"
        return inside_environment(state.display, extra)

    def _bus_access(self) -> BusAccess:
        """How this process reaches the sandbox's buses (vm.guest.atspi_client.BusAccess)."""
        state = self._require_state()
        assert state.bus_runtime_dir is not None
        # the uid the buses see this process as: the inside user's own (its host uid is
        # the invoking user's, or root's in a sandbox started before identities), else the
        # overflow uid (a separate identity maps no host uid of the workbench's)
        uid = overflow_uid() if self._separate_identity else INSIDE_UID
        return BusAccess(uid=uid, inside=f"{INSIDE_TMP}/{INSIDE_BUS_FOLDER}",
                         host=f"{state.bus_runtime_dir}/s")

    def inside_path(self, path: Path) -> str:
        """The path inside the sandbox of a host path in its home or /tmp."""
        path = Path(path)
        for host, inside in ((self.home, INSIDE_HOME), (self.tmp, INSIDE_TMP)):
            if path == host or host in path.parents:
                return inside + str(path)[len(str(host)):]
        return str(path)

    def _host_cwd(self, cwd: str) -> Path | None:
        """The host folder of a working folder inside (None: not in the home or /tmp)."""
        for host, inside in ((self.home, INSIDE_HOME), (self.tmp, INSIDE_TMP)):
            if cwd == inside or cwd.startswith(inside + "/"):
                return Path(str(host) + cwd[len(inside):])
        return None

    def _start_accessibility_bus(self) -> None:
        """The sandbox's session bus and AT-SPI bus, before any application starts (they
        look for it once, at start-up)."""
        state = self._require_state()
        missing = bus_available()
        if missing is not None:
            log.warning("sandbox %s: no accessibility tree: %s", self.name, missing)
            return
        if self.isolated:
            # inside: a bus accepts a client whose uid, as the bus sees it, is the one the
            # client claims, so bus and applications share the user namespace
            (self.tmp / INSIDE_BUS_FOLDER).mkdir(mode=0o700, exist_ok=True)
            give_to(self.tmp / INSIDE_BUS_FOLDER, self.identity)
            assert state.holder_pid is not None
            with open_entry(state.holder_pid) as entry:
                bus = start_accessibility_bus(
                    self._inside_env(), state.tag, self.logs,
                    runtime_dir=f"{INSIDE_TMP}/{INSIDE_BUS_FOLDER}",
                    wrap=lambda argv: self._bounded(
                        entry.command(argv, network=self.private_network)),
                    pass_fds=entry.fds,
                    config_file=f"{INSIDE_WORKBENCH}/session-bus.conf"
                    if self._separate_identity else None)
            state.bus_address, state.bus_marker = bus.address, bus.marker
            state.bus_pids = [pid for pid in (bus.daemon_pid, bus.launcher_pid) if pid]
            # the host reaches the sockets through a short link (a socket path has at most
            # 107 bytes; the sandbox's /tmp may lie deep in the workspace)
            state.bus_runtime_dir = tempfile.mkdtemp(prefix="wb-bus-")
            os.symlink(self.tmp / INSIDE_BUS_FOLDER, Path(state.bus_runtime_dir) / "s")
            wait_for_accessibility_bus(bus.address, access=self._bus_access())
            return
        bus = start_accessibility_bus(self._infra_env(), state.tag, self.logs)
        state.bus_address, state.bus_marker = bus.address, bus.marker
        state.bus_runtime_dir = bus.runtime_dir
        state.bus_pids = [pid for pid in (bus.daemon_pid, bus.launcher_pid) if pid]
        wait_for_accessibility_bus(bus.address)

    def _start_guest_server(self) -> None:
        assert self.state is not None
        self.tmp.mkdir(exist_ok=True)
        if self.isolated:
            ready = self.tmp / GUEST_READY_FILE
            ready.unlink(missing_ok=True)
            read_fd, write_fd = os.pipe()  # the token never lies in a file inside
            os.write(write_fd, (self.state.token + "\n").encode())
            os.close(write_fd)
            host, port = self.guest_host, self.guest_port
            if self.private_network:  # its own loopback, the port the forwarder relays to
                host, port = "127.0.0.1", INSIDE_GUEST_PORT
            cmd = [sys.executable, "-m", "vm.guest", "--host", host,
                   "--port", str(port), "--token-file", f"/dev/fd/{read_fd}",
                   "--root", INSIDE_HOME, "--root", INSIDE_TMP,
                   "--ready-file", f"{INSIDE_TMP}/{GUEST_READY_FILE}",
                   "--child-env", f"{TAG_VARIABLE}={self.state.tag}"]
            try:
                with open(self.logs / "guest.log", "ab") as logf:
                    proc, _pid = self._popen_inside(cmd, tagged=False, stdout=logf,
                                                    stderr=logf, pass_fds=(read_fd,))
            finally:
                os.close(read_fd)
        else:
            ready = self.root / "guest-ready.json"
            ready.unlink(missing_ok=True)
            token_file = self.root / "guest-token"
            write_token_file(token_file, self.state.token)  # 0600 from its first byte
            cmd = [sys.executable, "-m", "vm.guest", "--host", self.guest_host,
                   "--port", str(self.guest_port), "--token-file", str(token_file),
                   "--root", str(self.home), "--root", str(self.tmp),
                   "--home-alias", OSWORLD_HOME, "--ready-file", str(ready),
                   "--child-env", f"{TAG_VARIABLE}={self.state.tag}"]
            with open(self.logs / "guest.log", "ab") as logf:
                proc = subprocess.Popen(cmd, env=self._infra_env(), cwd=str(self.root),
                                        stdout=logf, stderr=logf, start_new_session=True)
        self._children.append(proc)
        deadline = time.monotonic() + GUEST_START_TIMEOUT
        while not ready.exists():
            if proc.poll() is not None:
                raise EnvironmentDead(f"guest server of sandbox {self.name} exited with "
                                      f"status {proc.returncode}; see {self.logs/'guest.log'}")
            if time.monotonic() > deadline:
                proc.kill()
                raise EnvironmentDead(f"guest server of sandbox {self.name} not ready after "
                                      f"{GUEST_START_TIMEOUT:.0f} s; see {self.logs/'guest.log'}")
            time.sleep(0.02)
        info = json.loads(ready.read_text())
        ready.unlink(missing_ok=True)
        self.state.guest_pid = proc.pid
        if not self.private_network:
            self.state.guest_url = f"http://{info['host']}:{info['port']}"
        elif self._guest_over_tcp:  # asked for: the port on the host the relay listens on
            self.state.guest_url = f"http://{self.guest_host}:{self.guest_port}"
        else:
            assert self.state.guest_socket is not None
            self.state.guest_url = unix_url(self.state.guest_socket)

    def stop(self) -> None:
        with self._lock:
            if self.state is None and self.state_file.exists():
                self.state = SandboxProvider.attach(self.name, self.workspace).state
            self._teardown()

    def _teardown(self) -> None:
        state = self.state
        if self._display is not None:
            # A call stuck on a wedged server holds the display's lock: close off-thread,
            # it finishes once the server below is killed.
            threading.Thread(target=_close_quietly, args=(self._display,), daemon=True).start()
            self._display = None
        if state is not None:
            if state.holder_pid and _is_bwrap(state.holder_pid):
                # the first process of a PID namespace: its end kills everything inside
                _kill(state.holder_pid)
            if state.container_pid and _is_bwrap(state.container_pid):
                terminate(state.container_pid, grace=1.0)
            for relay in (state.forwarder_pid, state.host_relay_pid):
                if relay and _runs(relay, b"vm.providers.forwarder"):
                    terminate(relay, grace=0.0)
            if state.slirp_pid and _program(state.slirp_pid) == "slirp4netns":
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
        self._close_bounds()
        self._reap()
        self.state_file.unlink(missing_ok=True)
        self.state = None
        self._watchdog.release()  # stopped here: its watchdog exits, touching nothing

    def _close_bounds(self) -> None:
        """Kill what is left in the sandbox's resource group (a daemon that left its
        session), remove the group and unmount a size-capped home (its files stay)."""
        try:
            bounds = self.bounds()
            if bounds is not None:
                bounds.close()
        except (LimitsError, ValueError, OSError) as exc:
            log.warning("sandbox %s: closing its resource limits: %s", self.name, exc)
        self._bounds = None

    def forget_if_stopped_elsewhere(self) -> bool:
        """Drop the remembered state when another process stopped this sandbox (its state
        file is gone); True when it did. Never while this handle is starting or stopping
        it: a start writes the state file last, so the file is missing all along."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self.state is None or self.state_file.exists():
                return False
            self.state = None
            return True
        finally:
            self._lock.release()

    def _reap(self) -> None:
        self._children = [p for p in self._children if p.poll() is None]

    def health(self) -> Health:
        state = self.state
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
        if self.guest_server and state.guest_pid and not pid_alive(state.guest_pid):
            return Health(False, f"guest server (pid {state.guest_pid}) is gone")
        return Health(True, f"display {state.display}")

    # ------------------------------------------------------------------ environment

    def _require_state(self) -> SandboxState:
        if self.state is None:
            raise EnvironmentDead(f"sandbox {self.name} is not started")
        return self.state

    def _infra_env(self) -> dict[str, str]:
        state = self._require_state()
        # The host's display settings must not leak in: the sandbox's apps draw on its own
        # X server (a QT_QPA_PLATFORM=offscreen from a test run would hide every Qt app).
        env = {k: v for k, v in os.environ.items()
               if k not in ("XAUTHORITY", TAG_VARIABLE, "QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
        bin_dir = str(Path(sys.executable).parent)  # our venv's python (with pyautogui) first
        env["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "/usr/bin:/bin")])
        env.update({"DISPLAY": state.display, "HOME": str(self.home),
                    "XAUTHORITY": str(self.xauthority),
                    "XDG_RUNTIME_DIR": str(self.root / "tmp"),
                    "TMPDIR": str(self.root / "tmp")})
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)  # never the host's session bus
        env.pop("NO_AT_BRIDGE", None)
        if state.bus_address:
            env.update(accessibility_environment(state.bus_address))
        # so `python -m vm.guest` finds this package even when it is not installed
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        return env

    def app_env(self) -> dict[str, str]:
        """Environment of processes run in the sandbox: its display, home and tag."""
        if self.isolated:  # the X cookie's host path: X clients on the host use this too
            return {**self._inside_env(), TAG_VARIABLE: self._require_state().tag,
                    "XAUTHORITY": str(self.xauthority)}
        env = self._infra_env()
        env[TAG_VARIABLE] = self._require_state().tag
        env.setdefault("LANG", "C.UTF-8")
        return env

    @property
    def display_name(self) -> str:
        return self._require_state().display

    @property
    def guest_url(self) -> str | None:
        return self._require_state().guest_url

    @property
    def token(self) -> str:
        return self._require_state().token

    def x11(self) -> Any:
        """The in-process controller of this sandbox's display (vm.x11.X11Display)."""
        with self._lock:
            if self._display is None:
                from vm.x11 import X11Display

                state = self._require_state()
                try:
                    with xauthority_env(self.xauthority):
                        self._display = X11Display(state.display)
                except Exception as exc:
                    raise EnvironmentDead(f"cannot open display {state.display} of sandbox "
                                          f"{self.name}: {exc}") from exc
            return self._display

    def _x11_call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except EnvironmentDead:
            raise
        except Exception as exc:
            health = self.health()
            if not health.alive:
                self._display = None
                raise EnvironmentDead(f"sandbox {self.name}: {health.detail}") from exc
            raise RuntimeError(f"sandbox {self.name}: {what} failed: {exc}") from exc

    def screen_size(self) -> tuple[int, int]:
        return self.width, self.height

    def screenshot(self) -> bytes:
        return bytes(self._x11_call("screenshot", self.x11().screenshot))

    def perform(self, action: Action) -> None:
        self._x11_call("action", self.x11().perform, action)

    def cursor_position(self) -> tuple[int, int]:
        x, y = self._x11_call("cursor position", self.x11().cursor_position)
        return int(x), int(y)

    def guest_location(self, path: str) -> tuple[Path, str]:
        """(host folder, path beneath it) of a guest path: `~/…`, `/home/user/…` or
        relative: the home; the host path of a file in the home or the sandbox's /tmp;
        `/tmp/…` in namespaces (where /tmp is the sandbox's own): its /tmp. Anything else
        is refused (PermissionError). Only the words are looked at: links are left to
        Beneath, which the file calls go through."""
        outside = PermissionError(f"path {path!r} is outside sandbox {self.name}'s home "
                                  f"{self.home}")
        if path == "~" or path.startswith("~/"):
            return self.home, path[2:]
        if not os.path.isabs(path):
            return self.home, path
        places = [(OSWORLD_HOME, self.home), (str(self.home), self.home),
                  (str(self.tmp), self.tmp)]
        for prefix, folder in places:
            if path == prefix or path.startswith(prefix + "/"):
                return folder, path[len(prefix) + 1:]
        if path == str(self.workspace) or path.startswith(f"{self.workspace}/"):
            raise outside  # a host path elsewhere in the workspace (another sandbox's)
        if self.isolated and (path == INSIDE_TMP or path.startswith(INSIDE_TMP + "/")):
            return self.tmp, path[len(INSIDE_TMP) + 1:]
        raise outside

    def _beneath(self, folder: Path) -> Beneath:
        """File work in the sandbox's `folder` that no link of its user leads out of; what
        it makes is the inside user's."""
        return Beneath(folder, self._owner)

    def resolve_path(self, path: str) -> Path:
        """A guest path (see `guest_location`) as the host path it leads to now, for
        commands and messages; PermissionError when its links or '..' lead out of the
        sandbox. The workbench never opens what this returns: read_file and write_file
        resolve and open in one step (a link may change between the two)."""
        folder, relative = self.guest_location(path)
        with self._beneath(folder) as files:
            return files.real_path(relative)

    def execute(self, command: list[str] | str, shell: bool = False,
                timeout: float = 120.0) -> CommandResult:
        self._require_state()
        try:
            rewritten = self.apps().command(_argv(command, shell), shell)
        except (NeedsVM, AppMissing) as exc:
            return CommandResult(returncode=127, output="", error=str(exc))
        if rewritten is None:
            return CommandResult(returncode=0, output="",
                                 error="a port forward a sandbox does not need: not run")
        command = rewritten
        if self.isolated:
            return self._execute_inside(_shell_argv(command, shell), timeout)
        try:
            result = subprocess.run(command, shell=shell, env=self.app_env(), cwd=self.home,
                                    capture_output=True, timeout=timeout,
                                    start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            return CommandResult(returncode=-1, output=_text(exc.stdout),
                                 error=f"timed out after {timeout} s")
        except OSError as exc:
            return CommandResult(returncode=127, output="", error=str(exc))
        return CommandResult(result.returncode, _text(result.stdout), _text(result.stderr))

    def _execute_inside(self, argv: list[str], timeout: float) -> CommandResult:
        """Run `argv` inside; after `timeout` seconds its whole process group is killed."""
        proc, _pid = self._popen_inside(argv, tagged=True, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, new_session=False)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            stdout, stderr = proc.communicate()
            return CommandResult(returncode=-1, output=_text(stdout),
                                 error=f"timed out after {timeout} s")
        return CommandResult(proc.returncode, _text(stdout), _text(stderr))

    @property
    def command_home(self) -> Path | None:
        """The folder OSWorld's /home/user must be rewritten to in commands run here; None
        when /home/user is the real home (a sandbox with namespaces)."""
        return None if self.isolated else self.home

    @property
    def host_ports(self) -> dict[int, int]:
        """Desktop ports reached on another port of this machine, as a QEMU VM's forwards:
        OSWorld's DevTools ports (9222, and 1337 behind it) are this sandbox's own port.
        None with a network of its own: see `devtools_sockets`."""
        state = self.state
        if state is None or state.devtools_socket or not state.devtools_port:
            return {}
        return {DEVTOOLS_PORT: state.devtools_port, CHROME_PORT: state.devtools_port}

    @property
    def devtools_sockets(self) -> dict[int, str]:
        """Desktop ports reached through a Unix socket of this machine (a sandbox with a
        network of its own): OSWorld's DevTools ports, 9222 and 1337 behind it."""
        path = self.state.devtools_socket if self.state is not None else None
        return {DEVTOOLS_PORT: path, CHROME_PORT: path} if path else {}

    def network_description(self) -> str:
        """One line for `workbench env up`: the network, and how the workbench reaches
        the guest server and DevTools."""
        state = self._require_state()
        if not self.private_network:
            where = "host" if self.isolated else "host (no namespaces)"
            return f"network: {where}; DevTools on the host's 127.0.0.1:{state.devtools_port}"
        outbound = "outbound through slirp4netns" if self.network == USER_NETWORK \
            else "no outbound access"
        ports = ", ".join(map(str, state.host_loopback_ports)) or "none"
        return (f"network: {self.network} ({outbound}; its own loopback); sockets in "
                f"{state.sockets_dir} (0700); host loopback ports reachable inside: {ports}")

    def apps(self) -> SandboxApps:
        """How OSWorld's application commands are rewritten for this sandbox."""
        state = self._require_state()
        if self.isolated:  # an unprivileged user at /home/user: no root workarounds
            return SandboxApps(Path(INSIDE_HOME), state.devtools_port or DEVTOOLS_PORT,
                               as_root=False)
        return SandboxApps(self.home, state.devtools_port or DEVTOOLS_PORT,
                           socket_dir=state.socket_dir)

    def launch(self, command: list[str] | str, shell: bool = False) -> None:
        """Start an application (OSWorld's commands rewritten: vm.providers.sandbox_apps);
        NeedsVM or AppMissing when this machine cannot run it."""
        self._require_state()
        rewritten = self.apps().command(_argv(command, shell), shell)
        if rewritten is None:
            log.info("sandbox %s: not needed here, not run: %s", self.name, command)
            return
        command = rewritten
        self._start_app(command, shell, INSIDE_HOME if self.isolated else str(self.home))

    def _start_app(self, command: list[str] | str, shell: bool, cwd: str) -> None:
        """Start an application of the sandbox, in a session of its own (remembered)."""
        self._note_sessions([self._app_pid(self._spawn_app(command, shell, cwd))])

    def _spawn_app(self, command: list[str] | str, shell: bool, cwd: str
                   ) -> subprocess.Popen[bytes]:
        """Start an application, in a session of its own (`_app_pid` finds its program: a
        revert starts all its applications before it waits for the first)."""
        with open(self.logs / "apps.log", "ab") as logf:
            if self.isolated:
                proc, _pid = self._popen_inside(_shell_argv(command, shell), tagged=True,
                                                stdout=logf, stderr=logf, cwd=cwd,
                                                find_child=False)
            else:
                proc = subprocess.Popen(command, shell=shell, env=self.app_env(), cwd=cwd,
                                        stdout=logf, stderr=logf, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        self._children.append(proc)
        return proc

    def _app_pid(self, proc: subprocess.Popen[bytes]) -> int:
        """The host pid of the program `_spawn_app` started (in namespaces, the process
        nsenter forks, once it has)."""
        return (child_of(proc.pid) or proc.pid) if self.isolated else proc.pid

    def _note_sessions(self, pids: list[int]) -> None:
        """Remember applications' sessions (see SandboxState.sessions); one state write."""
        state = self._require_state()
        found = [[pid, started] for pid in pids if (started := start_time(pid)) is not None]
        if not found:
            return  # already gone
        with self._lock:
            # forget sessions that have ended
            alive = session_members(state.sessions, self._members())
            state.sessions = [s for s in state.sessions if s[0] in alive] + found
            if self.state_file.exists():
                _write_json_atomic(self.state_file, asdict(state))

    def _kill_apps(self) -> None:
        """Kill every application of the sandbox: tagged processes, then whatever is left
        in the sessions it launched."""
        state = self._require_state()
        kill_tagged(state.tag, among=self._members)
        kill_sessions(state.sessions, among=self._members)
        state.sessions = []
        if self.isolated and state.holder_pid:
            # and whatever else runs inside, whatever its environment or session
            holder = state.holder_pid
            kill_leftovers(lambda: self._members() or namespace_pids(holder),
                           Services(container=state.container_pid, holder=holder,
                                    programs=tuple(pid for pid in (
                                        state.wm_pid, state.guest_pid, state.forwarder_pid)
                                        if pid),
                                    buses=tuple(state.bus_pids)))

    def _members(self) -> list[int] | None:
        """The host pids of all of the sandbox's processes, from its resource group (one
        read: every process inside joined it before it ran, and none can leave it): what the
        process look-ups search instead of all of /proc. None without a group (isolation =
        "none", no cgroups here): then they scan /proc."""
        bounds = self.bounds() if self.isolated else None
        if bounds is None or bounds.group is None or not bounds.group.folders:
            return None
        try:
            return bounds.group.pids()
        except LimitsError:
            return None

    def read_file(self, path: str) -> bytes:
        folder, relative = self.guest_location(path)
        with self._beneath(folder) as files:
            return files.read_bytes(relative)

    def write_file(self, path: str, data: bytes) -> None:
        folder, relative = self.guest_location(path)
        with self._beneath(folder) as files:
            files.write_atomic(relative, data, parents=True)

    def open_file(self, path: str) -> None:
        folder, relative = self.guest_location(path)
        with self._beneath(folder) as files:
            if not files.exists(relative):
                raise FileNotFoundError(f"sandbox {self.name}: {path} does not exist")
        # opened by the application, as the sandbox's user: never by the workbench
        target = folder / relative
        opener = shutil.which("xdg-open")
        if opener is None:
            raise FileNotFoundError("xdg-open not found: install the Debian package xdg-utils")
        self.launch([opener, self.inside_path(target) if self.isolated else str(target)])

    def windows(self) -> list[Any]:
        """The top-level windows; each one's pid is the host's number for its program
        (a program in the namespaces puts its own number on its window)."""
        found = list(self._x11_call("list windows", self.x11().list_windows))
        state = self.state
        if not self.isolated or state is None or not state.holder_pid:
            return found
        inside = {w.pid for w in found if w.pid}
        if not inside:
            return found
        members = self._members()
        mapping = host_pids(inside, namespace_pids(state.holder_pid) if members is None
                            else members)
        return [dataclasses.replace(w, pid=mapping.get(w.pid)) if w.pid else w
                for w in found]

    def activate_window(self, window_name: str, strict: bool = False,
                        by_class: bool = False) -> None:
        self._on_window("activate window", self.x11().activate_window, window_name, strict,
                        by_class)

    def close_window(self, window_name: str, strict: bool = False,
                     by_class: bool = False) -> None:
        self._on_window("close window", self.x11().close_window, window_name, strict,
                        by_class)

    def _on_window(self, what: str, call: Any, window_name: str, strict: bool,
                   by_class: bool) -> None:
        """`call` on the first window OSWorld's name finds, as this machine's applications
        name their windows (sandbox_apps.window_matches), waiting a while for an
        application launched just before to map it; LookupError naming what was tried
        when none comes."""
        tried = window_matches(window_name, strict, by_class)
        deadline = time.monotonic() + window_find_timeout(window_name, WINDOW_FIND_TIMEOUT)
        pause = 0.05
        while True:
            for match in tried:
                if self._x11_call(what, call, match.name, match.strict, match.by_class):
                    return
            if time.monotonic() > deadline:
                break
            time.sleep(pause)
            pause = min(0.5, pause * 1.5)
        ways = ", ".join(f"{'class' if m.by_class else 'title'} {m.name!r}"
                         f"{' (exact)' if m.strict else ''}" for m in tried)
        raise LookupError(f"sandbox {self.name}: no window matching {window_name!r} "
                          f"(tried {ways})")

    def accessibility_tree(self) -> str | None:
        """The sandbox's tree in OSWorld's XML layout; None without a bus (dbus-daemon or
        at-spi2-core missing when it started)."""
        state = self._require_state()
        if not state.bus_address:
            return None
        from vm.guest.accessibility import AccessibilityUnavailable
        from vm.guest.accessibility import accessibility_tree as read_tree

        try:
            if self.isolated:
                return read_tree(state.bus_address, access=self._bus_access())
            return read_tree(state.bus_address)
        except AccessibilityUnavailable as exc:
            raise RuntimeError(f"sandbox {self.name}: {exc}") from exc

    # ------------------------------------------------------------------ snapshots

    def _snapshot_dir(self, name: str) -> Path:
        return self.snapshot_root / check_name(name, "snapshot name")

    def _read_meta(self, folder: Path) -> dict[str, Any]:
        meta_file = folder / "snapshot.json"
        try:
            data = json.loads(meta_file.read_text())
        except FileNotFoundError:
            raise SnapshotError(f"sandbox {self.name} has no snapshot {folder.name!r}") from None
        except ValueError as exc:
            raise SnapshotError(f"{meta_file}: not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("apps"), list):
            raise SnapshotError(f"{meta_file}: field 'apps' must be a list")
        return data

    def _snapshot_record(self, meta: dict[str, Any]) -> Snapshot:
        return Snapshot(name=meta["name"], created=meta["created"],
                        size_bytes=meta.get("size_bytes", 0),
                        description=meta.get("description", ""), parent=meta.get("parent"),
                        task_id=meta.get("task_id"),
                        extra={"apps": [" ".join(a["argv"]) for a in meta["apps"]]})

    def _snapshot_folders(self) -> list[Path]:
        """Saved snapshots (staging and deleted folders start with a dot)."""
        if not self.snapshot_root.exists():
            return []
        return [f for f in self.snapshot_root.iterdir()
                if f.is_dir() and not f.name.startswith(".")]

    def _reparent(self, old: str, new: str | None) -> None:
        """Children of snapshot `old` now hang off `new` (keeps the tree after rename or
        delete)."""
        for folder in self._snapshot_folders():
            child = self._read_meta(folder)
            if child.get("parent") == old:
                child["parent"] = new
                _write_json_atomic(folder / "snapshot.json", child)

    def list_snapshots(self) -> list[Snapshot]:
        out = []
        for folder in self._snapshot_folders():
            try:
                out.append(self._snapshot_record(self._read_meta(folder)))
            except SnapshotError as exc:
                log.warning("%s", exc)
        return sorted(out, key=lambda s: s.created)

    def _running_apps(self) -> list[AppRecord]:
        processes, with_window = self._apps_and_windows()
        return [AppRecord(argv=list(p.argv), cwd=p.cwd, had_window=p.pid in with_window)
                for p in sorted(processes.values(), key=lambda p: p.pid)]

    def _apps_and_windows(self) -> tuple[dict[int, TaggedProcess], set[int]]:
        """The sandbox's applications ({pid: process}) and those of them showing a window."""
        state = self._require_state()
        window_pids = set()
        try:
            window_pids = {w.pid for w in self.windows() if w.pid}
        except RuntimeError:
            pass
        # a tagged process in the session of a launched app is part of that app (Chromium's
        # crash handlers, re-parented away from it): relaunching the app brings it back
        among = self._members()
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

    def save_snapshot(self, name: str, description: str = "",
                      task_id: str | None = None) -> Snapshot:
        with self._lock:
            state = self._require_state()
            folder = self._snapshot_dir(name)
            if folder.exists():
                raise SnapshotError(f"sandbox {self.name} already has a snapshot {name!r}; "
                                    "delete or rename it first")
            self.snapshot_root.mkdir(parents=True, exist_ok=True)
            staging = self.snapshot_root / f".{name}.{secrets.token_hex(4)}"
            staging.mkdir()
            try:
                apps = self._running_apps()
                # never through a link the agent swaps in mid-copy; set-id bits dropped
                size = _copy_live_home(self.home, staging / "home")
                meta = {"name": name, "created": time.time(), "description": description,
                        "parent": state.current_snapshot, "task_id": task_id,
                        "size_bytes": size,
                        "apps": [asdict(a) for a in apps],
                        "screen": [self.width, self.height],
                        # whose files these are (a revert into a sandbox of another
                        # identity gives them to it)
                        "host_uid": None if self.identity is None else self.identity.uid}
                _write_json_atomic(staging / "snapshot.json", meta)
                os.rename(staging, folder)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            self._set_current(name)
            return self._snapshot_record(meta)

    def revert_snapshot(self, name: str) -> None:
        with self._lock:
            self._require_state()
            meta = self._read_meta(self._snapshot_dir(name))
            if not self.health().alive:
                raise EnvironmentDead(f"sandbox {self.name}: {self.health().detail}")
            self._kill_apps()
            self._reap()
            self._release_input()
            bounds = self.bounds()
            if bounds is not None and bounds.home is not None:
                # a size-capped home is a mount: entries cannot be renamed across it
                replace_home_files(self.home, self._snapshot_dir(name) / "home")
                self._adopt_snapshot_files(meta, self.home)
            else:
                # Swap the home folder's entries: copy the snapshot beside it, then rename
                # each entry (the folder itself stays: the namespaces show it at /home/user)
                fresh = self.root / f".home-{secrets.token_hex(4)}"
                _copy_tree(self._snapshot_dir(name) / "home", fresh)
                self._adopt_snapshot_files(meta, fresh)
                old = self.root / f".old-home-{secrets.token_hex(4)}"
                old.mkdir()
                for entry in os.listdir(self.home):
                    os.rename(self.home / entry, old / entry)
                for entry in os.listdir(fresh):
                    os.rename(fresh / entry, self.home / entry)
                shutil.copystat(fresh, self.home)
                fresh.rmdir()
                threading.Thread(target=shutil.rmtree, args=(old, True), daemon=True).start()
            remove_stale_locks(self.home)  # the apps that held them were killed above
            # a snapshot saved before homes had them
            make_home_folders(self.home, self._owner)
            apps = [AppRecord(**a) for a in meta["apps"]]
            launched = []
            for app in apps:
                if self.isolated:
                    host_cwd = self._host_cwd(app.cwd)
                    cwd = app.cwd if host_cwd is not None and host_cwd.is_dir() \
                        else INSIDE_HOME
                else:
                    cwd = app.cwd if os.path.isdir(app.cwd) else str(self.home)
                try:  # a browser gets this sandbox's DevTools port (it changes on restart)
                    argv = self.apps().argv(app.argv) or app.argv
                except (NeedsVM, AppMissing) as exc:
                    log.warning("sandbox %s: not relaunched: %s", self.name, exc)
                    continue
                launched.append(self._spawn_app(argv, False, cwd))
            self._note_sessions([self._app_pid(proc) for proc in launched])
            self._wait_for_windows(sum(1 for a in apps if a.had_window))
            self._set_current(name)

    def _adopt_snapshot_files(self, meta: dict[str, Any], folder: Path) -> None:
        """Make a snapshot's files, copied to `folder`, fit this sandbox. A snapshot saved
        before identities (its metadata has no "host_uid") may hold set-id bits: cleared
        (one saved since was copied without them, so reverts to it skip that walk). Files
        saved under another identity (root's, or another sandbox's) are given to this
        sandbox's inside user, who must own its home."""
        if "host_uid" not in meta:
            clear_set_id_bits(folder)
        identity = self.identity
        if identity is not None and identity.separate and meta.get("host_uid") != identity.uid:
            give_tree_to(folder, identity)

    def _release_input(self) -> None:
        """Release buttons and keys an old episode may have left held down."""
        release = getattr(self.x11(), "release_all", None)
        if release is not None:
            self._x11_call("release input", release)

    def _wait_for_windows(self, count: int) -> None:
        if count == 0:
            return
        deadline = time.monotonic() + WINDOW_WAIT_TIMEOUT
        while time.monotonic() < deadline:
            if len(self._apps_and_windows()[1]) >= count:
                return
            time.sleep(0.01)
        log.warning("sandbox %s: %d application window(s) did not reappear within %.0f s",
                    self.name, count, WINDOW_WAIT_TIMEOUT)

    def rename_snapshot(self, old: str, new: str) -> None:
        with self._lock:
            source, target = self._snapshot_dir(old), self._snapshot_dir(new)
            meta = self._read_meta(source)
            if target.exists():
                raise SnapshotError(f"sandbox {self.name} already has a snapshot {new!r}")
            meta["name"] = new
            _write_json_atomic(source / "snapshot.json", meta)
            os.rename(source, target)
            self._reparent(old, new)
            if self.state is not None and self.state.current_snapshot == old:
                self._set_current(new)

    def delete_snapshot(self, name: str) -> None:
        with self._lock:
            folder = self._snapshot_dir(name)
            meta = self._read_meta(folder)
            trash = self.snapshot_root / f".deleted-{name}-{secrets.token_hex(4)}"
            os.rename(folder, trash)
            shutil.rmtree(trash, ignore_errors=True)
            self._reparent(name, meta.get("parent"))
            if self.state is not None and self.state.current_snapshot == name:
                self._set_current(None)

    def _set_current(self, name: str | None) -> None:
        if self.state is None:
            return
        self.state.current_snapshot = name
        if self.state_file.exists():
            _write_json_atomic(self.state_file, asdict(self.state))


def _is_bwrap(pid: int) -> bool:
    """True when `pid` is a bwrap (a recorded pid not since reused by another program)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"bwrap")
    except OSError:
        return False


def _runs(pid: int, word: bytes) -> bool:
    """True when `word` is one of the arguments of process `pid`."""
    try:
        return word in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def _program(pid: int) -> str:
    """The base name of the program `pid` runs ("" when it is gone)."""
    try:
        return os.path.basename(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                                .decode(errors="replace"))
    except OSError:
        return ""


def _unix_listener(path: Path) -> socket.socket:
    """A listening Unix socket at `path` (in a 0700 folder; the file is 0600 too)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def _listener(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _shell_argv(command: list[str] | str, shell: bool) -> list[str]:
    """An argv for `command` as subprocess would run it with `shell`."""
    if not shell:
        return [command] if isinstance(command, str) else list(command)
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    return ["/bin/sh", "-c", *command]


def _close_quietly(display: Any) -> None:
    try:
        display.close()
    except Exception:  # the X server may be gone already
        pass


def _argv(command: list[str] | str, shell: bool) -> list[str] | str:
    """A command string without a shell is split the way a shell would split it."""
    if isinstance(command, str) and not shell:
        return shlex.split(command)
    return command


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data


__all__ = ["HOME_FOLDERS", "AppRecord", "SandboxProvider", "SandboxState", "XServer",
           "make_home_folders"]
