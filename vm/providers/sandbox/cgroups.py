"""Memory and process-count bounds for a sandbox through cgroups (v2, or v1 where that is
what the host has).

A fork bomb or a 30 GB allocation inside a sandbox stops at its limit; the host and the
other sandboxes go on. Where a bound cannot be set here (no cgroup controller, no right to
create cgroups), `ResourceGroup.available()` says which and why.

Where the groups go: on cgroup v1, under this process's own cgroup of each controller
(nested, so whatever bounds the workbench also bounds its sandboxes); on cgroup v2, at
the root of the hierarchy (a non-root v2 cgroup that holds processes cannot hand
controllers to its children). Each sandbox's group is `workbench-<name>`.

The process that makes a group holds a shared `flock` on its folder until it closes it, so
`sweep_stale_groups` (at each group's creation, and `workbench env up`/`env list`) can
tell a group left empty by a killed workbench (nobody holds it, no process in it: removed)
from one being set up (held) or in use (processes in it: the kernel refuses its rmdir).
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
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vm.providers.sandbox.limits import LimitsError, SandboxLimits
from vm.providers.sandbox.mounts import mounts

log = logging.getLogger(__name__)

CONTROLLERS = ("memory", "pids")
GROUP_PREFIX = "workbench-"
# the availability probe's groups: workbench-probe-<pid of the probing process>-<8 hex>
_PROBE_NAME = re.compile(rf"{GROUP_PREFIX}probe-(\d+)-[0-9a-f]{{8}}")
CLOSE_TIMEOUT = 30.0  # seconds close() waits for a group's processes to die


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
        found = [mount for mount in mounts() if mount.filesystem in ("cgroup", "cgroup2")]
        own = _own_paths()
    except OSError as exc:
        return None, f"cannot read /proc/self/mountinfo or /proc/self/cgroup: {exc}"
    for mount in found:
        if mount.filesystem == "cgroup" and controller in mount.options and controller in own:
            return _Hierarchy(1, mount.point, _inside(mount.point, mount.root,
                                                      own[controller])), ""
    for mount in found:
        if mount.filesystem != "cgroup2":
            continue
        point = mount.point
        try:
            listed = (point / "cgroup.controllers").read_text().split()
        except OSError as exc:
            return None, f"cannot read {point / 'cgroup.controllers'}: {exc.strerror}"
        if controller in listed:
            return _Hierarchy(2, point, _inside(point, mount.root, own.get("", "/"))), ""
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

