"""People's judgements of episodes and steps, kept beside the model's output.

Annotations are only ever added: a step's response and actions, and an episode's score,
are never changed by annotating. The newest annotation of a step (or episode) is its
current state; older ones remain as history.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from trainer.store.connection import Database
from trainer.store.errors import StoreError
from vm.actions import Action
from vm.actions import from_dict as action_from_dict
from vm.actions import to_dict as action_to_dict

MAX_LABEL_LENGTH = 64
VERDICTS = ("accept", "reject")  # an episode's verdict: its newest episode-level label
CLEARED_LABEL = "unlabelled"  # a judgement withdrawn (the store needs something to record)


@dataclass(frozen=True)
class Annotation:
    episode_id: str
    step_index: int | None  # None: about the whole episode
    label: str | None = None  # e.g. "correct", "wrong", "critical"; "accept", "reject"
    corrected_actions: list[Action] | None = None  # what the step should have done
    score: float | None = None  # an episode-level override of the evaluator's score
    note: str = ""
    author: str = ""
    created_at: float = 0.0
    id: int | None = None  # assigned by the store

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "episode_id": self.episode_id, "step_index": self.step_index,
            "label": self.label,
            "corrected_actions": None if self.corrected_actions is None
            else [action_to_dict(a) for a in self.corrected_actions],
            "score": self.score, "note": self.note, "author": self.author,
            "created_at": self.created_at,
        }


class AnnotationStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    def add(self, episode_id: str, step_index: int | None = None, *, label: str | None = None,
            corrected_actions: list[Action] | None = None, score: float | None = None,
            note: str = "", author: str = "") -> Annotation:
        """Record a judgement of a step (step_index) or of the episode (None)."""
        where = f"annotation of episode {episode_id}" + (
            f" step {step_index}" if step_index is not None else "")
        if label is not None and not (0 < len(label) <= MAX_LABEL_LENGTH):
            raise StoreError(f"{where}: label must be 1..{MAX_LABEL_LENGTH} characters")
        if step_index is None and corrected_actions is not None:
            raise StoreError(f"{where}: corrected actions belong to a step; give step_index")
        if step_index is not None and score is not None:
            raise StoreError(f"{where}: a score override belongs to the episode; "
                             f"leave step_index out")
        if score is not None and not 0.0 <= score <= 1.0:
            raise StoreError(f"{where}: score must be within 0..1, got {score}")
        if label is None and corrected_actions is None and score is None and not note:
            raise StoreError(f"{where}: give a label, corrected actions, a score or a note")
        corrected = None if corrected_actions is None else json.dumps(
            [action_to_dict(a) for a in corrected_actions], ensure_ascii=False)
        now = time.time()
        with self._database.write() as db:
            step_count = db.execute("SELECT step_count FROM episodes WHERE id = ?",
                                    (episode_id,)).fetchone()
            if step_count is None:
                raise StoreError(f"{where}: no such episode")
            if step_index is not None and not 0 <= step_index < step_count[0]:
                raise StoreError(f"{where}: the episode has {step_count[0]} steps")
            cursor = db.execute(
                "INSERT INTO annotations (episode_id, step_index, label, corrected_actions, "
                "score, note, author, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (episode_id, step_index, label, corrected, score, note, author, now))
            db.execute("UPDATE episodes SET annotation_count = annotation_count + 1 "
                       "WHERE id = ?", (episode_id,))
        return Annotation(episode_id, step_index, label, corrected_actions, score, note,
                          author, now, cursor.lastrowid)

    def for_episode(self, episode_id: str) -> list[Annotation]:
        """All annotations of an episode and its steps, oldest first."""
        rows = self._database.rows(
            "SELECT * FROM annotations WHERE episode_id = ? ORDER BY id", (episode_id,))
        return [_from_row(r) for r in rows]

    def current(self, episode_id: str) -> dict[int | None, Annotation]:
        """The newest annotation per step (key: step index; None for the episode)."""
        latest: dict[int | None, Annotation] = {}
        for annotation in self.for_episode(episode_id):
            latest[annotation.step_index] = annotation
        return latest


def _from_row(row: dict[str, Any]) -> Annotation:
    corrected = None
    if row["corrected_actions"] is not None:
        corrected = [action_from_dict(a, f"annotation {row['id']} corrected_actions[{i}]")
                     for i, a in enumerate(json.loads(row["corrected_actions"]))]
    return Annotation(
        episode_id=row["episode_id"], step_index=row["step_index"], label=row["label"],
        corrected_actions=corrected, score=row["score"], note=row["note"],
        author=row["author"], created_at=row["created_at"], id=row["id"],
    )
