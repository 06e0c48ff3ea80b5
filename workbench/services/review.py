"""People's review of episodes: step labels, corrected points, notes, verdicts, the pool.

The store keeps annotations append-only and treats the newest one of a step (or of the
episode) as its current state. Each change here therefore writes one annotation carrying
the whole new state (the label, correction and note that stay, plus the one that
changed), so the current state is always the newest row and the history stays readable.
A state with nothing left in it (a label cleared, no note) is written with the label
CLEARED, which exports treat as no judgement.
"""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from dataclasses import dataclass, replace

from trainer.store import Annotation, Store
from trainer.store.annotations import CLEARED_LABEL
from vm.actions import Action, Click, DragTo, MoveTo, Scroll

STEP_LABELS: tuple[str, ...] = ("correct", "wrong", "critical")
EPISODE_VERDICTS: tuple[str, ...] = ("accept", "reject")
CLEARED = CLEARED_LABEL


@dataclass(frozen=True)
class StepReview:
    label: str | None = None  # one of STEP_LABELS
    corrected_actions: list[Action] | None = None
    note: str = ""

    @property
    def empty(self) -> bool:
        return self.label is None and self.corrected_actions is None and not self.note


@dataclass(frozen=True)
class EpisodeReview:
    verdict: str | None = None  # one of EPISODE_VERDICTS
    score_override: float | None = None
    note: str = ""
    in_pool: bool = False


def _label(annotation: Annotation | None) -> str | None:
    if annotation is None or annotation.label in (None, CLEARED):
        return None
    return annotation.label


def with_point(actions: Sequence[Action], x: int, y: int) -> list[Action]:
    """The step's actions with its first pointer position moved to (x, y); a single click
    there when the step had no pointer action (e.g. it only typed)."""
    out = list(actions)
    for i, action in enumerate(out):
        match action:
            case Click(x=ax) if ax is not None:
                out[i] = replace(action, x=x, y=y)
                return out
            case Scroll(x=sx) if sx is not None:
                out[i] = replace(action, x=x, y=y)
                return out
            case MoveTo() | DragTo():
                out[i] = replace(action, x=x, y=y)
                return out
    return [Click(x, y)]


class Reviewer:
    """Reads and changes the review state of episodes in one store."""

    def __init__(self, store: Store, author: str | None = None) -> None:
        self.store = store
        self.author = author if author is not None else _user()

    # -- reading ----------------------------------------------------------------------

    def steps(self, episode_id: str) -> dict[int, StepReview]:
        """The current review of each step that has one."""
        out = {}
        for index, annotation in self.store.annotations.current(episode_id).items():
            if index is None:
                continue
            review = StepReview(_label(annotation), annotation.corrected_actions,
                                annotation.note)
            if not review.empty:
                out[index] = review
        return out

    def step(self, episode_id: str, index: int) -> StepReview:
        return self.steps(episode_id).get(index, StepReview())

    def episode(self, episode_id: str) -> EpisodeReview:
        current = self.store.annotations.current(episode_id).get(None)
        in_pool = self.store.pool.get(episode_id) is not None
        if current is None:
            return EpisodeReview(in_pool=in_pool)
        return EpisodeReview(_label(current), current.score, current.note, in_pool)

    # -- steps ------------------------------------------------------------------------

    def set_label(self, episode_id: str, index: int, label: str | None) -> StepReview:
        if label is not None and label not in STEP_LABELS:
            raise ValueError(f"step label must be one of {list(STEP_LABELS)}, got {label!r}")
        return self._write_step(episode_id, index,
                                replace(self.step(episode_id, index), label=label))

    def set_corrected_point(self, episode_id: str, index: int, x: int, y: int
                            ) -> StepReview:
        """The step should have acted at (x, y): its actions with that point."""
        step = self.store.episodes.steps(episode_id, index, index + 1, tokens=False)
        if not step:
            raise ValueError(f"episode {episode_id} has no step {index}")
        corrected = with_point(step[0].actions, x, y)
        return self._write_step(episode_id, index, replace(
            self.step(episode_id, index), corrected_actions=corrected))

    def clear_correction(self, episode_id: str, index: int) -> StepReview:
        return self._write_step(episode_id, index, replace(
            self.step(episode_id, index), corrected_actions=None))

    def set_step_note(self, episode_id: str, index: int, note: str) -> StepReview:
        return self._write_step(episode_id, index,
                                replace(self.step(episode_id, index), note=note))

    def _write_step(self, episode_id: str, index: int, review: StepReview) -> StepReview:
        self.store.annotations.add(
            episode_id, index, label=review.label if not review.empty else CLEARED,
            corrected_actions=review.corrected_actions, note=review.note,
            author=self.author)
        return review

    # -- episodes ---------------------------------------------------------------------

    def set_verdict(self, episode_id: str, verdict: str | None) -> EpisodeReview:
        if verdict is not None and verdict not in EPISODE_VERDICTS:
            raise ValueError(f"verdict must be one of {list(EPISODE_VERDICTS)}, "
                             f"got {verdict!r}")
        return self._write_episode(episode_id,
                                   replace(self.episode(episode_id), verdict=verdict))

    def set_score_override(self, episode_id: str, score: float | None) -> EpisodeReview:
        if score is not None and not 0.0 <= score <= 1.0:
            raise ValueError(f"score override must be within 0..1, got {score}")
        return self._write_episode(episode_id,
                                   replace(self.episode(episode_id), score_override=score))

    def set_episode_note(self, episode_id: str, note: str) -> EpisodeReview:
        return self._write_episode(episode_id, replace(self.episode(episode_id), note=note))

    def _write_episode(self, episode_id: str, review: EpisodeReview) -> EpisodeReview:
        empty = review.verdict is None and review.score_override is None and not review.note
        self.store.annotations.add(
            episode_id, None, label=CLEARED if empty else review.verdict,
            score=review.score_override, note=review.note, author=self.author)
        return review

    # -- the success pool ---------------------------------------------------------------

    def set_in_pool(self, episode_id: str, in_pool: bool, note: str = "") -> EpisodeReview:
        """Put the episode in (or take it out of) its task's success pool. Only finished
        episodes (status done) can go in; the store says so otherwise."""
        if in_pool:
            self.store.pool.add(episode_id, added_by=self.author, note=note)
        else:
            self.store.pool.remove(episode_id)
        return self.episode(episode_id)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""
