"""Run one episode: reset, then decide, parse, act until done, fail, the step limit or a
parse error; stream each Step to a sink as it happens; evaluate at the end.

The sink is anything with `append_step(step, screenshot)` and `finish(status, score,
error, final_screenshot, info)` (info: what to add to the episode's info, e.g. its failed
setup commands): the store's `EpisodeWriter` is one, `MemorySink` another.
A failing environment or model ends the episode with status "error"; a cancelled one
ends "aborted"; neither escapes as an exception.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agents.policies.base import Decision, Policy
from agents.trajectory import (
    FAILED_COMMANDS_INFO,
    SAMPLING_INFO,
    SETUP_FAILED_INFO,
    Episode,
    EpisodeStatus,
    Step,
    new_episode_id,
)
from vm.observation import Observation, png_size

log = logging.getLogger(__name__)


@runtime_checkable
class EpisodeSink(Protocol):
    """Where a rollout streams its steps (trainer.store's EpisodeWriter is one)."""

    def append_step(self, step: Step, screenshot: bytes | None = None) -> Step: ...

    def finish(self, status: str = "done", score: float | None = None,
               error: str | None = None, final_screenshot: bytes | None = None,
               info: dict[str, Any] | None = None) -> None: ...


class MemorySink:
    """Keeps the steps and screenshots in memory (tests, dry runs)."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.screenshots: list[bytes | None] = []
        self.status: str | None = None
        self.score: float | None = None
        self.error: str | None = None
        self.final_screenshot: bytes | None = None
        self.info: dict[str, Any] = {}

    def append_step(self, step: Step, screenshot: bytes | None = None) -> Step:
        self.steps.append(step)
        self.screenshots.append(screenshot)
        return step

    def finish(self, status: str = "done", score: float | None = None,
               error: str | None = None, final_screenshot: bytes | None = None,
               info: dict[str, Any] | None = None) -> None:
        self.status, self.score, self.error = status, score, error
        self.final_screenshot = final_screenshot
        self.info.update(info or {})


@dataclass(frozen=True)
class RolloutConfig:
    max_steps: int = 15  # model calls per episode
    format_penalty: float = -1.0  # reward of a step whose response does not parse
    stop_on_parse_error: bool = True  # ARPO ends the episode at a format error
    evaluate: bool = True  # score with the task's evaluator at the end
    environment: str = ""  # recorded on the Episode, e.g. "sandbox"


@dataclass
class RolloutResult:
    episode: Episode
    timings: dict[str, float] = field(default_factory=dict)  # reset, evaluate, total (s)


class Rollout:
    """One episode of `policy` on `env`. `cancel()` from another thread stops it after the
    current step (a human policy waiting for input stops at once)."""

    def __init__(self, env: Any, policy: Policy, sink: EpisodeSink | None = None,
                 config: RolloutConfig | None = None) -> None:
        self.env = env
        self.policy = policy
        self.sink: EpisodeSink = sink if sink is not None else MemorySink()
        self.config = config or RolloutConfig()
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()
        self.policy.interrupt()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self, task: Any, episode_id: str | None = None) -> RolloutResult:
        config = self.config
        episode = Episode(
            id=episode_id or new_episode_id(), task_id=getattr(task, "id", "") or "task",
            environment=config.environment or getattr(self.env, "name", ""),
            policy_version=self.policy.policy_version,
            source=self.policy.source,  # type: ignore[arg-type]
            instruction=getattr(task, "instruction", "") or "",
        )
        timings: dict[str, float] = {}
        started = time.perf_counter()
        status: EpisodeStatus = "done"
        error: str | None = None
        screenshot: bytes | None = None

        def end(final_status: EpisodeStatus, message: str | None,
                evaluated: bool = False) -> RolloutResult:
            score = episode.score
            episode.status, episode.error, episode.finished_at = final_status, message, time.time()
            timings["total"] = time.perf_counter() - started
            record = command_failures(self.env, evaluated)
            episode.info.update(record)
            try:
                self.sink.finish(final_status, score, message, screenshot, info=record)
            except Exception as exc:
                log.error("episode %s: the sink failed to finish: %s", episode.id, exc)
                episode.error = f"{message or ''} (sink: {exc})".strip()
            return RolloutResult(episode, timings)

        try:
            observation = self.env.reset(task)
            screenshot = observation["screenshot"]
            self.policy.reset(task, self.env)
        except Exception as exc:  # environment or task setup failed
            timings["reset"] = time.perf_counter() - started
            if self.cancelled:  # e.g. the run stopping closed the model under it
                return end("aborted", "cancelled")
            return end("error", f"{RESET_ERROR}{type(exc).__name__}: {exc}")
        timings["reset"] = time.perf_counter() - started
        screen_size = png_size(screenshot) if screenshot else (0, 0)

        for index in range(config.max_steps):
            if self.cancelled:
                status, error = "aborted", "cancelled"
                break
            seen = Observation(screenshot=screenshot or b"", screen_size=screen_size,
                               instruction=episode.instruction)
            model_started = time.perf_counter()
            try:
                decision = self.policy.act(seen)
            except Exception as exc:  # model or script failure, or an interrupted wait
                if self.cancelled:
                    status, error = "aborted", "cancelled"
                else:
                    status, error = "error", f"policy: {type(exc).__name__}: {exc}"
                break
            model_seconds = time.perf_counter() - model_started
            if decision.end:
                break
            step = _step_from(index, decision, model_seconds)
            if index == 0:
                step.timings["reset"] = timings["reset"]
            if decision.parse_error is not None:
                step.reward = config.format_penalty
                step.info["format_error"] = True
                episode.steps.append(self._append(step, screenshot))
                if config.stop_on_parse_error:
                    break
                continue
            env_started = time.perf_counter()
            try:
                observation, reward, done, info = self.env.step(decision.actions)
            except Exception as exc:  # the desktop died or refused the actions
                step.timings["env"] = time.perf_counter() - env_started
                step.info["error"] = f"{type(exc).__name__}: {exc}"
                step.timestamp = time.time()
                episode.steps.append(self._append(step, decision.screen or screenshot))
                status, error = "error", f"step {index}: {type(exc).__name__}: {exc}"
                break
            step.timings["env"] = time.perf_counter() - env_started
            step.reward, step.done, step.timestamp = float(reward), bool(done), time.time()
            step.info.update(_json_safe(info))
            episode.steps.append(self._append(step, decision.screen or screenshot))
            screenshot = observation["screenshot"]
            if done:
                break

        evaluated = False
        if status == "done" and config.evaluate and not self.cancelled:
            evaluated = True
            evaluate_started = time.perf_counter()
            try:
                episode.score = float(self.env.evaluate())
                error = evaluation_note(self.env)
            except Exception as exc:
                status, error = "error", f"evaluate: {type(exc).__name__}: {exc}"
            timings["evaluate"] = time.perf_counter() - evaluate_started
        elif status == "done" and self.cancelled:
            status, error = "aborted", "cancelled"
        return end(status, error, evaluated)

    def _append(self, step: Step, screenshot: bytes | None) -> Step:
        return self.sink.append_step(step, screenshot)


# How the error of an episode that ended at reset starts (the desktop's revert or the
# task's setup failed): it never started, and is an error, never a score.
RESET_ERROR = "reset: "


def evaluation_note(env: Any) -> str | None:
    """What to keep on a "done" episode: setup and postconfig commands that exited
    non-zero (the command, its exit status, its stderr's last line), steps that did nothing
    where OSWorld goes on (a window they name that was not there), and why the last evaluation
    scored parts 0 without computing them (a result file the agent never saved, an app
    that was not running)."""
    evaluation = getattr(env, "last_evaluation", None)
    warnings = [*getattr(env, "setup_warnings", ()), *getattr(evaluation, "warnings", ())]
    failed = [*getattr(env, "setup_failures", ()), *getattr(evaluation, "failed_commands", ())]
    reason = getattr(evaluation, "reason", None)
    parts = [f"command failed: {f.describe()}" for f in failed]
    parts += [f"warning: {w}" for w in warnings if isinstance(w, str)]
    if isinstance(reason, str) and reason:
        parts.append(f"evaluation: {reason}")
    return "; ".join(parts) or None


def command_failures(env: Any, evaluated: bool = True) -> dict[str, Any]:
    """What an episode's info keeps of its setup's (and, when `evaluated`, its postconfig's)
    failed commands (agents.trajectory.FAILED_COMMANDS_INFO, SETUP_FAILED_INFO); {} when
    none failed."""
    failed = list(getattr(env, "setup_failures", ()))
    if evaluated:
        failed += list(getattr(getattr(env, "last_evaluation", None), "failed_commands", ()))
    if not failed:
        return {}
    from vm.tasks.setup_report import unexcused_setup  # vm.tasks: only when some failed

    return {FAILED_COMMANDS_INFO: [f.to_json() for f in failed],
            SETUP_FAILED_INFO: len(unexcused_setup(failed))}


def _step_from(index: int, decision: Decision, model_seconds: float) -> Step:
    generation = decision.generation
    timings = {"model": model_seconds}
    if "parse_seconds" in decision.info:
        timings["parse"] = float(decision.info.pop("parse_seconds"))
    step = Step(index=index, response=decision.response, actions=list(decision.actions),
                parse_error=decision.parse_error, timings=timings,
                info=_json_safe(decision.info))
    if decision.thought:
        step.info["thought"] = decision.thought
    if generation is not None:
        step.token_ids = generation.token_ids
        step.logprobs = generation.logprobs
        step.entropies = generation.entropies
        step.prompt_ids = generation.prompt_ids
        if generation.finish_reason:
            step.info["finish_reason"] = generation.finish_reason
        if generation.entropy_is_estimate:
            step.info["entropy_is_estimate"] = True
        if generation.sampling is not None:  # how it was drawn: the trainer scores with it
            step.info[SAMPLING_INFO] = generation.sampling
        if generation.token_ids:
            step.timings["generate"] = generation.seconds
    return step


def _json_safe(info: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in dict(info or {}).items():
        if value is None or isinstance(value, (bool, int, float, str)):
            out[str(key)] = value
        elif isinstance(value, (list, tuple)) and all(
                isinstance(v, (bool, int, float, str)) for v in value):
            out[str(key)] = list(value)
        else:
            out[str(key)] = repr(value)
    return out


def run_episode(env: Any, task: Any, policy: Policy, sink: EpisodeSink | None = None,
                config: RolloutConfig | None = None) -> Episode:
    """One episode of `policy` on `env` for `task`; see `Rollout` to cancel one."""
    return Rollout(env, policy, sink, config).run(task).episode
