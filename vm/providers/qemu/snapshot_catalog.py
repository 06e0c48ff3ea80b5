"""What QEMU does not keep about internal snapshots: description, parent, task, name.

QEMU stores the machine state inside the overlay qcow2 under a *tag*. This catalog, a
JSON file beside the overlay (written atomically), adds the user-facing name (so a
snapshot can be renamed), a description, the task it was taken for, and its parent (the
snapshot the machine was last saved to or reverted from), so the app can draw a tree.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vm.atomic_write import write_atomic
from vm.errors import SnapshotError

CATALOG_NAME = "snapshots.json"  # beside the overlay, in the VM's folder
CATALOG_VERSION = 1
_SAFE_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass
class SnapshotRecord:
    tag: str  # QEMU's name for it inside the qcow2
    name: str  # what the user sees; differs from tag after a rename
    description: str = ""
    parent: str | None = None  # tag of the parent snapshot
    task_id: str | None = None
    created: float = 0.0


@dataclass
class SnapshotCatalog:
    path: Path
    records: dict[str, SnapshotRecord] = field(default_factory=dict)  # by tag
    current: str | None = None  # tag the running machine descends from

    @classmethod
    def load(cls, path: Path) -> SnapshotCatalog:
        if not path.exists():
            return cls(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise SnapshotError(f"{path}: not a readable snapshot catalog: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("snapshots"), dict):
            raise SnapshotError(f"{path}: expected an object with a 'snapshots' object")
        records = {}
        for tag, entry in data["snapshots"].items():
            if not isinstance(entry, dict):
                raise SnapshotError(f"{path}: snapshots.{tag}: expected an object")
            try:
                records[tag] = SnapshotRecord(**{**entry, "tag": tag})
            except TypeError as exc:
                raise SnapshotError(f"{path}: snapshots.{tag}: {exc}") from exc
        current = data.get("current")
        return cls(path, records, current if isinstance(current, str) else None)

    def save(self) -> None:
        """Write the catalog atomically (temp file in the same folder, then rename)."""
        payload: dict[str, Any] = {
            "version": CATALOG_VERSION,
            "current": self.current,
            "snapshots": {
                tag: {k: v for k, v in asdict(record).items() if k != "tag"}
                for tag, record in self.records.items()
            },
        }
        write_atomic(self.path, json.dumps(payload, indent=2, sort_keys=True), fsync=True)

    # -------------------------------------------------------------------------------
    def tag_for(self, name: str, existing_tags: set[str]) -> str | None:
        """The tag of the snapshot shown as `name`, or None."""
        for record in self.records.values():
            if record.name == name and record.tag in existing_tags:
                return record.tag
        if name in existing_tags and (name not in self.records
                                      or self.records[name].name == name):
            return name
        return None

    def new_tag(self, name: str, existing_tags: set[str]) -> str:
        """A fresh tag for a snapshot called `name`: the name itself when it is safe."""
        taken = existing_tags | set(self.records)
        if _SAFE_TAG.match(name) and name not in taken:
            return name
        while True:
            tag = f"wb-{uuid.uuid4().hex[:12]}"
            if tag not in taken:
                return tag

    def clear(self) -> None:
        """Forget every record (the overlay that held their snapshots is gone) and save."""
        self.records.clear()
        self.current = None
        self.save()

    def name_of(self, tag: str) -> str:
        record = self.records.get(tag)
        return record.name if record else tag

    def record(self, record: SnapshotRecord) -> None:
        self.records[record.tag] = record
        self.current = record.tag
        self.save()

    def forget(self, tag: str) -> None:
        """Drop `tag`; its children hang from its parent so the tree stays connected."""
        removed = self.records.pop(tag, None)
        parent = removed.parent if removed else None
        for record in self.records.values():
            if record.parent == tag:
                record.parent = parent
        if self.current == tag:
            self.current = parent
        self.save()

    def prune(self, existing_tags: set[str]) -> None:
        """Forget records whose snapshot is no longer in the image."""
        for tag in [t for t in self.records if t not in existing_tags]:
            self.forget(tag)
