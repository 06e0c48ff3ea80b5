"""The embedded decoupled run: the data manager's batches on a real store (window, stale
episodes, consumption once, recovery after a restart), the episode queue, and whole runs
on real sandboxes with the tiny model: training while rolling out, an X server killed in
the middle of an episode, and Ctrl-C followed by a resume."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agents.backends.base import SamplingConfig
from tests.conftest import wait_until
from tests.run_configs import (
    SYSTEM_PROMPT,
    UNENDING_UPDATES,
    gradient_steps,
    tiny_run_config,
    train_then_interrupt,
)
from trainer.config import parse_run_config
from trainer.rollouts import EpisodeJob, EpisodeOutcome
from trainer.runtime import AsyncTrainingRun, DataManager, EpisodeScheduler, GroupTicket
from trainer.store import Store
from vm.env import DesktopEnv
from vm.processes import pid_alive
from vm.providers.sandbox import SandboxProvider
from vm.suite.families import button_task

ASYNC_METRICS = {"env_utilisation", "trainer_idle_fraction", "episodes_per_minute",
                 "sync_seconds", "version_lag_mean", "stale_episodes"}
LOOP_METRICS = {"reward_mean", "loss", "entropy", "kl", "grad_norm", "learning_rate",
                "policy_version", "train_seconds", "rollout_tokens_per_second"}


# -- the data manager and the queue (a real store, no desktops) -------------------------


class _Episodes:
    """Writes finished episodes of queued groups into a real store, as rollouts do."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.task = button_task(0, (448, 280))

    def finish(self, group: str, version: int, status: str = "done") -> EpisodeOutcome:
        writer = self.store.episodes.begin(self.task.id, policy_version=version,
                                           run_id=self.run_id, info={"group": group})
        with writer:
            writer.finish(status, 1.0 if status == "done" else None,
                          None if status == "done" else "the desktop died")
        job = EpisodeJob(self.task, info={"group": group})
        return EpisodeOutcome(job, self.store.episodes.load(writer.episode_id))


def test_data_manager_serves_whole_groups_within_the_version_window(workspace: Path) -> None:
    with Store.open(workspace) as store:
        run = store.runs.create(kind="train")
        episodes = _Episodes(store, run.id)
        data = DataManager(store, run.id, max_version_lag=1)
        task = episodes.task.id
        data.expect([GroupTicket(g, task, 2) for g in ("g1", "g2", "g3", "g4")])
        for outcome in (episodes.finish("g1", 0), episodes.finish("g1", 0),
                        episodes.finish("g2", 0), episodes.finish("g2", 1, "error"),
                        episodes.finish("g3", 0)):
            data.record(outcome)
        assert data.open_groups() == 4

        first = data.take(2, policy_version=1, timeout=0)
        assert first is not None and first.group_ids == ["g1", "g2"]
        assert len(first.episodes) == 4  # the error too: it was made, it is used up
        assert first.version_lags() == [1, 1, 1]
        assert set(store.runs.consumed(run.id)) == set(first.episode_ids)
        assert data.take(1, policy_version=1, timeout=0) is None  # g3 is still running

        data.record(episodes.finish("g3", 1))
        data.record(episodes.finish("g4", 0))
        data.record(episodes.finish("g4", 0))
        # at version 2 the window is [1, 2]: g4 is all stale and dropped, g3 half stale
        second = data.take(1, policy_version=2, timeout=0)
        assert second is not None and second.group_ids == ["g3"]
        assert [e.policy_version for e in second.episodes] == [1]
        assert second.stale_episodes == 3  # never trained, never consumed
        assert data.open_groups() == 0
        consumed = store.runs.consumed(run.id)
        assert len(consumed) == len(set(consumed)) == 5

        # a restarted process finds the finished, unconsumed groups still in the window
        episodes.finish("g5", 2)
        episodes.finish("g5", 2)
        again = DataManager(store, run.id, max_version_lag=1)
        assert again.recover(policy_version=2) == 1
        third = again.take(1, policy_version=2, timeout=0)
        assert third is not None and third.group_ids == ["g5"] and len(third.episodes) == 2
        assert again.take(1, policy_version=2, timeout=0) is None

        # a group whose desktops all failed is handed out too: its update reports them
        again.expect([GroupTicket("g6", task, 2)])
        again.record(episodes.finish("g6", 2, "error"))
        again.record(episodes.finish("g6", 2, "error"))
        failed = again.take(1, policy_version=2, timeout=0)
        assert failed is not None and [e.status for e in failed.episodes] == ["error"] * 2
        assert failed.version_lags() == []
        consumed = store.runs.consumed(run.id)
        assert len(consumed) == len(set(consumed)) == 9


