"""A sandbox's bubblewrap container: what it binds where, how its holder process starts,
and, for a separate identity, the user namespace it is made in and its staged bind sources."""

from __future__ import annotations

import functools
import json
import os
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vm.errors import EnvironmentDead
from vm.providers.isolation.inside import (
    ACCESSIBILITY_CONFIG,
    INSIDE_HOME,
    INSIDE_PATH,
    INSIDE_TMP,
    INSIDE_UID,
    INSIDE_WORKBENCH,
    INSIDE_XAUTHORITY,
)
from vm.providers.sandbox.identity import HostIdentity

START_TIMEOUT = 10.0
# Host folders an application may need, bound read-only where they exist (dpkg's database:
# what is installed, as `dpkg -l` and the sandbox's `apt install` read it).
HOST_FOLDERS = ("/usr", "/etc", "/opt", "/sys", "/var/cache/fontconfig", "/var/lib/dbus",
                "/var/lib/fontconfig", "/var/lib/defoma", "/var/lib/dpkg")
# Merged-/usr symlinks of Debian 12 (a folder on older systems: bound instead).
USR_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def usr_links() -> list[str]:
    out = []
    for link in USR_LINKS:
        if os.path.islink(link):
            out += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            out += ["--ro-bind", link, link]
    return out


@functools.lru_cache(maxsize=4)
def unreadable_paths(folder: str) -> tuple[tuple[str, bool], ...]:
    """(path, is folder) of what under `folder` other users may not read: hidden inside a
    sandbox, whose processes may run as the owner of these files (root, when the workbench
    runs as root) without any capability. Inside sees what any local user may read."""
    hidden: list[tuple[str, bool]] = []
    for root, folders, files in os.walk(folder):
        for name in list(folders):
            path = os.path.join(root, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not mode & 0o004 or not mode & 0o001:
                hidden.append((path, True))
                folders.remove(name)
        for name in files:
            path = os.path.join(root, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if os.path.isfile(path) and not os.path.islink(path) and not mode & 0o004:
                hidden.append((path, False))
    return tuple(hidden)


def _contains(folder: Path, path: Path) -> bool:
    return path == folder or folder in path.parents


def python_folders() -> list[Path]:
    """What this Python needs to run inside: its installation, the virtual environment and
    the folder holding the `vm` package."""
    package_root = Path(__file__).resolve().parents[3]
    folders = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), package_root}
    executable = Path(sys.executable).resolve()
    if not any(_contains(f, executable) for f in folders):
        folders.add(executable.parent)
    # a folder inside another is bound with it
    return sorted(f for f in folders if not any(o != f and _contains(o, f) for o in folders))


