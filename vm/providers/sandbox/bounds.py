"""Everything that bounds one sandbox (`SandboxBounds`): its resource group
(vm.providers.sandbox.cgroups) and home volume (vm.providers.sandbox.home_volume)
together, the wrapper every program of the sandbox starts through, a record for its state
file, and the one line `workbench env up` and the app show: each limit in effect, and each
one that is not with why, never a silent no-limit."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vm.providers.sandbox.cgroups import ResourceGroup, group_name
from vm.providers.sandbox.home_volume import HomeVolume
from vm.providers.sandbox.limits import LimitsError, SandboxLimits


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
