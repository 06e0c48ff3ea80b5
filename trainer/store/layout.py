"""Where things live inside a workspace folder (architecture.md, "The workspace on disk")."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

DB_NAME = "workbench.db"
_SHA_RE = re.compile(r"[0-9a-f]{64}")
WORKSPACE_ENV = "WORKBENCH_WORKSPACE"


@dataclass(frozen=True)
class WorkspaceLayout:
    """The paths of one workspace; `create()` makes the folders."""

    root: Path

    @property
    def db_path(self) -> Path:
        return self.root / DB_NAME

    @property
    def frames_dir(self) -> Path:
        return self.root / "frames"

    @property
    def frames_temp_dir(self) -> Path:
        return self.frames_dir / "tmp"

    @property
    def snapshots_dir(self) -> Path:
        return self.root / "snapshots"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def writers_dir(self) -> Path:
        """Lock files of the processes writing episodes now (see episodes.py)."""
        return self.root / ".writers"

    def frame_path(self, sha: str) -> Path:
        if not _SHA_RE.fullmatch(sha):
            raise ValueError(f"frame id {sha!r}: expected 64 lowercase hex digits (SHA-256)")
        return self.frames_dir / sha[:2] / f"{sha}.png"

    def checkpoint_dir(self, run_id: str, policy_version: int) -> Path:
        return self.checkpoints_dir / run_id / str(policy_version)

    def reference_dir(self, run_id: str) -> Path:
        """The run's KL reference when it is not the base model (the warmed-up policy)."""
        return self.checkpoints_dir / run_id / "kl-reference"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def create(self) -> None:
        for folder in (self.root, self.frames_dir, self.snapshots_dir, self.checkpoints_dir,
                       self.runs_dir, self.writers_dir):
            folder.mkdir(parents=True, exist_ok=True)


def default_workspace(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The workspace folder: `explicit`, else $WORKBENCH_WORKSPACE, else ./workspace."""
    if explicit:
        return Path(explicit)
    return Path(os.environ.get(WORKSPACE_ENV) or "workspace")
