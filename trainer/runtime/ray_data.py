"""The data manager of a Ray run: one actor, on the trainer's machine, that alone writes
episodes, steps, frames and their consumption to the store.

Environment actors stream each episode to it (`begin`, `append_step` with the PNG bytes,
`finish`) through `RemoteEpisodeStore`, a stand-in for `Store` that `RolloutRunner`
writes to; the trainer takes batches from it through `RemoteDataManager`. Inside, it is
the embedded `DataManager` over a `Store` of its own. It also remembers which episode
each environment actor is writing, so that when an actor dies the driver can end that
episode "error" (`abandon`) and the episode's task group still completes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.trajectory import Step
from trainer.rollouts import EpisodeJob, EpisodeOutcome
from trainer.runtime.data import GROUP_KEY, DataManager
from trainer.runtime.roles import GroupTicket, TrainingBatch
from trainer.store import EpisodeWriter, Store, StoreError
from trainer.store.episodes import EpisodeEnding

ROLLOUT_KEY = "rollout"  # the episode info field RolloutRunner writes the job's rollout to


@dataclass
class _Writing:
    """An episode an environment actor is streaming."""

    owner: str
    writer: EpisodeWriter
    info: dict[str, Any]
    steps: list[Step] = field(default_factory=list)  # kept for the outcome's token count


class DataManagerActor:
    """The Ray actor (threaded: environments write while the trainer waits for a batch).
    Every method is a remote call; arguments and results are plain records."""

    def __init__(self, workspace: str, run_id: str, max_version_lag: int) -> None:
        self.store = Store.open(Path(workspace))
        self.run_id = run_id
        self.data = DataManager(self.store, run_id, max_version_lag=max_version_lag)
        self._writing: dict[str, _Writing] = {}  # episode id -> its writer
        self._finished: dict[str, str] = {}  # owner -> the episode it finished last
        self._lock = threading.Lock()
        self._begin_lock = threading.Lock()  # the store's writer-lock set-up: one at a time

    def pid(self) -> int:
        """This process (the one writer of the run's episodes)."""
        return os.getpid()

    # -- episodes streamed by the environment actors ----------------------------------

    def begin(self, owner: str, task_id: str, fields: dict[str, Any]) -> str:
        """Start a running episode for `owner` (EpisodeStore.begin's fields): its id."""
        with self._begin_lock:
            writer = self.store.episodes.begin(task_id, **fields)
        with self._lock:
            self._writing[writer.episode_id] = _Writing(owner, writer,
                                                        dict(fields.get("info") or {}))
        return writer.episode_id

    def append_step(self, episode_id: str, step: Step, screenshot: bytes | None) -> Step:
        writing = self._open(episode_id)
        stored = writing.writer.append_step(step, screenshot)
        writing.steps.append(stored)
        return stored

    def finish(self, episode_id: str, status: str, score: float | None, error: str | None,
               final_screenshot: bytes | None,
               info: Mapping[str, Any] | None = None) -> None:
        writing = self._open(episode_id)
        writing.writer.finish(status, score, error, final_screenshot, info)
        with self._lock:
            self._writing.pop(episode_id, None)
            self._finished[writing.owner] = episode_id

    def abandon(self, owner: str, job: EpisodeJob, error: str) -> EpisodeOutcome:
        """`owner` died running `job`: its unfinished episode ends "error" with `error`.
        The outcome to record: that episode, the one it had finished for this job before
        dying, or none (it died before starting one)."""
        with self._lock:
            running = [(i, w) for i, w in self._writing.items() if w.owner == owner]
            for episode_id, _ in running:
                del self._writing[episode_id]
            last = self._finished.get(owner)
        for _, writing in running:
            writing.writer.finish("error", None, error)
        if running:
            return EpisodeOutcome(job, self.store.episodes.load(running[-1][0], tokens=False),
                                  error)
        if last is not None:
            episode = self.store.episodes.load(last, tokens=False)
            if (episode.info.get(GROUP_KEY) == job.info.get(GROUP_KEY)
                    and episode.info.get(ROLLOUT_KEY) == job.rollout):
                return EpisodeOutcome(job, episode, episode.error)
        return EpisodeOutcome(job, None, error)

    def _open(self, episode_id: str) -> _Writing:
        with self._lock:
            writing = self._writing.get(episode_id)
        if writing is None:
            raise StoreError(f"episode {episode_id}: not being written by the data manager "
                             f"(finished, abandoned or never begun)")
        return writing

    # -- the data manager role ---------------------------------------------------------

    def expect(self, groups: Sequence[GroupTicket]) -> None:
        self.data.expect(groups)

    def record(self, outcome: EpisodeOutcome) -> None:
        self.data.record(outcome)

    def recover(self, policy_version: int) -> int:
        return self.data.recover(policy_version)

    def open_groups(self) -> int:
        return self.data.open_groups()

    def take(self, groups: int, policy_version: int, timeout: float | None
             ) -> TrainingBatch | None:
        return self.data.take(groups, policy_version, timeout)

    def give_back(self, episode_ids: Sequence[str]) -> int:
        return self.data.give_back(episode_ids)

    def figures(self) -> tuple[int, int]:
        """(finished episodes, generated tokens) so far."""
        return self.data.finished_episodes, self.data.generated_tokens

    def close(self) -> None:
        """End what is still being written "incomplete" and close the store."""
        self.store.close()


class RemoteDataManager:
    """The trainer's handle on the data-manager actor (a `RunDataManager`); each call
    waits for the actor's answer."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def _call(self, method: str, *args: Any) -> Any:
        import ray

        return ray.get(getattr(self.actor, method).remote(*args))

    def expect(self, groups: Sequence[GroupTicket]) -> None:
        self._call("expect", list(groups))

    def record(self, outcome: EpisodeOutcome) -> None:
        self._call("record", outcome)

    def abandon(self, owner: str, job: EpisodeJob, error: str) -> EpisodeOutcome:
        outcome: EpisodeOutcome = self._call("abandon", owner, job, error)
        return outcome

    def recover(self, policy_version: int) -> int:
        return int(self._call("recover", policy_version))

    def open_groups(self) -> int:
        return int(self._call("open_groups"))

    def take(self, groups: int, policy_version: int, timeout: float | None = None
             ) -> TrainingBatch | None:
        batch: TrainingBatch | None = self._call("take", groups, policy_version, timeout)
        return batch

    def give_back(self, episode_ids: Sequence[str]) -> int:
        return int(self._call("give_back", list(episode_ids)))

    @property
    def finished_episodes(self) -> int:
        return int(self._call("figures")[0])

    @property
    def generated_tokens(self) -> int:
        return int(self._call("figures")[1])


class RemoteEpisodeWriter(EpisodeEnding):
    """`EpisodeWriter` for an environment actor: each call is written by the data
    manager (and waited for, so steps arrive in order and errors surface here)."""

    def __init__(self, actor: Any, episode_id: str) -> None:
        self.actor = actor
        self.episode_id = episode_id
        self.finished = False

    def append_step(self, step: Step, screenshot: bytes | None = None) -> Step:
        import ray

        stored: Step = ray.get(self.actor.append_step.remote(self.episode_id, step,
                                                             screenshot))
        return stored

    def finish(self, status: str = "done", score: float | None = None,
               error: str | None = None, final_screenshot: bytes | None = None,
               info: Mapping[str, Any] | None = None) -> None:
        import ray

        ray.get(self.actor.finish.remote(self.episode_id, status, score, error,
                                         final_screenshot, dict(info or {})))
        self.finished = True


class RemoteEpisodes:
    """`store.episodes` for an environment actor: `begin` opens the episode in the data
    manager under this actor's name."""

    def __init__(self, actor: Any, owner: str) -> None:
        self.actor = actor
        self.owner = owner

    def begin(self, task_id: str, **fields: Any) -> RemoteEpisodeWriter:
        import ray

        episode_id: str = ray.get(self.actor.begin.remote(self.owner, task_id, fields))
        return RemoteEpisodeWriter(self.actor, episode_id)


class RemoteEpisodeStore:
    """The part of `Store` that `RolloutRunner` writes to, backed by the data manager."""

    def __init__(self, actor: Any, owner: str) -> None:
        self.episodes = RemoteEpisodes(actor, owner)
