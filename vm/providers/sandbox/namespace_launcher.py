"""`NamespaceLauncher`: isolation = "namespaces", the desktop's programs in the sandbox's
namespaces as its unprivileged `user` (vm.providers.sandbox.launcher,
vm.providers.isolation)."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from vm.atomic_write import write_atomic
from vm.guest.atspi_client import BusAccess
from vm.processes import TAG_VARIABLE
from vm.providers.base import CommandResult
from vm.providers.isolation import (
    INSIDE_HOME,
    INSIDE_TMP,
    INSIDE_UID,
    INSIDE_WORKBENCH,
    USER_NETWORK,
    IsolationUnavailable,
    Namespaces,
    child_of,
    host_pids,
    inside_environment,
    namespace_pids,
    open_entry,
    overflow_uid,
    require_namespaces,
    write_account_files,
    write_bus_configs,
)
from vm.providers.sandbox.accessibility_bus import (
    accessibility_environment,
    start_accessibility_bus,
    wait_for_accessibility_bus,
)
from vm.providers.sandbox.apps import DEVTOOLS_PORT, AppMissing, SandboxApps
from vm.providers.sandbox.bounds import SandboxBounds
from vm.providers.sandbox.identity import HostIdentity, give_to, sandbox_identity
from vm.providers.sandbox.image import (
    image_overlays,
    runtime_links,
    write_image,
    write_terminal_launcher,
    write_window_manager_config,
)
from vm.providers.sandbox.launcher import (
    Launcher,
    accessibility_available,
    shell_argv,
    text_of,
)
from vm.providers.sandbox.limits import LimitsError
from vm.providers.sandbox.network import INSIDE_GUEST_PORT, start_forwarder
from vm.providers.sandbox.sweep import Services, kill_leftovers
from vm.providers.user_network import (
    resolv_conf_text,
    start_user_network,
    user_network_unavailable,
)
from vm.xserver import wait_for_window_manager

GUEST_READY_FILE = ".workbench-guest-ready.json"  # in the sandbox's /tmp
WINDOW_MANAGER_CACHE = "/tmp/.window-manager-cache"  # openbox's log, inside
INSIDE_BUS_FOLDER = ".accessibility-bus"  # in the sandbox's /tmp: its buses' sockets


class NamespaceLauncher(Launcher):
    """isolation = "namespaces": the desktop's programs run in the sandbox's namespaces
    (one bubblewrap container for its life, entered with nsenter) as an unprivileged
    `user` at /home/user, bounded by its resource group."""

    isolated = True
    window_manager_with_x_server = False
    inside_tmp = True

    def check(self) -> None:
        require_namespaces()  # IsolationUnavailable naming the fix
        if self.sandbox.network == USER_NETWORK:
            missing = user_network_unavailable()
            if missing is not None:
                raise IsolationUnavailable(f"sandbox {self.sandbox.name}: network = "
                                           f"\"user\" cannot run here: {missing}")

    def identity(self) -> HostIdentity | None:
        return sandbox_identity(self.sandbox.workspace, self.sandbox.name)

    def apply_bounds(self) -> SandboxBounds | None:
        sandbox = self.sandbox
        return SandboxBounds.apply(sandbox.workspace, sandbox.name, sandbox.home,
                                   sandbox.limits, owner=sandbox.owner, tmp=sandbox.tmp)

    def window_manager_config(self) -> Path:
        write_window_manager_config(self.sandbox.workbench_dir / "rc.xml",
                                    Path(INSIDE_WORKBENCH) / "terminal")
        return Path(INSIDE_WORKBENCH) / "rc.xml"

    def socket_dir(self) -> str | None:
        return None

    @property
    def _separate_identity(self) -> bool:
        """True when the inside user is a host uid of its own (the workbench runs as root)."""
        identity = self.sandbox.identity
        return identity is not None and identity.separate

    def _bounded(self, argv: list[str]) -> list[str]:
        """`argv` started inside the sandbox's resource group."""
        bounds = self.sandbox.bounds()
        return bounds.command(argv) if bounds is not None else argv

    def _namespaces(self) -> Namespaces:
        sandbox = self.sandbox
        state = sandbox.require_state()
        resolv_conf = None
        if sandbox.network == USER_NETWORK:  # slirp4netns's DNS
            resolv_conf = sandbox.workbench_dir / "resolv.conf"
            write_atomic(resolv_conf, resolv_conf_text().encode())
            resolv_conf.chmod(0o644)
        accessibility_config = sandbox.workbench_dir / "accessibility-bus.conf" \
            if self._separate_identity else None
        return Namespaces(name=sandbox.name, home=sandbox.home, tmp=sandbox.tmp,
                          workbench=sandbox.workbench_dir, display=state.display,
                          hidden=(sandbox.workspace,),
                          private_network=sandbox.private_network,
                          xauthority=sandbox.xauthority, resolv_conf=resolv_conf,
                          identity=sandbox.identity,
                          accessibility_config=accessibility_config,
                          overlays=image_overlays(sandbox.workbench_dir),
                          links=runtime_links(f"{INSIDE_TMP}/{INSIDE_BUS_FOLDER}"))

    def start_container(self) -> None:
        """The container holding the sandbox's namespaces (vm.providers.isolation); for
        network = "user" its outbound access (vm.providers.user_network); with a network
        of its own, the relays to its loopback (vm.providers.sandbox.network)."""
        self._start_namespaces()
        if self.sandbox.private_network:
            start_forwarder(self.sandbox)

    def _start_namespaces(self) -> None:
        sandbox = self.sandbox
        state = sandbox.require_state()
        write_account_files(sandbox.workbench_dir)
        write_image(sandbox.workbench_dir, self._chrome_argv())
        if self._separate_identity:
            write_bus_configs(sandbox.workbench_dir)
        log_file = sandbox.logs / "bwrap.log"
        if sandbox.network != USER_NETWORK:
            state.container_pid, state.holder_pid = self._namespaces().start(
                log_file, wrap=self._bounded)
            return
        # slirp4netns ends when the holder does: the pipe's write end lives in it only
        exit_read, exit_write = os.pipe()
        try:
            try:
                state.container_pid, state.holder_pid = self._namespaces().start(
                    log_file, wrap=self._bounded, keep_fds=(exit_write,))
            finally:
                os.close(exit_write)
            proc = start_user_network(state.holder_pid, exit_read,
                                      sandbox.logs / "slirp4netns.log")
        finally:
            os.close(exit_read)
        sandbox.add_child(proc)
        state.slirp_pid = proc.pid

    def _chrome_argv(self) -> list[str] | None:
        """What the sandbox runs for google-chrome; None when Chromium is missing."""
        try:
            return self.apps().chrome_argv([])
        except AppMissing:
            return None

    def start_accessibility_bus(self) -> None:
        sandbox = self.sandbox
        state = sandbox.require_state()
        if not accessibility_available(sandbox.name):
            return
        # inside: a bus accepts a client whose uid, as the bus sees it, is the one the
        # client claims, so bus and applications share the user namespace
        bus_folder = sandbox.tmp / INSIDE_BUS_FOLDER
        bus_folder.mkdir(mode=0o700, exist_ok=True)
        give_to(bus_folder, sandbox.identity)
        assert state.holder_pid is not None
        with open_entry(state.holder_pid) as entry:
            bus = start_accessibility_bus(
                self._inside_environment(), state.tag, sandbox.logs,
                runtime_dir=f"{INSIDE_TMP}/{INSIDE_BUS_FOLDER}",
                wrap=lambda argv: self._bounded(
                    entry.command(argv, network=sandbox.private_network)),
                pass_fds=entry.fds,
                config_file=f"{INSIDE_WORKBENCH}/session-bus.conf"
                if self._separate_identity else None)
        state.bus_address, state.bus_marker = bus.address, bus.marker
        state.bus_pids = [pid for pid in (bus.daemon_pid, bus.launcher_pid) if pid]
        # the host reaches the sockets through a short link (a socket path has at most
        # 107 bytes; the sandbox's /tmp may lie deep in the workspace)
        state.bus_runtime_dir = tempfile.mkdtemp(prefix="wb-bus-")
        os.symlink(bus_folder, Path(state.bus_runtime_dir) / "s")
        wait_for_accessibility_bus(bus.address, access=self.bus_access())

    def start_desktop(self) -> None:
        sandbox = self.sandbox
        write_terminal_launcher(sandbox.workbench_dir / "terminal", INSIDE_HOME,
                                ["XDG_CACHE_HOME"],
                                {TAG_VARIABLE: sandbox.require_state().tag}, mode=0o755)
        self._start_window_manager(Path(INSIDE_WORKBENCH) / "rc.xml")

    def _start_window_manager(self, config: Path) -> None:
        """openbox inside, its config `config` (a path inside); returns once it frames
        windows."""
        sandbox = self.sandbox
        state = sandbox.require_state()
        with open(sandbox.logs / "openbox.log", "ab") as logf:
            # its log in /tmp: the home holds only what its applications put there
            proc, _pid = self.popen(
                ["env", f"XDG_CACHE_HOME={WINDOW_MANAGER_CACHE}", "openbox", "--sm-disable",
                 "--config-file", str(config)], tagged=False, stdout=logf, stderr=logf)
        sandbox.add_child(proc)
        state.wm_pid = proc.pid
        wait_for_window_manager(state.display, proc, sandbox.xauthority)

    def _spawn_guest_server(self) -> tuple[subprocess.Popen[bytes], Path]:
        sandbox = self.sandbox
        state = sandbox.require_state()
        ready = sandbox.tmp / GUEST_READY_FILE
        ready.unlink(missing_ok=True)
        read_fd, write_fd = os.pipe()  # the token never lies in a file inside
        os.write(write_fd, (state.token + "\n").encode())
        os.close(write_fd)
        host, port = sandbox.guest_host, sandbox.guest_port
        if sandbox.private_network:  # its own loopback, the port the forwarder relays to
            host, port = "127.0.0.1", INSIDE_GUEST_PORT
        cmd = [sys.executable, "-m", "vm.guest", "--host", host,
               "--port", str(port), "--token-file", f"/dev/fd/{read_fd}",
               "--root", INSIDE_HOME, "--root", INSIDE_TMP,
               "--ready-file", f"{INSIDE_TMP}/{GUEST_READY_FILE}",
               "--child-env", f"{TAG_VARIABLE}={state.tag}"]
        try:
            with open(sandbox.logs / "guest.log", "ab") as logf:
                proc, _pid = self.popen(cmd, tagged=False, stdout=logf, stderr=logf,
                                        pass_fds=(read_fd,))
        finally:
            os.close(read_fd)
        return proc, ready

    def popen(self, argv: list[str], *, tagged: bool, stdout: Any, stderr: Any,
              cwd: str = INSIDE_HOME, new_session: bool = True,
              pass_fds: tuple[int, ...] = (), find_child: bool = True
              ) -> tuple[subprocess.Popen[bytes], int]:
        """Start `argv` in the sandbox's namespaces; returns the nsenter process and the
        host pid of the program (which leads a session of its own when `new_session`;
        with `find_child` False, nsenter's pid: the caller finds the program with
        `child_of`)."""
        sandbox = self.sandbox
        state = sandbox.require_state()
        assert state.holder_pid is not None
        extra = {TAG_VARIABLE: state.tag} if tagged else {}
        with open_entry(state.holder_pid) as entry:
            proc = subprocess.Popen(
                self._bounded(entry.command(argv, cwd, extra, new_session,
                                            network=sandbox.private_network)),
                env=self._inside_environment(), stdin=subprocess.DEVNULL, stdout=stdout,
                stderr=stderr, start_new_session=True, pass_fds=(*pass_fds, *entry.fds))
        pid = child_of(proc.pid) if new_session and find_child else None
        return proc, pid if pid is not None else proc.pid

    def _inside_environment(self) -> dict[str, str]:
        """The environment of programs inside (untagged: the tag goes on the program)."""
        state = self.sandbox.require_state()
        extra = accessibility_environment(state.bus_address) if state.bus_address else {}
        extra = dict(extra)
        if "LANG" not in os.environ:
            extra["LANG"] = "C.UTF-8"
        return inside_environment(state.display, extra)

    @property
    def home(self) -> str:
        return INSIDE_HOME

    def environment(self) -> dict[str, str]:
        # the X cookie's host path: X clients on the host use this too
        return {**self._inside_environment(), TAG_VARIABLE: self.sandbox.require_state().tag,
                "XAUTHORITY": str(self.sandbox.xauthority)}

    def apps(self) -> SandboxApps:
        # an unprivileged user at /home/user: no root workarounds
        state = self.sandbox.require_state()
        return SandboxApps(Path(INSIDE_HOME), state.devtools_port or DEVTOOLS_PORT,
                           as_root=False)

    def run(self, command: list[str] | str, shell: bool, timeout: float) -> CommandResult:
        """Run the command inside; after `timeout` seconds its whole process group is
        killed."""
        proc, _pid = self.popen(shell_argv(command, shell), tagged=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                new_session=False)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            stdout, stderr = proc.communicate()
            return CommandResult(returncode=-1, output=text_of(stdout),
                                 error=f"timed out after {timeout} s")
        return CommandResult(proc.returncode, text_of(stdout), text_of(stderr))

    def spawn(self, command: list[str] | str, shell: bool, cwd: str, log_file: Any
              ) -> subprocess.Popen[bytes]:
        proc, _pid = self.popen(shell_argv(command, shell), tagged=True, stdout=log_file,
                                stderr=log_file, cwd=cwd, find_child=False)
        return proc

    def program_pid(self, proc: subprocess.Popen[bytes]) -> int:
        # the process nsenter forks, once it has
        return child_of(proc.pid) or proc.pid

    def app_cwd(self, recorded: str) -> str:
        host_folder = self.sandbox.folders.host_folder(recorded)
        return recorded if host_folder is not None and host_folder.is_dir() else INSIDE_HOME

    def program_path(self, host_path: Path) -> str:
        return self.sandbox.folders.inside_path(host_path)

    def members(self) -> list[int] | None:
        bounds = self.sandbox.bounds()
        if bounds is None or bounds.group is None or not bounds.group.folders:
            return None
        try:
            return bounds.group.pids()
        except LimitsError:
            return None

    def kill_leftovers(self) -> None:
        """Whatever else runs inside, whatever its environment or session."""
        state = self.sandbox.require_state()
        if not state.holder_pid:
            return
        holder = state.holder_pid
        kill_leftovers(lambda: self.members() or namespace_pids(holder),
                       Services(container=state.container_pid, holder=holder,
                                programs=tuple(pid for pid in (
                                    state.wm_pid, state.guest_pid, state.forwarder_pid)
                                    if pid),
                                buses=tuple(state.bus_pids)))

    def host_window_pids(self, windows: list[Any]) -> list[Any]:
        # a program in the namespaces puts its own number on its window
        state = self.sandbox.state
        if state is None or not state.holder_pid:
            return windows
        inside = {w.pid for w in windows if w.pid}
        if not inside:
            return windows
        members = self.members()
        mapping = host_pids(inside, namespace_pids(state.holder_pid) if members is None
                            else members)
        return [dataclasses.replace(w, pid=mapping.get(w.pid)) if w.pid else w
                for w in windows]

    def bus_access(self) -> BusAccess | None:
        state = self.sandbox.require_state()
        assert state.bus_runtime_dir is not None
        # the uid the buses see this process as: the inside user's own (its host uid is
        # the invoking user's, or root's in a sandbox started before identities), else the
        # overflow uid (a separate identity maps no host uid of the workbench's)
        uid = overflow_uid() if self._separate_identity else INSIDE_UID
        return BusAccess(uid=uid, inside=f"{INSIDE_TMP}/{INSIDE_BUS_FOLDER}",
                         host=f"{state.bus_runtime_dir}/s")


