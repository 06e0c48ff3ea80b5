"""Every environment of a workspace as the Environments screen sees it: its sandboxes
(workbench.services.sandboxes) and the VMs listed in environments.toml
(workbench.services.vm_registry): QEMU VMs, which run as child processes of the app in
<workspace>/vms/<name>/, and remote OSWorld guest servers, which run elsewhere.

One info record per environment, start/stop/restart, snapshots (reverts timed) and the
provider behind each for the live view, manual control and demonstrations. Every call
may take seconds: the app runs them in workers.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vm.errors import EnvironmentError_
from vm.providers.base import Provider, Snapshot
from vm.providers.qemu import QemuProvider
from vm.providers.remote import RemoteProvider
from vm.providers.sandbox import check_name
from workbench.services.sandboxes import (
    DEFAULT_SCREEN,
    SandboxInfo,
    SandboxManager,
    SnapshotOperations,
)
from workbench.services.vm_registry import (
    REGISTRY_NAME,
    QemuEntry,
    RegistryError,
    RemoteEntry,
    VmEntry,
    VmKind,
    VmRegistry,
    add_entry,
    read_registry,
    remove_entry,
)

EnvironmentInfo = SandboxInfo  # one record for every kind (its `provider` says which)
REMOTE_PROBE_TIMEOUT_S = 3.0  # a status check of a remote guest server waits this long
REMOTE_LIFECYCLE = ("a remote VM runs elsewhere: start, stop and restart it with its own "
                    "tools (vmrun, docker, the cloud console)")
REMOTE_SNAPSHOTS = ("a remote OSWorld guest server has no snapshots: save and revert its "
                    "VM with its own tools")


@dataclass(frozen=True)
class Listing:
    """What the list shows: every environment, and what is wrong with environments.toml
    ('' when nothing)."""

    environments: list[SandboxInfo]
    problem: str = ""


def unsupported(info: SandboxInfo, operation: str) -> str:
    """Why `operation` ("start", "stop", "restart", "snapshots", "remove") cannot be done
    on this kind of environment; '' when it can (whatever its status)."""
    if info.provider == "remote":
        if operation in ("start", "stop", "restart"):
            return REMOTE_LIFECYCLE
        if operation == "snapshots":
            return REMOTE_SNAPSHOTS
    if operation == "remove" and info.provider == "sandbox":
        return "sandboxes are not listed in environments.toml (their folder is the entry)"
    return ""


class EnvironmentManager(SnapshotOperations):
    """Handles on every environment of one workspace (thread-safe)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace).resolve()
        self.sandboxes = SandboxManager(self.workspace)
        self._registry = VmRegistry()  # the last good read of environments.toml
        self._problem = ""
        self._qemu: dict[str, QemuProvider] = {}
        self._remote: dict[str, RemoteProvider] = {}
        self._probes: dict[str, RemoteProvider] = {}  # short timeouts, for status only
        self._busy: dict[str, str] = {}  # name -> "starting" / "stopping"
        self._failures: dict[str, str] = {}  # name -> why its last start failed
        self._lock = threading.RLock()

    @property
    def vm_root(self) -> Path:
        return self.workspace / "vms"

    # -- the list -----------------------------------------------------------------------

    def registry(self) -> VmRegistry:
        """environments.toml read again; on an error the last good read (and the error
        is kept for `listing`)."""
        try:
            registry = read_registry(self.workspace)
        except RegistryError as exc:
            with self._lock:
                self._problem = str(exc)
                return self._registry
        with self._lock:
            self._registry, self._problem = registry, ""
            return registry

    def listing(self) -> Listing:
        registry = self.registry()
        sandboxes = self.sandboxes.names()
        infos = [self.sandboxes.info(name) for name in sandboxes]
        problems = [self._problem] if self._problem else []
        for name in registry.names():
            if name in sandboxes:
                problems.append(f"{REGISTRY_NAME}: {name!r} is also a sandbox's name; the "
                                "VM is not shown (rename one of them)")
                continue
            infos.append(self.info(name))
        return Listing(infos, "\n".join(problems))

    def all(self) -> list[SandboxInfo]:
        return self.listing().environments

    def entry(self, name: str) -> VmEntry | None:
        """The VM entry of `name` (None for a sandbox)."""
        if name in self.sandboxes.names():
            return None
        entry = self._registry.get(name)
        if entry is None:
            entry = self.registry().get(name)
        return entry

    def kind(self, name: str) -> str:
        entry = self.entry(name)
        return "sandbox" if entry is None else entry.kind

    def info(self, name: str) -> SandboxInfo:
        entry = self.entry(name)
        if entry is None:
            return self.sandboxes.info(name)
        if isinstance(entry, RemoteEntry):
            return self._remote_info(entry)
        return self._qemu_info(entry)

    def _qemu_info(self, entry: QemuEntry) -> SandboxInfo:
        name = entry.name
        busy = self._busy.get(name)
        if busy is not None:  # a boot or a shutdown under way: not to be disturbed
            return SandboxInfo(name, busy, "qemu", 0, 0, "", None, 0, f"{busy}…")
        try:
            provider = self._qemu_provider(entry)
            snapshots = provider.list_snapshots()
        except (EnvironmentError_, OSError) as exc:
            return SandboxInfo(name, "dead", "qemu", 0, 0, "", None, 0, str(exc))
        current = provider.catalog.current
        snapshot = provider.catalog.name_of(current) if current else None
        if provider.process is None:
            image = Path(entry.config.image)
            detail = (f"the base image {image} is missing" if not image.is_file()
                      else self._failures.get(name)
                      or f"not running (image {image.name}, {entry.config.memory_mb} MB, "
                         f"{entry.config.cpus} CPU(s))")
            return SandboxInfo(name, "stopped", "qemu", 0, 0, "", snapshot, len(snapshots),
                               detail)
        health = provider.health()
        if not health.alive:
            return SandboxInfo(name, "dead", "qemu", 0, 0, "", snapshot, len(snapshots),
                               health.detail)
        try:
            width, height = provider.screen_size()
        except EnvironmentError_ as exc:
            return SandboxInfo(name, "dead", "qemu", 0, 0, "", snapshot, len(snapshots),
                               str(exc))
        display = provider.guest_url or f"QEMU pid {provider.pid}"
        return SandboxInfo(name, "running", "qemu", width, height, display, snapshot,
                           len(snapshots), health.detail)

    def _remote_info(self, entry: RemoteEntry) -> SandboxInfo:
        probe = self._probe(entry)
        health = probe.health()
        if not health.alive:
            return SandboxInfo(entry.name, "dead", "remote", 0, 0, entry.url, None, 0,
                               health.detail)
        try:
            width, height = probe.screen_size()
        except EnvironmentError_ as exc:
            return SandboxInfo(entry.name, "dead", "remote", 0, 0, entry.url, None, 0,
                               str(exc))
        return SandboxInfo(entry.name, "running", "remote", width, height, entry.url, None,
                           0, f"answers at {entry.url} ({REMOTE_LIFECYCLE})")

    # -- providers ----------------------------------------------------------------------

    def provider(self, name: str) -> Provider:
        """The desktop behind `name` (live view, manual control, demonstrations)."""
        entry = self.entry(name)
        if entry is None:
            return self.sandboxes.provider(name)
        if isinstance(entry, RemoteEntry):
            return self._remote_provider(entry)
        return self._qemu_provider(entry)

    def _qemu_provider(self, entry: QemuEntry) -> QemuProvider:
        with self._lock:
            provider = self._qemu.get(entry.name)
            # A stopped VM takes up an edited entry; a running one keeps what it booted.
            if provider is None or (provider.process is None
                                    and provider.config != entry.config):
                provider = QemuProvider(entry.name, self.vm_root / entry.name, entry.config)
                self._qemu[entry.name] = provider
            return provider

    def _remote_provider(self, entry: RemoteEntry) -> RemoteProvider:
        with self._lock:
            provider = self._remote.get(entry.name)
            if provider is None or provider.url != entry.url:
                provider = RemoteProvider(entry.name, entry.url, entry.resolved_token())
                self._remote[entry.name] = provider
            return provider

    def _probe(self, entry: RemoteEntry) -> RemoteProvider:
        with self._lock:
            probe = self._probes.get(entry.name)
            if probe is None or probe.url != entry.url:
                probe = RemoteProvider(entry.name, entry.url, entry.resolved_token(),
                                       timeout=REMOTE_PROBE_TIMEOUT_S, retries=0)
                self._probes[entry.name] = probe
            return probe

    def _vm(self, name: str, operation: str) -> VmEntry | None:
        """The VM entry of `name` for `operation`; refuses what its kind cannot do."""
        entry = self.entry(name)
        if isinstance(entry, RemoteEntry) and operation in ("start", "stop", "restart"):
            raise EnvironmentError_(f"cannot {operation} {name}: {REMOTE_LIFECYCLE}")
        return entry

    # -- lifecycle ----------------------------------------------------------------------

    def create(self, name: str, screen_size: tuple[int, int] = DEFAULT_SCREEN) -> SandboxInfo:
        """A new sandbox, started (its name must not be a VM's)."""
        check_name(name, "sandbox name")
        if self.registry().get(name) is not None:
            raise ValueError(f"{name!r} is already the name of a VM in {REGISTRY_NAME}")
        return self.sandboxes.create(name, screen_size)

    def start(self, name: str) -> SandboxInfo:
        entry = self._vm(name, "start")
        if entry is None:
            return self.sandboxes.start(name)
        assert isinstance(entry, QemuEntry)
        provider = self._qemu_provider(entry)
        if provider.running() and provider.health().alive:
            return self.info(name)
        self._mark_busy(name, "starting")
        try:
            provider.start()  # a dead one is cleaned up and booted again
            self._failures.pop(name, None)
        except BaseException as exc:
            self._failures[name] = f"the last start failed: {exc}"
            raise
        finally:
            self._busy.pop(name, None)
        return self.info(name)

    def stop(self, name: str) -> SandboxInfo:
        entry = self._vm(name, "stop")
        if entry is None:
            return self.sandboxes.stop(name)
        assert isinstance(entry, QemuEntry)
        self._mark_busy(name, "stopping")
        try:
            self._qemu_provider(entry).stop()
        finally:
            self._busy.pop(name, None)
        return self.info(name)

    def restart(self, name: str) -> SandboxInfo:
        entry = self._vm(name, "restart")
        if entry is None:
            return self.sandboxes.restart(name)
        self.stop(name)
        return self.start(name)

    def _mark_busy(self, name: str, state: str) -> None:
        with self._lock:
            if name in self._busy:
                raise EnvironmentError_(f"{name} is {self._busy[name]} already")
            self._busy[name] = state

    def running_vms(self) -> list[str]:
        """The QEMU VMs this app runs (they stop when it closes); no I/O."""
        with self._lock:
            return sorted(name for name, provider in self._qemu.items()
                          if provider.running())

    def stop_vms(self) -> list[str]:
        """Stop every QEMU VM this app started, side by side; their names."""
        with self._lock:
            providers = [p for p in self._qemu.values() if p.process is not None]
        if providers:
            with ThreadPoolExecutor(len(providers)) as pool:
                list(pool.map(lambda p: p.stop(), providers))
        return sorted(p.name for p in providers)

    # -- the list of VMs ----------------------------------------------------------------

    def add_vm(self, kind: VmKind, table: Mapping[str, Any]) -> SandboxInfo:
        """List a new VM in environments.toml (validated; names unique across kinds)."""
        with self._lock:
            entry = add_entry(self.workspace, kind, table, taken=self.sandboxes.names())
        self.registry()
        return self.info(entry.name)

    def remove_vm(self, name: str) -> None:
        """Take a stopped VM out of environments.toml. Its base image is never touched;
        a QEMU VM's work folder (overlay, snapshots) stays in vms/<name>/."""
        with self._lock:
            provider = self._qemu.get(name)
            if name in self._busy:
                raise EnvironmentError_(f"{name} is {self._busy[name]}")
            if provider is not None and provider.running():
                raise EnvironmentError_(f"stop {name} before removing it")
            if provider is not None and provider.process is not None:
                provider.stop()  # a dead VM: what is left of it (sockets, lock) goes
            remove_entry(self.workspace, name)
            self._qemu.pop(name, None)
            self._remote.pop(name, None)
            self._probes.pop(name, None)
        self.registry()

    # -- snapshots ----------------------------------------------------------------------

    def snapshots(self, name: str) -> list[Snapshot]:
        if self.kind(name) == "remote":
            return []  # the screen says why (`unsupported`)
        return super().snapshots(name)
