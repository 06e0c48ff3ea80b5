"""Task selection, rollout counts, step budgets, replay and pre-collected successes, against
a real workspace."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.trajectory import Episode, Step
from trainer.curation import (
    PRECOLLECTED_TAG,
    CurationConfig,
    Group,
    GroupMember,
    ReplayBuffer,
    SuccessSource,
    TaskFilter,
    TaskStatistics,
    apply_precollected,
    dynamic_rollout_count,
    inject_replay,
    is_all_failing,
    replay_batch,
    step_budget,
    trainable_steps,
    trim_group,
)
from trainer.store import EpisodeFilter, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "ws") as opened:
        yield opened


def add(store: Store, task: str, score: float | None, *, at: float, steps: int = 1,
        status: str = "done", source: str = "rollout", version: int | None = 1,
        run: str | None = "run-a", tags: tuple[str, ...] = ()) -> str:
    episode = Episode(
        id=f"{task}-{source}-{at}", task_id=task, policy_version=version, score=score,
        status=status, source=source, run_id=run, created_at=at,  # type: ignore[arg-type]
        tags=list(tags), steps=[Step(index=i, response=str(i)) for i in range(steps)])
    store.episodes.save(episode)
    return episode.id


def member(episode_id: str, score: float, *, task: str = "t", at: float = 0.0,
           version: int | None = 1, origin: str = "rollout") -> GroupMember:
    return GroupMember(episode_id=episode_id, task_id=task, score=score, created_at=at,
                       policy_version=version, source="rollout", origin=origin)


def group(scores: list[float], task: str = "t", prefix: str = "g") -> Group:
    return Group(task_id=task, members=[member(f"{prefix}{i}", s, task=task, at=float(i))
                                        for i, s in enumerate(scores)], notes=[])


# -- dynamic rollout count -------------------------------------------------------------------


@pytest.mark.parametrize(("rate", "expected"), [
    (0.6, 8), (0.75, 5), (0.9, 3), (1.0, 2),  # algorithms.md's table
    (0.1 * 6, 8), (0.3 * 3, 3),  # a hair off the table's rates in binary floating point
    (None, 8), (0.0, 8), (0.59, 8), (0.7, 5), (0.95, 2),
])
def test_dynamic_rollout_count_follows_darts_table(rate: float | None, expected: int) -> None:
    assert dynamic_rollout_count(rate, 8) == expected


def test_dynamic_rollout_count_stays_within_min_and_g() -> None:
    assert dynamic_rollout_count(0.6, 4) == 4  # int(9 / 0.6 - 7) = 8, but G is 4
    assert dynamic_rollout_count(1.0, 8, min_rollouts=3) == 3
    assert dynamic_rollout_count(0.7, 8, threshold=0.8) == 8
    with pytest.raises(ValueError, match=r"success_rate: expected a number in \[0, 1\]"):
        dynamic_rollout_count(1.5, 8)


# -- task statistics and the filter ----------------------------------------------------------


def test_task_statistics_over_the_newest_window(store: Store) -> None:
    # "a": six scored episodes; the window of 4 sees the newest four: 1, 0, 1, 1 (times 3-6).
    for at, score, steps in [(1, 1.0, 9), (2, 1.0, 9), (3, 1.0, 2), (4, 0.0, 7), (5, 1.0, 4),
                             (6, 0.5, 3)]:
        add(store, "a", score, at=at, steps=steps)
    add(store, "a", None, at=7, status="error")  # not scored: not counted
    add(store, "a", 1.0, at=8, status="incomplete", steps=50)
    add(store, "b", 0.0, at=1, steps=5)
    add(store, "c", 1.0, at=1, run="run-b", version=5, steps=6)
    stats = TaskStatistics.from_store(store, window=4, success_threshold=0.5)
    assert stats.episodes("a") == 4
    assert stats.success_rate("a") == 0.75
    assert stats.mean_success_length("a") == pytest.approx((2 + 4 + 3) / 3)
    assert (stats.success_rate("b"), stats.episodes("b"), stats.mean_success_length("b")) == (
        0.0, 1, None)
    assert (stats.success_rate("nope"), stats.episodes("nope")) == (None, 0)
    assert stats.task_ids == ["a", "b", "c"]

    strict = TaskStatistics.from_store(store, window=4, success_threshold=0.9)
    assert strict.success_rate("a") == 0.5
    assert strict.mean_success_length("a") == 3.0  # the 0.5-scored episode is no success now
    of_run = TaskStatistics.from_store(store, window=4, success_threshold=0.5, run_id="run-b")
    assert of_run.task_ids == ["c"]
    newer = TaskStatistics.from_store(store, window=4, success_threshold=0.5, min_version=2)
    assert newer.task_ids == ["c"] and newer.mean_success_length("c") == 6.0
    some = TaskStatistics.from_store(store, window=4, success_threshold=0.5, task_ids=["b"])
    assert some.task_ids == ["b"]


def test_filter_skips_solved_and_hopeless_tasks_with_reasons(store: Store) -> None:
    for at in range(16):
        add(store, "solved", 1.0, at=at)
        add(store, "hopeless", 0.0, at=at)
        add(store, "learning", float(at % 2), at=at)
    for at in range(3):
        add(store, "new", 1.0, at=at)  # fewer than filter_min_episodes: kept
    stats = TaskStatistics.from_store(store, window=16, success_threshold=0.5)
    ids = ["solved", "hopeless", "learning", "new", "unseen"]

    off = TaskFilter(CurationConfig())
    assert off.select(ids, stats) == (ids, {})

    dart = TaskFilter(CurationConfig(task_filter=True))
    kept, skipped = dart.select(ids, stats)
    assert kept == ["hopeless", "learning", "new", "unseen"]
    assert skipped == {"solved": "success rate 1.00 >= filter_max 1.0 over 16 episodes"}
    assert not dart.keep("solved", stats) and dart.keep("new", stats)

    band = TaskFilter(CurationConfig(task_filter=True, filter_min=0.1, filter_max=0.9))
    kept, skipped = band.select(ids, stats)
    assert kept == ["learning", "new", "unseen"]
    assert skipped["hopeless"] == "success rate 0.00 < filter_min 0.1 over 16 episodes"

    no_grace = TaskFilter(CurationConfig(task_filter=True, filter_min_episodes=0))
    assert no_grace.select(["new", "unseen"], stats) == (
        ["unseen"], {"new": "success rate 1.00 >= filter_max 1.0 over 3 episodes"})


# -- dynamic trajectory length ---------------------------------------------------------------


def test_step_budget_follows_the_length_of_successes(store: Store) -> None:
    add(store, "short", 1.0, at=1, steps=2)
    add(store, "short", 1.0, at=2, steps=3)
    add(store, "long", 1.0, at=1, steps=30)
    add(store, "failing", 0.0, at=1, steps=12)
    stats = TaskStatistics.from_store(store, window=16, success_threshold=0.5)
    assert step_budget("short", stats, factor=2.0, max_steps=15) == 5  # ceil(2 x 2.5)
    assert step_budget("short", stats, factor=0.1, max_steps=15) == 1  # at least one step
    assert step_budget("long", stats, factor=2.0, max_steps=15) == 15  # at most max_steps
    assert step_budget("long", stats, factor=0.1, max_steps=15) == 3  # 0.1 x 30, not 4
    assert step_budget("failing", stats, factor=2.0, max_steps=15) == 15  # no success yet
    assert step_budget("unseen", stats, factor=2.0, max_steps=15) == 15


def test_trainable_steps_drop_the_typical_part_of_long_failures() -> None:
    assert trainable_steps(10, True, 3.0) == list(range(10))
    assert trainable_steps(10, False, None) == list(range(10))
    assert trainable_steps(10, False, 3.0) == [3, 4, 5, 6, 7, 8, 9]
    assert trainable_steps(10, False, 2.5) == [3, 4, 5, 6, 7, 8, 9]  # ceil(2.5) = 3
    assert trainable_steps(3, False, 3.0) == [0, 1, 2]  # not longer: all steps
    assert trainable_steps(2, False, 3.0) == [0, 1]
    assert trainable_steps(0, False, 3.0) == []


# -- groups and experience replay ------------------------------------------------------------


def test_group_statistics_use_the_population_std() -> None:
    g = group([0.0, 1.0, 1.0, 0.0])
    assert (g.scores, g.mean, g.std) == ([0.0, 1.0, 1.0, 0.0], 0.5, 0.5)
    with pytest.raises(ValueError, match="group of task t: no members"):
        _ = Group(task_id="t", members=[]).mean


def test_group_member_from_summary(store: Store) -> None:
    add(store, "t", 0.25, at=3.0, version=7)
    add(store, "t", None, at=4.0, status="error")
    scored, unscored = sorted(store.queries.page(EpisodeFilter(task_ids=["t"])),
                              key=lambda s: s.created_at)
    assert GroupMember.from_summary(scored, origin="replay") == GroupMember(
        episode_id="t-rollout-3.0", task_id="t", score=0.25, created_at=3.0, policy_version=7,
        source="rollout", origin="replay")
    with pytest.raises(ValueError, match=r"episode t-rollout-4.0: score: expected a number"):
        GroupMember.from_summary(unscored)
    with pytest.raises(ValueError, match=r"origin: expected one of .*got 'reused'"):
        member("x", 1.0, origin="reused")


def test_replay_buffer_is_a_fifo_of_successes_per_task() -> None:
    buffer = ReplayBuffer(capacity=3, success_score=0.1)
    added = buffer.add([member("f0", 0.0), member("f1", 0.1),  # not > 0.1: no success
                        member("s0", 0.2), member("s1", 1.0), member("s0", 0.2),  # duplicate
                        member("o0", 1.0, task="other")])
    assert added == 3 and len(buffer) == 3
    assert [m.episode_id for m in buffer.get("t")] == ["s0", "s1"]
    buffer.add([member("s2", 1.0), member("s3", 1.0), member("s4", 1.0)])
    assert [m.episode_id for m in buffer.get("t")] == ["s2", "s3", "s4"]  # oldest out first
    assert [m.episode_id for m in buffer.get("other")] == ["o0"]
    assert buffer.get("unseen") == [] and buffer.sample("unseen", random.Random(0)) is None
    assert buffer.add([member("r", 1.0, origin="replay")]) == 0  # a copy it already knows
    drawn = {buffer.sample("t", random.Random(seed)).episode_id  # type: ignore[union-attr]
             for seed in range(50)}
    assert drawn == {"s2", "s3", "s4"}


def test_replay_judges_success_on_the_evaluators_score_not_the_penalised_reward() -> None:
    """A success whose format penalty took its reward to 0: its group is not all-failing,
    no member of it is replaced, and the buffer keeps it as a success; a group whose
    evaluator scores are all 0 is still repaired."""
    buffer = ReplayBuffer(success_score=0.1)
    buffer.add([member("old-success", 1.0, version=3)])
    penalised = dataclasses.replace(member("late", 0.0, at=1.0), evaluator_score=1.0)
    failed = [dataclasses.replace(member(f"f{i}", 0.0, at=2.0 + i), evaluator_score=0.0)
              for i in range(3)]
    with_success = Group(task_id="t", members=[penalised, *failed], notes=[])
    assert with_success.std == 0.0 and with_success.mean == 0.0  # by reward: no signal
    assert not is_all_failing(with_success)
    for seed in range(20):
        assert inject_replay(with_success, buffer, random.Random(seed)) is with_success
    assert buffer.add([penalised, *failed]) == 1
    assert "late" in [m.episode_id for m in buffer.get("t")]
    all_failed = Group(task_id="t", members=failed, notes=[])
    assert is_all_failing(all_failed)
    assert any(m.origin == "replay"
               for m in inject_replay(all_failed, buffer, random.Random(0)).members)
    with pytest.raises(ValueError, match="no members"):
        is_all_failing(Group(task_id="t", members=[], notes=[]))


def test_injection_replaces_one_member_of_an_all_failing_group() -> None:
    buffer = ReplayBuffer()
    buffer.add([member("old-success", 1.0, version=3)])
    for seed in range(20):
        failing = group([0.0, 0.0, 0.0, 0.0])
        repaired = inject_replay(failing, buffer, random.Random(seed))
        replayed = [m for m in repaired.members if m.origin == "replay"]
        assert len(replayed) == 1 and replayed[0].episode_id == "old-success"
        assert replayed[0].policy_version == 3  # the loss needs the old version
        assert sum(a != b for a, b in zip(failing.members, repaired.members, strict=True)) == 1
        assert [m.origin for m in failing.members] == ["rollout"] * 4  # input untouched
        (note,) = repaired.notes
        assert note.startswith("replay: episode old-success") and "replaced episode g" in note
    for scores in ([0.0, 1.0, 0.0, 0.0],  # has a signal already
                   [0.0, 0.3, 0.0, 0.0],  # std 0.13: not all-failing
                   [0.3, 0.3, 0.3, 0.3]):  # std 0 but mean 0.3: a uniform partial success
        mixed = group(scores)
        assert inject_replay(mixed, buffer, random.Random(0)) is mixed
    other_task = group([0.0, 0.0], task="u")
    assert inject_replay(other_task, buffer, random.Random(0)) is other_task


def test_a_batch_is_injected_before_its_successes_enter_the_buffer() -> None:
    # ARPO counts score > 0.1 as a buffer success, while a group of 0.15s is still
    # all-failing (std 0, mean < 0.2): with the buffer updated first, the group would be
    # "repaired" with one of its own episodes.
    buffer = ReplayBuffer()
    batch = [group([0.15, 0.15, 0.15, 0.15], prefix="a"), group([0.0, 0.0], task="u")]
    repaired = replay_batch(batch, buffer, random.Random(0))
    assert [g.members for g in repaired] == [g.members for g in batch]
    assert all(not g.notes for g in repaired)
    assert [m.episode_id for m in buffer.get("t")] == ["a0", "a1", "a2", "a3"]
    # Two groups of one task in a batch: the success of one is not replayed into the other.
    fresh = ReplayBuffer()
    batch = [group([1.0, 0.0], task="v", prefix="c"), group([0.0, 0.0], task="v", prefix="d")]
    repaired = replay_batch(batch, fresh, random.Random(0))
    assert [g.members for g in repaired] == [g.members for g in batch]
    assert [m.episode_id for m in fresh.get("v")] == ["c0"]
    # The next batch of the same task draws from them.
    again = replay_batch([group([0.0, 0.0, 0.0], prefix="b")], buffer, random.Random(0))
    assert [m.origin for m in again[0].members].count("replay") == 1


def test_replay_buffer_round_trips_through_json() -> None:
    buffer = ReplayBuffer(capacity=2, success_score=0.2)
    buffer.add([member("a", 1.0, at=1.0, version=None), member("b", 0.5, at=2.0),
                member("c", 0.9, task="u", at=3.0, origin="precollected")])
    restored = ReplayBuffer.from_dict(json.loads(json.dumps(buffer.to_dict())))
    assert (restored.capacity, restored.success_score) == (2, 0.2)
    assert restored.to_dict() == buffer.to_dict()
    assert restored.get("t") == buffer.get("t") and restored.get("u") == buffer.get("u")
    restored.add([member("d", 1.0)])
    assert [m.episode_id for m in restored.get("t")] == ["b", "d"]  # capacity kept

    broken = buffer.to_dict()
    broken["tasks"]["t"][1]["score"] = "high"
    with pytest.raises(ValueError, match=r"replay buffer.tasks\['t'\]\[1\].score: expected a "
                                         r"number, got 'high'"):
        ReplayBuffer.from_dict(broken)
    with pytest.raises(ValueError, match=r"replay buffer.capacity: expected a whole number"):
        ReplayBuffer.from_dict({"capacity": "8", "success_score": 0.1})


def test_replay_buffer_is_rebuilt_from_the_runs_newest_successes(store: Store) -> None:
    for at in range(5):
        add(store, "t", 1.0, at=at, version=at)
    add(store, "t", 0.05, at=10)  # not > 0.1
    add(store, "t", 1.0, at=11, status="error")
    add(store, "t", 1.0, at=12, run="run-b")  # another run
    add(store, "u", 0.5, at=1)
    buffer = ReplayBuffer.from_store(store, "run-a", capacity=3, success_score=0.1)
    assert [m.episode_id for m in buffer.get("t")] == [f"t-rollout-{at}" for at in (2, 3, 4)]
    assert [m.policy_version for m in buffer.get("t")] == [2, 3, 4]
    assert [m.episode_id for m in buffer.get("u")] == ["u-rollout-1"]
    assert len(buffer) == 4
    # The same buffer as one fed the run's episodes in order.
    live = ReplayBuffer(capacity=3)
    live.add(GroupMember.from_summary(s) for s in reversed(store.queries.page(
        EpisodeFilter(run_ids=["run-a"], statuses=["done"]))))
    assert live.to_dict()["tasks"] == buffer.to_dict()["tasks"]


# -- pre-collected successes -----------------------------------------------------------------


def test_success_source_prefers_the_pool_then_any_success(store: Store) -> None:
    pooled = add(store, "t", 1.0, at=1, source="human", version=None, run=None)
    newer = add(store, "t", 0.8, at=5, source="import", version=None, run=None)
    add(store, "t", 0.4, at=6)  # below the threshold
    add(store, "t", 1.0, at=7, status="error")
    store.pool.add(pooled)
    source = SuccessSource(store, success_threshold=0.5)

    found = source.newest_success("t")
    assert found is not None
    assert (found.episode_id, found.origin, found.source) == (pooled, "precollected", "human")
    found = source.newest_success("t", exclude=[pooled])
    assert found is not None and found.episode_id == newer
    store.pool.remove(pooled)
    found = source.newest_success("t")
    assert found is not None and (found.episode_id, found.score) == (newer, 0.8)
    assert source.newest_success("t", exclude=[pooled, newer]) is None
    assert source.newest_success("unseen") is None


def test_collected_successes_come_before_the_policys_own_old_ones(store: Store) -> None:
    collected = add(store, "t", 1.0, at=1, source="rollout", tags=(PRECOLLECTED_TAG,))
    own = add(store, "t", 1.0, at=5, source="rollout", version=3)  # newer, but stale
    source = SuccessSource(store, success_threshold=0.5)
    found = source.newest_success("t")
    assert found is not None and found.episode_id == collected
    found = source.newest_success("t", exclude=[collected])
    assert found is not None and found.episode_id == own
    store.pool.add(own)  # the curated pool still comes first
    found = source.newest_success("t")
    assert found is not None and found.episode_id == own


def test_pooled_episodes_without_a_score_count_and_failed_ones_do_not(store: Store) -> None:
    vouched = add(store, "t", None, at=1, source="human", version=None, run=None)
    disputed = add(store, "t", 0.0, at=2, source="human", version=None, run=None)
    store.pool.add(vouched)
    store.pool.add(disputed)
    found = SuccessSource(store).newest_success("t")
    assert found is not None and (found.episode_id, found.score) == (vouched, 1.0)


def test_apply_precollected_replaces_the_oldest_member(store: Store) -> None:
    demo = add(store, "t", 1.0, at=0.5, source="human", version=None, run=None)
    source = SuccessSource(store)
    # Listed out of time order: the oldest (created_at 1.0) is the third member.
    zero = Group(task_id="t", members=[member("m0", 0.0, at=3.0), member("m1", 0.0, at=2.0),
                                       member("m2", 0.0, at=1.0), member("m3", 0.0, at=4.0)],
                 notes=[])
    repaired = apply_precollected(zero, source)
    assert repaired is not None
    assert [m.episode_id for m in repaired.members] == ["m0", "m1", demo, "m3"]
    assert repaired.members[2].origin == "precollected" and repaired.mean == 0.25
    assert "replaced the oldest episode m2" in repaired.notes[0]

    signal = group([0.0, 1.0])
    assert apply_precollected(signal, source) is signal
    assert apply_precollected(group([0.0, 0.0], task="hard"), source) is None


def test_precollected_goes_only_into_groups_where_no_member_succeeded(store: Store) -> None:
    """Success is the evaluator's verdict, not the penalised reward: rewards [1, -0.5, -0.5,
    0] (mean 0) hold a success, and its group keeps it; a group of partial scores below the
    threshold (mean > 0) has none, and gets the known success."""
    add(store, "t", 1.0, at=0.5, source="human", version=None, run=None)
    source = SuccessSource(store, success_threshold=0.5)
    penalised = Group(task_id="t", notes=[], members=[
        member("s", 1.0, at=1.0), member("f1", -0.5, at=2.0), member("f2", -0.5, at=3.0),
        member("f3", 0.0, at=4.0)])
    assert penalised.mean == 0.0
    assert apply_precollected(penalised, source) is penalised
    # a success whose reward a format penalty took under the threshold still counts
    late = dataclasses.replace(member("p", 0.5, at=1.0), evaluator_score=1.0)
    format_hit = Group(task_id="t", notes=[], members=[late, member("q", 0.0, at=2.0)])
    assert late.succeeded(0.8) and not member("q", 0.5).succeeded(0.8)
    assert apply_precollected(format_hit, SuccessSource(store, 0.8)) is format_hit
    partial = group([0.3, 0.2, 0.4])
    repaired = apply_precollected(partial, source)
    assert repaired is not None and repaired is not partial
    assert [m.origin for m in repaired.members] == ["precollected", "rollout", "rollout"]


def test_a_member_round_trips_with_its_evaluator_score() -> None:
    scored = dataclasses.replace(member("m", -0.5), evaluator_score=1.0)
    assert GroupMember.from_dict(scored.to_dict()) == scored
    older = scored.to_dict()
    del older["evaluator_score"]  # a replay buffer saved before the field existed
    assert GroupMember.from_dict(older).evaluator_score is None


# -- trimming --------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(scores=st.lists(st.sampled_from([0.0, 0.2, 0.5, 0.7, 1.0]), min_size=1, max_size=12),
       size=st.integers(min_value=1, max_value=12), seed=st.integers(0, 2**32 - 1))
def test_trim_keeps_a_success_and_a_failure(scores: list[float], size: int, seed: int) -> None:
    full = group(scores)
    trimmed = trim_group(full, size, random.Random(seed))
    assert len(trimmed.members) == min(size, len(scores))
    ids = [m.episode_id for m in full.members]
    kept = [m.episode_id for m in trimmed.members]
    assert len(set(kept)) == len(kept)
    assert kept == [i for i in ids if i in kept]  # a subset, in the original order
    has_success = any(s >= 0.5 for s in scores)
    has_failure = any(s < 0.5 for s in scores)
    if has_success and has_failure and size >= 2:
        assert any(m.score >= 0.5 for m in trimmed.members)
        assert any(m.score < 0.5 for m in trimmed.members)
    if len(scores) <= size:
        assert trimmed is full
    else:
        assert trimmed.notes == [f"trimmed from {len(scores)} to {size} members"]


def test_trim_uses_the_given_success_threshold() -> None:
    scores = [0.3] + [0.0] * 9
    for seed in range(30):
        trimmed = trim_group(group(scores), 2, random.Random(seed), success_threshold=0.25)
        assert sorted(trimmed.scores) == [0.0, 0.3]
    choices = {tuple(m.episode_id for m in trim_group(group([0.0] * 6), 3,
                                                      random.Random(seed)).members)
               for seed in range(30)}
    assert len(choices) > 1  # the rest is chosen at random


# -- configuration ---------------------------------------------------------------------------


def test_every_config_field_has_a_default_and_help() -> None:
    config = CurationConfig()
    for item in dataclasses.fields(config):
        assert item.default is not dataclasses.MISSING, item.name
        assert item.metadata.get("help"), item.name
    assert not (config.task_filter or config.dynamic_rollouts or config.dynamic_step_budget
                or config.replay or config.precollected)


@pytest.mark.parametrize(("fields", "message"), [
    ({"filter_max": 2}, "curation.filter_max: expected a number in [0, 1], got 2"),
    ({"success_threshold": -0.1},
     "curation.success_threshold: expected a number in [0, 1], got -0.1"),
    ({"filter_min": 0.8, "filter_max": 0.5},
     "curation.filter_min: expected at most filter_max (0.5), got 0.8"),
    ({"rollout_threshold": 0.0},
     "curation.rollout_threshold: expected a number in (0, 1], got 0.0"),
    ({"stats_window": 0}, "curation.stats_window: expected a whole number >= 1, got 0"),
    ({"filter_min_episodes": -1},
     "curation.filter_min_episodes: expected a whole number >= 0, got -1"),
    ({"min_rollouts": 0}, "curation.min_rollouts: expected a whole number >= 1, got 0"),
    ({"replay_capacity": 0}, "curation.replay_capacity: expected a whole number >= 1, got 0"),
    ({"step_budget_factor": 0}, "curation.step_budget_factor: expected a number > 0, got 0"),
    ({"replay_std_below": -1}, "curation.replay_std_below: expected a number >= 0, got -1"),
    ({"replay": "yes"}, "curation.replay: expected true or false, got 'yes'"),
    ({"stats_window": 16.0}, "curation.stats_window: expected a whole number, got 16.0"),
    ({"replay_mean_below": "0.2"}, "curation.replay_mean_below: expected a number, got '0.2'"),
    ({"filter_max": float("nan")}, "curation.filter_max: expected a number, got nan"),
])
def test_config_rejects_bad_values_naming_the_field(fields: dict[str, object],
                                                    message: str) -> None:
    with pytest.raises(ValueError) as caught:
        CurationConfig(**fields)  # type: ignore[arg-type]
    assert str(caught.value) == message
