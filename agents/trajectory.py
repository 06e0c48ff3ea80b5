"""The records of what an agent did: `Step` (one model call and its actions) and `Episode`.

Every layer speaks these: the rollout streams Steps to the store, the store keeps them,
the trainer reads them back. They are plain dataclasses with `to_dict` / `from_dict`
(JSON-ready, validated on the way in with errors that name the field).
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from vm.actions import Action, ActionError
from vm.actions import from_dict as action_from_dict
from vm.actions import to_dict as action_to_dict

EpisodeStatus = Literal["running", "done", "error", "aborted", "incomplete"]
EpisodeSource = Literal["rollout", "oracle", "human", "import", "replay"]
EPISODE_STATUSES: tuple[str, ...] = get_args(EpisodeStatus)
EPISODE_SOURCES: tuple[str, ...] = get_args(EpisodeSource)
# The step info key holding how a model's response was sampled (SamplingConfig.record():
# temperature, top-p/top-k, the temperature its log-probs are at, every parameter sent).
SAMPLING_INFO = "sampling"
# What an episode's info keeps of its task's setup and postconfig (agents.rollout records
# it): every command that exited non-zero (vm.tasks.setup_report.FailedCommand.to_json:
# part, index, command, returncode, stderr, expected), and how many of them are setup
# commands no mark excuses (not "needs the web", "fails on OSWorld's image too", "a
# check"): the episode did not start from the task's state, so its score may not be
# OSWorld's. Absent when every command succeeded.
FAILED_COMMANDS_INFO = "failed_commands"
SETUP_FAILED_INFO = "setup_failed"
# An episode in one of these states will get no more steps.
FINISHED_STATUSES: tuple[str, ...] = ("done", "error", "aborted", "incomplete")


class TrajectoryError(ValueError):
    """A dict that does not describe a valid Step or Episode; the message names the field."""


@dataclass
class Step:
    """One model call: the screen it saw, what it answered, the actions parsed from that."""

    index: int  # 0-based position in the episode
    frame: str | None = None  # SHA-256 hex of the screenshot PNG the model saw (frame id)
    response: str = ""  # the model's raw text (or a human's description)
    actions: list[Action] = field(default_factory=list)
    parse_error: str | None = None  # why `response` did not parse, when it did not
    token_ids: list[int] | None = None  # response tokens as generated
    logprobs: list[float] | None = None  # rollout log-prob of each response token
    entropies: list[float] | None = None  # entropy of each response token's distribution
    prompt_ids: list[int] | None = None  # prompt tokens as sent (token-in/token-out)
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)  # environment info (JSON values)
    timings: dict[str, float] = field(default_factory=dict)  # seconds, e.g. {"model": 1.2}
    timestamp: float | None = None  # wall clock (unix seconds) when the actions ran

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "frame": self.frame,
            "response": self.response,
            "actions": [action_to_dict(a) for a in self.actions],
            "parse_error": self.parse_error,
            "token_ids": self.token_ids,
            "logprobs": self.logprobs,
            "entropies": self.entropies,
            "prompt_ids": self.prompt_ids,
            "reward": self.reward,
            "done": self.done,
            "info": self.info,
            "timings": self.timings,
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "step") -> Step:
        fields = _object(data, where)
        _no_unknown(fields, _STEP_FIELDS, where)
        actions_data = fields.get("actions") or []
        if not isinstance(actions_data, list):
            raise TrajectoryError(f"{where}.actions: expected a list")
        actions: list[Action] = []
        for i, item in enumerate(actions_data):
            place = f"{where}.actions[{i}]"
            try:
                actions.append(action_from_dict(item, place))
            except ActionError as exc:
                message = str(exc)
                raise TrajectoryError(
                    message if message.startswith(place) else f"{place}: {message}") from None
        return cls(
            index=_int(fields.get("index"), f"{where}.index"),
            frame=_optional_str(fields.get("frame"), f"{where}.frame"),
            response=_str(fields.get("response", ""), f"{where}.response"),
            actions=actions,
            parse_error=_optional_str(fields.get("parse_error"), f"{where}.parse_error"),
            token_ids=_int_list(fields.get("token_ids"), f"{where}.token_ids"),
            logprobs=_float_list(fields.get("logprobs"), f"{where}.logprobs"),
            entropies=_float_list(fields.get("entropies"), f"{where}.entropies"),
            prompt_ids=_int_list(fields.get("prompt_ids"), f"{where}.prompt_ids"),
            reward=_float(fields.get("reward", 0.0), f"{where}.reward"),
            done=_bool(fields.get("done", False), f"{where}.done"),
            info=_dict(fields.get("info"), f"{where}.info"),
            timings={k: _float(v, f"{where}.timings.{k}")
                     for k, v in _dict(fields.get("timings"), f"{where}.timings").items()},
            timestamp=_optional_float(fields.get("timestamp"), f"{where}.timestamp"),
        )


@dataclass
class Episode:
    """One attempt at a task, from reset to the evaluator's score (or to an error)."""

    id: str
    task_id: str
    environment: str = ""  # e.g. "sandbox", "qemu:ubuntu", "osworld"
    policy_version: int | None = None  # the checkpoint that produced it; None for humans
    steps: list[Step] = field(default_factory=list)
    score: float | None = None  # the evaluator's score in 0..1; None until evaluated
    status: EpisodeStatus = "running"
    source: EpisodeSource = "rollout"
    tags: list[str] = field(default_factory=list)
    run_id: str | None = None
    instruction: str = ""
    created_at: float = field(default_factory=time.time)  # unix seconds
    finished_at: float | None = None
    error: str | None = None  # why it ended in status "error" / "aborted"
    final_frame: str | None = None  # SHA-256 of the screen after the last step
    info: dict[str, Any] = field(default_factory=dict)  # provenance, e.g. an import's origin

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task_id": self.task_id,
            "environment": self.environment,
            "policy_version": self.policy_version,
            "steps": [s.to_dict() for s in self.steps],
            "score": self.score,
            "status": self.status,
            "source": self.source,
            "tags": list(self.tags),
            "run_id": self.run_id,
            "instruction": self.instruction,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "error": self.error,
            "final_frame": self.final_frame,
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "episode") -> Episode:
        fields = _object(data, where)
        _no_unknown(fields, _EPISODE_FIELDS, where)
        steps_data = fields.get("steps") or []
        if not isinstance(steps_data, list):
            raise TrajectoryError(f"{where}.steps: expected a list")
        tags = fields.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise TrajectoryError(f"{where}.tags: expected a list of strings")
        version = fields.get("policy_version")
        return cls(
            id=_str(fields.get("id"), f"{where}.id", non_empty=True),
            task_id=_str(fields.get("task_id"), f"{where}.task_id", non_empty=True),
            environment=_str(fields.get("environment", ""), f"{where}.environment"),
            policy_version=None if version is None else _int(version,
                                                             f"{where}.policy_version"),
            steps=[Step.from_dict(s, f"{where}.steps[{i}]") for i, s in enumerate(steps_data)],
            score=_optional_float(fields.get("score"), f"{where}.score"),
            status=_choice(fields.get("status", "running"), EPISODE_STATUSES,
                           f"{where}.status"),  # type: ignore[arg-type]
            source=_choice(fields.get("source", "rollout"), EPISODE_SOURCES,
                           f"{where}.source"),  # type: ignore[arg-type]
            tags=list(tags),
            run_id=_optional_str(fields.get("run_id"), f"{where}.run_id"),
            instruction=_str(fields.get("instruction", ""), f"{where}.instruction"),
            created_at=_float(fields.get("created_at", time.time()), f"{where}.created_at"),
            finished_at=_optional_float(fields.get("finished_at"), f"{where}.finished_at"),
            error=_optional_str(fields.get("error"), f"{where}.error"),
            final_frame=_optional_str(fields.get("final_frame"), f"{where}.final_frame"),
            info=_dict(fields.get("info"), f"{where}.info"),
        )