def test_the_queue_is_refilled_with_whole_groups_while_planning_is_allowed() -> None:
    tasks = [button_task(seed, (448, 280)) for seed in (1, 2)]
    plans: list[int] = []
    planned: list[GroupTicket] = []
    allowed = threading.Event()
    allowed.set()

    def plan() -> list[EpisodeJob]:
        plans.append(len(plans))
        return [EpisodeJob(task, k) for task in tasks for k in range(2)]

    scheduler = EpisodeScheduler(plan, low_water=2, may_plan=allowed.is_set,
                                 on_planned=planned.extend)
    jobs = [scheduler.next_job(timeout=1) for _ in range(3)]
    assert all(job is not None for job in jobs)
    assert len(plans) == 1 and [t.size for t in planned] == [2, 2]
    assert [job.info["group"] for job in jobs if job] == [planned[0].group_id] * 2 + [
        planned[1].group_id]
    assert all(job.info["group_size"] == 2 for job in jobs if job)
    # one job left, below the low-water mark: the next take plans two more groups
    assert scheduler.next_job(timeout=1) is not None
    assert len(plans) == 2 and scheduler.queued == 4
    allowed.clear()
    for _ in range(4):
        assert scheduler.next_job(timeout=1) is not None
    assert scheduler.next_job(timeout=0.3) is None  # held back: nothing queued
    allowed.set()
    assert scheduler.next_job(timeout=1) is not None and len(plans) == 3
    scheduler.close()
    assert scheduler.next_job(timeout=1) is None
    assert len({t.group_id for t in planned}) == 6


# -- whole runs on sandboxes ---------------------------------------------------------------

CLICK = "Action: click(start_box='(1,2)')"  # a corner of the screen, off every button


