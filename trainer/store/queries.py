"""The questions the app and the trainer ask of the store, answered with indexed SQL.

- the episode table: filter and sort, a page of summaries, or all matching ids (the
  app's table model holds ids and fetches rows lazily);
- task statistics: success rate over the newest N episodes per task (and policy version);
- unconsumed episodes of a run within a window of policy versions, and claiming them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.trajectory import SETUP_FAILED_INFO
from trainer.store.annotations import VERDICTS
from trainer.store.connection import Database
from trainer.store.errors import StoreError


@dataclass(frozen=True)
class EpisodeFilter:
    """Which episodes to show; an empty field does not filter."""

    task_ids: Sequence[str] = ()
    sources: Sequence[str] = ()
    statuses: Sequence[str] = ()
    run_ids: Sequence[str] = ()
    environments: Sequence[str] = ()
    min_version: int | None = None
    max_version: int | None = None
    min_score: float | None = None
    max_score: float | None = None
    tags: Sequence[str] = ()  # episodes carrying all of these tags
    annotated: bool | None = None  # True: with annotations; False: without
    in_pool: bool | None = None  # True: in the success pool; False: not
    text: str = ""  # a case-insensitive substring of the instruction
    verdict: str | None = None  # "accept", "reject", "reviewed" (either), "unreviewed"
    reviewer: str | None = None  # episodes someone of this name annotated


@dataclass(frozen=True)
class EpisodeSummary:
    """One row of the episode table (no steps)."""

    id: str
    task_id: str
    instruction: str
    environment: str
    source: str
    status: str
    score: float | None
    policy_version: int | None
    run_id: str | None
    tags: list[str]
    step_count: int
    annotation_count: int
    in_pool: bool
    created_at: float
    finished_at: float | None
    error: str | None
    verdict: str | None = None  # "accept" or "reject": the newest episode-level verdict
    reviewer: str = ""  # who gave it
    # setup commands that failed unexcused (agents.trajectory.SETUP_FAILED_INFO): the
    # episode did not start from its task's state
    setup_failed: int = 0


@dataclass(frozen=True)
class TaskStats:
    task_id: str
    policy_version: int | None  # None when statistics are over all versions (or humans')
    episodes: int  # how many of the newest episodes were counted (at most N)
    successes: int
    success_rate: float
    mean_score: float
    newest_at: float
    mean_success_steps: float | None = None  # mean step count of the counted successes


@dataclass(frozen=True)
class WorkspaceStats:
    episodes_by_status: dict[str, int]
    episodes_by_source: dict[str, int]
    steps: int
    frames: int
    frame_bytes: int
    tasks: int
    annotations: int
    pool: int
    runs: int


SORT_COLUMNS: dict[str, str] = {
    "created_at": "e.created_at",
    "finished_at": "e.finished_at",
    "score": "e.score",
    "task_id": "e.task_id",
    "step_count": "e.step_count",
    "policy_version": "e.policy_version",
    "status": "e.status",
    "source": "e.source",
}

# The newest episode-level annotation's label and author (an index on episode_id and
# step_index serves it): the episode's verdict, when that label is one.
_NEWEST_VERDICT = ("(SELECT a.{column} FROM annotations a WHERE a.episode_id = e.id AND "
                   "a.step_index IS NULL ORDER BY a.id DESC LIMIT 1)")
_SUMMARY_COLUMNS = (
    "e.id, e.task_id, e.instruction, e.environment, e.source, e.status, e.score, "
    "e.policy_version, e.run_id, e.tags, e.step_count, e.annotation_count, "
    "EXISTS (SELECT 1 FROM success_pool p WHERE p.episode_id = e.id) AS in_pool, "
    "e.created_at, e.finished_at, e.error, "
    f"{_NEWEST_VERDICT.format(column='label')} AS verdict, "
    f"{_NEWEST_VERDICT.format(column='author')} AS reviewer, "
    f"COALESCE(json_extract(e.info, '$.{SETUP_FAILED_INFO}'), 0) AS setup_failed"
)


def _where(selection: EpisodeFilter | None) -> tuple[str, list[Any]]:
    """The WHERE clause (or "") and its parameters for a filter."""
    if selection is None:
        return "", []
    clauses: list[str] = []
    params: list[Any] = []

    def one_of(column: str, values: Sequence[Any]) -> None:
        values = list(values)
        if values:
            clauses.append(f"{column} IN ({','.join('?' * len(values))})")
            params.extend(values)

    one_of("e.task_id", selection.task_ids)
    one_of("e.source", selection.sources)
    one_of("e.status", selection.statuses)
    one_of("e.run_id", selection.run_ids)
    one_of("e.environment", selection.environments)
    for column, op, value in (("e.policy_version", ">=", selection.min_version),
                              ("e.policy_version", "<=", selection.max_version),
                              ("e.score", ">=", selection.min_score),
                              ("e.score", "<=", selection.max_score)):
        if value is not None:
            clauses.append(f"{column} {op} ?")
            params.append(value)
    for tag in dict.fromkeys(selection.tags):
        clauses.append("e.id IN (SELECT episode_id FROM episode_tags WHERE tag = ?)")
        params.append(tag)
    if selection.annotated is not None:
        clauses.append("e.annotation_count > 0" if selection.annotated
                       else "e.annotation_count = 0")
    if selection.in_pool is not None:
        clauses.append(("" if selection.in_pool else "NOT ")
                       + "EXISTS (SELECT 1 FROM success_pool p WHERE p.episode_id = e.id)")
    if selection.verdict is not None:
        newest = _NEWEST_VERDICT.format(column="label")
        verdicts = {"accept": ["accept"], "reject": ["reject"],
                    "reviewed": list(VERDICTS)}.get(selection.verdict)
        if verdicts is not None:
            clauses.append(f"{newest} IN ({','.join('?' * len(verdicts))})")
            params.extend(verdicts)
        elif selection.verdict == "unreviewed":
            clauses.append(f"COALESCE({newest}, '') NOT IN ({','.join('?' * len(VERDICTS))})")
            params.extend(VERDICTS)
        else:
            raise StoreError(f"verdict filter: expected accept, reject, reviewed or "
                             f"unreviewed, got {selection.verdict!r}")
    if selection.reviewer:
        clauses.append("e.id IN (SELECT episode_id FROM annotations WHERE author = ?)")
        params.append(selection.reviewer)
    if selection.text:
        escaped = (selection.text.replace("\\", "\\\\").replace("%", "\\%")
                   .replace("_", "\\_"))
        clauses.append("e.instruction LIKE ? ESCAPE '\\'")
        params.append(f"%{escaped}%")
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _order(sort: str, descending: bool) -> str:
    column = SORT_COLUMNS.get(sort)
    if column is None:
        raise StoreError(f"cannot sort episodes by {sort!r}; choose one of "
                         f"{sorted(SORT_COLUMNS)}")
    direction = "DESC" if descending else "ASC"
    # rowid breaks ties so that pages are stable (and indexes still serve the order).
    return f" ORDER BY {column} {direction}, e.rowid {direction}"


def _summary(row: dict[str, Any]) -> EpisodeSummary:
    verdict = row["verdict"] if row["verdict"] in VERDICTS else None
    return EpisodeSummary(**{**row, "tags": json.loads(row["tags"]),
                             "setup_failed": _count(row["setup_failed"]),
                             "in_pool": bool(row["in_pool"]), "verdict": verdict,
                             "reviewer": (row["reviewer"] or "") if verdict else ""})


def _count(value: Any) -> int:
    """A count kept in an episode's info: an int, else 0 (a hand-edited info)."""
    return value if isinstance(value, int) and value >= 0 else 0


