"""Per-sandbox bounds: memory and process count through cgroups (v2, or v1 where that is
what the host has), home-folder size through a size-capped filesystem mounted on the home.

A fork bomb, a 30 GB allocation or a `dd` of an endless file inside a sandbox stops at its
limit; the host and the other sandboxes go on. Where a bound cannot be set here (no
cgroup controller, no right to create cgroups or to mount), `ResourceGroup.available()`
and `HomeVolume.available()` say which and why, and `describe_limits` puts that in the
one line `workbench env up` and the app show: never a silent no-limit.

Where the groups go: on cgroup v1, under this process's own cgroup of each controller
(nested, so whatever bounds the workbench also bounds its sandboxes); on cgroup v2, at
the root of the hierarchy (a non-root v2 cgroup that holds processes cannot hand
controllers to its children). Each sandbox's group is `workbench-<name>`.

The process that makes a group holds a shared `flock` on its folder until it closes it, so
`sweep_stale_groups` (at each group's creation, and `workbench env up`/`env list`) can
tell a group left empty by a killed workbench (nobody holds it, no process in it: removed)
from one being set up (held) or in use (processes in it: the kernel refuses its rmdir).

`SandboxBounds` is what a sandbox start uses: its group and home volume together, the
wrapper every program of the sandbox starts through, and a record for its state file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

HomeFilesystem = Literal["ext4", "tmpfs"]
log = logging.getLogger(__name__)

DEFAULT_MEMORY_MB = 4096
DEFAULT_PIDS = 2048
DEFAULT_HOME_MB = 4096
DEFAULT_HOME_FILESYSTEM: HomeFilesystem = "ext4"
CONTROLLERS = ("memory", "pids")
GROUP_PREFIX = "workbench-"
# the availability probe's groups: workbench-probe-<pid of the probing process>-<8 hex>
_PROBE_NAME = re.compile(rf"{GROUP_PREFIX}probe-(\d+)-[0-9a-f]{{8}}")
CLOSE_TIMEOUT = 30.0  # seconds close() waits for a group's processes to die
ENVIRONMENT = {  # SandboxLimits field -> the environment variable that sets it
    "memory_mb": "WORKBENCH_SANDBOX_MEMORY_MB",
    "pids": "WORKBENCH_SANDBOX_PIDS",
    "home_mb": "WORKBENCH_SANDBOX_HOME_MB",
    "home_filesystem": "WORKBENCH_SANDBOX_HOME_FILESYSTEM",
}


class LimitsError(RuntimeError):
    """A limit could not be set, read or removed; the message names the file or setting."""


# ---------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class SandboxLimits:
    """What one sandbox may use. 0 means no limit for that resource."""

    memory_mb: int = DEFAULT_MEMORY_MB  # MiB of memory (swap included) for all its processes
    pids: int = DEFAULT_PIDS  # processes and threads at once (a browser uses a few hundred)
    home_mb: int = DEFAULT_HOME_MB  # MiB its home folder may hold
    home_filesystem: HomeFilesystem = DEFAULT_HOME_FILESYSTEM  # "ext4": a sparse image file
    #   beside the home, loop-mounted (disk); "tmpfs": memory, counted in memory_mb

    def __post_init__(self) -> None:
        for name in ("memory_mb", "pids", "home_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"sandbox limits: {name}: expected a whole number >= 0 "
                                 f"(0: no limit), got {value!r}")
        if self.home_filesystem not in ("ext4", "tmpfs"):
            raise ValueError(f"sandbox limits: home_filesystem: expected 'ext4' or 'tmpfs', "
                             f"got {self.home_filesystem!r}")
        if self.memory_mb and self.memory_mb < 16:
            raise ValueError(f"sandbox limits: memory_mb: expected at least 16 (or 0), got "
                             f"{self.memory_mb}")
        if self.pids and self.pids < 8:
            raise ValueError(f"sandbox limits: pids: expected at least 8 (or 0), got {self.pids}")
        if self.home_mb and self.home_mb < 8:
            raise ValueError(f"sandbox limits: home_mb: expected at least 8 (or 0), got "
                             f"{self.home_mb}")

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "sandbox limits",
                   base: SandboxLimits | None = None) -> SandboxLimits:
        """Limits from a config table (a TOML section such as [environments.limits]) over
        `base`; an unknown key or a bad value raises ValueError naming `where` and the key."""
        values = dict(vars(base or cls()))
        for key, value in table.items():
            if key not in values:
                raise ValueError(f"{where}: unknown key {key!r} (expected one of "
                                 f"{', '.join(sorted(values))})")
            values[key] = value
        try:
            return cls(**values)
        except ValueError as exc:
            raise ValueError(f"{where}: {str(exc).removeprefix('sandbox limits: ')}") from None

    @classmethod
    def from_environment(cls, base: SandboxLimits | None = None) -> SandboxLimits:
        """`base` (default: the defaults) with what the WORKBENCH_SANDBOX_* variables set;
        a bad value raises ValueError naming the variable."""
        values = dict(vars(base or cls()))
        for name, variable in ENVIRONMENT.items():
            text = os.environ.get(variable, "").strip()
            if not text:
                continue
            if name == "home_filesystem":
                values[name] = text
                continue
            try:
                values[name] = int(text)
            except ValueError:
                raise ValueError(f"${variable}: expected a whole number >= 0 (0: no limit), "
                                 f"got {text!r}") from None
        try:
            return cls(**values)
        except ValueError as exc:
            message = str(exc).removeprefix("sandbox limits: ")
            name = message.split(":", 1)[0]
            raise ValueError(f"${ENVIRONMENT.get(name, name)}: {message}") from None


# ---------------------------------------------------------------------------- cgroups

@dataclass(frozen=True)
class ControllerSupport:
    """Whether one cgroup controller can bound sandboxes here, and where."""

    name: str  # "memory" or "pids"
    version: int  # 1 or 2; 0 when the host has no such controller
    parent: Path | None  # the folder sandbox groups are made in; None when not usable
    reason: str = ""  # why it cannot be used ("" when it can)

    @property
    def usable(self) -> bool:
        return self.parent is not None


@dataclass(frozen=True)
class CgroupSupport:
    """`ResourceGroup.available()`: each controller's support on this host, as this user."""

    controllers: tuple[ControllerSupport, ...]

    def get(self, name: str) -> ControllerSupport:
        for controller in self.controllers:
            if controller.name == name:
                return controller
        raise KeyError(name)

    @property
    def usable(self) -> bool:
        return all(controller.usable for controller in self.controllers)

    def describe(self) -> str:
        parts = []
        for c in self.controllers:
            if c.usable:
                parts.append(f"{c.name}: cgroup v{c.version} under {c.parent}")
            else:
                parts.append(f"{c.name}: unavailable ({c.reason})")
        return "; ".join(parts)


