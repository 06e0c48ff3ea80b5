"""The mounts this process sees (/proc/self/mountinfo), read by one parser: where the
cgroup hierarchies are (vm.providers.sandbox.cgroups) and what is mounted on a sandbox's
home (vm.providers.sandbox.home_volume)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    point: Path  # where it is mounted
    root: str  # the folder of its filesystem that is mounted there
    filesystem: str  # "ext4", "tmpfs", "cgroup2", ...
    source: str  # the device, or what stands for one ("tmpfs", "cgroup2")
    options: frozenset[str]  # the filesystem's own options (a cgroup v1 mount's controllers)


def unescape(text: str) -> str:
    """A /proc/self/mountinfo field as a path (it writes space, tab, newline and backslash
    as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), text)


def mounts() -> list[Mount]:
    """Every mount, in mountinfo's order (of two on one point, the later is on top);
    OSError when /proc/self/mountinfo cannot be read."""
    out = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            head, _, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if len(fields) < 5 or len(rest) < 2:
                continue
            out.append(Mount(point=Path(unescape(fields[4])), root=unescape(fields[3]),
                             filesystem=rest[0], source=unescape(rest[1]),
                             options=frozenset(rest[2].split(",")) if len(rest) > 2
                             else frozenset()))
    return out


def mount_on(folder: Path) -> Mount | None:
    """The topmost mount on `folder`; None when it is no mount point."""
    target = folder.resolve()
    found = None
    for mount in mounts():
        if mount.point == target:
            found = mount
    return found
