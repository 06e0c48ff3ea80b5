"""Which host uid and gid a sandbox's inside user `user` is.

As a normal user the inside user is the invoking user (bubblewrap maps it; nothing else
is possible without privileges). As root the inside user must not be host root: each
sandbox gets a uid/gid of its own from a reserved range that no account on the host uses
(root's line of /etc/subuid and /etc/subgid where they exist, else 0x70000000 onwards,
a range systemd leaves unused), recorded per workspace so a sandbox keeps its uid across
restarts and its files stay its own. docs/sandbox.md says why and how to choose the range.
"""

from __future__ import annotations

import fcntl
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from vm.atomic_write import write_atomic

UID_BASE_VARIABLE = "WORKBENCH_SANDBOX_UID_BASE"
UID_COUNT_VARIABLE = "WORKBENCH_SANDBOX_UID_COUNT"
# systemd's UIDS-GIDS.md leaves 0x70000000-0x7FFDFFFF unused; 65536 sandboxes from there
DEFAULT_UID_BASE = 0x70000000
DEFAULT_UID_COUNT = 65536
# in the workspace, beside sandboxes/ (which holds only sandboxes): {name: uid offset}
REGISTRY = "sandbox-identities.json"
REGISTRY_LOCK = ".sandbox-identities.lock"


class IdentityError(RuntimeError):
    """No unprivileged identity can be given to a sandbox; the message names the setting."""


@dataclass(frozen=True)
class HostIdentity:
    """The host uid/gid of a sandbox's inside user; `separate` is True when it is one of
    the reserved range's (the workbench runs as root), False when it is the invoking
    user's own."""

    uid: int
    gid: int
    separate: bool

    def owner(self) -> tuple[int, int] | None:
        """(uid, gid) that files the workbench makes for the sandbox must be given, None
        when they are the invoking user's anyway."""
        return (self.uid, self.gid) if self.separate else None

    def describe(self) -> str:
        """Who `user` inside is on the host, in a few words (`workbench env up`)."""
        if self.separate:
            return (f"`user` inside is host uid {self.uid}, gid {self.gid}, of its own "
                    "(docs/sandbox.md)")
        return f"`user` inside is host uid {self.uid}, the invoking user"


@dataclass(frozen=True)
class IdentityRange:
    """The reserved uids (and gids) sandboxes take from when the workbench runs as root."""

    uid_base: int
    gid_base: int
    count: int
    source: str  # where it came from, for messages

    @classmethod
    def configured(cls) -> IdentityRange:
        """$WORKBENCH_SANDBOX_UID_BASE/_COUNT, else root's line of /etc/subuid (and
        /etc/subgid), else DEFAULT_UID_BASE/COUNT; IdentityError naming the setting for a
        value that is not a number or reaches past 2^32-2."""
        base_text = os.environ.get(UID_BASE_VARIABLE, "").strip()
        count_text = os.environ.get(UID_COUNT_VARIABLE, "").strip()
        if base_text or count_text:
            base = _number(base_text or str(DEFAULT_UID_BASE), UID_BASE_VARIABLE)
            count = _number(count_text or str(DEFAULT_UID_COUNT), UID_COUNT_VARIABLE)
            found = cls(base, base, count, f"${UID_BASE_VARIABLE}/${UID_COUNT_VARIABLE}")
        else:
            uids = _subordinate("/etc/subuid")
            gids = _subordinate("/etc/subgid")
            if uids is not None and gids is not None:
                found = cls(uids[0], gids[0], min(uids[1], gids[1]),
                            "root's lines of /etc/subuid and /etc/subgid")
            else:
                found = cls(DEFAULT_UID_BASE, DEFAULT_UID_BASE, DEFAULT_UID_COUNT,
                            "the default range")
        top = max(found.uid_base, found.gid_base) + found.count
        if found.count < 1 or min(found.uid_base, found.gid_base) < 1000 or top > 2**32 - 2:
            raise IdentityError(f"{found.source}: sandbox uids {found.uid_base}+{found.count}"
                                " must lie between 1000 and 4294967294")
        return found