@dataclass(frozen=True)
class _Hierarchy:
    version: int
    mount: Path  # where the hierarchy is mounted
    own: Path  # this process's cgroup folder in it


def _mounts() -> list[tuple[str, Path, str, set[str]]]:
    """(fs type, mount point, root inside the hierarchy, super options) of cgroup mounts."""
    out = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            head, _, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
                continue
            out.append((rest[0], Path(_unescape(fields[4])), _unescape(fields[3]),
                        set(rest[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """Controller (or '' for cgroup v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup") as cgroup:
        for line in cgroup:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            _, names, path = parts
            for name in names.split(",") if names else [""]:
                out[name] = path
    return out


def _inside(mount: Path, mount_root: str, path: str) -> Path:
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
        path = path[len(mount_root):]
    return mount / path.lstrip("/")


def _hierarchy(controller: str) -> tuple[_Hierarchy | None, str]:
    """Where `controller` lives (a v1 hierarchy of its own or the v2 one), or why none."""
    try:
        mounts, own = _mounts(), _own_paths()
    except OSError as exc:
        return None, f"cannot read /proc/self/mountinfo or /proc/self/cgroup: {exc}"
    for fstype, point, root, options in mounts:
        if fstype == "cgroup" and controller in options and controller in own:
            return _Hierarchy(1, point, _inside(point, root, own[controller])), ""
    for fstype, point, root, _ in mounts:
        if fstype != "cgroup2":
            continue
        try:
            listed = (point / "cgroup.controllers").read_text().split()
        except OSError as exc:
            return None, f"cannot read {point / 'cgroup.controllers'}: {exc.strerror}"
        if controller in listed:
            return _Hierarchy(2, point, _inside(point, root, own.get("", "/"))), ""
        return None, (f"the host has no cgroup '{controller}' controller (not in "
                      f"{point / 'cgroup.controllers'}, no cgroup v1 mount of it)")
    return None, f"no cgroup hierarchy with the '{controller}' controller is mounted"


def _write(path: Path, text: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(text)
    except OSError as exc:
        raise LimitsError(f"cannot write {text!r} to {path}: {exc.strerror}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise LimitsError(f"cannot read {path}: {exc.strerror}") from None


def _enable_v2(folder: Path, controller: str) -> None:
    """Make `controller` available to `folder`'s children (cgroup v2 subtree_control)."""
    control = folder / "cgroup.subtree_control"
    if controller not in _read(control).split():
        _write(control, f"+{controller}")


def _probe(controller: str) -> ControllerSupport:
    hierarchy, reason = _hierarchy(controller)
    if hierarchy is None:
        return ControllerSupport(controller, 0, None, reason)
    parent = hierarchy.own if hierarchy.version == 1 else hierarchy.mount
    try:
        if hierarchy.version == 2:
            _enable_v2(parent, controller)
        probe = parent / f"{GROUP_PREFIX}probe-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            probe.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            raise LimitsError(f"cannot create a cgroup in {parent}: {exc.strerror}") from None
        limit = probe / ("memory.limit_in_bytes" if (controller, hierarchy.version) ==
                         ("memory", 1) else f"{controller}.max")
        try:
            if not limit.exists():
                raise LimitsError(f"{limit} is missing")
            with open(limit, "w"):
                pass  # opening for writing is what a group's set-up needs
        except OSError as exc:
            raise LimitsError(f"cannot write {limit}: {exc.strerror}") from None
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    except LimitsError as exc:
        hint = "" if os.geteuid() == 0 else " (creating cgroups needs root or a delegated subtree)"
        return ControllerSupport(controller, hierarchy.version, None, f"{exc}{hint}")
    return ControllerSupport(controller, hierarchy.version, parent)


def group_name(workspace: str | os.PathLike[str], sandbox: str) -> str:
    """The group name of sandbox `sandbox` of `workspace`: unique on the host, so that two
    workspaces' sandboxes of one name never share (or replace) a group."""
    digest = hashlib.sha256(str(Path(workspace).resolve()).encode()).hexdigest()[:10]
    return f"{sandbox}-{digest}"


@dataclass(frozen=True)
class ResourceUsage:
    """What a group uses now (None: that controller is not bounding this group)."""

    memory_bytes: int | None = None  # memory charged now (page cache and tmpfs included)
    memory_peak_bytes: int | None = None  # the most charged at once since the group was made
    memory_limit_hits: int | None = None  # times an allocation met the limit
    oom_kills: int | None = None  # processes the kernel killed for the group's memory limit
    processes: int | None = None  # processes and threads now
    process_limit_hits: int | None = None  # forks refused at the pids limit


def _counters(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[name] = int(value)
    return out


@dataclass
class ResourceGroup:
    """One sandbox's cgroups (one per controller on v1, one folder on v2) and its limits.

    Put the sandbox's top process in it before it runs anything (`command` or `preexec`),
    or right after it starts (`attach`): its children inherit the group."""

    name: str
    limits: SandboxLimits
    folders: dict[str, Path]  # controller -> this group's folder for it
    missing: dict[str, str] = field(default_factory=dict)  # controller -> why it is not bounding
    # descriptors of its folders with a shared flock, held by the process that made it (a
    # sweep leaves a held group alone); none in a handle read from a state file
    locks: list[int] = field(default_factory=list, repr=False, compare=False)

    @staticmethod
    def available() -> CgroupSupport:
        """Which controllers can bound sandboxes here, as this user, and why not."""
        return CgroupSupport(tuple(_probe(controller) for controller in CONTROLLERS))

    @classmethod
    def create(cls, name: str, limits: SandboxLimits, require: bool = False) -> ResourceGroup:
        """Make `name`'s group with `limits` (an earlier group of that name, left by a killed
        workbench, is emptied and replaced: make names with `group_name`). A limit that
        cannot be set here is recorded in `missing` (and in `describe()`); with `require`,
        it raises LimitsError instead."""
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"cgroup name: expected a plain folder name, got {name!r}")
        wanted = {"memory": limits.memory_mb, "pids": limits.pids}
        support = cls.available()
        try:  # what killed workbenches left (a failure only leaves them there)
            sweep_stale_groups(found.parent for found in support.controllers
                               if found.parent is not None)
        except LimitsError as exc:
            log.warning("%s", exc)
        folders: dict[str, Path] = {}
        missing: dict[str, str] = {}
        group = cls(name, limits, folders, missing)
        try:
            for controller in CONTROLLERS:
                if not wanted[controller]:
                    continue
                found = support.get(controller)
                if found.parent is None:
                    missing[controller] = found.reason
                    continue
                folder = found.parent / f"{GROUP_PREFIX}{name}"
                if folder.exists() and folder not in folders.values():
                    _kill_all([folder], str(folder))
                    _remove(folder)
                if folder not in folders.values():
                    group.locks.append(_make_and_hold(folder))
                folders[controller] = folder
                group._set_limit(controller, found.version)
            if require and missing:
                raise LimitsError("sandbox limits cannot be enforced here: " + "; ".join(
                    f"{c}: {why}" for c, why in missing.items()))
        except BaseException:
            group.close()
            raise
        return group

    def _version(self, controller: str) -> int:
        folder = self.folders[controller]
        return 2 if (folder / "cgroup.controllers").exists() else 1

    def _set_limit(self, controller: str, version: int) -> None:
        folder = self.folders[controller]
        if controller == "pids":
            _write(folder / "pids.max", str(self.limits.pids))
            return
        size = str(self.limits.memory_mb * 1024 * 1024)
        if version == 2:
            _write(folder / "memory.max", size)
            if (folder / "memory.swap.max").exists():
                _write(folder / "memory.swap.max", "0")  # swap would stretch the bound
            return
        _write(folder / "memory.limit_in_bytes", size)
        if (folder / "memory.memsw.limit_in_bytes").exists():  # memory + swap, same bound
            _write(folder / "memory.memsw.limit_in_bytes", size)

    def _procs_files(self) -> list[Path]:
        return [folder / "cgroup.procs" for folder in dict.fromkeys(self.folders.values())]

    def attach(self, pid: int) -> None:
        """Move process `pid` into the group; the children it makes from now on inherit it
        (children it already has stay where they are: prefer `command` or `preexec`)."""
        for procs in self._procs_files():
            _write(procs, str(pid))

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run through /bin/sh, which puts itself in the group and then execs it: no
        process of the sandbox runs outside the group, and no preexec_fn (unsafe in a
        threaded program) is needed. A failed join exits 126, naming the cgroup file.
        With no controller bounding the group, `argv` itself."""
        if not self.folders:
            return list(argv)
        steps = []
        for procs in self._procs_files():
            quoted = shlex.quote(str(procs))
            steps.append(f'echo $$ > {quoted} || {{ echo "workbench: cannot join cgroup: '
                         f'write to "{quoted}" failed" >&2; exit 126; }}')
        return ["/bin/sh", "-c", "; ".join([*steps, 'exec "$@"']), "sh", *argv]

    def preexec(self) -> Callable[[], None]:
        """A `preexec_fn` for subprocess.Popen that puts the child in the group before it
        execs (for callers that already use one; `command` needs none)."""
        files = [str(path) for path in self._procs_files()]  # none: joins nothing

        def join() -> None:
            pid = str(os.getpid()).encode()
            for path in files:
                descriptor = os.open(path, os.O_WRONLY)
                try:
                    os.write(descriptor, pid)
                finally:
                    os.close(descriptor)

        return join

    def pids(self) -> list[int]:
        """The processes in the group now."""
        return sorted(_members(list(self.folders.values())))

    def usage(self) -> ResourceUsage:
        values: dict[str, int | None] = {}
        if "memory" in self.folders:
            folder = self.folders["memory"]
            if self._version("memory") == 2:
                values["memory_bytes"] = int(_read(folder / "memory.current"))
                if (folder / "memory.peak").exists():
                    values["memory_peak_bytes"] = int(_read(folder / "memory.peak"))
                events = _counters(_read(folder / "memory.events"))
                values["memory_limit_hits"] = events.get("max", 0)
                values["oom_kills"] = events.get("oom_kill", 0)
            else:
                values["memory_bytes"] = int(_read(folder / "memory.usage_in_bytes"))
                values["memory_peak_bytes"] = int(_read(folder / "memory.max_usage_in_bytes"))
                values["memory_limit_hits"] = int(_read(folder / "memory.failcnt"))
                values["oom_kills"] = _counters(_read(folder / "memory.oom_control")).get(
                    "oom_kill", 0)
        if "pids" in self.folders:
            folder = self.folders["pids"]
            values["processes"] = int(_read(folder / "pids.current"))
            values["process_limit_hits"] = _counters(_read(folder / "pids.events")).get("max", 0)
        return ResourceUsage(**values)

    def describe(self) -> str:
        """What bounds this group, and what does not, in a few words."""
        parts = []
        if "memory" in self.folders:
            parts.append(f"memory {self.limits.memory_mb} MiB")
        if "pids" in self.folders:
            parts.append(f"{self.limits.pids} processes")
        for controller, why in self.missing.items():
            parts.append(f"{controller} NOT LIMITED ({why})")
        if not self.limits.memory_mb:
            parts.append("memory unlimited (setting 0)")
        if not self.limits.pids:
            parts.append("processes unlimited (setting 0)")
        return ", ".join(parts)

    def close(self) -> None:
        """Kill every process left in the group and remove its cgroup folders."""
        folders = list(dict.fromkeys(self.folders.values()))
        try:
            _kill_all(folders, self.name)
            for folder in folders:
                _remove(folder)
            self.folders.clear()
        finally:
            for descriptor in self.locks:
                os.close(descriptor)
            self.locks.clear()


def _make_and_hold(folder: Path, attempts: int = 20) -> int:
    """Make cgroup folder `folder` and take a shared flock on it (what tells a sweep in
    another process that the group is being set up or used); returns the descriptor. A
    sweep that removed the folder between the mkdir and the lock makes it again."""
    for _ in range(attempts):
        try:
            folder.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            raise LimitsError(f"cannot create cgroup {folder}: {exc.strerror}") from None
        try:
            descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue
        fcntl.flock(descriptor, fcntl.LOCK_SH)  # waits out a sweep looking at it
        try:
            if os.stat(folder).st_ino == os.fstat(descriptor).st_ino:
                return descriptor  # still the folder made above: held from now on
        except FileNotFoundError:
            pass
        os.close(descriptor)
    raise LimitsError(f"cannot create cgroup {folder}: removed by a sweep {attempts} times "
                      "over")


def _sweep_parents() -> list[Path]:
    """Where this process makes sandbox groups (see the module docstring), without the
    availability probe."""
    parents = []
    for controller in CONTROLLERS:
        hierarchy, _ = _hierarchy(controller)
        if hierarchy is not None:
            parents.append(hierarchy.own if hierarchy.version == 1 else hierarchy.mount)
    return parents


def sweep_stale_groups(parents: Iterable[Path] | None = None) -> list[Path]:
    """Remove the `workbench-*` groups in `parents` (default: where this process makes
    sandbox groups) that a killed workbench left: no process in them and nobody holding
    them (the process that made a group holds its flock until it closes it; an availability
    probe's group is left alone while its process lives). A group with a process in it is
    never touched: its removal is only an rmdir, which the kernel refuses for a group with
    a process (or a child group) in it. Returns the folders removed; LimitsError only when
    a parent cannot be listed."""
    removed: list[Path] = []
    for parent in dict.fromkeys(parents if parents is not None else _sweep_parents()):
        try:
            candidates = sorted(entry for entry in parent.iterdir()
                                if entry.name.startswith(GROUP_PREFIX))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise LimitsError(f"cannot list cgroup folder {parent}: {exc.strerror}") from None
        for folder in candidates:
            probe = _PROBE_NAME.fullmatch(folder.name)
            if probe is not None and Path(f"/proc/{probe.group(1)}").exists():
                continue
            if _sweep_one(folder):
                removed.append(folder)
    return removed


def _sweep_one(folder: Path) -> bool:
    """Remove `folder` when nobody holds it and no process is in it; True when removed."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise LimitsError(f"cannot open cgroup {folder}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live workbench holds it
        try:
            if _members([folder]):
                return False
        except LimitsError:
            return False
        try:
            folder.rmdir()
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
                return False  # a process (or a child group) came in meanwhile
            if exc.errno in (errno.EACCES, errno.EPERM):
                return False  # another user's (root's) group: not ours to remove
            raise LimitsError(f"cannot remove stale cgroup {folder}: {exc.strerror}"
                              ) from None
        return True
    finally:
        os.close(descriptor)


def _members(folders: list[Path]) -> set[int]:
    pids: set[int] = set()
    for folder in folders:
        try:
            text = (folder / "cgroup.procs").read_text()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise LimitsError(f"cannot read {folder / 'cgroup.procs'}: {exc.strerror}") from None
        pids.update(int(line) for line in text.split())
    return pids


def _kill_all(folders: list[Path], name: str, timeout: float = CLOSE_TIMEOUT) -> None:
    """SIGKILL what is in `folders` until they are empty. A process with a pending SIGKILL
    cannot fork, so even a fork bomb empties in a few rounds."""
    for folder in folders:
        kill = folder / "cgroup.kill"  # cgroup v2, Linux 5.14+: the kernel kills them all
        if kill.exists():
            with contextlib.suppress(OSError):
                kill.write_text("1")
    deadline = time.monotonic() + timeout
    while True:
        left = _members(folders)
        if not left:
            return
        if time.monotonic() > deadline:
            raise LimitsError(f"cgroup {name}: processes {sorted(left)[:20]} still in "
                              f"{', '.join(str(f / 'cgroup.procs') for f in folders)} "
                              f"{timeout:.0f} s after SIGKILL")
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)  # a polling interval, not a wait for an outcome


def _remove(folder: Path, timeout: float = CLOSE_TIMEOUT) -> None:
    """rmdir a cgroup folder; the kernel may say busy for a moment after its last process
    has died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise LimitsError(f"cannot remove cgroup {folder}: {exc.strerror}") from None
        time.sleep(0.01)


# ---------------------------------------------------------------------------- home volume

def _run(argv: list[str], what: str, ok: tuple[int, ...] = (0,)) -> None:
    try:
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LimitsError(f"{what}: {shlex.join(argv)}: {exc}") from None
    if result.returncode not in ok:
        output = result.stdout.decode(errors="replace").strip()
        raise LimitsError(f"{what}: {shlex.join(argv)} exited {result.returncode}: {output}")


def _unescape(text: str) -> str:
    """A /proc/self/mountinfo field as a path (it writes space, tab, newline and backslash
    as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), text)


def _mounted_source(folder: Path) -> tuple[str, str] | None:
    """(fs type, source) of the topmost mount on `folder`; None when it is no mount point."""
    target, found = str(folder.resolve()), None
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            head, _, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if len(fields) > 4 and len(rest) > 1 and _unescape(fields[4]) == target:
                found = (rest[0], _unescape(rest[1]))
    return found


def _loop_backing_file(device: str) -> str:
    try:
        return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()
    except OSError:
        return ""


@dataclass
class HomeVolume:
    """A size-capped filesystem mounted on a sandbox's home folder.

    "ext4": a sparse image file (by default `<home>.img` beside the home) formatted once
    and loop-mounted; its files survive a stop and come back at the next mount.
    "tmpfs": memory; what is written counts in the writer's memory cgroup, and the files
    are gone once it is unmounted. Both need root (mount(2)) in the host's namespace."""

    folder: Path
    filesystem: HomeFilesystem
    limit_mb: int
    image: Path | None = None

    @staticmethod
    def available(filesystem: HomeFilesystem = DEFAULT_HOME_FILESYSTEM) -> str:
        """'' when a home volume of this kind can be mounted here, else why not."""
        if os.geteuid() != 0:
            return "mounting a size-capped home needs root (see docs/sandbox.md)"
        tools = ["mount", "umount"] + (["mkfs.ext4"] if filesystem == "ext4" else [])
        missing = [tool for tool in tools if shutil.which(tool) is None]
        if missing:
            return f"{', '.join(missing)} not found on PATH (Debian: mount, e2fsprogs)"
        if filesystem == "ext4" and not Path("/dev/loop-control").exists():
            return "no /dev/loop-control: loop devices are unavailable (modprobe loop)"
        return ""

    @classmethod
    def mount(cls, folder: Path, limit_mb: int, filesystem: HomeFilesystem = "ext4",
              image: Path | None = None, owner: tuple[int, int] | None = None) -> HomeVolume:
        """Mount a `limit_mb` MiB filesystem on `folder` (made if missing). A folder that
        is already this volume's mount (a killed workbench's) is taken over; files already
        in the folder move into the volume (LimitsError, folder untouched, when they do
        not fit). `owner` (uid, gid) and the mode of the top folder stay as they were
        (`owner` overrides)."""
        why = cls.available(filesystem)
        if why:
            raise LimitsError(f"home size limit for {folder}: {why}")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        info = folder.stat()
        mode = info.st_mode & 0o7777
        if owner is None:
            owner = (info.st_uid, info.st_gid)
        if filesystem == "ext4":
            image = Path(image) if image else folder.with_name(folder.name + ".img")
        volume = cls(folder, filesystem, limit_mb, image if filesystem == "ext4" else None)
        mounted = _mounted_source(folder)
        if mounted is not None:  # left mounted by a workbench that was killed: take it over
            if filesystem == "tmpfs" and mounted[0] == "tmpfs":
                _run(["mount", "-o", f"remount,size={limit_mb * 1024 * 1024}", str(folder)],
                     f"home size limit: resize the tmpfs on {folder}")
                return volume
            if filesystem == "ext4" and mounted[0] == "ext4" and image is not None and \
                    Path(_loop_backing_file(mounted[1])).resolve() == image.resolve():
                if image.stat().st_size == limit_mb * 1024 * 1024:
                    return volume
                _run(["umount", str(folder)], f"home size limit: unmount {folder} to resize")
            else:
                raise LimitsError(f"home size limit: {folder} is already a mount point of "
                                  f"{mounted[0]} {mounted[1]}, not this home's "
                                  f"{image or filesystem} (unmount it first)")
        if any(folder.iterdir()):
            if filesystem == "ext4" and image is not None and image.exists():
                raise LimitsError(f"home size limit: {folder} has files and so has {image} "
                                  "(a home of an earlier setting): delete one of them")
            return cls._mount_moving_files(volume, mode, owner)
        cls._mount_empty(volume, mode, owner)
        return volume

    @classmethod
    def _mount_moving_files(cls, volume: HomeVolume, mode: int,
                            owner: tuple[int, int]) -> HomeVolume:
        """A home that has files already (a workspace made before home limits): they move
        into the new volume; if they do not fit, the home is left as it was."""
        folder = volume.folder
        aside = folder.with_name(f".{folder.name}-unbounded-{secrets.token_hex(4)}")
        os.rename(folder, aside)
        folder.mkdir()
        try:
            cls._mount_empty(volume, mode, owner)
            try:
                _run(["cp", "-a", "--", f"{aside}/.", f"{folder}/"],
                     f"home size limit: move the files of {folder} into its "
                     f"{volume.limit_mb} MiB volume")
            except LimitsError:
                volume.unmount(delete_image=True)
                raise
        except BaseException:
            with contextlib.suppress(OSError):
                folder.rmdir()
                os.rename(aside, folder)
            raise
        shutil.rmtree(aside)
        return volume

    @staticmethod
    def _mount_empty(volume: HomeVolume, mode: int, owner: tuple[int, int]) -> None:
        folder, image, limit_mb = volume.folder, volume.image, volume.limit_mb
        size = limit_mb * 1024 * 1024
        if volume.filesystem == "tmpfs":
            _run(["mount", "-t", "tmpfs", "-o",
                  f"size={size},mode={mode:o},uid={owner[0]},gid={owner[1]},nosuid,nodev",
                  "tmpfs", str(folder)], f"home size limit: mount tmpfs on {folder}")
            return
        assert image is not None
        if not image.exists() or image.stat().st_size != size:
            if image.exists():  # the setting changed: grow (or shrink) the filesystem
                # exit 1: it repaired something (the lost+found removed below, say)
                _run(["e2fsck", "-f", "-p", str(image)], f"home size limit: check {image}",
                     ok=(0, 1))
                os.truncate(image, max(size, image.stat().st_size))
                _run(["resize2fs", str(image), f"{size // 1024}K"],
                     f"home size limit: resize {image} to {limit_mb} MiB")
                os.truncate(image, size)
            else:
                with open(image, "wb") as handle:
                    handle.truncate(size)  # sparse: takes disk only as the home fills
                _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E",
                      f"root_owner={owner[0]}:{owner[1]}", str(image)],
                     f"home size limit: format {image}")
        _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(folder)],
             f"home size limit: loop-mount {image} on {folder}")
        with contextlib.suppress(OSError):
            (folder / "lost+found").rmdir()  # mkfs's folder would show in the user's home
        os.chown(folder, *owner)  # the home keeps the owner and mode it had unmounted
        os.chmod(folder, mode)

    def usage(self) -> tuple[int, int]:
        """(bytes used, bytes the home may hold)."""
        stats = os.statvfs(self.folder)
        total = stats.f_blocks * stats.f_frsize
        return total - stats.f_bfree * stats.f_frsize, total

    def unmount(self, delete_image: bool = False) -> None:
        """Unmount the home (its processes must be gone: `ResourceGroup.close` first); with
        `delete_image`, the ext4 image and the files in it go too."""
        if _mounted_source(self.folder) is not None:
            _run(["umount", str(self.folder)], f"home size limit: unmount {self.folder}")
        if delete_image and self.image is not None:
            self.image.unlink(missing_ok=True)

    def describe(self) -> str:
        kind = f"ext4 image {self.image}" if self.image else "tmpfs, counted in memory"
        return f"home {self.limit_mb} MiB ({kind})"


