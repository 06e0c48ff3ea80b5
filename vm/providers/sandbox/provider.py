"""`SandboxProvider`: the Provider (vm.providers.base) of a sandbox desktop. It holds the
sandbox's settings, folders and state, and hands each job to the module that holds it:
starting programs to its launcher (host or namespaces), the network to
vm.providers.sandbox.network, snapshots to vm.providers.sandbox.snapshots.

A persistent sandbox outlives the process that started it (its processes run in their own
sessions and its state is a JSON file in the workspace), so `workbench env up` can start
one and later commands (or the app) attach to it by name; any other ends with the process
that started it, however it dies (vm.providers.sandbox.watchdog).
"""

from __future__ import annotations

import logging
import secrets
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from vm.actions import Action
from vm.errors import EnvironmentDead
from vm.file_windows import OPEN_FILE_WAIT, file_window, no_window_note
from vm.processes import TaggedProcess
from vm.providers.base import CommandResult, Health, Snapshot
from vm.providers.beneath import Beneath
from vm.providers.isolation import (
    HOST_NETWORK,
    NAMESPACES,
    isolation_mode,
    network_mode,
)
from vm.providers.isolation import host_loopback_ports as host_loopback_ports_setting
from vm.providers.sandbox import network, services
from vm.providers.sandbox.apps import (
    DEVTOOLS_PORT,
    AppMissing,
    NeedsVM,
    SandboxApps,
    free_port,
    remove_stale_locks,
)
from vm.providers.sandbox.bounds import SandboxBounds
from vm.providers.sandbox.display import SandboxScreen
from vm.providers.sandbox.home import SandboxFolders
from vm.providers.sandbox.host_launcher import HostLauncher
from vm.providers.sandbox.identity import HostIdentity, give_to
from vm.providers.sandbox.image import make_home_folders
from vm.providers.sandbox.launcher import Launcher
from vm.providers.sandbox.limits import LimitsError, SandboxLimits
from vm.providers.sandbox.namespace_launcher import NamespaceLauncher
from vm.providers.sandbox.resume import resumed_argv
from vm.providers.sandbox.running_apps import (
    applications,
    kill_applications,
    launched_sessions,
    live_sessions,
)
from vm.providers.sandbox.snapshots import AppRecord, SnapshotStore
from vm.providers.sandbox.state import SandboxState, check_name
from vm.providers.sandbox.watchdog import Watchdog, owner_record, reclaim_orphans, sandbox_lock
from vm.waiting import poll_until
from vm.xserver import start_xvfb, write_xauthority

log = logging.getLogger(__name__)

# Memory and processes are bounded by default; the home's size only when asked for
# ($WORKBENCH_SANDBOX_HOME_MB): a capped home is a loop-mounted volume, and a revert onto
# it copies files instead of renaming them.
SANDBOX_DEFAULT_LIMITS = SandboxLimits(home_mb=0)
WINDOW_WAIT_TIMEOUT = 5.0


