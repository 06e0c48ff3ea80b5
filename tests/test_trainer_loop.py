"""`workbench train` end to end on real sandboxes with the tiny model: warm-up, updates,
metrics and checkpoints in the store, Ctrl-C saving a checkpoint, and resume continuing
the same run without training an episode twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.run_configs import (
    UNENDING_UPDATES,
    gradient_steps,
    tiny_run_config,
    train_then_interrupt,
)
from trainer.config import parse_run_config
from trainer.loop import PRECOLLECTED_TAG, TrainingRun, WarmupProgress
from trainer.store import Store
from trainer.store.queries import EpisodeFilter

pytestmark = [pytest.mark.x11, pytest.mark.slow]

REQUIRED_METRICS = {
    "reward_mean", "reward_std", "success_rate", "loss", "entropy", "kl", "clip_fraction",
    "is_ratio_min", "is_ratio_mean", "is_ratio_max", "grad_norm", "learning_rate",
    "rollout_tokens_per_second", "train_tokens_per_second", "rollout_seconds",
    "train_seconds", "rollout_time_fraction", "policy_version",
}


def test_a_run_writes_metrics_checkpoints_and_consumes_each_episode_once(
        tmp_path: Path) -> None:
    # a warm-up that moves the adapter well away from zero (the base model); no dropout,
    # so that the policy's and the reference's passes over the same weights agree
    text = tiny_run_config(updates=2, warmup_steps=2, warmup_learning_rate=0.05,
                           lora_dropout=0.0)
    workspace = tmp_path / "ws"
    warm_up: list[WarmupProgress] = []
    summary = TrainingRun(parse_run_config(text), text, workspace, progress=False,
                          on_warmup=warm_up.append).run()
    assert summary.status == "done" and summary.updates == 2
    assert summary.policy_version == gradient_steps(summary.history)
    # the warm-up said where it was: recording, what it kept, each of its 2 steps
    assert [(p.stage, p.done, p.total) for p in warm_up] == [
        ("collecting", 0, 2), ("collected", warm_up[1].done, 2), ("step", 1, 2),
        ("step", 2, 2)] and warm_up[1].done >= 1
    assert all(p.nll is not None and p.nll > 0 for p in warm_up[2:])
    with Store.open(workspace) as store:
        run = store.runs.get(summary.run_id)
        assert run.status == "done" and run.config == text
        versions = [c.policy_version for c in store.runs.checkpoints(run.id)]
        assert versions == list(range(summary.policy_version + 1))  # 0: after the warm-up
        for checkpoint in store.runs.checkpoints(run.id):
            assert (workspace / checkpoint.path / "checkpoint.json").is_file()
        names = {p.name for p in store.runs.metrics(run.id)}
        assert names >= REQUIRED_METRICS, REQUIRED_METRICS - names
        assert "warmup_nll" in names
        # the KL term (beta > 0) refers to the warmed-up policy, saved beside the versions:
        # the first update's only pass starts from it
        reference = workspace / "checkpoints" / run.id / "kl-reference"
        assert (reference / "adapter" / "adapter_config.json").is_file()
        # (0.006 at the first update when the reference was the base model)
        first_kl = store.runs.metrics(run.id, ["kl"])[0]
        assert first_kl.step == 1 and first_kl.value is not None, first_kl
        assert abs(first_kl.value) < 1e-6, first_kl
        assert any(n.startswith("success_rate/buttons-grid2x2-") for n in names)
        steps = {p.step for p in store.runs.metrics(run.id, ["reward_mean"])}
        assert steps == {1, 2}
        consumed = store.runs.consumed(run.id)
        assert len(consumed) == len(set(consumed))
        trained = {e for r in summary.history for e in r.episode_ids}
        assert set(consumed) == trained
        # every rolled-out episode carries the version that made it
        for result in summary.history:
            for episode_id in result.episode_ids:
                episode = store.episodes.load(episode_id, steps=False)
                made_by = result.policy_version - int(result.metrics["gradient_step"])
                assert episode.policy_version == made_by
                # and the desktop it ran on (the app's Live screen reads it)
                assert episode.info["sandbox"].startswith(f"train-{run.id}-")
    # the run's throwaway desktops are gone, not left to pile up on the Environments screen
    for folder in ("sandboxes", "snapshots"):
        assert not list((workspace / folder).glob(f"train-{summary.run_id}-*"))


def test_a_resumed_run_refers_to_the_reference_its_warm_up_saved(tmp_path: Path) -> None:
    text = tiny_run_config(updates=1, warmup_steps=2, warmup_learning_rate=0.05)
    workspace = tmp_path / "ws"
    first = TrainingRun(parse_run_config(text), text, workspace, progress=False)
    summary = first.run()
    assert summary.status == "done"
    reference = (workspace / "checkpoints" / summary.run_id / "kl-reference").absolute()
    assert first.policy.reference_checkpoint == reference
    saved_at = (reference / "checkpoint.json").stat().st_mtime_ns

    text = tiny_run_config(updates=2, warmup_steps=2, warmup_learning_rate=0.05)
    resumed = TrainingRun(parse_run_config(text), text, workspace, run_id=summary.run_id,
                          resume=True, progress=False)
    assert resumed.run().status == "done"
    assert resumed.policy.reference_checkpoint == reference
    assert (reference / "checkpoint.json").stat().st_mtime_ns == saved_at  # loaded, not redone

    reference.rename(reference.with_name("moved"))
    text = tiny_run_config(updates=3, warmup_steps=2, warmup_learning_rate=0.05)
    again = TrainingRun(parse_run_config(text), text, workspace, run_id=summary.run_id,
                        resume=True, progress=False)
    with pytest.raises(ValueError, match=f"grpo.beta: {reference} is missing"):
        again.run()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["loop", "embedded-runtime"])
def test_an_update_that_trains_nothing_makes_no_new_version(tmp_path: Path,
                                                             asynchronous: bool) -> None:
    from dataclasses import replace

    from trainer.runtime import AsyncTrainingRun

    # One new token cannot be an action: every response is unparseable, every group's
    # rewards are equal, and without a KL term no sample has anything to teach.
    extra = "[runtime]\nasynchronous = true\n" if asynchronous else ""
    text = tiny_run_config(updates=2, max_steps=1, extra=extra)
    config = parse_run_config(text)
    config = replace(config, grpo=replace(config.grpo, beta=0.0),
                     rollout=replace(config.rollout, max_new_tokens=1))
    workspace = tmp_path / "ws"
    run_class = AsyncTrainingRun if asynchronous else TrainingRun
    summary = run_class(config, text, workspace, progress=False).run()
    assert summary.status == "done" and summary.updates == 2
    assert summary.policy_version == 0
    assert [r.policy_version for r in summary.history] == [0, 0]
    assert [r.metrics["gradient_step"] for r in summary.history] == [0.0, 0.0]
    assert all(r.metrics["no_gradient_step/equal_rewards_in_every_group"] == 1.0
               for r in summary.history)
    with Store.open(workspace) as store:
        assert [c.policy_version for c in store.runs.checkpoints(summary.run_id)] == [0]
        for result in summary.history:
            for episode_id in result.episode_ids:
                assert store.episodes.load(episode_id, steps=False).policy_version == 0


def test_ctrl_c_saves_and_resume_continues_the_same_run(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    # a run that cannot end before the Ctrl-C reaches it, however slow the machine
    config.write_text(tiny_run_config(updates=UNENDING_UPDATES))
    workspace = tmp_path / "ws"
    returncode, output = train_then_interrupt(config, workspace, "interrupted")
    assert returncode == 130, output
    with Store.open(workspace) as store:
        run = store.runs.get("interrupted")
        assert run.status == "stopped"
        saved = store.runs.latest_version("interrupted")
        assert saved is not None and saved >= 1
        consumed_before = store.runs.consumed("interrupted")

    target = saved + 2  # the resumed run trains two more updates, then ends
    config.write_text(tiny_run_config(updates=target))
    resumed = subprocess.run(
        [sys.executable, "-m", "workbench", "--workspace", str(workspace), "train",
         str(config), "--resume", "interrupted"], capture_output=True, text=True,
        timeout=600, env={**os.environ, "TQDM_DISABLE": "1"})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (f"run interrupted: done after {target} updates; policy version {target}"
            in resumed.stdout), resumed.stdout[-2000:]
    # piped, the run writes a line per update as it goes (the app's Log panel shows them)
    assert f"update {target}/{target} · policy v{target} · reward " in resumed.stdout
    with Store.open(workspace) as store:
        assert store.runs.get("interrupted").status == "done"
        assert [c.policy_version for c in store.runs.checkpoints("interrupted")][-1] == target
        consumed = store.runs.consumed("interrupted")
        assert len(consumed) == len(set(consumed))  # none trained twice
        assert set(consumed_before) <= set(consumed)  # none lost
        # every update logged its figures ("episodes" always; reward_mean only when the
        # update had finished episodes of its own, which a resumed first update may lack)
        steps = sorted({p.step for p in store.runs.metrics("interrupted", ["episodes"])})
        assert steps == list(range(1, target + 1))


def test_precollected_oracle_successes_fill_groups_that_found_none(tmp_path: Path) -> None:
    # The untrained tiny model never clicks the right button: every group fails, and
    # each takes the oracle success collected for its task before the first update.
    text = tiny_run_config(updates=1, extra="""