def new_episode_id() -> str:
    """A fresh, unique episode id (32 hex digits)."""
    return uuid.uuid4().hex


_STEP_FIELDS = frozenset(Step.__dataclass_fields__)
_EPISODE_FIELDS = frozenset(Episode.__dataclass_fields__)


# ---------------------------------------------------------------------------------------
# Field checks for from_dict: each raises TrajectoryError naming the field.


def _object(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TrajectoryError(f"{where}: expected an object, got {type(data).__name__}")
    return data


def _no_unknown(fields: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = set(fields) - allowed
    if unknown:
        raise TrajectoryError(f"{where}: unknown field(s) {sorted(unknown)}")


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TrajectoryError(f"{where}: expected a whole number, got {value!r}")
    return value


def _float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TrajectoryError(f"{where}: expected a number, got {value!r}")
    return float(value)


def _optional_float(value: Any, where: str) -> float | None:
    return None if value is None else _float(value, where)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise TrajectoryError(f"{where}: expected true or false, got {value!r}")
    return value


def _str(value: Any, where: str, non_empty: bool = False) -> str:
    if not isinstance(value, str) or (non_empty and not value):
        expected = "a non-empty string" if non_empty else "a string"
        raise TrajectoryError(f"{where}: expected {expected}, got {value!r}")
    return value


def _optional_str(value: Any, where: str) -> str | None:
    return None if value is None else _str(value, where)


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise TrajectoryError(f"{where}: expected one of {list(choices)}, got {value!r}")
    return str(value)


def _dict(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TrajectoryError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _int_list(value: Any, where: str) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise TrajectoryError(f"{where}: expected a list of whole numbers")
    return value


def _float_list(value: Any, where: str) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise TrajectoryError(f"{where}: expected a list of numbers")
    out = [float(v) for v in value]
    if not all(math.isfinite(v) or v == -math.inf for v in out):
        raise TrajectoryError(f"{where}: expected finite numbers (or -inf log-probs)")
    return out