class EpisodeQueries:
    def __init__(self, database: Database) -> None:
        self._database = database

    # -- the episode table ------------------------------------------------------------

    def page(self, selection: EpisodeFilter | None = None, *, sort: str = "created_at",
             descending: bool = True, limit: int = 100, offset: int = 0
             ) -> list[EpisodeSummary]:
        """One page of episode summaries."""
        where, params = _where(selection)
        sql = (f"SELECT {_SUMMARY_COLUMNS} FROM episodes e{where}{_order(sort, descending)}"
               " LIMIT ? OFFSET ?")
        return [_summary(r) for r in self._database.rows(sql, [*params, limit, offset])]

    def count(self, selection: EpisodeFilter | None = None) -> int:
        where, params = _where(selection)
        return int(self._database.value(f"SELECT COUNT(*) FROM episodes e{where}", params))

    def ids(self, selection: EpisodeFilter | None = None, *, sort: str = "created_at",
            descending: bool = True) -> list[str]:
        """All matching episode ids in order (for a table model that loads rows lazily)."""
        where, params = _where(selection)
        sql = f"SELECT e.id FROM episodes e{where}{_order(sort, descending)}"
        with self._database.read() as db:
            return [r[0] for r in db.conn.execute(sql, params)]

    def summaries(self, episode_ids: Sequence[str]) -> list[EpisodeSummary]:
        """Summaries of these episodes, in the given order (unknown ids are left out)."""
        found: dict[str, EpisodeSummary] = {}
        ids = list(episode_ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            sql = (f"SELECT {_SUMMARY_COLUMNS} FROM episodes e "
                   f"WHERE e.id IN ({','.join('?' * len(chunk))})")
            for row in self._database.rows(sql, chunk):
                found[row["id"]] = _summary(row)
        return [found[i] for i in ids if i in found]

    # -- task statistics --------------------------------------------------------------

    def task_stats(self, newest: int = 20, *, by_version: bool = True,
                   run_id: str | None = None, min_version: int | None = None,
                   task_ids: Sequence[str] = (), success_threshold: float = 0.5
                   ) -> list[TaskStats]:
        """Success rate over the newest `newest` scored episodes per task (and version).

        An episode is a success when its score >= `success_threshold`.
        """
        # "+status": keep the planner off the status index (status is not selective);
        # the covering task/version/newest index then serves the whole query.
        clauses = ["+status = 'done'", "score IS NOT NULL"]
        params: list[Any] = []
        if run_id is not None:
            clauses.append("run_id = ?")
            params.append(run_id)
        if min_version is not None:
            clauses.append("policy_version >= ?")
            params.append(min_version)
        if task_ids:
            clauses.append(f"task_id IN ({','.join('?' * len(task_ids))})")
            params.extend(task_ids)
        partition = "task_id, policy_version" if by_version else "task_id"
        version = "policy_version" if by_version else "NULL"
        sql = f"""
            WITH ranked AS (
                SELECT task_id, policy_version, score, created_at, step_count,
                       ROW_NUMBER() OVER (PARTITION BY {partition}
                                          ORDER BY created_at DESC) AS newness
                FROM episodes WHERE {' AND '.join(clauses)}
            )
            SELECT task_id, {version} AS policy_version, COUNT(*) AS episodes,
                   SUM(score >= ?) AS successes, AVG(score) AS mean_score,
                   MAX(created_at) AS newest_at,
                   AVG(CASE WHEN score >= ? THEN step_count END) AS mean_success_steps
            FROM ranked WHERE newness <= ?
            GROUP BY {partition}
            ORDER BY task_id, policy_version
        """
        rows = self._database.rows(sql, [*params, success_threshold, success_threshold,
                                         newest])
        return [TaskStats(task_id=r["task_id"], policy_version=r["policy_version"],
                          episodes=r["episodes"], successes=r["successes"],
                          success_rate=r["successes"] / r["episodes"],
                          mean_score=r["mean_score"], newest_at=r["newest_at"],
                          mean_success_steps=r["mean_success_steps"])
                for r in rows]

    # -- training input ---------------------------------------------------------------

    def unconsumed(self, run_id: str, *, min_version: int | None = None,
                   max_version: int | None = None, limit: int | None = None,
                   statuses: Sequence[str] = ("done",)) -> list[EpisodeSummary]:
        """The run's episodes not yet trained on, made by a policy version in the window,
        oldest first."""
        sql, params = self._unconsumed_sql(_SUMMARY_COLUMNS, run_id, min_version,
                                           max_version, limit, statuses)
        return [_summary(r) for r in self._database.rows(sql, params)]

    def claim_unconsumed(self, run_id: str, policy_version: int | None, *,
                         min_version: int | None = None, max_version: int | None = None,
                         limit: int | None = None, statuses: Sequence[str] = ("done",)
                         ) -> list[str]:
        """Atomically pick unconsumed episodes (as `unconsumed`) and mark them consumed by
        `run_id` at `policy_version`; returns their ids. No episode is claimed twice."""
        sql, params = self._unconsumed_sql("e.id", run_id, min_version, max_version, limit,
                                           statuses)
        now = time.time()
        with self._database.write() as db:
            if not db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise StoreError(f"no run {run_id!r}")
            ids = [r[0] for r in db.conn.execute(sql, params)]
            db.conn.executemany(
                "INSERT INTO consumption (run_id, episode_id, policy_version, consumed_at) "
                "VALUES (?, ?, ?, ?)", [(run_id, i, policy_version, now) for i in ids])
        return ids

    @staticmethod
    def _unconsumed_sql(columns: str, run_id: str, min_version: int | None,
                        max_version: int | None, limit: int | None,
                        statuses: Sequence[str]) -> tuple[str, list[Any]]:
        clauses = ["e.run_id = ?", f"e.status IN ({','.join('?' * len(statuses))})",
                   "NOT EXISTS (SELECT 1 FROM consumption c "
                   "WHERE c.run_id = ? AND c.episode_id = e.id)"]
        params: list[Any] = [run_id, *statuses, run_id]
        if min_version is not None:
            clauses.append("e.policy_version >= ?")
            params.append(min_version)
        if max_version is not None:
            clauses.append("e.policy_version <= ?")
            params.append(max_version)
        sql = (f"SELECT {columns} FROM episodes e WHERE {' AND '.join(clauses)} "
               "ORDER BY e.created_at, e.rowid")
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return sql, params

    # -- the whole workspace ----------------------------------------------------------

    def workspace_stats(self) -> WorkspaceStats:
        with self._database.read():
            by_status = {r["status"]: r["n"] for r in self._database.rows(
                "SELECT status, COUNT(*) AS n FROM episodes GROUP BY status ORDER BY status")}
            by_source = {r["source"]: r["n"] for r in self._database.rows(
                "SELECT source, COUNT(*) AS n FROM episodes GROUP BY source ORDER BY source")}
            frames = self._database.row(
                "SELECT COUNT(*) AS n, COALESCE(SUM(size), 0) AS bytes FROM frames")
            assert frames is not None

            def count(table: str) -> int:
                return int(self._database.value(f"SELECT COUNT(*) FROM {table}"))

            return WorkspaceStats(
                episodes_by_status=by_status, episodes_by_source=by_source,
                steps=int(self._database.value(
                    "SELECT COALESCE(SUM(step_count), 0) FROM episodes")),
                frames=frames["n"], frame_bytes=frames["bytes"], tasks=count("tasks"),
                annotations=count("annotations"), pool=count("success_pool"),
                runs=count("runs"))