[curation]
precollected = true
precollect_oracle = 1
""")
    workspace = tmp_path / "ws"
    config = parse_run_config(text)
    summary = TrainingRun(config, text, workspace, progress=False).run()
    assert summary.status == "done"
    with Store.open(workspace) as store:
        ids = store.queries.ids(EpisodeFilter(tags=[PRECOLLECTED_TAG]))
        collected = store.queries.summaries(ids)
        assert sorted(s.task_id for s in collected) == ["buttons-grid2x2-0",
                                                        "buttons-grid2x2-1"]
        assert all(s.status == "done" and (s.score or 0) >= 1.0 for s in collected)
        rollouts = [e for r in summary.history for e in r.episode_ids]
        assert not set(ids) & set(rollouts)  # collected, not rolled out by the policy
        success = store.runs.metrics(summary.run_id, ["success_rate"])[0].value
        injected = store.runs.metrics(summary.run_id, ["precollected"])
        if success == 0.0:  # no group found a success of its own
            assert injected and injected[0].value == 2.0


def test_a_held_out_evaluation_every_n_updates_is_logged_and_never_trained_on(
        tmp_path: Path) -> None:
    text = tiny_run_config(updates=2, extra="""eval_every = 1  # (in [training])
eval_rollouts = 2
[training.eval_tasks]
buttons = 2
buttons_seed = 700
buttons_grid = [2, 2]
""")
    workspace = tmp_path / "ws"
    run = TrainingRun(parse_run_config(text), text, workspace, progress=False)
    run.run()
    with Store.open(workspace) as store:
        run_id = run.run_id or ""
        points = store.runs.metrics(run_id, ["heldout/success_rate", "heldout/episodes"])
        by_name: dict[str, list[int]] = {}
        for point in points:
            by_name.setdefault(point.name, []).append(point.step)
        assert by_name == {"heldout/success_rate": [1, 2], "heldout/episodes": [1, 2]}
        assert {p.value for p in points if p.name == "heldout/episodes"} == {4.0}
        held_out = store.queries.page(EpisodeFilter(tags=["heldout", f"heldout:{run_id}"]))
        assert len(held_out) == 8 and {e.run_id for e in held_out} == {None}
        assert {e.task_id for e in held_out}.isdisjoint(run.tasks_by_id)
        assert not set(store.runs.consumed(run_id)) & {e.id for e in held_out}


def test_held_out_tasks_must_not_be_training_tasks(tmp_path: Path) -> None:
    text = tiny_run_config(updates=1, extra="""eval_every = 1  # (in [training])
