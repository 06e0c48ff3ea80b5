"""A VM's internal snapshots (RAM, devices and disk, inside its overlay): listed, saved,
reverted, deleted and renamed, through QMP jobs while it runs and qemu-img while it is
stopped, with the names and tree that vm.providers.qemu.snapshot_catalog keeps."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vm.errors import EnvironmentDead, SnapshotError
from vm.providers.base import Snapshot
from vm.providers.qemu.config import QemuConfig
from vm.providers.qemu.disk import DISK_NODE, image_info, snapshot_nodes
from vm.providers.qemu.qmp import QMPClient, QMPError
from vm.providers.qemu.snapshot_catalog import SnapshotCatalog, SnapshotRecord
from vm.waiting import poll_until


class Snapshots:
    """The snapshots of VM `name`. `client` gives its QMP connection while it runs (None
    while it does not); `running` says whether QEMU runs; `io_lock` is the VM's, held
    while a snapshot is saved, reverted or deleted so no input interleaves."""

    def __init__(self, name: str, config: QemuConfig, overlay: Path, uefi_vars: Path,
                 catalog: SnapshotCatalog, io_lock: threading.RLock,
                 client: Callable[[], QMPClient | None], running: Callable[[], bool]) -> None:
        self.name = name
        self.config = config
        self.overlay = overlay
        self.uefi_vars = uefi_vars
        self.catalog = catalog
        self._io_lock = io_lock
        self._client = client
        self._running = running
        self._has_snapshot_jobs: bool | None = None

    def list_all(self) -> list[Snapshot]:
        """Snapshots in the overlay (also while the VM is stopped), oldest first."""
        raw = self._image_snapshots()
        self.catalog.prune({entry["name"] for entry in raw})
        snapshots = []
        for entry in raw:
            tag = entry["name"]
            record = self.catalog.records.get(tag)
            parent = record.parent if record else None
            snapshots.append(Snapshot(
                name=self.catalog.name_of(tag),
                created=entry.get("date-sec", 0) + entry.get("date-nsec", 0) / 1e9,
                size_bytes=int(entry.get("vm-state-size", 0)),
                description=record.description if record else "",
                parent=self.catalog.name_of(parent) if parent else None,
                task_id=record.task_id if record else None,
                extra={
                    "tag": tag,
                    "id": entry.get("id"),
                    "vm_clock_seconds": (entry.get("vm-clock-sec", 0)
                                         + entry.get("vm-clock-nsec", 0) / 1e9),
                    "current": tag == self.catalog.current,
                },
            ))
        return sorted(snapshots, key=lambda s: s.created)

    def save(self, name: str, description: str = "", task_id: str | None = None) -> Snapshot:
        """Save the running machine's full state; a snapshot of the same name is replaced."""
        check_name(name, "name")
        with self._io_lock:
            tags = self._tags()
            old = self.catalog.tag_for(name, tags)
            if old is not None:
                self._snapshot_job("snapshot-delete", "delvm", old)
                self.catalog.forget(old)
                tags.discard(old)
            parent = self.catalog.current
            tag = self.catalog.new_tag(name, tags)
            self._snapshot_job("snapshot-save", "savevm", tag)
            self.catalog.record(SnapshotRecord(tag=tag, name=name, description=description,
                                               parent=parent, task_id=task_id,
                                               created=time.time()))
        for snapshot in self.list_all():
            if snapshot.extra.get("tag") == tag:
                return snapshot
        raise SnapshotError(f"VM {self.name}: snapshot {name!r} missing right after saving")

    def revert(self, name: str) -> None:
        """Restore the machine (RAM, devices, disk) to snapshot `name`; it keeps running."""
        with self._io_lock:
            tag = self._tag(name)
            self._snapshot_job("snapshot-load", "loadvm", tag)
            self.catalog.current = tag
            self.catalog.save()

    def delete(self, name: str) -> None:
        with self._io_lock:
            tag = self._tag(name)
            if self._running():
                self._snapshot_job("snapshot-delete", "delvm", tag)
            else:
                files = [self.overlay] + ([self.uefi_vars]
                                          if self.config.firmware == "uefi" else [])
                for file in files:
                    result = subprocess.run(["qemu-img", "snapshot", "-d", tag, str(file)],
                                            capture_output=True, text=True, timeout=300)
                    if result.returncode != 0 and file == self.overlay:
                        raise SnapshotError(f"VM {self.name}: cannot delete snapshot "
                                            f"{name!r}: {result.stderr.strip()}")
            self.catalog.forget(tag)

    def rename(self, old: str, new: str) -> None:
        """Rename in the catalog (QEMU cannot rename; its tag stays as it was)."""
        check_name(new, "new")
        tags = self._tags()
        tag = self._tag(old)
        if new != old and self.catalog.tag_for(new, tags) is not None:
            raise SnapshotError(f"VM {self.name}: a snapshot named {new!r} already exists")
        record = self.catalog.records.get(tag)
        if record is None:
            record = SnapshotRecord(tag=tag, name=old, created=time.time())
            self.catalog.records[tag] = record
        record.name = new
        self.catalog.save()

    def _qmp(self) -> QMPClient:
        qmp = self._client()
        if qmp is None:
            raise EnvironmentDead(f"VM {self.name} is not running")
        return qmp

    def _image_snapshots(self) -> list[dict[str, Any]]:
        qmp = self._client()
        if qmp is not None:
            nodes = qmp.execute("query-named-block-nodes", {"flat": True},
                                timeout=self.config.qmp_timeout)
            for node in nodes:
                if node.get("node-name") == DISK_NODE:
                    return list(node.get("image", {}).get("snapshots", []))
            raise SnapshotError(f"VM {self.name}: block node {DISK_NODE} not found")
        if not self.overlay.exists():
            return []
        return list(image_info(self.overlay).get("snapshots", []))

    def _tags(self) -> set[str]:
        return {entry["name"] for entry in self._image_snapshots()}

    def _tag(self, name: str) -> str:
        tags = self._tags()
        tag = self.catalog.tag_for(name, tags)
        if tag is None:
            have = sorted(self.catalog.name_of(t) for t in tags)
            raise SnapshotError(f"VM {self.name}: no snapshot named {name!r} (have {have})")
        return tag

    def _snapshot_job(self, command: str, monitor_command: str, tag: str) -> None:
        """Run snapshot-save/-load/-delete as a QMP job, or savevm/loadvm/delvm on
        QEMU versions without those jobs (before 6.0)."""
        qmp = self._qmp()
        if self._has_snapshot_jobs is None:
            names = {c["name"] for c in qmp.execute("query-commands")}
            self._has_snapshot_jobs = command in names
        timeout = self.config.snapshot_timeout
        if not self._has_snapshot_jobs:
            output = qmp.hmp(f"{monitor_command} {tag}", timeout=timeout).strip()
            if output:  # the human monitor prints nothing on success
                raise SnapshotError(f"VM {self.name}: {monitor_command} {tag}: {output}")
            return
        job = f"wb-{command}-{uuid.uuid4().hex[:8]}"
        arguments: dict[str, Any] = {"job-id": job, "tag": tag,
                                     "devices": snapshot_nodes(self.config)}
        if command != "snapshot-delete":
            arguments["vmstate"] = DISK_NODE
        try:
            qmp.execute(command, arguments, timeout=self.config.qmp_timeout)
        except QMPError as exc:
            raise SnapshotError(f"VM {self.name}: {command} {tag}: {exc.description}") \
                from exc

        def concluded() -> bool:
            jobs = {j["id"]: j for j in qmp.execute("query-jobs",
                                                    timeout=self.config.qmp_timeout)}
            state = jobs.get(job)
            if state is None:
                raise SnapshotError(f"VM {self.name}: {command} job {job} vanished")
            if state["status"] != "concluded":
                return False
            qmp.execute("job-dismiss", {"id": job}, timeout=self.config.qmp_timeout)
            if "error" in state:
                raise SnapshotError(f"VM {self.name}: {command} {tag}: {state['error']}")
            return True

        if not poll_until(concluded, timeout, 0.005):
            raise SnapshotError(f"VM {self.name}: {command} {tag} did not finish "
                                f"within {timeout:.0f} s")


def check_name(name: str, field: str) -> None:
    """A snapshot name as the user gave it: 1..128 characters, no control characters."""
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        raise SnapshotError(f"snapshot {field}: expected 1..128 characters, got {name!r}")
    if any(ord(c) < 32 for c in name):
        raise SnapshotError(f"snapshot {field}: control characters are not allowed")
