"""A person's demonstration of a task, recorded as an episode of source "human".

`start(task)` sets the desktop up as a rollout does (`DesktopEnv.reset`: back to the base
snapshot, then the task's setup); every Action the person performs goes through
`DesktopEnv.step` and becomes a step with the screen it was performed on; `finish()`
adds the closing DONE (or FAIL) step, scores the episode with the task's evaluator and
stores it; `discard()` throws it away.

Steps are stored in the typed Action form rollouts store, their response the pyautogui
code of the actions (as the oracle's and the human policy's are). It is not UI-TARS text
on purpose: UI-TARS points depend on the prompt's image budget, and trainer.samples
writes the UI-TARS response from the actions with the training run's own mapping.

A step stays open until the next one starts, so that what a person does in several input
events and a model does in one call is one step: typed characters in a row are one
TypeText, a drag's MoveTo and DragTo one drag.

Qt-free and synchronous; the app calls it from one worker thread, in order (calls are
serialised by a lock all the same).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agents.rollout import command_failures, evaluation_note
from agents.trajectory import Step
from trainer.curation import CurationConfig
from trainer.store import EpisodeWriter, Store
from trainer.store.pool import PoolEntry
from vm.actions import (
    ACTION_TYPES,
    Action,
    Done,
    DragTo,
    Fail,
    MoveTo,
    TypeText,
    actions_to_pyautogui,
)
from vm.env import DesktopEnv

Ending = Literal["done", "fail"]
# An episode with at least this score is a success (the trainer's default threshold).
SUCCESS_THRESHOLD = CurationConfig().success_threshold


class DemoError(RuntimeError):
    """A recorder call out of turn (record before start, start while recording) or with
    input that is not an Action; the message says which."""


@dataclass(frozen=True)
class DemoResult:
    """A finished demonstration as stored."""

    episode_id: str
    task_id: str
    status: str  # "done", or "error" when the evaluator or the desktop failed
    score: float | None  # the evaluator's score; None when it could not run
    steps: int  # stored steps, the closing DONE/FAIL step included
    ending: Ending  # how the person ended it
    error: str | None = None
    success_threshold: float = SUCCESS_THRESHOLD

    @property
    def succeeded(self) -> bool:
        return (self.status == "done" and self.score is not None
                and self.score >= self.success_threshold)


@dataclass
class _OpenStep:
    """The step being recorded: its screen and the actions performed on it so far."""

    index: int
    screenshot: bytes
    actions: list[Action]
    started: float  # wall clock of its first action
    env_seconds: float = 0.0


class DemoRecorder:
    """Records demonstrations on `env` into `store`, one at a time."""

    def __init__(self, env: DesktopEnv, store: Store, *, environment: str = "sandbox",
                 tags: Sequence[str] = ("demonstration",),
                 success_threshold: float = SUCCESS_THRESHOLD) -> None:
        self.env = env
        self.store = store
        self.environment = environment
        self.tags = list(tags)
        self.success_threshold = success_threshold
        self.task: Any = None
        # the setup commands of the task being recorded that failed (FailedCommand)
        self.setup_failures: list[Any] = []
        self._writer: EpisodeWriter | None = None
        self._open: _OpenStep | None = None
        self._lock = threading.RLock()

    # -- state ----------------------------------------------------------------------------

    @property
    def recording(self) -> bool:
        return self._writer is not None

    @property
    def setup_warning(self) -> str:
        """What a person recording must know before starting: the setup commands that
        failed with no mark to excuse them (the desktop is not in the task's state); ""
        when there are none."""
        from vm.tasks.setup_report import unexcused_setup

        failed = unexcused_setup(self.setup_failures)
        if not failed:
            return ""
        lines = "; ".join(f.describe() for f in failed)
        return (f"setup incomplete: {len(failed)} command{'s' if len(failed) > 1 else ''} "
                f"failed, so the desktop is not as the task expects ({lines})")

    @property
    def episode_id(self) -> str | None:
        return self._writer.episode_id if self._writer is not None else None

    @property
    def step_count(self) -> int:
        """Steps so far, the open one included."""
        stored = self._writer.next_index if self._writer is not None else 0
        return stored + (1 if self._open is not None else 0)

    # -- recording ------------------------------------------------------------------------

    def start(self, task: Any) -> str:
        """Set the desktop up for `task` (a vm.tasks.Task) and open its episode; returns
        the episode id. A failing setup raises (TaskSetupError, EnvironmentDead) and
        stores nothing."""
        with self._lock:
            if self._writer is not None:
                raise DemoError(f"already recording episode {self._writer.episode_id} of "
                                f"task {self.task.id}; finish or discard it first")
            if not getattr(task, "id", ""):
                raise DemoError(f"start: expected a task with an id, got {task!r}")
            self.env.reset(task)
            self.setup_failures = list(getattr(self.env, "setup_failures", ()))
            self.task = task
            self._open = None
            self._writer = self.store.episodes.begin(
                task.id, environment=self.environment, source="human",
                instruction=task.instruction, tags=self.tags,
                info={"sandbox": self.env.name, "recorded_with": "workbench app"})
            return self._writer.episode_id

    def record(self, actions: Action | Sequence[Action]) -> int:
        """Perform the person's action(s) on the desktop and record them; returns the index
        of the step they went into. A desktop that fails ends the episode "error" and the
        exception is raised."""
        batch = _as_actions(actions)
        if any(isinstance(a, (Done, Fail)) for a in batch):
            raise DemoError("record: end a demonstration with finish() (DONE) or "
                            "finish('fail') (FAIL), not with a recorded action")
        with self._lock:
            writer = self._require_writer("record")
            open_step = self._open
            index = writer.next_index if open_step is None else open_step.index
            try:
                if open_step is None or not _continues(open_step.actions, batch):
                    self._store_open_step()
                    index = writer.next_index
                    open_step = self._open = _OpenStep(
                        index=index, screenshot=self._screenshot(), actions=[],
                        started=time.time())
                started = time.perf_counter()
                self.env.step(batch)
            except Exception as exc:  # the desktop (or the store) failed under the step
                if open_step is not None:
                    open_step.actions = _merged(open_step.actions, batch)
                self._end_with_error(f"step {index}: {type(exc).__name__}: {exc}")
                raise
            open_step.env_seconds += time.perf_counter() - started
            open_step.actions = _merged(open_step.actions, batch)
            return open_step.index

    def finish(self, ending: Ending = "done") -> DemoResult:
        """Close the demonstration with DONE (`ending="done"`) or FAIL, score it with the
        task's evaluator and store it."""
        if ending not in ("done", "fail"):
            raise DemoError(f"finish: ending must be 'done' or 'fail', got {ending!r}")
        with self._lock:
            writer = self._require_writer("finish")
            task_id = self.task.id
            try:
                self._store_open_step()
                closing: Action = Done() if ending == "done" else Fail()
                screenshot = self._screenshot()
                self.env.step([closing])
                writer.append_step(Step(index=writer.next_index,
                                        response=actions_to_pyautogui([closing]),
                                        actions=[closing], done=True, timestamp=time.time(),
                                        info={"done": True} if ending == "done"
                                        else {"fail": True}), screenshot)
            except Exception as exc:  # the desktop (or the store) failed: recorded
                failure = f"{type(exc).__name__}: {exc}"
                self._end_with_error(failure)
                return DemoResult(writer.episode_id, task_id, "error", None,
                                  writer.next_index, ending, failure, self.success_threshold)
            status: str = "done"
            score: float | None = None
            error: str | None = None
            try:
                score = float(self.env.evaluate())
                error = evaluation_note(self.env)
            except Exception as exc:  # the evaluator or the desktop failed: recorded
                status, error = "error", f"evaluate: {type(exc).__name__}: {exc}"
            final = self._screenshot_or_none()
            writer.finish(status, score, error, final, command_failures(self.env))
            result = DemoResult(writer.episode_id, task_id, status, score, writer.next_index,
                                ending, error, self.success_threshold)
            self._reset()
            return result

    def discard(self) -> str | None:
        """Throw the demonstration away (the episode is deleted); returns its id, or None
        when nothing was being recorded. The desktop stays as it is."""
        with self._lock:
            writer = self._writer
            if writer is None:
                return None
            self.store.episodes.delete(writer.episode_id)
            self._reset()
            return writer.episode_id

    def add_to_pool(self, result: DemoResult, added_by: str = "") -> PoolEntry:
        """Put a successful demonstration in its task's success pool."""
        return add_to_success_pool(self.store, result, added_by)

    # -- inside ---------------------------------------------------------------------------

    def _require_writer(self, what: str) -> EpisodeWriter:
        if self._writer is None:
            raise DemoError(f"{what}: no demonstration is being recorded; start(task) first")
        return self._writer

    def _screenshot(self) -> bytes:
        return self.env.observe().screenshot

    def _screenshot_or_none(self) -> bytes | None:
        try:
            return self._screenshot()
        except Exception:  # the desktop is gone; the episode keeps its steps' screens
            return None

    def _store_open_step(self) -> None:
        open_step, self._open = self._open, None
        if open_step is None or self._writer is None:
            return
        step = Step(index=open_step.index, response=actions_to_pyautogui(open_step.actions),
                    actions=list(open_step.actions), timestamp=open_step.started,
                    timings={"env": open_step.env_seconds})
        self._writer.append_step(step, open_step.screenshot)

    def _end_with_error(self, error: str) -> None:
        writer = self._writer
        if writer is None:
            return
        try:
            self._store_open_step()
        finally:
            writer.finish("error", error=error, final_screenshot=self._screenshot_or_none())
            self._reset()

    def _reset(self) -> None:
        self._writer, self._open, self.task = None, None, None
        self.setup_failures = []


def add_to_success_pool(store: Store, result: DemoResult, added_by: str = "") -> PoolEntry:
    """Put a successful demonstration in its task's success pool (DemoError otherwise)."""
    if not result.succeeded:
        raise DemoError(f"episode {result.episode_id} scored {result.score} "
                        f"({result.status}); only successes go in the success pool")
    return store.pool.add(result.episode_id, added_by=added_by, note="human demonstration")


def _as_actions(actions: Action | Sequence[Action]) -> list[Action]:
    items: list[Any] = [actions] if isinstance(actions, ACTION_TYPES) else list(
        actions)  # type: ignore[arg-type]
    if not items or not all(isinstance(a, ACTION_TYPES) for a in items):
        raise DemoError(f"record: expected an Action or a non-empty list of Actions, "
                        f"got {actions!r}")
    return items


def _continues(previous: list[Action], batch: list[Action]) -> bool:
    """Whether `batch` belongs to the step that did `previous`: more typed text after
    typed text, or the DragTo of a drag whose MoveTo started the step."""
    if not previous:
        return True
    if all(isinstance(a, TypeText) for a in previous + batch):
        return True
    return (len(previous) == 1 and isinstance(previous[0], MoveTo)
            and isinstance(batch[0], DragTo) and len(batch) == 1)


def _merged(previous: list[Action], batch: list[Action]) -> list[Action]:
    """`previous` followed by `batch`, typed text in a row joined into one TypeText."""
    out = list(previous)
    for action in batch:
        if isinstance(action, TypeText) and out and isinstance(out[-1], TypeText):
            out[-1] = TypeText(out[-1].text + action.text)
        else:
            out.append(action)
    return out