@pytest.fixture(scope="module")
def clicking_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model taught here to answer CLICK to any screen: its actions parse, so
    its episodes act on their desktops step after step (the random tiny model's answers
    do not parse, and an episode of them never touches its desktop after the reset)."""
    import torch
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

    from agents.backends.transformers_backend import TransformersBackend
    from agents.parsing import ImageBudget
    from agents.prompting import PromptConfig, Turn, build_messages, encode
    from tests.tiny_models import build_tiny_qwen25_vl, png_screen

    folder = build_tiny_qwen25_vl(tmp_path_factory.mktemp("clicking") / "model")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    processor = AutoImageProcessor.from_pretrained(folder)
    template = (folder / "chat_template.jinja").read_text() \
        if (folder / "chat_template.jinja").is_file() else None
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32)
    prompt = PromptConfig(history_images=2, budget=ImageBudget(max_pixels=31360),
                          system_prompt=SYSTEM_PROMPT)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    target = [*tokenizer(CLICK, add_special_tokens=False).input_ids, end]
    examples = [encode(build_messages(instruction, history, png_screen(448, 280, colour),
                                      prompt), tokenizer, processor, template)
                for colour, instruction in (("white", "Click the red button."),
                                            ("blue", "Click the green button."))
                for history in ([], [Turn(png_screen(448, 280, "grey"), CLICK)])]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(40):
        optimizer.zero_grad()
        for example in examples:
            ids = torch.tensor([example.prompt_ids + target])
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                           mm_token_type_ids=(ids == model.config.image_token_id).long(),
                           pixel_values=example.pixel_values,
                           image_grid_thw=example.image_grid_thw).logits
            logits = logits[0, len(example.prompt_ids) - 1:-1]
            torch.nn.functional.cross_entropy(logits, torch.tensor(target)).backward()
        optimizer.step()
    model.eval()
    backend = TransformersBackend.from_model(model, tokenizer, processor, template)
    unseen = build_messages("Click the purple button.", [], png_screen(448, 280, "yellow"),
                            prompt)
    assert backend.generate([unseen], SamplingConfig(max_new_tokens=12,
                                                     temperature=0))[0].text == CLICK
    model.save_pretrained(folder)
    return folder



def config_text(updates: int, *, lag: int = 1, max_steps: int = 2,
                model: Path | None = None, temperature: float = 1.0) -> str:
    return tiny_run_config(updates, seed=5, model=model, max_steps=max_steps,
                           temperature=temperature,
                           extra=f"[runtime]\nasynchronous = true\nmax_version_lag = {lag}\n")


@pytest.mark.x11
@pytest.mark.slow
def test_an_embedded_run_trains_while_the_environments_keep_rolling_out(
        tmp_path: Path) -> None:
    text = config_text(updates=3)
    workspace = tmp_path / "ws"
    run = AsyncTrainingRun(parse_run_config(text), text, workspace, progress=False)
    summary = run.run()
    assert summary.status == "done" and summary.updates == 3
    assert summary.policy_version == gradient_steps(summary.history)
    # every version went to the rollout worker, with its sync time
    assert [p.version for p in run.publications] == list(range(summary.policy_version + 1))
    assert all(p.sync_seconds > 0 and p.snapshot_seconds > 0 for p in run.publications)
    with Store.open(workspace) as store:
        run_record = store.runs.get(summary.run_id)
        assert run_record.status == "done"
        assert [c.policy_version for c in store.runs.checkpoints(run_record.id)] == [1, 2, 3]
        names = {p.name for p in store.runs.metrics(run_record.id)}
        assert names >= ASYNC_METRICS | LOOP_METRICS, (ASYNC_METRICS | LOOP_METRICS) - names
        for name in ASYNC_METRICS:
            assert {p.step for p in store.runs.metrics(run_record.id, [name])} == {1, 2, 3}
        consumed = store.runs.consumed(run_record.id)
        assert len(consumed) == len(set(consumed))
        assert set(consumed) == {e for r in summary.history for e in r.episode_ids}
        versions_made: set[int] = set()
        for result in summary.history:
            trained = [store.episodes.load(i, steps=False) for i in result.episode_ids]
            # whole groups of tasks_per_update tasks, each episode made by a version
            # in the window [version - max_version_lag, version] of the update's start
            start = result.policy_version - 1
            assert len({e.info["group"] for e in trained}) == 2
            for episode in trained:
                assert episode.policy_version is not None
                assert start - 1 <= episode.policy_version <= start
                versions_made.add(episode.policy_version)
            lags = [start - e.policy_version for e in trained
                    if e.status == "done" and e.policy_version is not None]
            assert result.metrics["version_lag_mean"] == pytest.approx(
                sum(lags) / len(lags))
        # environments switched to newer versions between their episodes
        assert len(versions_made) >= 2


@pytest.mark.x11
@pytest.mark.slow
def test_an_embedded_run_evaluates_on_held_out_tasks_at_the_newest_version(
        tmp_path: Path) -> None:
    from trainer.store.queries import EpisodeFilter

    text = tiny_run_config(2, seed=5, extra="""eval_every = 1  # (in [training])
