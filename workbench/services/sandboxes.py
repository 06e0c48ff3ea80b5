"""The workspace's sandbox desktops as the Environments screen sees them: each one's
status, and start, stop, restart and snapshot operations (reverts timed).

A sandbox is known by its folder under <workspace>/sandboxes/ and is running while it
has a state file (vm.providers.sandbox); stopped sandboxes keep their snapshots. Every
call here may take seconds: the app runs them in workers.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vm.errors import EnvironmentDead
from vm.providers.base import Snapshot
from vm.providers.isolation import isolation_warnings
from vm.providers.sandbox import LimitsError, SandboxProvider, check_name, reclaim_orphans

DEFAULT_SCREEN = (1280, 800)


@dataclass(frozen=True)
class SandboxInfo:
    """One environment as the screen lists it; VMs use it too
    (workbench.services.environments)."""

    name: str
    status: str  # "running", "stopped" or "dead" (a VM also "starting" / "stopping")
    provider: str  # the kind of desktop: "sandbox", "qemu" or "remote"
    width: int  # 0 while not known (a stopped VM)
    height: int
    display: str  # e.g. ":3" while running; a VM's guest server URL
    snapshot: str | None  # the snapshot it was last saved as or reverted to
    snapshots: int
    detail: str  # health detail, or why it is dead
    # what the screen must show on this environment: a sandbox running without namespaces
    # or without its resource limits (read from its state file; see sandbox_warnings)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class RevertResult:
    sandbox: str
    snapshot: str
    seconds: float


def sandbox_warnings(provider: SandboxProvider) -> tuple[str, ...]:
    """What a person must be told about a running sandbox, from its state file: that it
    runs without namespaces (isolation = "none": its programs run on the host as the
    workbench's user) or shares the host's network (network = "host"), in the words of
    `workbench env up` and `env list` (vm.providers.isolation.isolation_warnings), and
    that a resource limit does not hold (none applied, or one asked for that this host or
    user could not set), with the limits line that says why."""
    state = provider.state
    if state is None:
        return ()
    out = isolation_warnings(state.isolation, state.network)
    try:
        bounds = provider.bounds()
    except LimitsError as exc:
        return (*out, f"WARNING: resource limits unknown: {exc}")
    line = provider.limits_description().removeprefix("limits: ")
    if bounds is None:  # "none (why)"
        out.append("WARNING: no resource limits: "
                   + line.removeprefix("none (").removesuffix(")"))
    elif bounds.unbounded():
        out.append(f"WARNING: resource limits do not all hold: {line}")
    return tuple(out)


class SnapshotOperations:
    """The snapshot operations of a manager, on whatever desktop `provider(name)` gives;
    reverts are timed (what the screen shows as "reverted in … s")."""

    def provider(self, name: str) -> Any:
        raise NotImplementedError

    def snapshots(self, name: str) -> list[Snapshot]:
        return list(self.provider(name).list_snapshots())

    def take_snapshot(self, name: str, snapshot: str, description: str = "") -> Snapshot:
        taken: Snapshot = self.provider(name).save_snapshot(snapshot, description=description)
        return taken

    def revert(self, name: str, snapshot: str) -> RevertResult:
        provider = self.provider(name)
        started = time.perf_counter()
        provider.revert_snapshot(snapshot)
        return RevertResult(name, snapshot, time.perf_counter() - started)

    def rename_snapshot(self, name: str, old: str, new: str) -> None:
        self.provider(name).rename_snapshot(old, new)

    def delete_snapshot(self, name: str, snapshot: str) -> None:
        self.provider(name).delete_snapshot(snapshot)


class SandboxManager(SnapshotOperations):
    """Handles on the sandboxes of one workspace (thread-safe)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace).resolve()
        self._providers: dict[str, SandboxProvider] = {}
        self._lock = threading.Lock()
        # sandbox name -> why it stopped, for one the process that started it left running
        # when it died (vm.providers.sandbox.watchdog.reclaim_orphans)
        self._reclaimed: dict[str, str] = {}

    @property
    def root(self) -> Path:
        return self.workspace / "sandboxes"

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and not p.name.startswith("."))

    def provider(self, name: str) -> SandboxProvider:
        """The running sandbox, attached; else a handle that can start it or list its
        snapshots."""
        with self._lock:
            known = self._providers.get(name)
            # Stopped by another process (the CLI, a training run's cleanup): what this
            # handle remembers is gone, so it is stopped, not dead. A handle in the middle
            # of its own start (no state file yet) is kept as it is.
            if known is not None and known.state is not None \
                    and not known.forget_if_stopped_elsewhere():
                return known
            try:
                provider = SandboxProvider.attach(name, self.workspace)
            except EnvironmentDead:
                provider = known or SandboxProvider(name, self.workspace, persistent=True)
            self._providers[name] = provider
            return provider

    def info(self, name: str) -> SandboxInfo:
        provider = self.provider(name)
        state = provider.state
        snapshots = len(provider.list_snapshots())
        if state is None:
            return SandboxInfo(name, "stopped", provider.kind, provider.width, provider.height,
                               "", None, snapshots, self._reclaimed.get(name, "not running"))
        health = provider.health()
        return SandboxInfo(name, "running" if health.alive else "dead", provider.kind,
                           state.width, state.height, state.display, state.current_snapshot,
                           snapshots, health.detail, sandbox_warnings(provider))

    def all(self) -> list[SandboxInfo]:
        self._reclaimed.update(reclaim_orphans(self.workspace))
        return [self.info(name) for name in self.names()]

    def create(self, name: str, screen_size: tuple[int, int] = DEFAULT_SCREEN) -> SandboxInfo:
        """A new sandbox, started."""
        check_name(name, "sandbox name")
        if (self.root / name).exists():
            raise ValueError(f"sandbox {name!r} already exists in {self.workspace}")
        # people attach to it later: it outlives the app
        provider = SandboxProvider(name, self.workspace, screen_size=screen_size,
                                   persistent=True)
        provider.start()
        with self._lock:
            self._providers[name] = provider
        return self.info(name)

    def start(self, name: str) -> SandboxInfo:
        provider = self.provider(name)
        if provider.state is None or not provider.health().alive:
            provider.persistent = True  # started here: it outlives the app
            self._reclaimed.pop(name, None)
            provider.start()
        return self.info(name)

    def stop(self, name: str) -> SandboxInfo:
        self.provider(name).stop()
        return self.info(name)

    def restart(self, name: str) -> SandboxInfo:
        provider = self.provider(name)
        provider.stop()
        provider.persistent = True
        self._reclaimed.pop(name, None)
        provider.start()
        return self.info(name)
