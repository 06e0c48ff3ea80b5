"""What one sandbox may use: memory, processes and home size (`SandboxLimits`), from a
config table or the WORKBENCH_SANDBOX_* variables. What enforces them: cgroups
(vm.providers.sandbox.cgroups), a size-capped home (vm.providers.sandbox.home_volume),
both together for one sandbox (vm.providers.sandbox.bounds)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

HomeFilesystem = Literal["ext4", "tmpfs"]

DEFAULT_MEMORY_MB = 4096
DEFAULT_PIDS = 2048
DEFAULT_HOME_MB = 4096
DEFAULT_HOME_FILESYSTEM: HomeFilesystem = "ext4"
ENVIRONMENT = {  # SandboxLimits field -> the environment variable that sets it
    "memory_mb": "WORKBENCH_SANDBOX_MEMORY_MB",
    "pids": "WORKBENCH_SANDBOX_PIDS",
    "home_mb": "WORKBENCH_SANDBOX_HOME_MB",
    "home_filesystem": "WORKBENCH_SANDBOX_HOME_FILESYSTEM",
}


class LimitsError(RuntimeError):
    """A limit could not be set, read or removed; the message names the file or setting."""


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

