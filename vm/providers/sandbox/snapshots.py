"""A sandbox's snapshots: each one a folder under the workspace's snapshots/<sandbox>
holding its home's files and snapshot.json (when and from what it was taken, and the
applications to relaunch, `AppRecord`). Restoring one swaps the home's files; the
provider kills and relaunches the applications around it."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vm.errors import SnapshotError
from vm.providers.base import Snapshot
from vm.providers.beneath import Beneath, clear_set_id_bits
from vm.providers.sandbox.home_volume import replace_home_files
from vm.providers.sandbox.identity import HostIdentity, give_tree_to
from vm.providers.sandbox.state import check_name, write_json_atomic

log = logging.getLogger(__name__)


@dataclass
class AppRecord:
    """An application to relaunch on revert."""

    argv: list[str]
    cwd: str
    had_window: bool = False


def _copy_live_home(home: Path, destination: Path) -> int:
    """Copy a running sandbox's home for a snapshot, from descriptors only (cp resolves
    paths by name: a folder the agent swaps for a link mid-copy would bring host files
    in). Files deleted mid-copy and FIFOs, sockets and devices are left out, and logged.
    Returns the bytes of file data copied."""
    with Beneath(home) as tree:
        report = tree.copy_tree(destination)
    for what, left_out in (("vanished while copying", report.vanished),
                           ("not files, folders or links", report.skipped)):
        if left_out:
            log.info("copying %s: %d entr%s left out, %s (%s)", home, len(left_out),
                     "y" if len(left_out) == 1 else "ies", what, ", ".join(left_out[:3]))
    return report.bytes


# what cp says of a file that was listed and then vanished before it was copied
_VANISHED = re.compile(r"^cp: cannot (?:stat|open) '(?P<path>.+?)'(?: for reading)?: "
                       r"No such file or directory$")


def vanished_only(stderr: str, src: Path) -> list[str]:
    """The files under `src` that cp reports as vanished mid-copy, when those are all it
    complains about; [] when it reports anything else (a real failure)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    paths = [match["path"] for match in map(_VANISHED.match, lines) if match]
    inside = [path for path in paths if path.startswith(f"{src}/")]
    return paths if lines and len(paths) == len(lines) == len(inside) else []


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy a folder with its metadata (cp -a is several times faster than copytree). A
    live home changes while it is copied: a file an application deleted between cp's
    listing and its copy (a journal, a lock) is gone from the home too, so the copy
    stands without it, as a snapshot taken a moment later would; anything else fails."""
    result = subprocess.run(["cp", "-a", "--reflink=auto", "--", str(src), str(dst)],
                            capture_output=True, text=True,
                            env={**os.environ, "LC_ALL": "C"})  # messages as parsed
    if result.returncode == 0:
        return
    vanished = vanished_only(result.stderr, src)
    if vanished:
        log.info("copying %s: %d file(s) vanished while copying (%s)", src, len(vanished),
                 ", ".join(vanished[:3]))
        return
    raise SnapshotError(f"copying {src} to {dst} failed: {result.stderr.strip()}")


class SnapshotStore:
    """The snapshots of sandbox `sandbox`, in `root` (snapshots/<sandbox> of its
    workspace). Staging and deleted folders start with a dot."""

    def __init__(self, root: Path, sandbox: str) -> None:
        self.root = root
        self.sandbox = sandbox

    def folder(self, name: str) -> Path:
        return self.root / check_name(name, "snapshot name")

    def read_meta(self, folder: Path) -> dict[str, Any]:
        meta_file = folder / "snapshot.json"
        try:
            data = json.loads(meta_file.read_text())
        except FileNotFoundError:
            raise SnapshotError(f"sandbox {self.sandbox} has no snapshot {folder.name!r}"
                                ) from None
        except ValueError as exc:
            raise SnapshotError(f"{meta_file}: not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("apps"), list):
            raise SnapshotError(f"{meta_file}: field 'apps' must be a list")
        return data

    @staticmethod
    def record(meta: dict[str, Any]) -> Snapshot:
        return Snapshot(name=meta["name"], created=meta["created"],
                        size_bytes=meta.get("size_bytes", 0),
                        description=meta.get("description", ""), parent=meta.get("parent"),
                        task_id=meta.get("task_id"),
                        extra={"apps": [" ".join(a["argv"]) for a in meta["apps"]]})

    def folders(self) -> list[Path]:
        """Saved snapshots (staging and deleted folders start with a dot)."""
        if not self.root.exists():
            return []
        return [f for f in self.root.iterdir() if f.is_dir() and not f.name.startswith(".")]

    def _reparent(self, old: str, new: str | None) -> None:
        """Children of snapshot `old` now hang off `new` (keeps the tree after rename or
        delete)."""
        for folder in self.folders():
            child = self.read_meta(folder)
            if child.get("parent") == old:
                child["parent"] = new
                write_json_atomic(folder / "snapshot.json", child)

    def all(self) -> list[Snapshot]:
        out = []
        for folder in self.folders():
            try:
                out.append(self.record(self.read_meta(folder)))
            except SnapshotError as exc:
                log.warning("%s", exc)
        return sorted(out, key=lambda s: s.created)

    def save(self, name: str, home: Path, running_apps: Callable[[], list[AppRecord]], *,
             description: str, task_id: str | None, parent: str | None,
             screen: tuple[int, int], identity: HostIdentity | None) -> Snapshot:
        """Copy the live `home` and the applications `running_apps` finds as snapshot
        `name` (staged, then renamed into place: a failure leaves no snapshot)."""
        folder = self.folder(name)
        if folder.exists():
            raise SnapshotError(f"sandbox {self.sandbox} already has a snapshot {name!r}; "
                                "delete or rename it first")
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".{name}.{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            apps = running_apps()
            # never through a link the agent swaps in mid-copy; set-id bits dropped
            size = _copy_live_home(home, staging / "home")
            meta = {"name": name, "created": time.time(), "description": description,
                    "parent": parent, "task_id": task_id, "size_bytes": size,
                    "apps": [asdict(a) for a in apps],
                    "screen": list(screen),
                    # whose files these are (a revert into a sandbox of another identity
                    # gives them to it)
                    "host_uid": None if identity is None else identity.uid}
            write_json_atomic(staging / "snapshot.json", meta)
            os.rename(staging, folder)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return self.record(meta)

    def restore_home(self, name: str, meta: dict[str, Any], home: Path, scratch: Path,
                     capped: bool, identity: HostIdentity | None) -> None:
        """Make `home`'s files those of snapshot `name` (its applications must be gone).
        The folder itself stays: the namespaces show it at /home/user. `capped`: the home
        is a size-capped mount, whose entries cannot be renamed across it; else the
        snapshot is copied beside it, in `scratch`, and the entries are swapped."""
        if capped:
            replace_home_files(home, self.folder(name) / "home")
            _adopt_files(meta, home, identity)
            return
        fresh = scratch / f".home-{secrets.token_hex(4)}"
        _copy_tree(self.folder(name) / "home", fresh)
        _adopt_files(meta, fresh, identity)
        old = scratch / f".old-home-{secrets.token_hex(4)}"
        old.mkdir()
        for entry in os.listdir(home):
            os.rename(home / entry, old / entry)
        for entry in os.listdir(fresh):
            os.rename(fresh / entry, home / entry)
        shutil.copystat(fresh, home)
        fresh.rmdir()
        threading.Thread(target=shutil.rmtree, args=(old, True), daemon=True).start()

    def rename(self, old: str, new: str) -> None:
        source, target = self.folder(old), self.folder(new)
        meta = self.read_meta(source)
        if target.exists():
            raise SnapshotError(f"sandbox {self.sandbox} already has a snapshot {new!r}")
        meta["name"] = new
        write_json_atomic(source / "snapshot.json", meta)
        os.rename(source, target)
        self._reparent(old, new)

    def delete(self, name: str) -> None:
        folder = self.folder(name)
        meta = self.read_meta(folder)
        trash = self.root / f".deleted-{name}-{secrets.token_hex(4)}"
        os.rename(folder, trash)
        shutil.rmtree(trash, ignore_errors=True)
        self._reparent(name, meta.get("parent"))


def _adopt_files(meta: dict[str, Any], folder: Path, identity: HostIdentity | None) -> None:
    """Make a snapshot's files, copied to `folder`, fit this sandbox. A snapshot saved
    before identities (its metadata has no "host_uid") may hold set-id bits: cleared (one
    saved since was copied without them, so reverts to it skip that walk). Files saved
    under another identity (root's, or another sandbox's) are given to this sandbox's
    inside user, who must own its home."""
    if "host_uid" not in meta:
        clear_set_id_bits(folder)
    if identity is not None and identity.separate and meta.get("host_uid") != identity.uid:
        give_tree_to(folder, identity)
