"""Episodes on real sandboxes, streamed into a real store: the scripted oracle, a replay,
a person's actions, the tiny model (in-process and through an OpenAI-compatible server),
cancellation, and a desktop that dies mid-episode."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agents.backends import SamplingConfig
from agents.parsing import ImageBudget
from agents.policies import (
    Decision,
    HumanPolicy,
    OraclePolicy,
    PolicyError,
    ReplayPolicy,
    VLMPolicy,
    VLMPolicyConfig,
)
from agents.prompting import PromptConfig
from agents.rollout import EpisodeSink, MemorySink, Rollout, RolloutConfig, run_episode
from agents.trajectory import Episode
from tests.conftest import wait_until
from tests.tiny_models import served_tiny_model, tiny_qwen25_vl
from trainer.store import Store
from vm.actions import Click, Done
from vm.env import DesktopEnv
from vm.observation import Observation
from vm.processes import pid_alive, pids_with_environ, tagged_pids
from vm.providers.sandbox import SandboxProvider
from vm.screen_compare import changed_fraction
from vm.suite import bundled_suite
from vm.tasks import Task

__all__ = ["served_tiny_model"]  # a fixture used here
pytestmark = pytest.mark.x11

SMALL_PROMPT = PromptConfig(budget=ImageBudget(max_pixels=48 * 28 * 28), history_images=2)


@pytest.fixture(scope="module")
def suite() -> Any:
    return bundled_suite()


@pytest.fixture
def env(workspace: Path) -> Iterator[DesktopEnv]:
    with DesktopEnv(SandboxProvider("agent", workspace / "sandboxes",
                                    guest_server=False)) as environment:
        yield environment


@pytest.fixture
def store(workspace: Path) -> Iterator[Store]:
    with Store.open(workspace / "store") as opened:
        yield opened


def _stream(store: Store, env: DesktopEnv, task: Task, policy: Any,
            config: RolloutConfig | None = None) -> Episode:
    with store.episodes.begin(task.id, environment="sandbox", source=policy.source,
                              policy_version=policy.policy_version,
                              instruction=task.instruction) as writer:
        assert isinstance(writer, EpisodeSink)  # the store's writer is a rollout sink
        result = Rollout(env, policy, writer, config).run(task, episode_id=writer.episode_id)
    return result.episode


def test_oracle_episode_streamed_to_the_store(env: DesktopEnv, store: Store,
                                              suite: Any) -> None:
    task = suite.tasks["todo-add"]
    episode = _stream(store, env, task, OraclePolicy())
    assert (episode.status, episode.score) == ("done", 1.0)
    stored = store.episodes.load(episode.id)
    assert (stored.status, stored.score, stored.source) == ("done", 1.0, "oracle")
    assert [s.actions for s in stored.steps] == [s.actions for s in episode.steps]
    assert isinstance(stored.steps[-1].actions[0], Done) and stored.steps[-1].done
    assert all(s.frame and store.frames.exists(s.frame) for s in stored.steps)
    assert stored.final_frame is not None
    assert all({"model", "env"} <= set(s.timings) for s in stored.steps)
    assert "reset" in stored.steps[0].timings


def test_replay_reaches_the_same_score(env: DesktopEnv, store: Store, suite: Any) -> None:
    task = suite.tasks["form-name"]
    original = _stream(store, env, task, OraclePolicy())
    assert (original.status, original.score) == ("done", 1.0), (
        original.error, [(s.actions, s.info) for s in original.steps])
    recorded = store.episodes.load(original.id)
    # The confirm click's step shows the dialog it clicks in: the oracle recorded the
    # screen it acted on (after waiting for the dialog), not the one before it opened.
    confirm = len(recorded.steps) - 2  # ..., click Submit, click Yes, DONE
    before, shown = (store.frames.get(recorded.steps[i].frame or "")
                     for i in (confirm - 1, confirm))
    assert changed_fraction(before, shown) > 0.01
    # No recorded pace: only the screens keep the replay from clicking before the dialog
    # is there, however slow the machine is today.
    policy = ReplayPolicy(recorded, recorded_pace=False, frames=store.frames.get)
    replayed = _stream(store, env, task, policy)
    stored = store.episodes.load(replayed.id)
    assert (stored.source, stored.status, stored.score) == ("replay", "done", 1.0)
    assert [s.actions for s in stored.steps] == [s.actions for s in original.steps]
    # Every step compared its screen with the recorded one before acting. (A recorded
    # frame caught mid-repaint can never match; that step waits its limit, then acts,
    # which two copies of the suite at once did show: "in sync" is not asserted.)
    assert all("replay_sync_seconds" in s.info for s in stored.steps), [
        s.info for s in stored.steps]
    # a replay that runs out of actions before DONE ends and is still evaluated
    short = Episode(id="short", task_id=task.id, steps=original.steps[:1])
    partial = run_episode(env, task, ReplayPolicy(short))
    assert (partial.status, partial.score, len(partial.steps)) == ("done", 0.0, 1)


def test_human_actions_from_another_thread(env: DesktopEnv, suite: Any) -> None:
    task = suite.tasks["buttons-0"]
    human = HumanPolicy()
    sink = MemorySink()
    rollout = Rollout(env, human, sink, RolloutConfig(max_steps=5))
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(rollout.run(task)))
    worker.start()
    try:
        # the person looks at the screen the rollout shows, then acts on it
        wait_until(lambda: human.observation is not None, 20, "the first screen")
        from vm.suite.families import button_target
        from vm.suite.oracles.desktop import click_widget, wait_state

        target = click_widget(env.provider, "buttons", f"button_{button_target(task)}")
        human.submit(target, note="I click the button the task names")
        # ...and says it is done once the application shows the click
        wait_state(env.provider, "buttons", lambda s: s.get("clicked"), what="the click")
        human.submit([Done()])
        worker.join(timeout=30)
    finally:
        rollout.cancel()
        worker.join(timeout=10)
    episode = results[0].episode
    assert (episode.source, episode.status, episode.score) == ("human", "done", 1.0)
    assert episode.steps[0].response == "I click the button the task names"
    assert sink.status == "done" and len(sink.steps) == 2


def test_cancel_stops_a_waiting_rollout(env: DesktopEnv, suite: Any) -> None:
    human = HumanPolicy()
    sink = MemorySink()
    rollout = Rollout(env, human, sink)
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(rollout.run(suite.tasks["todo-add"])))
    worker.start()
    wait_until(lambda: human.observation is not None, 20, "the rollout waiting for input")
    rollout.cancel()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert results[0].episode.status == "aborted" and sink.status == "aborted"
    assert sink.score is None


class _KillsTheDesktop:
    """A policy that acts once, then stops the desktop under the rollout."""

    name, source, policy_version = "killer", "rollout", None

    def __init__(self, env: DesktopEnv) -> None:
        self.env, self.calls = env, 0

    def reset(self, task: Any, env: Any) -> None:
        pass

    def act(self, observation: Observation) -> Decision:
        self.calls += 1
        if self.calls == 2:
            self.env.provider.stop()
        return Decision(response="click", actions=[Click(10, 10)])

    def interrupt(self) -> None:
        pass


def test_a_dead_desktop_ends_the_episode_with_an_error(env: DesktopEnv, store: Store,
                                                        suite: Any) -> None:
    episode = _stream(store, env, suite.tasks["todo-add"], _KillsTheDesktop(env))
    stored = store.episodes.load(episode.id)
    assert stored.status == "error" and stored.score is None
    assert stored.error is not None and stored.error.startswith("step 1:")
    assert len(stored.steps) == 2 and "error" in stored.steps[1].info
    # a reset that fails is an error episode too, not an exception
    failed = run_episode(env, suite.tasks["todo-add"], OraclePolicy())
    assert failed.status == "error"
    assert failed.error is not None and failed.error.startswith("reset:")


def _sandbox(env: DesktopEnv) -> SandboxProvider:
    """The environment's desktop, a sandbox (its processes)."""
    assert isinstance(env.provider, SandboxProvider)
    return env.provider