[training.eval_tasks]
buttons = 2
buttons_grid = [2, 2]
""")  # the same generated tasks as [tasks]
    with pytest.raises(ValueError, match="also trained on"):
        TrainingRun(parse_run_config(text), text, tmp_path / "ws", progress=False).run()


def test_a_multi_step_tabs_run_trains_with_the_cpu_threads_it_was_given(
        tmp_path: Path) -> None:
    import torch

    text = tiny_run_config(updates=1, max_steps=3).replace(
        'finetune = "lora"', 'finetune = "lora"\ncpu_threads = 1').replace(
        "[tasks]\nbuttons = 2\nbuttons_grid = [2, 2]", "[tasks]\ntabs = 2\ntabs_seed = 151")
    before = torch.get_num_threads()
    during: list[int] = []
    summary = TrainingRun(parse_run_config(text), text, tmp_path / "ws", progress=False,
                          on_update=lambda _: during.append(torch.get_num_threads())).run()
    assert summary.status == "done" and during == [1]
    assert torch.get_num_threads() == before  # given back when the run ends
    with Store.open(tmp_path / "ws") as store:
        episodes = [store.episodes.load(e) for e in summary.history[0].episode_ids]
        assert {e.task_id for e in episodes} == {"tabs-2x2-151", "tabs-2x2-152"}
        assert all(1 <= len(e.steps) <= 3 for e in episodes)
        assert any(len(e.steps) == 3 for e in episodes)  # three clicks asked of the model


def test_stop_at_success_reads_the_median_of_the_last_updates_from_the_store(
        tmp_path: Path) -> None:
    # The decision alone, on a real store (a resumed run counts its earlier updates); the
    # tabs learning test (tests/test_trainer_learning_tabs.py) ends a whole run by it.
    text = tiny_run_config(updates=50, extra="stop_at_success = 0.75  # (in [training])\n"
                                             "stop_window = 3\n")
    run = TrainingRun(parse_run_config(text), text, tmp_path / "ws", progress=False)
    with Store.open(tmp_path / "ws") as store:
        run.store, run.run_id = store, store.runs.create(name="early stop").id
        verdicts = []
        for step, rate in enumerate([1.0, 1.0, 0.0, 0.5, 1.0, 0.75, 0.0, 1.0], start=1):
            store.runs.log_metrics(run.run_id, step, {"success_rate": rate})
            verdicts.append(run._reached_target())
        # windows: (1), (1 1), (1 1 0), (1 0 .5), (0 .5 1), (.5 1 .75), (1 .75 0), (.75 0 1)
        assert verdicts == [False, False, True, False, False, True, True, True]
    off = tiny_run_config(updates=50)
    assert not TrainingRun(parse_run_config(off), off, tmp_path / "ws2",
                           progress=False)._reached_target()
    with pytest.raises(ValueError, match="stop_at_success"):
        parse_run_config(tiny_run_config(updates=5, extra="stop_at_success = 1.5\n"))
