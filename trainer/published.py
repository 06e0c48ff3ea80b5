"""A run's published policy versions on disk: runs/<run>/published/v<N>/adapter, the
folders vLLM loads LoRA adapters from (trainer/vllm_rollouts.py, the rollout service's
VLLMWorker).

Every change to the tree is a rename, so a crash at any point leaves each v<N> either
whole or absent, never half-written or half-deleted:

- `write`: the adapter is saved beside the tree under `.v<N>.partial-<id>` and renamed to
  v<N> (a folder left for v<N> by a stopped run is first renamed away, then removed);
- `remove`: v<N> is renamed to `.v<N>.removing-<id>`, then deleted;
- `sweep`: what a crashed process left (partial and removing folders) and every version
  not kept is removed; a run calls it once it has published the version it starts from.

Which versions to remove is the caller's decision: a lock-step run removes the previous
version after publishing the next; an asynchronous run removes a version when the rollout
service retires it (no episode and no call holds it, and it is not the newest:
`RolloutService(on_retired=)`).
"""

from __future__ import annotations

import logging
import re
import shutil
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ADAPTER = "adapter"  # the adapter folder's name inside a version's folder
_VERSION = re.compile(r"v(\d+)")
_LEFTOVER = re.compile(r"\.v\d+\.(partial|removing)-[0-9a-f]+")


def write_adapter_folder(model: Any, version_folder: Path) -> Path:
    """Save the trained LoRA adapter (not the KL reference's) to `version_folder`/adapter,
    atomically: written beside it under a temporary name, then renamed into place, so a
    worker reading the folder (vLLM loads it on its first request) never sees half of
    it, and a killed process leaves no partial version. A folder left by a stopped run
    for the same version is replaced. Returns the adapter folder."""
    from trainer.model import TRAINED_ADAPTER

    version_folder.parent.mkdir(parents=True, exist_ok=True)
    partial = version_folder.with_name(f".{version_folder.name}.partial-{_tag()}")
    try:
        model.save_pretrained(partial / ADAPTER, selected_adapters=[TRAINED_ADAPTER])
        old = _detach(version_folder)
        partial.rename(version_folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return version_folder / ADAPTER


def _tag() -> str:
    return uuid.uuid4().hex[:12]


def _detach(version_folder: Path) -> Path | None:
    """Rename `version_folder` out of the versions' names (None: there is none)."""
    detached = version_folder.with_name(f".{version_folder.name}.removing-{_tag()}")
    try:
        version_folder.rename(detached)
    except FileNotFoundError:
        return None
    return detached


class PublishedVersions:
    """The version folders under `folder` (runs/<run>/published)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, version: int) -> Path:
        """Version `version`'s folder (its adapter is in `ADAPTER` inside)."""
        return self.folder / f"v{version}"

    def write(self, model: Any, version: int) -> Path:
        """Publish `model`'s trained adapter as `version` (see `write_adapter_folder`);
        the adapter folder."""
        return write_adapter_folder(model, self.path(version))

    def versions(self) -> list[int]:
        """The versions whose folders are in place, oldest first."""
        if not self.folder.is_dir():
            return []
        found = (_VERSION.fullmatch(p.name) for p in self.folder.iterdir() if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m is not None)

    def remove(self, version: int) -> None:
        """Remove `version`'s folder: renamed away first, so it is whole or gone."""
        detached = _detach(self.path(version))
        if detached is None:
            return
        shutil.rmtree(detached, ignore_errors=True)
        log.debug("published version %d removed from %s", version, self.folder)

    def sweep(self, keep: Collection[int]) -> list[int]:
        """Remove what a crashed process left half-written or half-deleted, and every
        version not in `keep`; the versions removed."""
        if not self.folder.is_dir():
            return []
        for leftover in self.folder.iterdir():
            if _LEFTOVER.fullmatch(leftover.name):
                shutil.rmtree(leftover, ignore_errors=True)
        removed = [v for v in self.versions() if v not in keep]
        for version in removed:
            self.remove(version)
        return removed