class _UnparsableWhileTheDesktopDies:
    """A policy whose answers never parse (so the episode never acts), while its X
    server is killed: the app's last state file is still readable afterwards."""

    name, source = "garbage", "rollout"
    policy_version: int | None = None

    def __init__(self, env: DesktopEnv) -> None:
        self.env = env

    def reset(self, task: Any, env: Any) -> None:
        pass

    def act(self, observation: Observation) -> Decision:
        state = _sandbox(self.env).state
        assert state is not None
        os.kill(state.xvfb_pid, signal.SIGKILL)
        return Decision(response="???", parse_error="no action")

    def interrupt(self) -> None:
        pass


def test_a_desktop_dead_before_evaluation_is_an_error_not_a_score(
        env: DesktopEnv, suite: Any) -> None:
    episode = run_episode(env, suite.tasks["todo-add"], _UnparsableWhileTheDesktopDies(env))
    assert episode.status == "error" and episode.score is None
    assert episode.error is not None and "died before evaluation" in episode.error
    # closing the dead environment stops what is left of its desktop (it used to skip
    # the stop: the accessibility bus and the window manager outlived the test)
    state = _sandbox(env).state
    assert state is not None and state.bus_marker
    env.close()
    assert not pids_with_environ(state.bus_marker) and not tagged_pids(state.tag)
    assert state.wm_pid is None or not pid_alive(state.wm_pid)  # None: no window manager


