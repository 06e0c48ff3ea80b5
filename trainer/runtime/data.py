"""The data manager of a decoupled run: it learns which task groups were queued, hears of
each finished episode, and hands the trainer whole groups of unconsumed episodes made
within the window of policy versions [current - max_version_lag, current], marking them
consumed in the store as it does (so no episode is trained twice, even across a resume).

Episodes older than the window are never trained: they stay unconsumed in the store and
are counted as stale. Groups are served oldest first, since those are the next to go
stale. In the embedded mode the rollouts write episodes to the store themselves and the
data manager only hears their outcomes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from agents.trajectory import FINISHED_STATUSES
from trainer.rollouts import EpisodeOutcome
from trainer.runtime.roles import GroupTicket, TrainingBatch
from trainer.store import Store

log = logging.getLogger(__name__)

GROUP_KEY = "group"  # the episode info field naming its task group
GROUP_SIZE_KEY = "group_size"


@dataclass
class _Member:
    episode_id: str | None  # None: the job never became an episode (cancelled, no desktop)
    status: str
    policy_version: int | None


@dataclass
class _Group:
    ticket: GroupTicket
    members: list[_Member] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return len(self.members) >= self.ticket.size


class DataManager:
    """Serves training batches of whole task groups (see the module docstring).
    Thread-safe: environments record outcomes while the trainer takes batches."""

    def __init__(self, store: Store, run_id: str, *, max_version_lag: int) -> None:
        if max_version_lag < 0:
            raise ValueError(f"max_version_lag: expected >= 0, got {max_version_lag}")
        self.store = store
        self.run_id = run_id
        self.max_version_lag = max_version_lag
        self._groups: dict[str, _Group] = {}  # insertion order: oldest first
        self._cond = threading.Condition()
        self._stale = 0  # stale "done" episodes not yet reported in a batch
        self.finished_episodes = 0  # every outcome recorded (for rates)
        self.generated_tokens = 0

    # -- episodes in -----------------------------------------------------------------

    def expect(self, groups: Sequence[GroupTicket]) -> None:
        with self._cond:
            for ticket in groups:
                self._groups.setdefault(ticket.group_id, _Group(ticket))

    def record(self, outcome: EpisodeOutcome) -> None:
        episode = outcome.episode
        group_id = outcome.job.info.get(GROUP_KEY)
        member = _Member(episode.id if episode is not None else None, outcome.status,
                         episode.policy_version if episode is not None else None)
        tokens = sum(len(s.token_ids or []) for s in episode.steps) if episode else 0
        with self._cond:
            self.finished_episodes += 1
            self.generated_tokens += tokens
            group = self._groups.get(str(group_id))
            if group is None:
                log.warning("episode %s: no queued group %r", member.episode_id, group_id)
                return
            group.members.append(member)
            if group.complete:
                self._cond.notify_all()

    def recover(self, policy_version: int) -> int:
        """A resumed run: the groups of this run's unconsumed finished episodes still in
        the window (nothing of the run is running any more). Returns how many."""
        low = policy_version - self.max_version_lag
        summaries = self.store.queries.unconsumed(self.run_id, min_version=low,
                                                  statuses=FINISHED_STATUSES)
        found: dict[str, _Group] = {}
        for summary in summaries:
            info = self.store.episodes.load(summary.id, steps=False).info
            group_id = info.get(GROUP_KEY)
            if not isinstance(group_id, str):
                continue  # not a rollout of a queued group (a demonstration)
            group = found.setdefault(group_id, _Group(GroupTicket(group_id, summary.task_id,
                                                                  0)))
            group.members.append(_Member(summary.id, summary.status, summary.policy_version))
        with self._cond:
            for group_id, group in found.items():
                # complete with what is there: the rest was queued by the process that died
                group.ticket = GroupTicket(group_id, group.ticket.task_id, len(group.members))
                self._groups.setdefault(group_id, group)
            self._cond.notify_all()
        return len(found)

    # -- batches out -----------------------------------------------------------------

    def open_groups(self) -> int:
        with self._cond:
            return len(self._groups)

    def take(self, groups: int, policy_version: int, timeout: float | None = None
             ) -> TrainingBatch | None:
        """The oldest `groups` complete groups with an episode in the window, their
        in-window episodes marked consumed at `policy_version`; None after `timeout`."""
        if groups < 1:
            raise ValueError(f"groups: expected >= 1, got {groups}")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                chosen = self._select(policy_version, groups)
                if len(chosen) >= groups:
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            low = policy_version - self.max_version_lag
            ids: list[str] = []
            for group in chosen:
                del self._groups[group.ticket.group_id]
                for member in group.members:
                    if member.episode_id is None:
                        continue
                    if _in_window(member, low):
                        ids.append(member.episode_id)
                    elif member.status == "done":
                        self._stale += 1
            stale, self._stale = self._stale, 0
            claimed = self.store.runs.consume(self.run_id, ids, policy_version)
        # steps without token ids: curation and metrics read scores and parse errors; the
        # samples load each trained episode whole
        episodes = [self.store.episodes.load(i, tokens=False) for i in claimed]
        return TrainingBatch(policy_version, episodes, [g.ticket.group_id for g in chosen],
                             stale)

    def give_back(self, episode_ids: Sequence[str]) -> int:
        return self.store.runs.unconsume(self.run_id, episode_ids=list(episode_ids))

    def _select(self, policy_version: int, limit: int) -> list[_Group]:
        """Complete groups with an episode in the window, oldest first (a group of errors
        too: its update trains nothing but reports them, as the synchronous loop does);
        complete groups without one are forgotten, their "done" episodes counted stale."""
        low = policy_version - self.max_version_lag
        chosen: list[_Group] = []
        for group_id, group in list(self._groups.items()):
            if not group.complete:
                continue
            if any(m.episode_id is not None and _in_window(m, low) for m in group.members):
                if len(chosen) < limit:
                    chosen.append(group)
            else:
                del self._groups[group_id]
                self._stale += sum(m.status == "done" for m in group.members)
        return chosen


def _in_window(member: _Member, low: int) -> bool:
    return member.policy_version is not None and member.policy_version >= low
