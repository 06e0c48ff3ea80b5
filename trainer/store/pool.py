"""The success pool: episodes people (or the trainer) vouch for as successes of their task.

The trainer draws replayed and pre-collected successes from it (algorithms.md: ARPO replay,
DART pre-collected successes); the app shows which tasks have none yet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from trainer.store.connection import Database
from trainer.store.errors import StoreError


@dataclass(frozen=True)
class PoolEntry:
    episode_id: str
    task_id: str
    score: float | None  # the episode's evaluator score
    source: str  # the episode's source: rollout, oracle, human, import, replay
    policy_version: int | None
    added_at: float
    added_by: str
    note: str


class SuccessPool:
    def __init__(self, database: Database) -> None:
        self._database = database

    def add(self, episode_id: str, *, added_by: str = "", note: str = "") -> PoolEntry:
        """Put a finished episode in its task's pool (again: no change)."""
        with self._database.write() as db:
            row = db.execute("SELECT task_id, status FROM episodes WHERE id = ?",
                             (episode_id,)).fetchone()
            if row is None:
                raise StoreError(f"success pool: no episode {episode_id!r}")
            if row[1] != "done":
                raise StoreError(f"success pool: episode {episode_id} has status {row[1]!r}; "
                                 f"only finished ('done') episodes can be successes")
            db.execute("INSERT OR IGNORE INTO success_pool (episode_id, task_id, added_at, "
                       "added_by, note) VALUES (?, ?, ?, ?, ?)",
                       (episode_id, row[0], time.time(), added_by, note))
        entry = self.get(episode_id)
        assert entry is not None
        return entry

    def remove(self, episode_id: str) -> bool:
        """Take an episode out of the pool; False if it was not in it."""
        with self._database.write() as db:
            cursor = db.execute("DELETE FROM success_pool WHERE episode_id = ?", (episode_id,))
        return cursor.rowcount > 0

    def get(self, episode_id: str) -> PoolEntry | None:
        rows = self._entries("WHERE p.episode_id = ?", [episode_id])
        return rows[0] if rows else None

    def entries(self, task_id: str | None = None, limit: int | None = None) -> list[PoolEntry]:
        """Pool members, newest first; of one task when `task_id` is given."""
        where, params = ("WHERE p.task_id = ?", [task_id]) if task_id is not None else ("", [])
        return self._entries(where, params, limit)

    def counts(self) -> dict[str, int]:
        """How many pooled successes each task has (tasks with none are absent)."""
        rows = self._database.rows(
            "SELECT task_id, COUNT(*) AS n FROM success_pool GROUP BY task_id")
        return {r["task_id"]: r["n"] for r in rows}

    def tasks_without_success(self) -> list[str]:
        """Known tasks with no pooled success: the hard ones that need a demonstration."""
        rows = self._database.rows(
            "SELECT id FROM tasks WHERE id NOT IN (SELECT task_id FROM success_pool) "
            "ORDER BY id")
        return [r["id"] for r in rows]

    def _entries(self, where: str, params: list[Any],
                 limit: int | None = None) -> list[PoolEntry]:
        sql = (
            "SELECT p.episode_id, p.task_id, e.score, e.source, e.policy_version, p.added_at, "
            "p.added_by, p.note FROM success_pool p JOIN episodes e ON e.id = p.episode_id "
            f"{where} ORDER BY p.added_at DESC, p.episode_id"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params = [*params, limit]
        return [PoolEntry(**r) for r in self._database.rows(sql, params)]