def test_a_task_without_an_oracle_is_an_error_episode(env: DesktopEnv) -> None:
    task = replace(bundled_suite().tasks["todo-add"], id="no-oracle")
    episode = run_episode(env, task, OraclePolicy())
    assert episode.status == "error" and "no oracle" in (episode.error or "")
    with pytest.raises(PolicyError):
        OraclePolicy().act(Observation(b"", (1, 1)))


@pytest.mark.slow
def test_tiny_model_episode_stored_with_tokens(env: DesktopEnv, store: Store,
                                               suite: Any) -> None:
    from agents.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(tiny_qwen25_vl(), device="cpu")
    config = VLMPolicyConfig(prompt=SMALL_PROMPT,
                             sampling=SamplingConfig(max_new_tokens=16, seed=0))
    policy = VLMPolicy(backend, config, policy_version=3)
    task = suite.tasks["todo-add"]
    episode = _stream(store, env, task, policy,
                      RolloutConfig(max_steps=3, stop_on_parse_error=False))
    stored = store.episodes.load(episode.id)
    assert stored.policy_version == 3 and stored.status == "done" and stored.score == 0.0
    assert len(stored.steps) == 3
    for step, live in zip(stored.steps, episode.steps, strict=True):
        # a random model writes no valid action: each step records why, with the penalty
        assert step.parse_error and step.reward == -1.0 and step.info["format_error"]
        assert step.token_ids and step.token_ids == live.token_ids
        assert len(step.logprobs or []) == len(step.entropies or []) == len(step.token_ids)
        assert step.prompt_ids and step.frame is not None
        assert step.timings["model"] > 0
    # the default ends the episode at the first format error
    first = _stream(store, env, task, VLMPolicy(backend, config))
    assert len(first.steps) == 1 and first.steps[0].parse_error


@pytest.mark.slow
def test_openai_backend_drives_an_episode(env: DesktopEnv, store: Store, suite: Any,
                                          served_tiny_model: tuple[str, str]) -> None:
    from agents.backends.openai_backend import OpenAIBackend

    base_url, model = served_tiny_model
    backend = OpenAIBackend(base_url, model, timeout=60)
    config = VLMPolicyConfig(prompt=SMALL_PROMPT, sampling=SamplingConfig(max_new_tokens=12))
    episode = _stream(store, env, suite.tasks["buttons-1"], VLMPolicy(backend, config),
                      RolloutConfig(max_steps=2, stop_on_parse_error=False))
    stored = store.episodes.load(episode.id)
    assert stored.status == "done" and len(stored.steps) == 2
    assert all(s.response == live.response for s, live in zip(stored.steps, episode.steps,
                                                              strict=True))
    assert all(s.timings["model"] > 0 and s.frame for s in stored.steps)
