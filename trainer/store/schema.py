"""The database schema as explicit, numbered migrations (recorded in PRAGMA user_version).

Each migration runs in its own write transaction together with the version bump, so a
database is always at exactly one version. Never edit a released migration: add one.
"""

from __future__ import annotations

from collections.abc import Callable

from trainer.store.connection import Database, Handle
from trainer.store.errors import SchemaError


def _v1_trajectories(db: Handle) -> None:
    """Tasks, episodes, their steps and tags, and the frames (screenshots) they point at."""
    db.table("tasks").create(
        {"id": str, "instruction": str, "domain": str, "source": str, "config": str,
         "created_at": float},
        pk="id", not_null={"instruction", "domain", "source", "config"},
        defaults={"instruction": "", "domain": "", "source": "", "config": "{}"},
    )
    db.table("frames").create(
        {"sha": str, "width": int, "height": int, "size": int, "created_at": float},
        pk="sha",
    )
    db.table("episodes").create(
        {"id": str, "task_id": str, "environment": str, "policy_version": int,
         "run_id": str, "source": str, "status": str, "score": float, "instruction": str,
         "tags": str, "created_at": float, "finished_at": float, "error": str,
         "final_frame": str, "info": str, "writer": str},
        pk="id",
        not_null={"task_id", "environment", "source", "status", "instruction", "tags",
                  "created_at", "info"},
        defaults={"environment": "", "instruction": "", "tags": "[]", "info": "{}"},
        foreign_keys=[("task_id", "tasks", "id"), ("final_frame", "frames", "sha")],
    )
    db.table("steps").create(
        {"episode_id": str, "idx": int, "frame": str, "response": str, "actions": str,
         "parse_error": str, "token_ids": bytes, "logprobs": bytes, "entropies": bytes,
         "prompt_ids": bytes, "reward": float, "done": int, "info": str, "timings": str,
         "timestamp": float},
        pk=("episode_id", "idx"),
        not_null={"response", "actions", "reward", "done", "info", "timings"},
        defaults={"response": "", "actions": "[]", "reward": 0.0, "done": 0, "info": "{}",
                  "timings": "{}"},
        foreign_keys=[("episode_id", "episodes", "id"), ("frame", "frames", "sha")],
    )
    db.table("episode_tags").create(
        {"episode_id": str, "tag": str}, pk=("episode_id", "tag"),
        foreign_keys=[("episode_id", "episodes", "id")],
    )


def _v2_curation(db: Handle) -> None:
    """Annotations beside the model's output, and the success pool."""
    db.table("annotations").create(
        {"id": int, "episode_id": str, "step_index": int, "label": str,
         "corrected_actions": str, "score": float, "note": str, "author": str,
         "created_at": float},
        pk="id", not_null={"episode_id", "note", "author", "created_at"},
        defaults={"note": "", "author": ""},
        foreign_keys=[("episode_id", "episodes", "id")],
    )
    db.table("annotations").create_index(["episode_id", "step_index"])
    db.table("success_pool").create(
        {"episode_id": str, "task_id": str, "added_at": float, "added_by": str, "note": str},
        pk="episode_id", not_null={"task_id", "added_at", "added_by", "note"},
        defaults={"added_by": "", "note": ""},
        foreign_keys=[("episode_id", "episodes", "id"), ("task_id", "tasks", "id")],
    )
    db.table("success_pool").create_index(["task_id", "added_at"])


def _v3_runs(db: Handle) -> None:
    """Runs, their checkpoints (policy versions), metrics, and which episodes they consumed."""
    db.table("runs").create(
        {"id": str, "name": str, "kind": str, "config": str, "status": str,
         "created_at": float, "finished_at": float, "info": str},
        pk="id", not_null={"name", "kind", "config", "status", "created_at", "info"},
        defaults={"name": "", "config": "", "info": "{}"},
    )
    db.table("checkpoints").create(
        {"run_id": str, "policy_version": int, "path": str, "created_at": float, "info": str},
        pk=("run_id", "policy_version"), not_null={"path", "created_at", "info"},
        defaults={"info": "{}"},
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("metrics").create(
        {"run_id": str, "name": str, "step": int, "value": float, "time": float},
        not_null={"run_id", "name", "step", "time"},
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("metrics").create_index(["run_id", "name", "step"])
    db.table("consumption").create(
        {"run_id": str, "episode_id": str, "policy_version": int, "consumed_at": float},
        pk=("run_id", "episode_id"), not_null={"consumed_at"},
        foreign_keys=[("run_id", "runs", "id"), ("episode_id", "episodes", "id")],
    )


def _v4_query_speed(db: Handle) -> None:
    """Counters on episodes (backfilled) and the indexes the app's and trainer's queries use."""
    from sqlite_utils.db import DescIndex

    db.table("episodes").add_column("step_count", int, not_null_default=0)
    db.table("episodes").add_column("annotation_count", int, not_null_default=0)
    db.execute("UPDATE episodes SET step_count = "
               "(SELECT COUNT(*) FROM steps WHERE steps.episode_id = episodes.id)")
    db.execute("UPDATE episodes SET annotation_count = "
               "(SELECT COUNT(*) FROM annotations WHERE annotations.episode_id = episodes.id)")
    episodes = db.table("episodes")
    episodes.create_index(["created_at"])
    # Covers task statistics (newest N per task and version) without touching the table.
    episodes.create_index(["task_id", "policy_version", DescIndex("created_at"), "status",
                           "score"], index_name="idx_episodes_task_version_newest")
    episodes.create_index(["run_id", "policy_version", "created_at"])
    episodes.create_index(["source", "created_at"])
    episodes.create_index(["status", "created_at"])
    episodes.create_index(["score", "created_at"])
    episodes.create_index(["policy_version", "created_at"])
    db.table("episode_tags").create_index(["tag", "episode_id"])
    db.table("consumption").create_index(["episode_id"])


Migration = Callable[[Handle], None]
# (version, what it does): version n turns a database at version n-1 into version n.
MIGRATIONS: tuple[tuple[int, Migration], ...] = (
    (1, _v1_trajectories),
    (2, _v2_curation),
    (3, _v3_runs),
    (4, _v4_query_speed),
)
LATEST_VERSION = MIGRATIONS[-1][0]


def schema_version(database: Database) -> int:
    return int(database.value("PRAGMA user_version"))


def migrate(database: Database, up_to: int = LATEST_VERSION) -> list[int]:
    """Apply the missing migrations up to `up_to`; returns the versions applied.

    Safe when two processes open the same new workspace at once: each migration re-reads
    the version inside its write transaction.
    """
    current = schema_version(database)
    if current > LATEST_VERSION:
        raise SchemaError(
            f"{database.path}: schema version {current} is newer than this workbench "
            f"understands (latest {LATEST_VERSION}); update the workbench to open it"
        )
    applied: list[int] = []
    for version, step in MIGRATIONS:
        if version > up_to:
            break
        with database.write() as db:
            if schema_version(database) >= version:
                continue
            try:
                step(db)
            except Exception as exc:
                raise SchemaError(
                    f"{database.path}: migration {version} ({step.__doc__}) failed: {exc}"
                ) from exc
            db.execute(f"PRAGMA user_version = {version}")
            applied.append(version)
    return applied
