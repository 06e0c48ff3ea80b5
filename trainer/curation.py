"""Which tasks to train on, how many rollouts and steps each gets, and how groups are repaired
(ARPO experience replay, DART task filter, pre-collected successes and dynamic rollouts)."""

from __future__ import annotations

import math
import random
import statistics
from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from trainer.config_io import knob
from trainer.store.queries import EpisodeSummary, TaskStats
from trainer.store.workspace import Store

ORIGINS: tuple[str, ...] = ("rollout", "replay", "precollected")


@dataclass(frozen=True)
class CurationConfig:
    """The curation knobs of a training run; every one is off or neutral by default."""

    success_threshold: float = knob(
        0.5, "an episode with score >= this is a success (statistics, pools)")
    stats_window: int = knob(16, "task statistics over the newest N scored episodes per task")
    task_filter: bool = knob(
        False, "skip tasks whose recent success rate is outside [filter_min, filter_max)")
    filter_min: float = knob(0.0, "lowest recent success rate of a task that is trained on")
    filter_max: float = knob(
        1.0, "DART's acc_max: tasks at or above this success rate are skipped (no signal)")
    filter_min_episodes: int = knob(
        4, "a task with fewer recent episodes is always kept (not enough evidence)")
    dynamic_rollouts: bool = knob(
        False, "DART's dynamic rollout count: fewer rollouts for mostly solved tasks")
    rollout_threshold: float = knob(
        0.6, "below this success rate a task gets the full G rollouts")
    min_rollouts: int = knob(2, "n_min: the fewest rollouts a task gets")
    dynamic_step_budget: bool = knob(
        False, "give each task a step budget from the length of its successes")
    step_budget_factor: float = knob(
        2.0, "a task's step budget: factor x mean length of its successes, in [1, max_steps]")
    replay: bool = knob(
        False, "ARPO experience replay: all-failing groups get one stored success")
    replay_capacity: int = knob(8, "successes kept per task in the replay buffer")
    replay_success_score: float = knob(
        0.1, "ARPO: an episode with score > this is a success for the replay buffer")
    replay_std_below: float = knob(
        0.05, "a group counts as all-failing when the std of its scores is below this ...")
    replay_mean_below: float = knob(0.2, "... and the mean of its scores is below this")
    precollected: bool = knob(
        False, "DART: a group in which no episode reached success_threshold takes the "
               "newest known success of its task in place of its oldest episode")
    precollect_oracle: int = knob(
        0, "before the first update, run the scripted oracle this many times on each "
           "training task with no known success (pre-collected successes for "
           "`precollected`; tasks without an oracle are left as they are)", ge=0)
    dynamic_sampling_groups: int = knob(
        0, "DAPO's dynamic sampling: while fewer groups than this have rewards that "
           "differ, roll out another round of groups (the next tasks in turn) before "
           "training (0: off)", ge=0)
    dynamic_sampling_rounds: int = knob(
        2, "extra rounds dynamic sampling may add to one update, at most (DAPO's "
           "max_num_gen_batches)", ge=0)

    def __post_init__(self) -> None:
        # The config comes from a TOML file: check the types too, not only the ranges.
        for item in fields(self):
            value = getattr(self, item.name)
            where = f"curation.{item.name}"
            if item.type == "bool" and not isinstance(value, bool):
                raise ValueError(f"{where}: expected true or false, got {value!r}")
            if item.type == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{where}: expected a whole number, got {value!r}")
            if item.type == "float" and (isinstance(value, bool)
                                         or not isinstance(value, (int, float))
                                         or not math.isfinite(value)):
                raise ValueError(f"{where}: expected a number, got {value!r}")
        for name in ("success_threshold", "filter_min", "filter_max", "rollout_threshold",
                     "replay_success_score"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"curation.{name}: expected a number in [0, 1], got {value!r}")
        if self.filter_min > self.filter_max:
            raise ValueError(f"curation.filter_min: expected at most filter_max "
                             f"({self.filter_max!r}), got {self.filter_min!r}")
        if self.rollout_threshold <= 0:
            raise ValueError(f"curation.rollout_threshold: expected a number in (0, 1], got "
                             f"{self.rollout_threshold!r}")
        for name, least in (("stats_window", 1), ("filter_min_episodes", 0),
                            ("min_rollouts", 1), ("replay_capacity", 1)):
            value = getattr(self, name)
            if value < least:
                raise ValueError(f"curation.{name}: expected a whole number >= {least}, "
                                 f"got {value!r}")
        if self.step_budget_factor <= 0:
            raise ValueError(f"curation.step_budget_factor: expected a number > 0, got "
                             f"{self.step_budget_factor!r}")
        if self.replay_std_below < 0:
            raise ValueError(f"curation.replay_std_below: expected a number >= 0, got "
                             f"{self.replay_std_below!r}")