def replace_home_files(home: Path, source: Path) -> None:
    """Make `home`'s files those of `source` (a snapshot's home), for a home that may be a
    mounted volume: the folder stays (it is what the namespaces show at /home/user), the
    old files are removed before the new are copied (renames cannot cross into a mount,
    and a volume may not hold two homes at once). A snapshot larger than the volume
    raises LimitsError naming both; the home then holds what was copied."""
    old = home / f".workbench-old-{secrets.token_hex(4)}"
    old.mkdir()
    for entry in os.listdir(home):
        if entry != old.name:
            os.rename(home / entry, old / entry)
    shutil.rmtree(old)
    _run(["cp", "-a", "--", f"{source}/.", f"{home}/"],
         f"home size limit: copy {source} into {home}")


# ---------------------------------------------------------------------------- one line

def describe_limits(limits: SandboxLimits, group: ResourceGroup | None = None,
                    home: HomeVolume | None = None, home_reason: str = "") -> str:
    """One line for `workbench env up` and the app: the limits in effect, and each one that
    is not, with why. `group`/`home` are what the sandbox start made (None: not made);
    `home_reason` is why no home volume was mounted."""
    parts = []
    if group is not None:
        parts.append(group.describe())
    elif limits.memory_mb or limits.pids:
        why = ResourceGroup.available()
        parts.append("memory and processes NOT LIMITED (" + (
            why.describe() if not why.usable else "no group was made") + ")")
    else:
        parts.append("memory and processes unlimited (settings 0)")
    if home is not None:
        parts.append(home.describe())
    elif limits.home_mb:
        parts.append("home size NOT LIMITED (" + (
            home_reason or HomeVolume.available(limits.home_filesystem) or
            "no volume was mounted") + ")")
    else:
        parts.append("home size unlimited (setting 0)")
    return "limits: " + "; ".join(parts)