def _number(text: str, variable: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise IdentityError(f"${variable}: expected a number, got {text!r}") from None


def _subordinate(path: str) -> tuple[int, int] | None:
    """(start, count) of root's first range in /etc/subuid-style `path`; None without."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] in ("root", "0"):
            try:
                return int(parts[1]), int(parts[2])
            except ValueError:
                continue
    return None


def _ids_in_use(path: str) -> set[int]:
    """The uids (or gids) of /etc/passwd-style `path`'s entries."""
    found: set[int] = set()
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return found
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) > 2 and parts[2].isdigit():
            found.add(int(parts[2]))
    return found


def sandbox_identity(workspace: Path, name: str) -> HostIdentity:
    """The host identity of sandbox `name`'s inside user: the invoking user's unless this
    process is root, then the one recorded for it in the workspace, or a free one of the
    range recorded now (IdentityError when the range is full)."""
    if os.geteuid() != 0:
        return HostIdentity(os.getuid(), os.getgid(), separate=False)
    reserved = IdentityRange.configured()
    folder = Path(workspace)
    folder.mkdir(parents=True, exist_ok=True)
    registry = folder / REGISTRY
    with open(folder / REGISTRY_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            taken: dict[str, int] = json.loads(registry.read_text())
            if not isinstance(taken, dict):
                raise ValueError("not an object")
        except FileNotFoundError:
            taken = {}
        except ValueError as exc:
            raise IdentityError(f"{registry}: unreadable ({exc}); remove it to give every "
                                "sandbox a new identity") from exc
        offset = taken.get(name)
        if not isinstance(offset, int) or not 0 <= offset < reserved.count:
            offset = _free_offset(reserved, set(taken.values()), str(workspace))
            taken[name] = offset
            write_atomic(registry, json.dumps(taken, indent=1, sort_keys=True))
    return HostIdentity(reserved.uid_base + offset, reserved.gid_base + offset, separate=True)


def _free_offset(reserved: IdentityRange, used: set[int], workspace: str) -> int:
    """An offset no sandbox of the workspace and no account or group uses, searched from a
    point that depends on the workspace (so two workspaces rarely meet)."""
    accounts = _ids_in_use("/etc/passwd")
    groups = _ids_in_use("/etc/group")
    start = zlib.crc32(workspace.encode()) % reserved.count
    for step in range(reserved.count):
        offset = (start + step) % reserved.count
        if offset in used or reserved.uid_base + offset in accounts \
                or reserved.gid_base + offset in groups:
            continue
        return offset
    raise IdentityError(f"every uid of {reserved.source} ({reserved.uid_base}+"
                        f"{reserved.count}) is taken; set ${UID_COUNT_VARIABLE} higher")


def give_to(path: Path, identity: HostIdentity | None, mode: int | None = None) -> None:
    """Make `path` (not followed if a link) the sandbox's, and set `mode` on it."""
    if os.path.islink(path):
        raise PermissionError(f"{path}: a link where the sandbox's own file must be")
    owner = identity.owner() if identity is not None else None
    if owner is not None:
        os.chown(path, *owner, follow_symlinks=False)
    if mode is not None:
        os.chmod(path, mode)


def give_tree_to(folder: Path, identity: HostIdentity) -> int:
    """Make everything under `folder` that is not the sandbox's its own (a home made
    before sandboxes had identities, a snapshot of one); links are changed, never
    followed. Returns how many entries changed."""
    owner = identity.owner()
    if owner is None:
        return 0
    changed = 0
    for root, folders, files in os.walk(folder):
        for name in [*folders, *files, ""]:
            path = os.path.join(root, name) if name else root
            try:
                info = os.lstat(path)
                if (info.st_uid, info.st_gid) != owner:
                    os.chown(path, *owner, follow_symlinks=False)
                    changed += 1
            except OSError:
                continue
    return changed


__all__ = [
    "HostIdentity",
    "IdentityError",
    "IdentityRange",
    "give_to",
    "give_tree_to",
    "sandbox_identity",
]