@dataclass(frozen=True)
class Namespaces:
    """One sandbox's container: what it binds where. `start` starts its holder process;
    programs are started in it through an `Entry` (vm.providers.isolation.entry)."""

    name: str
    home: Path  # the sandbox home on the host: /home/user inside
    tmp: Path  # its /tmp on the host
    workbench: Path  # host folder shown read-only at INSIDE_WORKBENCH
    display: str  # ":12": its X socket is bound in
    hidden: tuple[Path, ...] = ()  # host folders never to show (the workspace)
    private_network: bool = False  # a network namespace of its own ("user" or "none")
    resolv_conf: Path | None = None  # bound over /etc/resolv.conf's target ("user")
    xauthority: Path | None = None  # the X cookie: bound read-only at INSIDE_XAUTHORITY
    shared: tuple[Path, ...] = ()  # host folders bound read-write at the same path
    # the host uid/gid the inside user is; a separate one (the workbench runs as root) is
    # mapped through a user namespace made first (`user_namespace`), else bwrap maps the
    # invoking user
    identity: HostIdentity | None = None
    # bound over the system's at-spi2 bus configuration (a separate identity's buses must
    # admit the workbench, which they see as the overflow uid)
    accessibility_config: Path | None = None
    # (host folder, path inside): bound read-only over a folder of the host's, in its place
    overlays: tuple[tuple[Path, str], ...] = ()
    # (target, path inside): symbolic links made inside (under /run, a tmpfs)
    links: tuple[tuple[str, str], ...] = ()

    @property
    def separate_identity(self) -> bool:
        return self.identity is not None and self.identity.separate

    def container_argv(self, info_fd: int, userns_fd: int | None = None,
                       staging: Staging | None = None) -> list[str]:
        """bwrap's argv; its JSON (the pids) goes to `info_fd`, and its holder prints a
        line once the namespaces are set up (bwrap writes the JSON before its mounts are
        done: a program entering earlier finds an empty root). `userns_fd`: the user
        namespace to make them in (a separate identity's), instead of a new one mapping
        the invoking user; `staging`: where bwrap, looking up its sources as that
        identity, finds the ones it may not reach (see `Staging`)."""

        def stage(path: Path, own: bool) -> str:
            return str(path) if staging is None else staging.source(path, own)

        x_socket = f"/tmp/.X11-unix/X{self.display.lstrip(':').split('.')[0]}"
        user = ["--unshare-user"] if userns_fd is None else ["--userns", str(userns_fd)]
        argv = ["bwrap", *user, "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
                "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", self.name,
                "--new-session", "--cap-drop", "ALL"]
        if self.private_network:
            argv.append("--unshare-net")
        for folder in HOST_FOLDERS:
            if os.path.isdir(folder):
                argv += ["--ro-bind", folder, folder]
        argv += usr_links()
        for path, is_folder in unreadable_paths("/etc"):
            argv += ["--tmpfs", path] if is_folder else ["--ro-bind", "/dev/null", path]
        argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/run", "--tmpfs", "/var/tmp",
                 "--tmpfs", "/home", "--bind", stage(self.home, True), INSIDE_HOME,
                 "--bind", stage(self.tmp, True), INSIDE_TMP, "--ro-bind", x_socket, x_socket,
                 "--ro-bind", stage(self.workbench, True), INSIDE_WORKBENCH,
                 "--ro-bind", stage(self.workbench / "passwd", True), "/etc/passwd",
                 "--ro-bind", stage(self.workbench / "group", True), "/etc/group"]
        # after /tmp: a checkout or virtual environment under the host's /tmp (a CI clone)
        # would be hidden by the private /tmp if bound before it
        for python_folder in python_folders():
            argv += ["--ro-bind", stage(python_folder, False), str(python_folder)]
        for shared in self.shared:
            argv += ["--bind", stage(shared, False), str(shared)]
        shown = [Path(f) for f in HOST_FOLDERS] + python_folders()
        for hidden in self.hidden:  # a workspace inside a folder shown: hidden again
            if any(_contains(f, hidden) for f in shown):
                argv += ["--tmpfs", str(hidden)]
        if self.xauthority is not None:
            argv += ["--ro-bind", stage(self.xauthority, True), INSIDE_XAUTHORITY]
        if self.resolv_conf is not None:
            from vm.providers.user_network import resolv_conf_target

            argv += ["--ro-bind", stage(self.resolv_conf, True), resolv_conf_target()]
        if self.accessibility_config is not None and os.path.exists(ACCESSIBILITY_CONFIG):
            argv += ["--ro-bind", stage(self.accessibility_config, True),
                     ACCESSIBILITY_CONFIG]
        for source, inside in self.overlays:
            argv += ["--ro-bind", stage(source, True), inside]
        for target, link in self.links:
            argv += ["--symlink", target, link]
        argv += ["--remount-ro", "/"]  # the root tmpfs: nothing to write but the binds
        holder = "echo ready; exec sleep infinity >/dev/null"
        argv += ["--chdir", INSIDE_HOME, "--info-fd", str(info_fd), "--", "/bin/sh", "-c",
                 holder]
        return argv

    def start(self, log_file: Path,
              wrap: Callable[[list[str]], list[str]] | None = None,
              keep_fds: tuple[int, ...] = ()) -> tuple[int, int]:
        """Start the holder (its argv passed through `wrap`: the sandbox's resource group;
        `keep_fds` stay open in it for its whole life); returns (bwrap's pid, the pid of
        the namespaces' first process), both as the host numbers them. EnvironmentDead
        when it does not come up."""
        userns: UserNamespace | None = None
        if self.separate_identity:
            assert self.identity is not None
            userns = UserNamespace.make(self.identity, self.name)
        read_fd, write_fd = os.pipe()
        ready_read, ready_write = os.pipe()
        staging = None if self.identity is None or userns is None else Staging(self.identity)
        argv = self.container_argv(write_fd, None if userns is None else userns.fd, staging)
        if staging is not None:
            argv = staging.wrap(argv)
        userns_fds = () if userns is None else (userns.fd,)
        try:
            with open(log_file, "ab") as log:
                proc = subprocess.Popen(wrap(argv) if wrap else argv,
                                        pass_fds=(write_fd, *userns_fds, *keep_fds),
                                        stdin=subprocess.DEVNULL, stdout=ready_write,
                                        stderr=log,
                                        env={"PATH": INSIDE_PATH}, start_new_session=True)
        finally:
            os.close(write_fd)
            os.close(ready_write)
            if userns is not None:  # bwrap joined it: its processes keep it
                userns.close()
        deadline = time.monotonic() + START_TIMEOUT
        try:
            data = self._read_until_closed(read_fd, deadline, proc, log_file)
            ready = self._read_until_closed(ready_read, deadline, proc, log_file, b"\n")
        finally:
            os.close(read_fd)
            os.close(ready_read)
        try:
            child = int(json.loads(data)["child-pid"])
        except (ValueError, KeyError, TypeError):
            child = None
        if child is None or ready.strip() != b"ready":
            if proc.poll() is None:
                proc.kill()
            proc.wait(5)
            raise EnvironmentDead(f"sandbox {self.name}: bwrap exited with status "
                                  f"{proc.returncode} before its namespaces were ready; "
                                  f"see {log_file}") from None
        return proc.pid, child

    def _read_until_closed(self, fd: int, deadline: float, proc: subprocess.Popen[bytes],
                           log_file: Path, end: bytes | None = None) -> bytes:
        data = b""
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                proc.kill()
                proc.wait(5)
                raise EnvironmentDead(f"sandbox {self.name}: bwrap did not set up its "
                                      f"namespaces within {START_TIMEOUT:.0f} s; see "
                                      f"{log_file}")
            chunk = os.read(fd, 4096)
            if not chunk:
                return data
            data += chunk
            if end is not None and data.endswith(end):
                return data