# -- dynamic rollout count and task statistics ----------------------------------------------


def dynamic_rollout_count(success_rate: float | None, num_generations: int,
                          threshold: float = 0.6, min_rollouts: int = 2) -> int:
    """DART's rollout count for a task: G below `threshold` (or without statistics), else
    max(min_rollouts, int(9 / s - 7)), never above G: 8 at 0.6, 5 at 0.75, 3 at 0.9, 2 at 1."""
    if num_generations < 1:
        raise ValueError(f"num_generations: expected a whole number >= 1, got "
                         f"{num_generations!r}")
    if success_rate is None or success_rate < threshold or success_rate <= 0:
        return num_generations
    if success_rate > 1:
        raise ValueError(f"success_rate: expected a number in [0, 1] or None, got "
                         f"{success_rate!r}")
    # A rate that reaches 0.6 by arithmetic (0.1 * 6 = 0.6000000000000001) gives 9 / s =
    # 14.999999999999998: rounding first keeps the table's rows from dropping by one.
    count = int(round(9 / success_rate, 9) - 7)
    return min(num_generations, max(min_rollouts, count))


class TaskStatistics:
    """Success rate, episode count and typical success length of each task over its newest
    scored episodes; tasks without any are absent (their rate is None)."""

    def __init__(self, stats: Mapping[str, TaskStats]) -> None:
        self._stats = dict(stats)

    @classmethod
    def from_store(cls, store: Store, *, window: int, success_threshold: float,
                   run_id: str | None = None, min_version: int | None = None,
                   task_ids: Sequence[str] = ()) -> TaskStatistics:
        """Statistics over the newest `window` "done", scored episodes of each task (of one
        run and from `min_version` on, when given; of `task_ids`, when given)."""
        if window < 1:
            raise ValueError(f"window: expected a whole number >= 1, got {window!r}")
        rows = store.queries.task_stats(
            newest=window, by_version=False, run_id=run_id, min_version=min_version,
            task_ids=task_ids, success_threshold=success_threshold)
        return cls({r.task_id: r for r in rows})

    @property
    def task_ids(self) -> list[str]:
        return sorted(self._stats)

    def get(self, task_id: str) -> TaskStats | None:
        return self._stats.get(task_id)

    def success_rate(self, task_id: str) -> float | None:
        found = self._stats.get(task_id)
        return None if found is None else found.success_rate

    def episodes(self, task_id: str) -> int:
        found = self._stats.get(task_id)
        return 0 if found is None else found.episodes

    def mean_success_length(self, task_id: str) -> float | None:
        """Mean step count of the task's successes in the window; None without a success."""
        stats = self._stats.get(task_id)
        steps = stats.mean_success_steps if stats is not None else None
        return None if steps is None else float(steps)


class TaskFilter:
    """DART's task selection on live statistics: train on a task while its recent success
    rate is in [filter_min, filter_max); always-solved tasks give no advantage signal."""

    def __init__(self, config: CurationConfig) -> None:
        self.config = config

    def keep(self, task_id: str, stats: TaskStatistics) -> bool:
        return self._skip_reason(task_id, stats) is None

    def select(self, task_ids: Iterable[str], stats: TaskStatistics
               ) -> tuple[list[str], dict[str, str]]:
        """The kept ids in their order, and why each skipped id was skipped."""
        kept: list[str] = []
        skipped: dict[str, str] = {}
        for task_id in task_ids:
            reason = self._skip_reason(task_id, stats)
            if reason is None:
                kept.append(task_id)
            else:
                skipped[task_id] = reason
        return kept, skipped

    def _skip_reason(self, task_id: str, stats: TaskStatistics) -> str | None:
        config = self.config
        if not config.task_filter:
            return None
        episodes = stats.episodes(task_id)
        rate = stats.success_rate(task_id)
        if rate is None or episodes < config.filter_min_episodes:
            return None
        if rate >= config.filter_max:
            return (f"success rate {rate:.2f} >= filter_max {config.filter_max} "
                    f"over {episodes} episodes")
        if rate < config.filter_min:
            return (f"success rate {rate:.2f} < filter_min {config.filter_min} "
                    f"over {episodes} episodes")
        return None


