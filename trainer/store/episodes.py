"""Writing and reading episodes: streamed step by step (a rollout) or whole (an import).

A rollout opens an `EpisodeWriter` with `EpisodeStore.begin(...)`, appends each Step as it
happens (each append is one short transaction: frame file first, then the rows), and
finishes with a status and score. Readers see the episode, status "running", with the
steps written so far. A writer that dies leaves its episode "running" until the next open
of the workspace marks it "incomplete" (see writers.py).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

from agents.trajectory import (
    EPISODE_SOURCES,
    EPISODE_STATUSES,
    FINISHED_STATUSES,
    Episode,
    Step,
    new_episode_id,
)
from trainer.store.connection import Database
from trainer.store.errors import StoreError
from trainer.store.frames import FrameStore
from trainer.store.layout import WorkspaceLayout
from trainer.store.writers import WriterLock, writer_alive
from vm.actions import ActionError
from vm.actions import from_dict as action_from_dict
from vm.actions import to_dict as action_to_dict

ABANDONED_MESSAGE = "the writing process ended before the episode finished"

_STEP_COLUMNS = ("episode_id", "idx", "frame", "response", "actions", "parse_error",
                 "token_ids", "logprobs", "entropies", "prompt_ids", "reward", "done",
                 "info", "timings", "timestamp")
_INSERT_STEP = (f"INSERT INTO steps ({', '.join(_STEP_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_STEP_COLUMNS))})")
_STEP_COLUMNS_NO_TOKENS = ", ".join(
    c for c in _STEP_COLUMNS if c not in ("token_ids", "logprobs", "entropies", "prompt_ids"))


class EpisodeEnding:
    """How an episode writer ends: `fail`, and the context manager that finishes an
    episode "error" on an exception and "incomplete" when left without `finish()`.
    Shared by the store's writer and the Ray environment actors' remote writer."""

    finished: bool

    def finish(self, status: str = "done", score: float | None = None,
               error: str | None = None, final_screenshot: bytes | None = None,
               info: Mapping[str, Any] | None = None) -> None:
        raise NotImplementedError

    def fail(self, error: str) -> None:
        """End the episode with status "error" (the environment or model failed)."""
        self.finish(status="error", error=error)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.finished:
            return
        if exc is not None:
            self.finish(status="error", error=f"{type(exc).__name__}: {exc}")
        else:
            self.finish(status="incomplete", error="the writer closed without finishing")


class EpisodeWriter(EpisodeEnding):
    """Appends the steps of one running episode, then finishes it.

    Use as a context manager: leaving the block with an exception finishes the episode
    with status "error" and the exception's text; leaving it without `finish()` marks it
    "incomplete".
    """

    def __init__(self, store: EpisodeStore, episode_id: str, next_index: int = 0) -> None:
        self._store = store
        self.episode_id = episode_id
        self.next_index = next_index
        self.finished = False

    def append_step(self, step: Step, screenshot: bytes | None = None) -> Step:
        """Store one step (and its screenshot, when given); returns the step as stored.

        `step.index` must be the next index (0, 1, 2, ...). With `screenshot`, the PNG is
        stored once by content and `step.frame` is set to its id.
        """
        if self.finished:
            raise StoreError(f"episode {self.episode_id}: already finished; cannot append")
        if step.index != self.next_index:
            raise StoreError(f"episode {self.episode_id}: step index {step.index} given, "
                             f"expected {self.next_index}")
        frames = self._store.frames
        sha = frames.write_file(screenshot) if screenshot is not None else None
        if sha is not None:
            step = replace(step, frame=sha)
        row = _step_row(self.episode_id, step)
        database = self._store.database
        with _frames_must_exist(f"episode {self.episode_id} step {step.index}"), \
                database.write() as db:
            if sha is not None and screenshot is not None:
                frames.register(sha, screenshot)
            cursor = db.execute(
                "UPDATE episodes SET step_count = step_count + 1 "
                "WHERE id = ? AND status = 'running'", (self.episode_id,))
            if cursor.rowcount != 1:
                status = database.value("SELECT status FROM episodes WHERE id = ?",
                                        (self.episode_id,))
                raise StoreError(f"episode {self.episode_id}: cannot append a step, its "
                                 f"status is {status!r} (expected 'running')")
            db.conn.execute(_INSERT_STEP, row)
        self.next_index += 1
        return step

    def finish(self, status: str = "done", score: float | None = None,
               error: str | None = None, final_screenshot: bytes | None = None,
               info: Mapping[str, Any] | None = None) -> None:
        """End the episode with its evaluator score (or an error) and the final screen;
        `info`'s keys are added to the episode's info (replacing those it has)."""
        if status not in FINISHED_STATUSES:
            raise StoreError(f"episode {self.episode_id}: finish status must be one of "
                             f"{list(FINISHED_STATUSES)}, got {status!r}")
        frames = self._store.frames
        sha = frames.write_file(final_screenshot) if final_screenshot is not None else None
        with self._store.database.write() as db:
            if sha is not None and final_screenshot is not None:
                frames.register(sha, final_screenshot)
            db.execute(
                "UPDATE episodes SET status = ?, score = ?, error = ?, finished_at = ?, "
                "final_frame = COALESCE(?, final_frame), info = json_patch(info, ?) "
                "WHERE id = ?",
                (status, score, error, time.time(), sha,
                 _json(dict(info or {}), f"episode {self.episode_id} info"),
                 self.episode_id))
        self.finished = True

class EpisodeStore:
    """Episodes and their steps in the database."""

    def __init__(self, database: Database, layout: WorkspaceLayout, frames: FrameStore) -> None:
        self.database = database
        self.layout = layout
        self.frames = frames
        self._writer_lock = WriterLock(layout)

    # -- writing ----------------------------------------------------------------------

    def begin(self, task_id: str, *, environment: str = "", policy_version: int | None = None,
              run_id: str | None = None, source: str = "rollout", instruction: str = "",
              tags: Iterable[str] = (), episode_id: str | None = None,
              info: Mapping[str, Any] | None = None,
              created_at: float | None = None) -> EpisodeWriter:
        """Start a running episode and return the writer that streams its steps."""
        if not task_id:
            raise StoreError("an episode needs a task id")
        if source not in EPISODE_SOURCES:
            raise StoreError(f"episode source must be one of {list(EPISODE_SOURCES)}, "
                             f"got {source!r}")
        self._writer_lock.acquire()
        episode = Episode(
            id=episode_id or new_episode_id(), task_id=task_id, environment=environment,
            policy_version=policy_version, run_id=run_id, source=source,  # type: ignore[arg-type]
            instruction=instruction, tags=list(dict.fromkeys(tags)), status="running",
            created_at=time.time() if created_at is None else created_at,
            info=dict(info or {}),
        )
        with self.database.write():
            self._insert_episode(episode)
        return EpisodeWriter(self, episode.id)

    def resume(self, episode_id: str) -> EpisodeWriter:
        """A writer for an episode this process started and that is still running."""
        row = self.database.row("SELECT status, step_count, writer FROM episodes WHERE id = ?",
                                (episode_id,))
        if row is None:
            raise StoreError(f"no episode {episode_id!r}")
        if row["status"] != "running" or row["writer"] != self._writer_lock.id:
            raise StoreError(f"episode {episode_id}: not running in this process "
                             f"(status {row['status']!r})")
        return EpisodeWriter(self, episode_id, next_index=int(row["step_count"]))

    def save(self, episode: Episode) -> None:
        """Store a whole episode (an import, a human demonstration) in one transaction.

        Its steps' frames must already be stored (FrameStore.put). A "running" episode
        saved this way belongs to this process, like one started with `begin`.
        """
        for i, step in enumerate(episode.steps):
            if step.index != i:
                raise StoreError(f"episode {episode.id}: steps[{i}].index is {step.index}, "
                                 f"expected {i}")
        if episode.status == "running":
            self._writer_lock.acquire()
        rows = [_step_row(episode.id, s) for s in episode.steps]
        with _frames_must_exist(f"episode {episode.id}"), self.database.write() as db:
            self._insert_episode(episode)
            db.conn.executemany(_INSERT_STEP, rows)
            db.execute("UPDATE episodes SET step_count = ? WHERE id = ?",
                       (len(rows), episode.id))

    def _insert_episode(self, episode: Episode) -> None:
        if episode.status not in EPISODE_STATUSES:
            raise StoreError(f"episode {episode.id}: unknown status {episode.status!r}")
        db = self.database.db
        if db.execute("SELECT 1 FROM episodes WHERE id = ?", (episode.id,)).fetchone():
            raise StoreError(f"episode {episode.id} already exists")
        # A task seen for the first time gets a row; one with no instruction yet gets this one.
        db.execute("INSERT INTO tasks (id, instruction, created_at) VALUES (?, ?, ?) "
                   "ON CONFLICT (id) DO UPDATE SET instruction = excluded.instruction "
                   "WHERE tasks.instruction = ''",
                   (episode.task_id, episode.instruction, time.time()))
        tags = list(dict.fromkeys(episode.tags))
        db.execute(
            "INSERT INTO episodes (id, task_id, environment, policy_version, run_id, source, "
            "status, score, instruction, tags, created_at, finished_at, error, final_frame, "
            "info, writer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (episode.id, episode.task_id, episode.environment, episode.policy_version,
             episode.run_id, episode.source, episode.status, episode.score,
             episode.instruction, json.dumps(tags), episode.created_at, episode.finished_at,
             episode.error, episode.final_frame,
             _json(episode.info, f"episode {episode.id} info"),
             self._writer_lock.id if episode.status == "running" else None))
        db.conn.executemany("INSERT INTO episode_tags (episode_id, tag) VALUES (?, ?)",
                            [(episode.id, t) for t in tags])

    def set_tags(self, episode_id: str, tags: Iterable[str]) -> None:
        tags = list(dict.fromkeys(tags))
        with self.database.write() as db:
            self._require(episode_id)
            db.execute("UPDATE episodes SET tags = ? WHERE id = ?", (json.dumps(tags), episode_id))
            db.execute("DELETE FROM episode_tags WHERE episode_id = ?", (episode_id,))
            db.conn.executemany("INSERT INTO episode_tags (episode_id, tag) VALUES (?, ?)",
                                [(episode_id, t) for t in tags])

    def delete(self, episode_id: str) -> None:
        """Remove an episode with its steps, tags, annotations, pool and consumption rows.

        Frame files stay (other episodes may share them).
        """
        with self.database.write() as db:
            self._require(episode_id)
            for table in ("steps", "episode_tags", "annotations", "success_pool", "consumption"):
                db.execute(f"DELETE FROM {table} WHERE episode_id = ?", (episode_id,))
            db.execute("DELETE FROM episodes WHERE id = ?", (episode_id,))

    def mark_abandoned(self) -> list[str]:
        """Mark "running" episodes whose writer process is gone as "incomplete".

        Called on every open; the app may call it again while it stays open. Returns the
        ids of the episodes it marked.
        """
        writers = self.database.rows(
            "SELECT DISTINCT writer FROM episodes WHERE status = 'running'")
        marked: list[str] = []
        for row in writers:
            writer = row["writer"]
            if writer == self._writer_lock.id and self._writer_lock.held:
                continue
            if writer is not None and writer_alive(self.layout, writer):
                continue
            with self.database.write() as db:
                ids = [r[0] for r in db.execute(
                    "SELECT id FROM episodes WHERE status = 'running' AND writer IS ?",
                    (writer,))]
                db.execute(
                    "UPDATE episodes SET status = 'incomplete', finished_at = ?, "
                    "error = COALESCE(error, ?) WHERE status = 'running' AND writer IS ?",
                    (time.time(), ABANDONED_MESSAGE, writer))
            marked += ids
        return marked

    def close(self) -> None:
        """Mark this process's running episodes incomplete and drop the writer lock."""
        if not self._writer_lock.held:
            return
        with self.database.write() as db:
            db.execute(
                "UPDATE episodes SET status = 'incomplete', finished_at = ?, "
                "error = COALESCE(error, ?) WHERE status = 'running' AND writer = ?",
                (time.time(), ABANDONED_MESSAGE, self._writer_lock.id))
        self._writer_lock.release()

    # -- reading ----------------------------------------------------------------------

    def exists(self, episode_id: str) -> bool:
        return self.database.value("SELECT 1 FROM episodes WHERE id = ?", (episode_id,)) == 1

    def load(self, episode_id: str, steps: bool = True, tokens: bool = True) -> Episode:
        """An episode with its steps (screenshots stay on disk: `step.frame` names them).

        `tokens=False` skips token ids, log-probs and entropies (faster for display).
        """
        with self.database.read():
            row = self.database.row("SELECT * FROM episodes WHERE id = ?", (episode_id,))
            if row is None:
                raise StoreError(f"no episode {episode_id!r}")
            step_list = self.steps(episode_id, tokens=tokens) if steps else []
        return _episode_from_row(row, step_list)

    def steps(self, episode_id: str, start: int = 0, stop: int | None = None,
              tokens: bool = True) -> list[Step]:
        """Steps start..stop-1 of an episode, e.g. the ones written since the last poll."""
        columns = "*" if tokens else _STEP_COLUMNS_NO_TOKENS
        sql = f"SELECT {columns} FROM steps WHERE episode_id = ? AND idx >= ?"
        params: list[Any] = [episode_id, start]
        if stop is not None:
            sql += " AND idx < ?"
            params.append(stop)
        rows = self.database.rows(sql + " ORDER BY idx", params)
        return [_step_from_row(r, episode_id) for r in rows]

    def _require(self, episode_id: str) -> None:
        if not self.exists(episode_id):
            raise StoreError(f"no episode {episode_id!r}")