eval_rollouts = 2
[training.eval_tasks]
buttons = 2
buttons_seed = 700
buttons_grid = [2, 2]
[runtime]
asynchronous = true
""")
    workspace = tmp_path / "ws"
    run = AsyncTrainingRun(parse_run_config(text), text, workspace, progress=False)
    summary = run.run()
    assert summary.status == "done" and summary.updates == 2
    with Store.open(workspace) as store:
        run_id = summary.run_id
        points = store.runs.metrics(run_id, ["heldout/success_rate", "heldout/episodes"])
        by_name: dict[str, list[int]] = {}
        for point in points:
            by_name.setdefault(point.name, []).append(point.step)
        assert by_name == {"heldout/success_rate": [1, 2], "heldout/episodes": [1, 2]}
        assert {p.value for p in points if p.name == "heldout/episodes"} == {4.0}
        held_out = store.queries.page(EpisodeFilter(tags=["heldout", f"heldout:{run_id}"]))
        # rolled out by the environments between their training episodes: of no run,
        # never trained on, each at the version the update had just published
        assert len(held_out) == 8 and {e.run_id for e in held_out} == {None}
        assert {e.task_id for e in held_out}.isdisjoint(run.tasks_by_id)
        assert not set(store.runs.consumed(run_id)) & {e.id for e in held_out}
        assert sorted(e.policy_version or 0 for e in held_out) == sorted(
            r.policy_version for r in summary.history for _ in range(4))
        assert all(store.episodes.load(e.id, steps=False).info.get("policy")
                   == "vlm:held-out" for e in held_out)


@pytest.mark.x11
@pytest.mark.slow
def test_an_x_server_killed_mid_episode_ends_that_episode_and_the_run_goes_on(
        tmp_path: Path, clicking_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = config_text(updates=3, max_steps=3, model=clicking_model, temperature=0.0)
    workspace = tmp_path / "ws"
    run = AsyncTrainingRun(parse_run_config(text), text, workspace, progress=False)
    # The first episode to reach its second step loses its X server just before that
    # step: mid-episode by construction (a kill from outside at a moment picked by
    # watching the store could come after the episode had ended)
    killed: list[str] = []
    lock = threading.Lock()
    real_step = DesktopEnv.step

    def step(env: DesktopEnv, action: Any, pause: float | None = None) -> Any:
        with lock:
            kill = bool(env.actions) and not killed
            if kill:
                killed.append(env.name)
        if kill:
            provider = env.provider
            assert isinstance(provider, SandboxProvider) and provider.state is not None
            pid = provider.state.xvfb_pid
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not pid_alive(pid), timeout=30, message="the X server to die")
        return real_step(env, action, pause)

    monkeypatch.setattr(DesktopEnv, "step", step)
    summary = run.run()
    assert killed
    with Store.open(workspace) as store:
        errors = [e for e in store.queries.page(limit=500) if e.status == "error"]
    assert len(errors) == 1
    victim = errors[0]
    # it died acting on its desktop, after the steps it had made
    assert (victim.error or "").startswith("step ")
    assert summary.status == "done" and summary.updates == 3
    with Store.open(workspace) as store:
        assert len(store.episodes.load(victim.id).steps) >= 1
        restarts = store.runs.metrics(summary.run_id, ["env_restarts"])[-1].value
        assert restarts is not None and restarts >= 1  # the pool replaced the desktop
        statuses = Counter(e.status for e in store.queries.page(limit=500))
        assert statuses["done"] >= 6  # and the run went on rolling out and training




@pytest.mark.x11
@pytest.mark.slow
def test_sigterm_saves_and_resume_continues_the_same_run(tmp_path: Path) -> None:
    """SIGTERM (a service manager's stop, `kill`) stops `workbench train` as Ctrl-C does
    (tests/test_trainer_loop.py sends that one): saved, stopped, no desktop left behind."""
    config = tmp_path / "run.toml"
    # a run that cannot end before the signal reaches it, however slow the machine
    config.write_text(config_text(updates=UNENDING_UPDATES))
    workspace = tmp_path / "ws"
    returncode, output = train_then_interrupt(config, workspace, "interrupted",
                                              signal.SIGTERM)
    assert returncode == 143, output
    assert not list((workspace / "sandboxes").glob("*/state.json")), output
    with Store.open(workspace) as store:
        assert store.runs.get("interrupted").status == "stopped"
        # `workbench train` ran it decoupled, as runtime.asynchronous asks
        assert store.runs.metrics("interrupted", ["version_lag_mean"])
        saved = store.runs.latest_version("interrupted")
        assert saved is not None and saved >= 1
        consumed_before = store.runs.consumed("interrupted")
        # finished, untrained episodes of the stopped process, still in the window (lag 1)
        leftover = {e.id for e in store.queries.unconsumed("interrupted",
                                                           min_version=saved - 1)}
        # the environments stopped their episodes ("aborted") before the store closed
        statuses = {e.status for e in store.queries.page(limit=500)}
        assert statuses <= {"done", "error", "aborted"}, statuses

    target = saved + 2  # the resumed run trains two more updates, then ends
    text = config_text(updates=target)
    resumed = AsyncTrainingRun(parse_run_config(text), text, workspace,
                               run_id="interrupted", resume=True, progress=False).run()
    assert (resumed.status, resumed.updates) == ("done", target)
    assert resumed.policy_version == saved + gradient_steps(resumed.history)
    with Store.open(workspace) as store:
        assert store.runs.get("interrupted").status == "done"
        assert [c.policy_version for c in store.runs.checkpoints("interrupted")][-1] == \
            resumed.policy_version
        consumed = store.runs.consumed("interrupted")
        assert len(consumed) == len(set(consumed))  # none trained twice
        assert set(consumed_before) <= set(consumed)  # none lost
        if leftover:  # the resumed run trains the oldest groups first
            assert leftover & set(consumed)
        # every update logged its figures ("episodes" always; reward_mean only when the
        # update had finished episodes of its own, which a resumed first update may lack)
        steps = sorted({p.step for p in store.runs.metrics("interrupted", ["episodes"])})
        assert steps == list(range(1, target + 1))
