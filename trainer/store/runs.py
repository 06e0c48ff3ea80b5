"""Runs, their checkpoints (policy versions), their metrics, and what each run consumed.

Consumption is how an episode is fed to training exactly once per run: `consume` records
(run, episode) pairs with INSERT OR IGNORE inside one transaction and returns only the
episodes this call claimed, so two trainer steps can never both take the same episode.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer.store.connection import Database
from trainer.store.errors import StoreError

RUN_STATUSES = ("created", "running", "done", "failed", "stopped")


@dataclass(frozen=True)
class Run:
    id: str
    name: str = ""
    kind: str = "train"  # train, rollout, eval
    config: str = ""  # the run configuration file's text (TOML)
    status: str = "created"
    created_at: float = 0.0
    finished_at: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Checkpoint:
    run_id: str
    policy_version: int
    path: str  # relative to the workspace, e.g. checkpoints/<run>/<version>
    created_at: float
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricPoint:
    name: str
    step: int
    value: float | None
    time: float


class RunStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    # -- runs -------------------------------------------------------------------------

    def create(self, run_id: str | None = None, *, name: str = "", kind: str = "train",
               config: str = "", info: Mapping[str, Any] | None = None) -> Run:
        run = Run(id=run_id or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6],
                  name=name, kind=kind, config=config, created_at=time.time(),
                  info=dict(info or {}))
        with self._database.write() as db:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)).fetchone():
                raise StoreError(f"run {run.id!r} already exists")
            db.table("runs").insert({"id": run.id, "name": run.name, "kind": run.kind,
                               "config": run.config, "status": run.status,
                               "created_at": run.created_at, "finished_at": None,
                               "info": json.dumps(run.info)})
        return run

    def get(self, run_id: str) -> Run:
        row = self._database.row("SELECT * FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise StoreError(f"no run {run_id!r}")
        return _run(row)

    def all(self) -> list[Run]:
        """All runs, newest first."""
        return [_run(r) for r in self._database.rows(
            "SELECT * FROM runs ORDER BY created_at DESC")]

    def set_status(self, run_id: str, status: str) -> None:
        if status not in RUN_STATUSES:
            raise StoreError(f"run {run_id}: status must be one of {list(RUN_STATUSES)}, "
                             f"got {status!r}")
        finished = time.time() if status in ("done", "failed", "stopped") else None
        with self._database.write() as db:
            cursor = db.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?",
                                (status, finished, run_id))
        if cursor.rowcount == 0:
            raise StoreError(f"no run {run_id!r}")

    # -- checkpoints ------------------------------------------------------------------

    def add_checkpoint(self, run_id: str, policy_version: int, path: str,
                       info: Mapping[str, Any] | None = None) -> Checkpoint:
        checkpoint = Checkpoint(run_id, policy_version, path, time.time(), dict(info or {}))
        with self._database.write() as db:
            self._require(run_id)
            if db.execute("SELECT 1 FROM checkpoints WHERE run_id = ? AND policy_version = ?",
                          (run_id, policy_version)).fetchone():
                raise StoreError(f"run {run_id}: policy version {policy_version} exists")
            db.execute("INSERT INTO checkpoints (run_id, policy_version, path, created_at, "
                       "info) VALUES (?, ?, ?, ?, ?)",
                       (run_id, policy_version, path, checkpoint.created_at,
                        json.dumps(checkpoint.info)))
        return checkpoint

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        rows = self._database.rows(
            "SELECT * FROM checkpoints WHERE run_id = ? ORDER BY policy_version", (run_id,))
        return [Checkpoint(r["run_id"], r["policy_version"], r["path"], r["created_at"],
                           json.loads(r["info"])) for r in rows]

    def latest_version(self, run_id: str) -> int | None:
        value = self._database.value(
            "SELECT MAX(policy_version) FROM checkpoints WHERE run_id = ?", (run_id,))
        return None if value is None else int(value)

    # -- metrics ----------------------------------------------------------------------

    def log_metrics(self, run_id: str, step: int, values: Mapping[str, float | None],
                    at: float | None = None) -> None:
        """Record several named values at one training step (one short transaction)."""
        now = time.time() if at is None else at
        rows = [(run_id, name, step, None if v is None else float(v), now)
                for name, v in values.items()]
        with self._database.write() as db:
            self._require(run_id)
            db.conn.executemany(
                "INSERT INTO metrics (run_id, name, step, value, time) VALUES (?, ?, ?, ?, ?)",
                rows)

    def metrics(self, run_id: str, names: Iterable[str] | None = None,
                after_step: int | None = None) -> list[MetricPoint]:
        """Metric points in step order; `after_step` fetches only what is new (live plots)."""
        sql = "SELECT name, step, value, time FROM metrics WHERE run_id = ?"
        params: list[Any] = [run_id]
        if names is not None:
            wanted = list(names)
            sql += f" AND name IN ({','.join('?' * len(wanted))})"
            params += wanted
        if after_step is not None:
            sql += " AND step > ?"
            params.append(after_step)
        return [MetricPoint(**r) for r in self._database.rows(sql + " ORDER BY step, rowid",
                                                              params)]

    # -- consumption ------------------------------------------------------------------

    def consume(self, run_id: str, episode_ids: Iterable[str], policy_version: int | None
                ) -> list[str]:
        """Record that `run_id` trained on these episodes; returns those newly consumed."""
        ids = list(dict.fromkeys(episode_ids))
        claimed: list[str] = []
        now = time.time()
        with self._database.write() as db:
            self._require(run_id)
            for episode_id in ids:
                if not db.execute("SELECT 1 FROM episodes WHERE id = ?",
                                  (episode_id,)).fetchone():
                    raise StoreError(f"run {run_id}: cannot consume unknown episode "
                                     f"{episode_id!r}")
                cursor = db.execute(
                    "INSERT OR IGNORE INTO consumption (run_id, episode_id, policy_version, "
                    "consumed_at) VALUES (?, ?, ?, ?)", (run_id, episode_id, policy_version, now))
                if cursor.rowcount:
                    claimed.append(episode_id)
        return claimed

    def unconsume(self, run_id: str, *, from_version: int | None = None,
                  episode_ids: Iterable[str] = ()) -> int:
        """Give episodes back to training: those consumed at `from_version` or later (an
        update lost with its process; its checkpoint was never written) and/or the given
        ids. Returns how many were given back."""
        removed = 0
        with self._database.write() as db:
            if from_version is not None:
                removed += db.execute(
                    "DELETE FROM consumption WHERE run_id = ? AND policy_version >= ?",
                    (run_id, from_version)).rowcount
            ids = list(episode_ids)
            if ids:
                removed += db.conn.executemany(
                    "DELETE FROM consumption WHERE run_id = ? AND episode_id = ?",
                    [(run_id, i) for i in ids]).rowcount
        return removed

    def consumed(self, run_id: str) -> list[str]:
        rows = self._database.rows(
            "SELECT episode_id FROM consumption WHERE run_id = ? ORDER BY consumed_at, rowid",
            (run_id,))
        return [r["episode_id"] for r in rows]

    def _require(self, run_id: str) -> None:
        if not self._database.value("SELECT 1 FROM runs WHERE id = ?", (run_id,)):
            raise StoreError(f"no run {run_id!r}")


def _run(row: dict[str, Any]) -> Run:
    return Run(id=row["id"], name=row["name"], kind=row["kind"], config=row["config"],
               status=row["status"], created_at=row["created_at"],
               finished_at=row["finished_at"], info=json.loads(row["info"]))