# -- dynamic trajectory length ---------------------------------------------------------------


def step_budget(task_id: str, stats: TaskStatistics, *, factor: float, max_steps: int) -> int:
    """A task's step budget: ceil(factor x mean length of its successes) within
    [1, max_steps]; max_steps while the task has no success."""
    if max_steps < 1:
        raise ValueError(f"max_steps: expected a whole number >= 1, got {max_steps!r}")
    if factor <= 0:
        raise ValueError(f"factor: expected a number > 0, got {factor!r}")
    typical = stats.mean_success_length(task_id)
    if typical is None:
        return max_steps
    return min(max_steps, max(1, _ceil(factor * typical)))


def trainable_steps(step_count: int, succeeded: bool, typical_length: float | None
                    ) -> list[int]:
    """The step indices of an episode to train on: all of them, except that a failure longer
    than the typical success length contributes only its steps from that length on."""
    if step_count < 0:
        raise ValueError(f"step_count: expected a whole number >= 0, got {step_count!r}")
    if succeeded or typical_length is None:
        return list(range(step_count))
    cutoff = _ceil(typical_length)
    if step_count > cutoff:
        return list(range(cutoff, step_count))
    return list(range(step_count))


def _ceil(value: float) -> int:
    # 0.1 * 30 is 3.0000000000000004: without rounding its ceiling would be 4.
    return math.ceil(round(value, 9))


# -- groups ----------------------------------------------------------------------------------


@dataclass
class GroupMember:
    """One episode in a task's group, as the advantage computation sees it."""

    episode_id: str
    task_id: str
    score: float
    created_at: float
    policy_version: int | None  # replayed members are older: the loss corrects for it
    source: str  # the episode's source in the store: rollout, human, import, replay
    origin: str = "rollout"  # how it joined the group: "rollout", "replay", "precollected"
    # The evaluator's score (0..1) when `score` is a reward that also counts other terms
    # (the format penalty); success is judged on it. None: `score` is the evaluator's.
    evaluator_score: float | None = None

    @property
    def judged_score(self) -> float:
        """The evaluator's score: what success is judged on, whatever penalties the reward
        (`score`) carries."""
        return self.score if self.evaluator_score is None else self.evaluator_score

    def succeeded(self, threshold: float) -> bool:
        """Whether the evaluator scored the episode a success (score >= threshold), whatever
        penalties its reward carries."""
        return self.judged_score >= threshold

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise ValueError(f"group member {self.episode_id}: origin: expected one of "
                             f"{list(ORIGINS)}, got {self.origin!r}")

    @classmethod
    def from_summary(cls, summary: EpisodeSummary, origin: str = "rollout") -> GroupMember:
        if summary.score is None:
            raise ValueError(f"episode {summary.id}: score: expected a number (a group "
                             f"needs scored episodes), got None")
        return cls(episode_id=summary.id, task_id=summary.task_id, score=summary.score,
                   created_at=summary.created_at, policy_version=summary.policy_version,
                   source=summary.source, origin=origin)

    def to_dict(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "task_id": self.task_id, "score": self.score,
                "created_at": self.created_at, "policy_version": self.policy_version,
                "source": self.source, "origin": self.origin,
                "evaluator_score": self.evaluator_score}

    @classmethod
    def from_dict(cls, data: Any, where: str = "group member") -> GroupMember:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
        unknown = set(data) - _MEMBER_FIELDS
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}")
        for name in ("episode_id", "task_id", "source", "origin"):
            if not isinstance(data.get(name), str):
                raise ValueError(f"{where}.{name}: expected a string, got {data.get(name)!r}")
        for name in ("score", "created_at"):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{where}.{name}: expected a number, got {value!r}")
        version = data.get("policy_version")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise ValueError(f"{where}.policy_version: expected a whole number or null, "
                             f"got {version!r}")
        evaluator = data.get("evaluator_score")  # absent in buffers saved before it existed
        if evaluator is not None and (isinstance(evaluator, bool)
                                      or not isinstance(evaluator, (int, float))):
            raise ValueError(f"{where}.evaluator_score: expected a number or null, "
                             f"got {evaluator!r}")
        return cls(episode_id=data["episode_id"], task_id=data["task_id"],
                   score=float(data["score"]), created_at=float(data["created_at"]),
                   policy_version=version, source=data["source"], origin=data["origin"],
                   evaluator_score=None if evaluator is None else float(evaluator))