class SandboxProvider:
    """One sandbox desktop: a private Xvfb display with a window manager, real
    applications, a home folder of its own and our guest server, with no VM at all.

    Everything that runs on the desktop (window manager, guest server, applications,
    terminals, commands) runs in the sandbox's own namespaces as an unprivileged `user` at
    /home/user (vm.providers.isolation); the X server and the accessibility bus's sockets
    stay outside, bound in. `isolation="none"` runs them on the host instead, as the
    invoking user. The network: vm.providers.sandbox.network.

    A snapshot is the home folder's files plus the applications to relaunch (argv and
    working directory). A revert kills the desktop's applications (with namespaces,
    every process inside but the sandbox's own services: window manager, guest server,
    relay, buses), releases keys and buttons left held, puts the home's files back (its
    /tmp stays as it is) and relaunches the applications, waiting for their windows. The
    relaunched ones have $WORKBENCH_RESUME=1 (vm.providers.sandbox.resume): our bundled
    task apps then show the state their files saved."""

    kind = "sandbox"

    def __init__(self, name: str, workspace: str | Path, screen_size: tuple[int, int] = (1280, 800),
                 guest_server: bool = True, guest_host: str = "127.0.0.1",
                 guest_port: int = 0, isolation: str | None = None,
                 network: str | None = None, limits: SandboxLimits | None = None,
                 host_loopback_ports: tuple[int, ...] | None = None,
                 persistent: bool = False) -> None:
        self.name = check_name(name, "sandbox name")
        # True: it outlives the process that starts it (`workbench env up`, the app); False:
        # it ends with that process, however it dies (vm.providers.sandbox.watchdog)
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
        # its folders (vm.providers.sandbox.home), under their short names too
        self.folders = folders = SandboxFolders(self.workspace, self.name)
        self.root, self.home, self.logs, self.tmp = (folders.root, folders.home,
                                                     folders.logs, folders.tmp)
        self.state_file, self.xauthority = folders.state_file, folders.xauthority
        self.workbench_dir, self.snapshot_root = folders.workbench, folders.snapshots
        self.snapshots = SnapshotStore(self.folders.snapshots, self.name)
        self.state: SandboxState | None = None
        self._children: list[subprocess.Popen[bytes]] = []
        self._lock = threading.RLock()
        self._screen = SandboxScreen(self.name, self.xauthority, self._lock, self.health)
        # how its programs start: on the host, or in its namespaces
        self.launcher = self._launcher()
        # memory, processes and home size (None: the defaults and $WORKBENCH_SANDBOX_*,
        # read at start); applied with namespaces only
        self._limits = limits
        self._bounds: SandboxBounds | None = None
        # the host identity of the inside user (set at start, or from the state file):
        # files the workbench makes in the home or /tmp are given to it
        self.identity: HostIdentity | None = None

    def _launcher(self) -> Launcher:
        return NamespaceLauncher(self) if self.isolation == NAMESPACES else HostLauncher(self)

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def attach(cls, name: str, workspace: str | Path) -> SandboxProvider:
        """A handle on a sandbox started earlier (possibly by another process)."""
        provider = cls(name, workspace)
        provider.state = state = SandboxState.load(provider.state_file, name,
                                                   provider.workspace)
        provider.width, provider.height = state.width, state.height
        provider.isolation = state.isolation
        provider.launcher = provider._launcher()
        provider.network = state.network
        provider.host_loopback_ports = tuple(state.host_loopback_ports)
        provider.persistent = state.persistent
        if state.host_uid is not None and state.host_gid is not None:
            provider.identity = HostIdentity(state.host_uid, state.host_gid,
                                             state.identity_separate)
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
        return self.launcher.isolated

    def start(self) -> None:
        """Start the desktop (nothing while it runs). Unless `persistent`, it ends with this
        process: a watchdog stops it when this process dies (vm.providers.sandbox.watchdog)."""
        reclaim_orphans(self.workspace, skip=self.name)
        with sandbox_lock(self.root):
            before = self.state
            self._start()
            if self.state is not before and not self.persistent:
                self._watch_owner()

    def _watch_owner(self) -> None:
        """Start the watchdog that stops this sandbox when this process dies; without one
        it would outlive this process, so it is stopped."""
        state = self.require_state()
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
            launcher = self.launcher
            launcher.check()
            if self.state_file.exists():
                # Leftovers of an earlier run of this name (crashed, or killed): clean up.
                try:
                    SandboxProvider.attach(self.name, self.workspace)._teardown()
                except EnvironmentDead:
                    pass
            self.identity = launcher.identity()
            self.folders.make(self.identity)
            # before the home is filled and the first process runs
            self._bounds = bounds = launcher.apply_bounds()
            try:
                make_home_folders(self.home, self.owner)
                # bound in, read by the inside user, whose machine name is the sandbox's
                write_xauthority(self.xauthority, hostnames=(self.name,))
                give_to(self.xauthority, self.identity, 0o600)
            except BaseException:
                self._close_bounds()
                raise
            xserver = start_xvfb(self.width, self.height, log_dir=self.logs,
                                 xauthority=self.xauthority,
                                 window_manager=launcher.window_manager_with_x_server,
                                 window_manager_config=launcher.window_manager_config(),
                                 authorization=True)
            self.state = SandboxState(
                name=self.name, display=xserver.display, width=self.width,
                height=self.height, xvfb_pid=xserver.pid, wm_pid=xserver.wm_pid,
                guest_pid=None, guest_url=None, token=secrets.token_urlsafe(24),
                tag=f"{self.name}-{secrets.token_hex(4)}", started=time.time(),
                devtools_port=DEVTOOLS_PORT if self.private_network else free_port(),
                socket_dir=launcher.socket_dir(),
                isolation=self.isolation, network=self.network,
                host_loopback_ports=list(self.host_loopback_ports)
                if self.private_network else [],
                limits=None if bounds is None else bounds.record(),
                persistent=self.persistent, **owner_record(),
                host_uid=None if self.identity is None else self.identity.uid,
                host_gid=None if self.identity is None else self.identity.gid,
                identity_separate=self.identity is not None and self.identity.separate,
            )
            try:
                launcher.start_container()
                launcher.start_accessibility_bus()
                launcher.start_desktop()
                if self.guest_server:
                    self._start_guest_server()
            except BaseException:
                self._teardown()
                raise
            self.state.save(self.state_file)
            log.info("sandbox %s up on %s; %s", self.name, xserver.display,
                     self.limits_description())

    def _start_guest_server(self) -> None:
        self.launcher.start_guest_server()

    @property
    def limits(self) -> SandboxLimits:
        """What this sandbox may use (vm.providers.sandbox.limits): given, else
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
        return f"limits: none ({self.launcher.unbounded_reason()})"

    @property
    def owner(self) -> tuple[int, int] | None:
        """(uid, gid) the files the workbench makes in the home or /tmp are given to; None
        when they are the invoking user's anyway (or the sandbox has no identity)."""
        return self.identity.owner() if self.identity is not None else None

    def stop(self) -> None:
        with self._lock:
            if self.state is None and self.state_file.exists():
                self.state = SandboxProvider.attach(self.name, self.workspace).state
            self._teardown()

    def _teardown(self) -> None:
        self._screen.close()
        if self.state is not None:
            services.end_sandbox(self.state)
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

    def add_child(self, proc: subprocess.Popen[bytes]) -> None:
        """Remember a process started for this sandbox, to reap it once it ends."""
        self._children.append(proc)

    def _reap(self) -> None:
        self._children = [p for p in self._children if p.poll() is None]

    def health(self) -> Health:
        return services.health(self.state, self.guest_server)

    # ------------------------------------------------------------------ environment

    def require_state(self) -> SandboxState:
        """The running sandbox's state; EnvironmentDead when it is not started."""
        if self.state is None:
            raise EnvironmentDead(f"sandbox {self.name} is not started")
        return self.state

    def app_env(self) -> dict[str, str]:
        """Environment of processes run in the sandbox: its display, home and tag."""
        return self.launcher.environment()

    @property
    def display_name(self) -> str:
        return self.require_state().display

    @property
    def guest_url(self) -> str | None:
        return self.require_state().guest_url

    @property
    def token(self) -> str:
        return self.require_state().token

    def x11(self) -> Any:
        """The in-process controller of this sandbox's display (vm.x11.X11Display)."""
        return self._screen.connection(lambda: self.require_state().display)

    def screen_size(self) -> tuple[int, int]:
        return self.width, self.height

    def screenshot(self) -> bytes:
        return bytes(self._screen.call("screenshot", self.x11().screenshot))

    def perform(self, action: Action) -> None:
        self._screen.call("action", self.x11().perform, action)

    def cursor_position(self) -> tuple[int, int]:
        x, y = self._screen.call("cursor position", self.x11().cursor_position)
        return int(x), int(y)

    def guest_location(self, path: str) -> tuple[Path, str]:
        """(host folder, path beneath it) of a guest path (SandboxFolders.guest_location;
        `/tmp/…` is the sandbox's /tmp in namespaces, where /tmp is its own)."""
        return self.folders.guest_location(path, inside_tmp=self.launcher.inside_tmp)

    def inside_path(self, path: Path) -> str:
        """The path inside the sandbox of a host path in its home or /tmp."""
        return self.folders.inside_path(path)

    def _beneath(self, folder: Path) -> Beneath:
        """File work in the sandbox's `folder` that no link of its user leads out of; what
        it makes is the inside user's."""
        return Beneath(folder, self.owner)

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
        self.require_state()
        try:
            rewritten = self.apps().command(_argv(command, shell), shell)
        except (NeedsVM, AppMissing) as exc:
            return CommandResult(returncode=127, output="", error=str(exc))
        if rewritten is None:
            return CommandResult(returncode=0, output="",
                                 error="a port forward a sandbox does not need: not run")
        return self.launcher.run(rewritten, shell, timeout)

    @property
    def command_home(self) -> Path | None:
        """The folder OSWorld's /home/user must be rewritten to in commands run here; None
        when /home/user is the real home (a sandbox with namespaces)."""
        return self.launcher.command_home

    @property
    def host_ports(self) -> dict[int, int]:
        """Desktop ports reached on another port of this machine (network.host_ports)."""
        return network.host_ports(self.state)

    @property
    def devtools_sockets(self) -> dict[int, str]:
        """Desktop ports reached through a Unix socket (network.devtools_sockets)."""
        return network.devtools_sockets(self.state)

    def network_description(self) -> str:
        """One line for `workbench env up`: the network, and how the workbench reaches
        the guest server and DevTools."""
        return network.describe(self.require_state(), self.network, self.private_network,
                                self.isolated)

    def apps(self) -> SandboxApps:
        """How OSWorld's application commands are rewritten for this sandbox."""
        return self.launcher.apps()

    def launch(self, command: list[str] | str, shell: bool = False) -> None:
        """Start an application (OSWorld's commands rewritten: vm.providers.sandbox.apps);
        NeedsVM or AppMissing when this machine cannot run it."""
        self.require_state()
        rewritten = self.apps().command(_argv(command, shell), shell)
        if rewritten is None:
            log.info("sandbox %s: not needed here, not run: %s", self.name, command)
            return
        self._note_sessions([self.launcher.program_pid(
            self._spawn_app(rewritten, shell, self.launcher.home))])

    def _spawn_app(self, command: list[str] | str, shell: bool, cwd: str
                   ) -> subprocess.Popen[bytes]:
        """Start an application, in a session of its own (Launcher.program_pid finds its
        program)."""
        with open(self.logs / "apps.log", "ab") as logf:
            proc = self.launcher.spawn(command, shell, cwd, logf)
        self.add_child(proc)
        return proc

    def _note_sessions(self, pids: list[int]) -> None:
        """Remember applications' sessions (see SandboxState.sessions); one state write."""
        state = self.require_state()
        found = launched_sessions(pids)
        if not found:
            return  # already gone
        with self._lock:
            # forget sessions that have ended
            state.sessions = live_sessions(state.sessions, self._members()) + found
            if self.state_file.exists():
                state.save(self.state_file)

    def _kill_apps(self) -> None:
        """Kill every application of the sandbox, and with namespaces whatever else runs
        inside but its own services."""
        kill_applications(self.require_state(), self._members)
        self.launcher.kill_leftovers()

    def _members(self) -> list[int] | None:
        """The host pids of all of the sandbox's processes (Launcher.members); None: the
        process look-ups scan /proc."""
        return self.launcher.members()

    def read_file(self, path: str) -> bytes:
        folder, relative = self.guest_location(path)
        with self._beneath(folder) as files:
            return files.read_bytes(relative)

    def write_file(self, path: str, data: bytes) -> None:
        folder, relative = self.guest_location(path)
        with self._beneath(folder) as files:
            files.write_atomic(relative, data, parents=True)

    def open_file(self, path: str) -> str | None:
        """Open `path` in its default application as OSWorld's server does: wait for a
        window showing it and activate it (vm.file_windows); None once it is in front,
        else a note that no such window came."""
        folder, relative = self.guest_location(path)
        with self._beneath(folder) as files:
            if not files.exists(relative):
                raise FileNotFoundError(f"sandbox {self.name}: {path} does not exist")
        # opened by the application, as the sandbox's user: never by the workbench
        opener = shutil.which("xdg-open")
        if opener is None:
            raise FileNotFoundError("xdg-open not found: install the Debian package xdg-utils")
        self.launch([opener, self.launcher.program_path(folder / relative)])
        title = poll_until(lambda: file_window([w.title for w in self.windows()], path),
                           OPEN_FILE_WAIT, 0.1)
        if title is None:
            return no_window_note(path, OPEN_FILE_WAIT)
        self.activate_window(title, strict=True)
        return None

    def windows(self) -> list[Any]:
        """The top-level windows; each one's pid is the host's number for its program
        (a program in the namespaces puts its own number on its window)."""
        found = list(self._screen.call("list windows", self.x11().list_windows))
        return self.launcher.host_window_pids(found)

    def activate_window(self, window_name: str, strict: bool = False,
                        by_class: bool = False) -> None:
        self._screen.on_window("activate window", self.x11().activate_window, window_name,
                               strict, by_class)

    def close_window(self, window_name: str, strict: bool = False,
                     by_class: bool = False) -> None:
        self._screen.on_window("close window", self.x11().close_window, window_name,
                               strict, by_class)

    def accessibility_tree(self) -> str | None:
        """The sandbox's tree in OSWorld's XML layout; None without a bus (dbus-daemon or
        at-spi2-core missing when it started)."""
        state = self.require_state()
        if not state.bus_address:
            return None
        from vm.guest.accessibility import AccessibilityUnavailable
        from vm.guest.accessibility import accessibility_tree as read_tree

        try:
            return read_tree(state.bus_address, access=self.launcher.bus_access())
        except AccessibilityUnavailable as exc:
            raise RuntimeError(f"sandbox {self.name}: {exc}") from exc

    # ------------------------------------------------------------------ snapshots

    def list_snapshots(self) -> list[Snapshot]:
        return self.snapshots.all()

    def _running_apps(self) -> list[AppRecord]:
        processes, with_window = self._apps_and_windows()
        return [AppRecord(argv=list(p.argv), cwd=p.cwd, had_window=p.pid in with_window)
                for p in sorted(processes.values(), key=lambda p: p.pid)]

    def _apps_and_windows(self) -> tuple[dict[int, TaggedProcess], set[int]]:
        """The sandbox's applications ({pid: process}) and those of them showing a window."""
        state = self.require_state()
        window_pids = set()
        try:
            window_pids = {w.pid for w in self.windows() if w.pid}
        except RuntimeError:
            pass
        return applications(state, window_pids, self._members())

    def save_snapshot(self, name: str, description: str = "",
                      task_id: str | None = None) -> Snapshot:
        with self._lock:
            state = self.require_state()
            snapshot = self.snapshots.save(
                name, self.home, self._running_apps, description=description,
                task_id=task_id, parent=state.current_snapshot,
                screen=(self.width, self.height), identity=self.identity)
            self._set_current(name)
            return snapshot

    def revert_snapshot(self, name: str) -> None:
        with self._lock:
            self.require_state()
            meta = self.snapshots.read_meta(self.snapshots.folder(name))
            if not self.health().alive:
                raise EnvironmentDead(f"sandbox {self.name}: {self.health().detail}")
            self._kill_apps()
            self._reap()
            self._release_input()
            bounds = self.bounds()
            self.snapshots.restore_home(name, meta, self.home, self.root,
                                        capped=bounds is not None and bounds.home is not None,
                                        identity=self.identity)
            remove_stale_locks(self.home)  # the apps that held them were killed above
            # a snapshot saved before homes had them
            make_home_folders(self.home, self.owner)
            apps = [AppRecord(**a) for a in meta["apps"]]
            launched = []
            for app in apps:
                cwd = self.launcher.app_cwd(app.cwd)
                try:  # a browser gets this sandbox's DevTools port (it changes on restart)
                    argv = self.apps().argv(app.argv) or app.argv
                except (NeedsVM, AppMissing) as exc:
                    log.warning("sandbox %s: not relaunched: %s", self.name, exc)
                    continue
                # told it is resumed: our task apps take up their saved state
                launched.append(self._spawn_app(resumed_argv(argv), False, cwd))
            self._note_sessions([self.launcher.program_pid(proc) for proc in launched])
            self._wait_for_windows(sum(1 for a in apps if a.had_window))
            self._set_current(name)

    def _release_input(self) -> None:
        """Release buttons and keys an old episode may have left held down."""
        release = getattr(self.x11(), "release_all", None)
        if release is not None:
            self._screen.call("release input", release)

    def _wait_for_windows(self, count: int) -> None:
        if count == 0:
            return
        if not poll_until(lambda: len(self._apps_and_windows()[1]) >= count,
                          WINDOW_WAIT_TIMEOUT, 0.01):
            log.warning("sandbox %s: %d application window(s) did not reappear within "
                        "%.0f s", self.name, count, WINDOW_WAIT_TIMEOUT)

    def rename_snapshot(self, old: str, new: str) -> None:
        with self._lock:
            self.snapshots.rename(old, new)
            if self.state is not None and self.state.current_snapshot == old:
                self._set_current(new)

    def delete_snapshot(self, name: str) -> None:
        with self._lock:
            self.snapshots.delete(name)
            if self.state is not None and self.state.current_snapshot == name:
                self._set_current(None)

    def _set_current(self, name: str | None) -> None:
        if self.state is None:
            return
        self.state.current_snapshot = name
        if self.state_file.exists():
            self.state.save(self.state_file)


def _argv(command: list[str] | str, shell: bool) -> list[str] | str:
    """A command string without a shell is split the way a shell would split it."""
    if isinstance(command, str) and not shell:
        return shlex.split(command)
    return command