# ---------------------------------------------------------------------------- one sandbox

@dataclass
class SandboxBounds:
    """Everything that bounds one sandbox: what the start made and why the rest is not.

    The sandbox start calls `apply` before its home is filled and its first process runs,
    starts every process through `command`, keeps `record()` in its state file, and its
    stop (in this process or another: `from_record`) calls `close`."""

    limits: SandboxLimits
    group: ResourceGroup | None = None
    home: HomeVolume | None = None
    home_reason: str = ""  # why `home` is None although limits.home_mb asks for one
    # the sandbox's /tmp when the home is capped: a tmpfs of the same size (its files
    # count in the memory limit too), so /tmp is no way around the home's cap
    tmp: HomeVolume | None = None

    @classmethod
    def apply(cls, workspace: str | os.PathLike[str], sandbox: str, home: Path,
              limits: SandboxLimits, owner: tuple[int, int] | None = None,
              require: bool = False, tmp: Path | None = None) -> SandboxBounds:
        """Make the sandbox's group and mount its home volume on `home` (empty, or this
        volume's mount left by a killed workbench), and a tmpfs of the same size on `tmp`
        (its /tmp, when given). What this host or user cannot bound is recorded with why
        (see `describe`); with `require` it raises LimitsError instead. An error setting
        up a bound that is available raises LimitsError, undoing the rest."""
        group = ResourceGroup.create(group_name(workspace, sandbox), limits, require=require)
        bounds = cls(limits, group)
        try:
            if limits.home_mb:
                why = HomeVolume.available(limits.home_filesystem)
                if why and require:
                    raise LimitsError(f"sandbox limits cannot be enforced here: home: {why}")
                if why:
                    bounds.home_reason = why
                else:
                    bounds.home = HomeVolume.mount(home, limits.home_mb,
                                                   limits.home_filesystem, owner=owner)
                    if tmp is not None:
                        bounds.tmp = HomeVolume.mount(tmp, limits.home_mb, "tmpfs",
                                                      owner=owner)
        except BaseException:
            bounds.close()
            raise
        return bounds

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` started inside the sandbox's group (itself when no controller bounds it)."""
        return self.group.command(argv) if self.group is not None else list(argv)

    def describe(self) -> str:
        """The one line for `workbench env up` and the app."""
        line = describe_limits(self.limits, self.group, self.home, self.home_reason)
        if self.tmp is not None:
            line += f"; /tmp {self.tmp.limit_mb} MiB (tmpfs, counted in memory)"
        return line

    def unbounded(self) -> list[str]:
        """The limits asked for (non-zero settings) that do not hold: "memory", "pids",
        "home"; empty when everything asked for is enforced."""
        missing = [controller for controller, wanted in
                   (("memory", self.limits.memory_mb), ("pids", self.limits.pids))
                   if wanted and (self.group is None or controller not in self.group.folders)]
        if self.limits.home_mb and self.home is None:
            missing.append("home")
        return missing

    def close(self, delete_home: bool = False) -> None:
        """Kill what is left in the group, remove it, then unmount the home (with
        `delete_home`, its ext4 image goes too: the home's files with it)."""
        if self.group is not None:
            self.group.close()
        if self.home is not None:
            self.home.unmount(delete_image=delete_home)
        if self.tmp is not None:
            self.tmp.unmount()

    def record(self) -> dict[str, Any]:
        """A JSON-ready record for the sandbox's state file."""
        return {
            "limits": vars(self.limits).copy(),
            "group": None if self.group is None else {
                "name": self.group.name,
                "folders": {c: str(f) for c, f in self.group.folders.items()},
                "missing": dict(self.group.missing)},
            "home": None if self.home is None else {
                "folder": str(self.home.folder), "filesystem": self.home.filesystem,
                "limit_mb": self.home.limit_mb,
                "image": None if self.home.image is None else str(self.home.image)},
            "home_reason": self.home_reason,
            "tmp": None if self.tmp is None else {
                "folder": str(self.tmp.folder), "limit_mb": self.tmp.limit_mb},
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any], where: str = "sandbox state") -> SandboxBounds:
        """The bounds `record()` described (in another process: `workbench env down`)."""
        try:
            limits = SandboxLimits(**record["limits"])
            group = home = None
            if record["group"] is not None:
                data = record["group"]
                group = ResourceGroup(str(data["name"]), limits,
                                      {str(c): Path(f) for c, f in data["folders"].items()},
                                      {str(c): str(w) for c, w in data["missing"].items()})
            if record["home"] is not None:
                data = record["home"]
                home = HomeVolume(Path(data["folder"]), data["filesystem"], int(data["limit_mb"]),
                                  None if data["image"] is None else Path(data["image"]))
            tmp = None
            if record.get("tmp") is not None:  # state files from before /tmp was bounded
                data = record["tmp"]
                tmp = HomeVolume(Path(data["folder"]), "tmpfs", int(data["limit_mb"]))
            return cls(limits, group, home, str(record["home_reason"]), tmp)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise LimitsError(f"{where}: unreadable sandbox limits record: {exc!r}") from None