_MEMBER_FIELDS = frozenset(GroupMember.__dataclass_fields__)


@dataclass
class Group:
    """The episodes of one task that share an advantage baseline, and what curation did."""

    task_id: str
    members: list[GroupMember]
    notes: list[str] = field(default_factory=list)

    @property
    def scores(self) -> list[float]:
        return [m.score for m in self.members]

    @property
    def mean(self) -> float:
        return statistics.fmean(self._scores_or_raise())

    @property
    def std(self) -> float:
        """Population standard deviation, as ARPO's numpy check computes it."""
        return statistics.pstdev(self._scores_or_raise())

    def _scores_or_raise(self) -> list[float]:
        if not self.members:
            raise ValueError(f"group of task {self.task_id}: no members")
        return self.scores


def _with_member(group: Group, index: int, member: GroupMember, note: str) -> Group:
    members = list(group.members)
    members[index] = member
    return Group(task_id=group.task_id, members=members, notes=[*group.notes, note])


# -- ARPO experience replay ------------------------------------------------------------------


class ReplayBuffer:
    """Per task, a FIFO of the newest successful episodes (score > success_score)."""

    def __init__(self, capacity: int = 8, success_score: float = 0.1) -> None:
        if capacity < 1:
            raise ValueError(f"replay buffer capacity: expected a whole number >= 1, got "
                             f"{capacity!r}")
        self.capacity = capacity
        self.success_score = success_score
        self._tasks: dict[str, deque[GroupMember]] = {}

    def add(self, members: Iterable[GroupMember]) -> int:
        """Store the successes among `members` (oldest evicted first); returns how many."""
        added = 0
        for member in members:
            # A replayed member is a copy of one the buffer holds (or held): adding it
            # again would let one success crowd out the newer ones.
            if member.judged_score <= self.success_score or member.origin == "replay":
                continue
            queue = self._tasks.setdefault(member.task_id, deque(maxlen=self.capacity))
            if any(m.episode_id == member.episode_id for m in queue):
                continue
            queue.append(replace(member))
            added += 1
        return added

    def get(self, task_id: str) -> list[GroupMember]:
        """The task's stored successes, oldest first."""
        return [replace(m) for m in self._tasks.get(task_id, ())]

    def sample(self, task_id: str, rng: random.Random,
               exclude: Collection[str] = ()) -> GroupMember | None:
        """One stored success of the task drawn at random (not one of `exclude`), or None."""
        candidates = [m for m in self._tasks.get(task_id, ()) if m.episode_id not in exclude]
        return replace(rng.choice(candidates)) if candidates else None

    @property
    def task_ids(self) -> list[str]:
        return [t for t, queue in self._tasks.items() if queue]

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._tasks.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for checkpoints."""
        return {"capacity": self.capacity, "success_score": self.success_score,
                "tasks": {t: [m.to_dict() for m in queue] for t, queue in self._tasks.items()
                          if queue}}

    @classmethod
    def from_dict(cls, data: Any, where: str = "replay buffer") -> ReplayBuffer:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
        capacity = data.get("capacity")
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise ValueError(f"{where}.capacity: expected a whole number, got {capacity!r}")
        success_score = data.get("success_score")
        if isinstance(success_score, bool) or not isinstance(success_score, (int, float)):
            raise ValueError(f"{where}.success_score: expected a number, got "
                             f"{success_score!r}")
        tasks = data.get("tasks", {})
        if not isinstance(tasks, dict):
            raise ValueError(f"{where}.tasks: expected an object, got {type(tasks).__name__}")
        buffer = cls(capacity=capacity, success_score=float(success_score))
        for task_id, items in tasks.items():
            if not isinstance(items, list):
                raise ValueError(f"{where}.tasks[{task_id!r}]: expected a list, got "
                                 f"{type(items).__name__}")
            members = [GroupMember.from_dict(item, f"{where}.tasks[{task_id!r}][{i}]")
                       for i, item in enumerate(items)]
            for i, member in enumerate(members):
                if member.task_id != task_id:
                    raise ValueError(f"{where}.tasks[{task_id!r}][{i}].task_id: expected "
                                     f"{task_id!r}, got {member.task_id!r}")
            buffer.add(members)
        return buffer

    @classmethod
    def from_store(cls, store: Store, run_id: str, capacity: int = 8,
                   success_score: float = 0.1) -> ReplayBuffer:
        """The buffer a run had: its newest `capacity` successes per task, so that a resumed
        run replays what it would have replayed had it not stopped."""
        rows = store.database.rows(
            """
            WITH ranked AS (
                SELECT id, task_id, score, created_at, policy_version, source,
                       ROW_NUMBER() OVER (PARTITION BY task_id
                                          ORDER BY created_at DESC, rowid DESC) AS newness
                FROM episodes
                WHERE run_id = ? AND +status = 'done' AND score > ?
            )
            SELECT id, task_id, score, created_at, policy_version, source, newness
            FROM ranked WHERE newness <= ?
            ORDER BY task_id, newness DESC
            """, [run_id, success_score, capacity])
        buffer = cls(capacity=capacity, success_score=success_score)
        buffer.add(_member(r, "rollout") for r in rows)
        return buffer


def is_all_failing(group: Group, *, std_below: float = 0.05, mean_below: float = 0.2) -> bool:
    """ARPO's test for a group with no advantage signal, on the evaluator's scores: a
    success whose reward a format penalty took to 0 is still a success, and its group is
    not all-failing."""
    group._scores_or_raise()  # a group with no member is an error, as for its mean
    scores = [member.judged_score for member in group.members]
    return statistics.pstdev(scores) < std_below and statistics.fmean(scores) < mean_below


def inject_replay(group: Group, buffer: ReplayBuffer, rng: random.Random, *,
                  std_below: float = 0.05, mean_below: float = 0.2) -> Group:
    """An all-failing group with one member, chosen at random, replaced by a stored success
    of its task (origin "replay"); any other group, or one whose task has none, unchanged.

    Order matters: inject into every group of a batch first, then `buffer.add` the batch
    (as `replay_batch` does), so a group is never repaired with its own episodes.
    """
    if not is_all_failing(group, std_below=std_below, mean_below=mean_below):
        return group
    drawn = buffer.sample(group.task_id, rng,
                          exclude={m.episode_id for m in group.members})
    if drawn is None:
        return group
    index = rng.randrange(len(group.members))
    replaced = group.members[index]
    note = (f"replay: episode {drawn.episode_id} (score {drawn.score:.2f}, version "
            f"{drawn.policy_version}) replaced episode {replaced.episode_id} "
            f"(score {replaced.score:.2f})")
    return _with_member(group, index, replace(drawn, origin="replay"), note)


def replay_batch(groups: Sequence[Group], buffer: ReplayBuffer, rng: random.Random, *,
                 std_below: float = 0.05, mean_below: float = 0.2) -> list[Group]:
    """ARPO's step for one batch: inject into the all-failing groups, then store the batch's
    new successes in the buffer."""
    repaired = [inject_replay(g, buffer, rng, std_below=std_below, mean_below=mean_below)
                for g in groups]
    buffer.add(m for g in groups for m in g.members)
    return repaired


# -- DART pre-collected successes ------------------------------------------------------------


PRECOLLECTED_TAG = "precollected"  # the tag of episodes collected to be injected


class SuccessSource:
    """Known successes of a task from anywhere in the workspace: the curated success pool
    first, then episodes collected for this (tagged "precollected", e.g. by
    `curation.precollect_oracle`), then any finished episode that scored as a success
    (human, import, any run). Collected successes come before the policy's own old ones:
    those carry the log-probs of an older policy, so truncated importance sampling all but
    silences them once the policy has moved away from the right answer (a task stuck on a
    wrong answer would get no signal)."""

    def __init__(self, store: Store, success_threshold: float = 0.5) -> None:
        self.store = store
        self.success_threshold = success_threshold

    def newest_success(self, task_id: str, exclude: Collection[str] = ()
                       ) -> GroupMember | None:
        """The task's newest pooled success, else its newest scored success; origin
        "precollected". A pooled episode without a score (a person vouched for it, no
        evaluator ran) counts as score 1.0; one the evaluator scored below the threshold
        is passed over, as it would give a group no signal."""
        excluded = list(exclude)
        not_excluded = (f" AND e.id NOT IN ({','.join('?' * len(excluded))})"
                        if excluded else "")
        columns = "e.id, e.task_id, e.score, e.created_at, e.policy_version, e.source"
        database = self.store.database
        with database.read():
            pooled = database.row(
                f"SELECT {columns} FROM success_pool p JOIN episodes e ON e.id = p.episode_id "
                f"WHERE p.task_id = ? AND e.status = 'done' "
                f"AND (e.score IS NULL OR e.score >= ?){not_excluded} "
                f"ORDER BY e.created_at DESC, e.rowid DESC LIMIT 1",
                [task_id, self.success_threshold, *excluded])
            if pooled is not None:
                if pooled["score"] is None:
                    pooled["score"] = 1.0
                return _member(pooled, "precollected")
            scored = None
            for tagged in (True, False):
                join = ("JOIN episode_tags t ON t.episode_id = e.id AND t.tag = ? "
                        if tagged else "")
                scored = database.row(
                    f"SELECT {columns} FROM episodes e {join}"
                    f"WHERE e.task_id = ? AND e.status = 'done' AND e.score >= ?"
                    f"{not_excluded} ORDER BY e.created_at DESC, e.rowid DESC LIMIT 1",
                    [*([PRECOLLECTED_TAG] if tagged else []), task_id,
                     self.success_threshold, *excluded])
                if scored is not None:
                    break
        return None if scored is None else _member(scored, "precollected")


def apply_precollected(group: Group, source: SuccessSource) -> Group | None:
    """DART: a group in which no member reached the success threshold (by the evaluator's
    score, not the reward: a success with a format penalty is still a success, and a
    failure's penalty does not make a group look failing) gets the task's newest known
    success in place of its oldest member; None when the task has no known success (skip
    it for now). A group with a success is left as it is, so its success is never the
    member replaced."""
    if any(m.succeeded(source.success_threshold) for m in group.members):
        return group
    if not group.members:
        return group
    success = source.newest_success(group.task_id,
                                    exclude={m.episode_id for m in group.members})
    if success is None:
        return None
    index = min(range(len(group.members)), key=lambda i: group.members[i].created_at)
    replaced = group.members[index]
    note = (f"precollected: episode {success.episode_id} ({success.source}, score "
            f"{success.score:.2f}) replaced the oldest episode {replaced.episode_id}")
    return _with_member(group, index, success, note)


def trim_group(group: Group, size: int, rng: random.Random, *,
               success_threshold: float = 0.5) -> Group:
    """At most `size` members, chosen at random but keeping at least one success and one
    failure when the group has both (so the trimmed group still has a signal)."""
    if size < 1:
        raise ValueError(f"size: expected a whole number >= 1, got {size!r}")
    count = len(group.members)
    if count <= size:
        return group
    successes = [i for i, m in enumerate(group.members) if m.score >= success_threshold]
    failures = [i for i, m in enumerate(group.members) if m.score < success_threshold]
    keep: set[int] = set()
    if successes and failures and size >= 2:
        keep = {rng.choice(successes), rng.choice(failures)}
    rest = [i for i in range(count) if i not in keep]
    keep.update(rng.sample(rest, size - len(keep)))
    members = [m for i, m in enumerate(group.members) if i in keep]
    return Group(task_id=group.task_id, members=members,
                 notes=[*group.notes, f"trimmed from {count} to {size} members"])


def _member(row: Mapping[str, Any], origin: str) -> GroupMember:
    return GroupMember(episode_id=row["id"], task_id=row["task_id"], score=float(row["score"]),
                       created_at=row["created_at"], policy_version=row["policy_version"],
                       source=row["source"], origin=origin)
