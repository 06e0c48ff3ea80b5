"""The four roles of a decoupled (DART-style) training run, as small interfaces, and the
records they pass each other.

- EnvCluster: desktops to lease, with busy/idle figures (`vm.pool.EnvPool` is one).
- RolloutService: policy workers behind one `generate`; publishes policy versions to them;
  an episode holds a `PolicySession` that keeps one version for the whole episode.
- DataManager: finished episodes in, training batches out (task groups of unconsumed
  episodes within a window of policy versions), marking what it hands out consumed.
- Trainer: takes batches, updates the policy, publishes each new version.

The embedded source (`trainer.sources.embedded`) runs the first three as threads of one
process beside the training loop (trainer/loop.py, the trainer); the Ray source
(`trainer.sources.cluster`) puts each behind Ray actors that speak these same records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agents.backends.base import Generation, SamplingConfig

if TYPE_CHECKING:
    from agents.trajectory import Episode
    from trainer.rollouts import EpisodeOutcome
    from trainer.update_log import UpdateResult
    from vm.pool import EnvUsage


# -- records ---------------------------------------------------------------------------


@dataclass
class Publication:
    """One published policy version: what workers load, and what loading it cost."""

    version: int
    state: dict[str, Any]  # tensors: adapter weights (LoRA) or the full state dict
    adapter_path: Path | None = None  # a folder, for workers that load files (vLLM)
    published_at: float = field(default_factory=time.time)
    snapshot_seconds: float = 0.0  # taking the state from the trainer's model
    load_seconds: dict[str, float] = field(default_factory=dict)  # per worker, summed
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                  compare=False)

    def record_load(self, worker: str, seconds: float) -> None:
        with self._lock:
            self.load_seconds[worker] = self.load_seconds.get(worker, 0.0) + seconds

    @property
    def sync_seconds(self) -> float:
        """Snapshot plus every worker's in-place loads of this version so far."""
        with self._lock:
            return self.snapshot_seconds + sum(self.load_seconds.values())


@dataclass(frozen=True)
class GroupTicket:
    """A task group the scheduler queued: `size` rollouts of one task, one baseline."""

    group_id: str
    task_id: str
    size: int


@dataclass
class TrainingBatch:
    """Task groups the data manager handed to the trainer (already marked consumed)."""

    policy_version: int  # the trainer's version when it took the batch
    episodes: list[Episode]  # every finished episode of the groups, errors included
    group_ids: list[str]
    stale_episodes: int = 0  # "done" episodes left out since the last batch: too old

    @property
    def episode_ids(self) -> list[str]:
        return [e.id for e in self.episodes]

    def version_lags(self) -> list[int]:
        """policy_version - episode version, for each finished ("done") episode."""
        return [self.policy_version - e.policy_version for e in self.episodes
                if e.status == "done" and e.policy_version is not None]


@dataclass(frozen=True)
class WorkerStatus:
    """One rollout worker as the service sees it."""

    name: str
    version: int | None  # the policy version loaded now (None: never loaded)
    in_flight: int
    healthy: bool  # False during the cool-down after a timeout or failure
    requests: int
    failures: int
    last_error: str | None


# -- the four roles --------------------------------------------------------------------


class EnvClusterRole(Protocol):
    """Desktops to lease one episode at a time."""

    size: int

    def lease(self, timeout: float | None = None) -> AbstractContextManager[Any]: ...

    def usage(self) -> list[EnvUsage]: ...

    def close(self) -> None: ...


class PolicySession(Protocol):
    """What one episode generates with: a backend fixed at one policy version."""

    name: str
    version: int | None

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]: ...

    def close(self) -> None:
        """The episode is over: its version may be dropped when nobody else holds it."""
        ...


class RolloutServiceRole(Protocol):
    """Policy workers behind one interface, following the published versions."""

    @property
    def newest_version(self) -> int | None: ...

    def publish(self, publication: Publication) -> Publication: ...

    def session(self) -> PolicySession:
        """A session at the newest published version (held until closed)."""
        ...

    def workers(self) -> list[WorkerStatus]: ...

    def close(self) -> None: ...


class DataManagerRole(Protocol):
    """Finished episodes in, training batches out."""

    def expect(self, groups: Sequence[GroupTicket]) -> None:
        """Groups the scheduler queued: a group is complete when all its episodes are."""
        ...

    def record(self, outcome: EpisodeOutcome) -> None:
        """A finished (or never started) episode of an expected group."""
        ...

    def open_groups(self) -> int:
        """Groups expected and not yet handed out or dropped."""
        ...

    def take(self, groups: int, policy_version: int, timeout: float | None = None
             ) -> TrainingBatch | None:
        """`groups` complete groups within the version window, marked consumed; None when
        not enough are ready within `timeout` seconds."""
        ...

    def give_back(self, episode_ids: Sequence[str]) -> int:
        """Undo the consumption of episodes an update did not train on."""
        ...


class TrainerRole(Protocol):
    """Updates the policy from batches and publishes each new version."""

    policy_version: int

    def train(self, batch: TrainingBatch) -> UpdateResult: ...

    def publication(self) -> Publication:
        """The current version as the rollout workers load it."""
        ...