# Where bwrap finds the bind sources its separate identity may not reach: a tmpfs mounted
# over /dev/shm in a mount namespace of bwrap's own (nothing of it shows on the host).
STAGE = "/dev/shm"


class Staging:
    """The bind sources of a container with a separate identity, made reachable to it.

    bwrap looks up its bind sources as the inside user's host identity (with capabilities
    over what that user namespace maps only), so the sandbox's folders (in 0700 folders of
    root's) and a Python under /root are out of its reach. Each such source is bound, by
    root, under STAGE in a mount namespace made for bwrap (`wrap`; slave to the host's,
    so the host's unmounts still reach it); bwrap binds it from there. Nothing is made
    readable on the host."""

    def __init__(self, identity: HostIdentity) -> None:
        self.identity = identity
        self.binds: list[tuple[str, str, bool]] = []  # (source, staged path, is a folder)

    def source(self, path: Path, own: bool) -> str:
        """The path bwrap is given for `path`: staged when it is one of the sandbox's own
        files (`own`: always under root's 0700 folder) or its identity cannot reach it."""
        if not own and _reachable(path, self.identity):
            return str(path)
        staged = f"{STAGE}/{len(self.binds)}"
        self.binds.append((str(path), staged, path.is_dir()))
        return staged

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` (bwrap's) run after the staging mounts, in a mount namespace of its own."""
        lines = ["set -e", f"mount -t tmpfs -o mode=0755,size=64k workbench-stage {STAGE}"]
        for source, staged, folder in self.binds:
            lines.append(f"mkdir {staged}" if folder else f": > {staged}")
            lines.append(f"mount --bind {shlex.quote(source)} {staged}")
        lines.append('exec "$@"')
        return ["unshare", "--mount", "--propagation", "slave", "--", "/bin/sh", "-c",
                "\n".join(lines), "workbench-stage", *argv]


def _reachable(path: Path, identity: HostIdentity) -> bool:
    """True when `identity` may look up `path` (search permission on every folder above
    it; links are resolved first)."""
    try:
        folders = list(path.resolve().parents)
    except OSError:
        return False
    for folder in folders:
        try:
            info = folder.stat()
        except OSError:
            return False
        if info.st_uid == identity.uid:
            allowed = info.st_mode & 0o100
        elif info.st_gid == identity.gid:
            allowed = info.st_mode & 0o010
        else:
            allowed = info.st_mode & 0o001
        if not allowed:
            return False
    return True


@dataclass
class UserNamespace:
    """A user namespace mapping the inside user (uid and gid 1000) to a sandbox's own
    host uid and gid, made by root before bwrap joins it (`--userns`): bwrap can only map
    the invoking user, and as root that is host root. Nothing else is mapped: host root
    and every other host id are the overflow id (65534) inside, and a namespace made
    inside maps at most the same host uid."""

    holder: subprocess.Popen[bytes]
    fd: int

    @classmethod
    def make(cls, identity: HostIdentity, name: str) -> UserNamespace:
        """The namespace, held by a process until `close`; EnvironmentDead naming why
        when this host refuses the map (a container whose own map lacks the uid)."""
        holder = subprocess.Popen(["unshare", "--user", "--", "/bin/sh", "-c",
                                   "echo ready; exec sleep infinity"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env={"PATH": INSIDE_PATH},
                                  start_new_session=True)
        assert holder.stdout is not None
        try:
            ready, _, _ = select.select([holder.stdout], [], [], START_TIMEOUT)
            if not ready or holder.stdout.readline().strip() != b"ready":
                raise EnvironmentDead(f"sandbox {name}: unshare --user did not start a user "
                                      "namespace")
            for kind, host_id in (("uid", identity.uid), ("gid", identity.gid)):
                try:
                    Path(f"/proc/{holder.pid}/{kind}_map").write_text(
                        f"{INSIDE_UID} {host_id} 1\n")
                except OSError as exc:
                    raise EnvironmentDead(
                        f"sandbox {name}: cannot map the inside user to host {kind} {host_id}"
                        f" ({exc}); choose a range this host may map with "
                        "$WORKBENCH_SANDBOX_UID_BASE and $WORKBENCH_SANDBOX_UID_COUNT "
                        "(docs/sandbox.md)") from None
            fd = os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        except BaseException:
            holder.kill()
            holder.wait(START_TIMEOUT)
            _close_pipes(holder)
            raise
        return cls(holder, fd)

    def close(self) -> None:
        os.close(self.fd)
        self.holder.kill()
        self.holder.wait(START_TIMEOUT)
        _close_pipes(self.holder)


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