@contextmanager
def _frames_must_exist(where: str) -> Iterator[None]:
    """Turn the foreign-key failure of an unknown frame id into a message that says so."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if "FOREIGN KEY" not in str(exc):
            raise StoreError(f"{where}: {exc}") from None
        raise StoreError(f"{where}: refers to a frame that is not stored; store screenshots "
                         f"with FrameStore.put (or pass them to append_step)") from None


# ---------------------------------------------------------------------------------------
# Row encoding. Token arrays are packed little-endian (int32 ids, float64 log-probs) so
# a 1000-token response costs kilobytes, not a JSON parse.


def _json(value: Any, where: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{where}: not storable as JSON ({exc})") from None


def _pack(values: list[int] | list[float] | None, typecode: str, where: str) -> bytes | None:
    if values is None:
        return None
    try:
        packed = array(typecode, values)
    except (TypeError, OverflowError) as exc:
        raise StoreError(f"{where}: {exc}") from None
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _unpack(blob: bytes | None, typecode: str) -> list[Any] | None:
    if blob is None:
        return None
    values = array(typecode)
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def _step_row(episode_id: str, step: Step) -> tuple[Any, ...]:
    where = f"episode {episode_id} step {step.index}"
    return (
        episode_id, step.index, step.frame, step.response,
        json.dumps([action_to_dict(a) for a in step.actions], ensure_ascii=False),
        step.parse_error,
        _pack(step.token_ids, "i", f"{where} token_ids"),
        _pack(step.logprobs, "d", f"{where} logprobs"),
        _pack(step.entropies, "d", f"{where} entropies"),
        _pack(step.prompt_ids, "i", f"{where} prompt_ids"),
        float(step.reward), int(bool(step.done)),
        _json(step.info, f"{where} info"), _json(step.timings, f"{where} timings"),
        step.timestamp,
    )


def _step_from_row(row: Mapping[str, Any], episode_id: str) -> Step:
    where = f"episode {episode_id} step {row['idx']}"
    try:
        actions = [action_from_dict(a, f"{where} actions[{i}]")
                   for i, a in enumerate(json.loads(row["actions"]))]
    except (ActionError, ValueError) as exc:
        raise StoreError(f"{where}: stored actions are unreadable ({exc})") from None
    return Step(
        index=row["idx"], frame=row["frame"], response=row["response"], actions=actions,
        parse_error=row["parse_error"],
        token_ids=_unpack(row.get("token_ids"), "i"),
        logprobs=_unpack(row.get("logprobs"), "d"),
        entropies=_unpack(row.get("entropies"), "d"),
        prompt_ids=_unpack(row.get("prompt_ids"), "i"),
        reward=row["reward"], done=bool(row["done"]), info=json.loads(row["info"]),
        timings=json.loads(row["timings"]), timestamp=row["timestamp"],
    )


def _episode_from_row(row: Mapping[str, Any], steps: list[Step]) -> Episode:
    return Episode(
        id=row["id"], task_id=row["task_id"], environment=row["environment"],
        policy_version=row["policy_version"], steps=steps, score=row["score"],
        status=row["status"], source=row["source"], tags=json.loads(row["tags"]),
        run_id=row["run_id"], instruction=row["instruction"], created_at=row["created_at"],
        finished_at=row["finished_at"], error=row["error"], final_frame=row["final_frame"],
        info=json.loads(row["info"]),
    )
