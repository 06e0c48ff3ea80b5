"""The namespaces a sandbox's desktop runs in (bubblewrap), and how the workbench starts
programs inside them.

A sandbox with `isolation = "namespaces"` (the default) holds one bubblewrap container for
its whole life: new user, mount, PID, IPC and UTS namespaces, an unprivileged user `user`
(uid 1000) inside even when the workbench runs as root, the host filesystem read-only and
only in part (/usr, /etc without its unreadable files, this Python), the sandbox home at
/home/user and a private /tmp. Its first process only holds the namespaces; the window
manager, the guest server, applications, terminals and commands are started in them with
`nsenter` (see `Namespaces.enter`), so they run there whoever asks: the provider, the guest
server or the window manager's Ctrl+Alt+T. docs/sandbox.md gives the threat model.

`isolation = "none"` runs the desktop's programs on the host as the invoking user, as
before: it must be asked for, and the CLI says so on every sandbox.

The network is a setting of its own (`network_mode`): "user" (the default with namespaces)
gives the sandbox a network namespace of its own with outbound access through slirp4netns
(vm.providers.user_network); "none" a network namespace with a loopback only; "host" the
host's network, shared (asked for explicitly, and the CLI warns). With a network of its
own, the workbench reaches the guest server and DevTools through Unix sockets
(vm.providers.forwarder), and host loopback ports are reachable inside only when listed
(`host_loopback_ports`).
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from vm.atomic_write import write_atomic
from vm.errors import EnvironmentDead
from vm.providers.sandbox_identity import HostIdentity, IdentityError, IdentityRange

ISOLATION_VARIABLE = "WORKBENCH_SANDBOX_ISOLATION"
NAMESPACES = "namespaces"
NO_ISOLATION = "none"
ISOLATION_MODES = (NAMESPACES, NO_ISOLATION)
NETWORK_VARIABLE = "WORKBENCH_SANDBOX_NETWORK"
# a network namespace of its own, with outbound access through slirp4netns (not to the
# host's loopback): the default with namespaces
USER_NETWORK = "user"
NO_NETWORK = "none"  # a private network namespace: a loopback of its own and nothing else
HOST_NETWORK = "host"  # the host's network namespace: its loopback and its outside access
NETWORK_MODES = (USER_NETWORK, NO_NETWORK, HOST_NETWORK)
HOST_PORTS_VARIABLE = "WORKBENCH_SANDBOX_HOST_PORTS"
INSIDE_HOME = "/home/user"  # OSWorld's images' home, real inside a sandbox
INSIDE_USER = "user"
INSIDE_UID = 1000
INSIDE_TMP = "/tmp"
# read-only inside: what the workbench puts there (terminal launcher, X cookie, passwd)
INSIDE_WORKBENCH = "/run/workbench"
INSIDE_XAUTHORITY = "/run/xauthority"  # the sandbox's X cookie
# first on PATH inside: OSWorld's commands a sandbox answers itself (sudo, apt, pip,
# google-chrome: vm.providers.sandbox_image)
INSIDE_BIN = f"{INSIDE_WORKBENCH}/bin"
START_TIMEOUT = 10.0
# at-spi-bus-launcher's configuration of the accessibility bus (its path is built in)
ACCESSIBILITY_CONFIG = "/usr/share/defaults/at-spi2/accessibility.conf"
SESSION_CONFIG = "/usr/share/dbus-1/session.conf"
# ioctl on a namespace's file: a new descriptor of the user namespace owning it
NS_GET_USERNS = 0xB701
# Host folders an application may need, bound read-only where they exist (dpkg's database:
# what is installed, as `dpkg -l` and the sandbox's `apt install` read it).
HOST_FOLDERS = ("/usr", "/etc", "/opt", "/sys", "/var/cache/fontconfig", "/var/lib/dbus",
                "/var/lib/fontconfig", "/var/lib/defoma", "/var/lib/dpkg")
# Merged-/usr symlinks of Debian 12 (a folder on older systems: bound instead).
USR_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Environment entries of the host that reach the inside (everything else is dropped: an
# API key in the workbench's environment is no business of the desktop's).
PASSED_VARIABLES = ("LANG", "LANGUAGE", "TZ", "TERM")
INSIDE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"


class IsolationUnavailable(RuntimeError):
    """This machine cannot run a sandbox in namespaces; the message names the fix."""


def isolation_mode(value: str | None = None) -> str:
    """The isolation setting: `value`, else $WORKBENCH_SANDBOX_ISOLATION, else
    "namespaces"; ValueError naming the setting for anything else."""
    return _setting(value, "isolation", ISOLATION_VARIABLE, NAMESPACES, ISOLATION_MODES)


def network_mode(value: str | None = None, isolation: str = NAMESPACES) -> str:
    """The network setting: `value`, else $WORKBENCH_SANDBOX_NETWORK, else "user" with
    namespaces ("host" without: a network namespace needs them); ValueError naming the
    setting for anything else."""
    default = USER_NETWORK if isolation == NAMESPACES else HOST_NETWORK
    return _setting(value, "network", NETWORK_VARIABLE, default, NETWORK_MODES)


def host_loopback_ports(value: Iterable[int] | None = None) -> tuple[int, ...]:
    """Ports of the host's loopback a sandbox with a network of its own may reach, at the
    same port of its own loopback: `value`, else $WORKBENCH_SANDBOX_HOST_PORTS (numbers
    separated by commas), else none. ValueError naming the setting for a word that is not
    a TCP port."""
    where = "host_loopback_ports"
    if value is None:
        text = os.environ.get(HOST_PORTS_VARIABLE, "")
        where = f"${HOST_PORTS_VARIABLE}"
        words: list[object] = [w.strip() for w in text.split(",") if w.strip()]
    else:
        words = list(value)
    ports = []
    for word in words:
        try:
            port = int(str(word))
        except ValueError:
            port = 0
        if not 0 < port < 65536 or isinstance(word, bool):
            raise ValueError(f"{where}: expected TCP ports (1-65535), got {word!r}")
        ports.append(port)
    return tuple(sorted(set(ports)))


def _setting(value: str | None, name: str, variable: str, default: str,
             choices: Iterable[str]) -> str:
    """`value`, else $`variable`, else `default`; ValueError naming the setting (or the
    variable) when it is not one of `choices`."""
    where = name
    if value is None:
        value = os.environ.get(variable) or default
        where = f"${variable}"
    allowed = tuple(choices)
    if value not in allowed:
        raise ValueError(f"{where}: expected one of {', '.join(map(repr, allowed))}, "
                         f"got {value!r}")
    return value


NO_ISOLATION_WARNING = ("WARNING: isolation = \"none\": this sandbox's programs run on the "
                        "host as {user}, with that user's rights over its files and "
                        "processes (docs/sandbox.md)")


HOST_NETWORK_WARNING = ("WARNING: network = \"host\": this sandbox shares the host's network: "
                        "its programs reach the host's loopback services and other "
                        "sandboxes' ports, and its DevTools port on the host's 127.0.0.1 is "
                        "open to every local user (docs/sandbox.md)")


def no_isolation_warning() -> str:
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return NO_ISOLATION_WARNING.format(user=user)


def isolation_warnings(isolation: str, network: str) -> list[str]:
    """What a person is told of a sandbox that does not isolate fully, every time it is
    shown (`workbench env up`, `env list`, the app's Environments screen), from its
    settings or its state file: its programs run on the host (isolation = "none", whose
    network is the host's too: one warning says it), or it shares the host's network
    (network = "host")."""
    if isolation != NAMESPACES:
        return [no_isolation_warning()]
    if network == HOST_NETWORK:
        return [HOST_NETWORK_WARNING]
    return []


@functools.lru_cache(maxsize=1)
def namespaces_unavailable() -> str | None:
    """None when sandboxes can run in namespaces here, else why not and the fix (checked
    once per process by starting a container and a program in it, as a sandbox's are)."""
    for program, package in (("bwrap", "bubblewrap"), ("nsenter", "util-linux"),
                             ("setpriv", "util-linux")):
        if shutil.which(program) is None:
            return (f"{program} not found: install the Debian package {package} (make setup "
                    f"does), or set isolation = \"none\" (${ISOLATION_VARIABLE}=none) to run "
                    "sandboxes without isolation")
    userns: UserNamespace | None = None
    user = ["--unshare-user"]
    if os.geteuid() == 0:  # as a sandbox's: mapped to an id of the reserved range
        try:
            reserved = IdentityRange.configured()
            userns = UserNamespace.make(HostIdentity(reserved.uid_base, reserved.gid_base,
                                                     separate=True), "probe")
        except (IdentityError, EnvironmentDead, OSError) as exc:
            return f"no user namespace with an unprivileged identity: {exc}"
        user = ["--userns", str(userns.fd)]
    info_read, info_write = os.pipe()
    try:
        probe = subprocess.Popen(
            ["bwrap", *user, "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
             "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
             "--ro-bind", "/usr", "/usr", *_usr_links(), "--proc", "/proc", "--dev", "/dev",
             "--info-fd", str(info_write), "--", "/bin/sh", "-c",
             "echo ready; exec sleep infinity"],
            pass_fds=(info_write, *(() if userns is None else (userns.fd,))),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={"PATH": INSIDE_PATH})
    except OSError as exc:
        os.close(info_read)
        return f"bwrap did not run: {exc}"
    finally:
        os.close(info_write)
        if userns is not None:
            userns.close()
    holder = None
    try:
        holder = _probe_holder(probe, info_read)
        if holder is None:
            probe.kill()
            _, stderr = probe.communicate(timeout=START_TIMEOUT)
            reason = stderr.decode(errors="replace").strip()[-300:] or "no answer"
            if "Joining specified user namespace failed" in reason:  # as root: setns
                return _entering_refused(reason)
            return (f"bwrap cannot create namespaces here ({reason}): enable unprivileged "
                    "user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
                    "user.max_user_namespaces > 0; in a container, run it with "
                    "--security-opt seccomp=unconfined or privileged), or set isolation = "
                    f"\"none\" (${ISOLATION_VARIABLE}=none) to run sandboxes without "
                    "isolation")
        return _entering_unavailable(holder)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run: {exc}"
    finally:
        os.close(info_read)
        if holder is not None:
            _kill_quietly(holder)  # its init: everything inside ends
        if probe.poll() is None:
            probe.kill()
        probe.wait(START_TIMEOUT)
        for pipe in (probe.stdout, probe.stderr):
            if pipe is not None:
                pipe.close()


def _probe_holder(probe: subprocess.Popen[bytes], info_read: int) -> int | None:
    """The host pid of the probe container's first process once its namespaces are set
    up (it printed `ready`), None when it does not come up within START_TIMEOUT."""
    assert probe.stdout is not None
    ready, _, _ = select.select([probe.stdout], [], [], START_TIMEOUT)
    if not ready or probe.stdout.readline().strip() != b"ready":
        return None
    data = b""
    while select.select([info_read], [], [], START_TIMEOUT)[0]:
        chunk = os.read(info_read, 4096)  # written before `ready`, then closed
        if not chunk:
            break
        data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _entering_unavailable(holder: int) -> str | None:
    """None when a program starts in the namespaces of `holder` the way a sandbox's
    programs do (`Entry`), else nsenter's complaint and the fix."""
    with open_entry(holder) as entry:
        try:
            entered = subprocess.run(entry.command(["true"], cwd="/"), pass_fds=entry.fds,
                                     capture_output=True, timeout=START_TIMEOUT,
                                     stdin=subprocess.DEVNULL, env={"PATH": INSIDE_PATH})
        except subprocess.TimeoutExpired:
            reason = f"nsenter did not finish within {START_TIMEOUT:.0f} s"
        else:
            if entered.returncode == 0:
                return None
            reason = entered.stderr.decode(errors="replace").strip()[-300:] or \
                f"exit status {entered.returncode}"
    return _entering_refused(reason)


def _entering_refused(reason: str) -> str:
    """Why sandboxes cannot run where joining namespaces is refused, and the fix."""
    return (f"a program cannot be started in a sandbox's namespaces here ({reason}): "
            "nsenter (and, as root, bwrap) must be allowed to join them (setns; in a "
            "container, run it with --security-opt seccomp=unconfined or privileged), with "
            "util-linux 2.32 or later and a kernel of 4.9 or later, or set isolation = "
            f"\"none\" (${ISOLATION_VARIABLE}=none) to run sandboxes without isolation")


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def require_namespaces() -> None:
    reason = namespaces_unavailable()
    if reason is not None:
        raise IsolationUnavailable(f"sandboxes run in namespaces, and this machine cannot: "
                                   f"{reason}")


def _usr_links() -> list[str]:
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
    package_root = Path(__file__).resolve().parents[2]
    folders = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), package_root}
    executable = Path(sys.executable).resolve()
    if not any(_contains(f, executable) for f in folders):
        folders.add(executable.parent)
    # a folder inside another is bound with it
    return sorted(f for f in folders if not any(o != f and _contains(o, f) for o in folders))


def overflow_uid() -> int:
    """The uid a host uid that a user namespace does not map shows as inside it (host root
    and every other host user, seen from a sandbox with a separate identity)."""
    try:
        return int(Path("/proc/sys/kernel/overflowuid").read_text())
    except (OSError, ValueError):
        return 65534


# A bus admits its own user, and those its policy names; the workbench reads the
# accessibility tree from the host, which a separate identity's buses see as the overflow
# uid. Only the sandbox's user and host root can reach their sockets (in its 0700 /tmp).
_ADMIT_ALL = ('<policy context="default"><allow user="*"/></policy>\n')


def write_bus_configs(folder: Path) -> tuple[Path, Path]:
    """(session bus configuration, accessibility bus configuration) in `folder`: the
    system's, admitting any user that reaches the socket."""
    session = folder / "session-bus.conf"
    write_atomic(session, '<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus '
                 'Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/'
                 f'busconfig.dtd">\n<busconfig>\n<include>{SESSION_CONFIG}</include>\n'
                 f'{_ADMIT_ALL}</busconfig>\n', mode=0o644)
    accessibility = folder / "accessibility-bus.conf"
    try:
        system = Path(ACCESSIBILITY_CONFIG).read_text(encoding="utf-8")
    except OSError:
        system = "<busconfig>\n</busconfig>\n"
    write_atomic(accessibility, system.replace("</busconfig>", _ADMIT_ALL + "</busconfig>"),
                 mode=0o644)
    return session, accessibility


def write_account_files(folder: Path) -> tuple[Path, Path]:
    """passwd and group files for inside: the host's entries, with uid/gid 1000 (and the
    name `user`) being OSWorld's user `user` at /home/user."""
    folder.mkdir(parents=True, exist_ok=True)

    def lines(path: str, keep: int) -> list[str]:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            parts = line.split(":")
            if len(parts) > keep and parts[0] != INSIDE_USER and parts[keep] != str(INSIDE_UID):
                out.append(line)
        return out

    passwd = [*lines("/etc/passwd", 2),
              f"{INSIDE_USER}:x:{INSIDE_UID}:{INSIDE_UID}:user:{INSIDE_HOME}:/bin/bash"]
    group = [*lines("/etc/group", 2), f"{INSIDE_USER}:x:{INSIDE_UID}:"]
    write_atomic(folder / "passwd", "\n".join(passwd) + "\n")
    write_atomic(folder / "group", "\n".join(group) + "\n")
    for name in ("passwd", "group"):
        (folder / name).chmod(0o644)
    return folder / "passwd", folder / "group"


@dataclass(frozen=True)
class Namespaces:
    """One sandbox's container: what it binds where. `start` starts its holder process;
    `enter` is the argv that runs a program in it."""

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
        argv += _usr_links()
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


@dataclass
class Entry:
    """How programs are started in the namespaces of a container whose first process is
    `holder` (a host pid); open it with `open_entry`, pass `fds` to every Popen of its
    commands (pass_fds), and close it once they started (it is a context manager).

    bwrap (not set-user-id on Debian) makes the namespaces in a user namespace mapping
    the caller's uid to 0, for its mounts, then a nested one mapping 1000 that the holder
    lives in; the nested one owns none of the others. Root on the host joins them anyway
    (its capabilities reach every namespace), then the nested user namespace: one nsenter
    (`outer` is None). A normal user may not: joining them through the nested user
    namespace is refused ("reassociate to namespace 'ns/ipc' failed"). Then `outer` is a
    descriptor of the user namespace that owns them (ioctl NS_GET_USERNS on the holder's
    mount namespace, whose owner the caller is), and a program joins them through it,
    then the nested one with a second nsenter (keeping its uid: 0 is not mapped there).
    The program inherits that descriptor, read-only; joining that namespace needs a
    capability in it, which nothing inside has."""

    holder: int
    outer: int | None = None

    @property
    def fds(self) -> tuple[int, ...]:
        return () if self.outer is None else (self.outer,)

    def close(self) -> None:
        if self.outer is not None:
            os.close(self.outer)
            self.outer = None

    def __enter__(self) -> Entry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def command(self, argv: Iterable[str], cwd: str = INSIDE_HOME,
                environment: dict[str, str] | None = None, new_session: bool = False,
                network: bool = False) -> list[str]:
        """The argv that runs `argv` in the container, in `cwd` inside, with `environment`
        added, without any capability and with no way to gain one (no_new_privs:
        set-user-id programs do not raise it); in a session of its own when
        `new_session` (its pid then leads it); in its network namespace when `network`
        (the container has one of its own)."""
        namespaces = ["--mount", "--pid", "--ipc", "--uts", *(["--net"] if network else []),
                      "--root", "--wd", *self._credentials(), "--"]
        if self.outer is None:
            prefix = ["nsenter", f"--target={self.holder}", "--user", *namespaces]
        else:
            # the nested user namespace last, found as the holder inside: pid 1 of the
            # container's /proc (the host's /proc is not there any more)
            prefix = ["nsenter", f"--target={self.holder}",
                      f"--user=/proc/self/fd/{self.outer}", *namespaces,
                      "nsenter", "--target=1", "--user", "--preserve-credentials", "--"]
        prefix += ["setpriv", "--no-new-privs", "--inh-caps=-all", "--"]
        if new_session:
            prefix.append("setsid")
        assignments = [f"{k}={v}" for k, v in (environment or {}).items()]
        return [*prefix, "env", f"--chdir={cwd}", *assignments, *argv]

    def _credentials(self) -> list[str]:
        """nsenter's options for the uid the program gets: root becomes the inside user
        (uid and gid 1000, no supplementary group), whatever host uid the namespace maps
        that to (a separate identity, or root for a sandbox started before identities);
        a normal user keeps its uid, which the namespace maps to 1000."""
        if self.outer is None and _joins_any_namespace():
            return [f"--setuid={INSIDE_UID}", f"--setgid={INSIDE_UID}"]
        return ["--preserve-credentials"]

    def relay(self, rules: Iterable[str]) -> list[str]:
        """The relay (vm.providers.forwarder) with `rules` ("FROM=TO") in the container's
        user and network namespaces (the host's mounts: it reaches sockets there)."""
        relay = relay_argv(rules)
        if self.outer is None:
            return ["nsenter", f"--target={self.holder}", "--user", "--net",
                    "--preserve-credentials", "--", *relay]
        return ["nsenter", f"--target={self.holder}", f"--user=/proc/self/fd/{self.outer}",
                "--net", "--preserve-credentials", "--",
                "nsenter", f"--target={self.holder}", "--user", "--preserve-credentials",
                "--", *relay]


def open_entry(holder: int) -> Entry:
    """How to start programs in the container whose first process is `holder` (see
    `Entry`). A holder that is gone gives the plain entry: its nsenter fails as before."""
    if _joins_any_namespace():
        return Entry(holder)
    try:
        user = os.open(f"/proc/{holder}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return Entry(holder)
    try:
        mine = os.fstat(user)
        mnt = os.open(f"/proc/{holder}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        try:
            owner = fcntl.ioctl(mnt, NS_GET_USERNS)  # a new descriptor (close-on-exec)
        finally:
            os.close(mnt)
    except OSError:
        return Entry(holder)
    finally:
        os.close(user)
    entry = Entry(holder, owner)
    owners = os.fstat(owner)
    if (mine.st_dev, mine.st_ino) == (owners.st_dev, owners.st_ino):
        entry.close()  # one user namespace owns them all: the plain entry
    return entry


CAP_SYS_CHROOT, CAP_SYS_ADMIN = 18, 21


@functools.lru_cache(maxsize=1)
def _joins_any_namespace() -> bool:
    """True when this process may join any namespace its user namespace holds (root on
    the host, with CAP_SYS_ADMIN and CAP_SYS_CHROOT): nsenter then joins the container's
    mount, PID, IPC, UTS and network namespaces before its user namespace, whichever user
    namespace owns them, and one nsenter does (bwrap makes a nested user namespace as
    root too)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    effective = int(line.split()[1], 16)
                    return all(effective >> cap & 1 for cap in (CAP_SYS_CHROOT,
                                                                  CAP_SYS_ADMIN))
    except (OSError, ValueError):
        pass
    return False


def relay_argv(rules: Iterable[str]) -> list[str]:
    """The relay (vm.providers.forwarder) with `rules` ("FROM=TO"), on the host."""
    return [sys.executable, "-m", "vm.providers.forwarder", *rules]


def inside_environment(display: str, extra: dict[str, str]) -> dict[str, str]:
    """The environment of a program inside: the host's locale only, then OSWorld's user."""
    env = {k: v for k, v in os.environ.items()
           if k in PASSED_VARIABLES or k.startswith("LC_")}
    bin_dir = str(Path(sys.executable).parent)  # our venv's python (with pyautogui) first
    # the sandbox's own commands before it (sudo, apt, pip: vm.providers.sandbox_image)
    env.update({"PATH": f"{INSIDE_BIN}:{bin_dir}:{INSIDE_PATH}", "HOME": INSIDE_HOME,
                "USER": INSIDE_USER, "LOGNAME": INSIDE_USER, "SHELL": "/bin/bash",
                "DISPLAY": display,
                "XAUTHORITY": INSIDE_XAUTHORITY, "TMPDIR": INSIDE_TMP,
                "XDG_RUNTIME_DIR": INSIDE_TMP,
                "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    env.update(extra)
    return env


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


__all__ = [
    "HOST_NETWORK",
    "HOST_NETWORK_WARNING",
    "INSIDE_HOME",
    "ISOLATION_MODES",
    "ISOLATION_VARIABLE",
    "NAMESPACES",
    "NETWORK_MODES",
    "NO_ISOLATION",
    "NO_NETWORK",
    "USER_NETWORK",
    "Entry",
    "IsolationUnavailable",
    "Namespaces",
    "child_of",
    "host_loopback_ports",
    "host_pids",
    "inside_environment",
    "isolation_mode",
    "isolation_warnings",
    "namespaces_unavailable",
    "network_mode",
    "no_isolation_warning",
    "open_entry",
    "overflow_uid",
    "relay_argv",
    "require_namespaces",
    "write_account_files",
    "write_bus_configs",
]
