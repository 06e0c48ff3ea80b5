"""The vision-language model policy: prompt, generate, parse."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from agents.backends.base import Backend, BackendError, SamplingConfig
from agents.parsing import (
    CoordinateMapping,
    ParseError,
    ResponseFormat,
    UITarsStyle,
    parse_response,
)
from agents.policies.base import Decision, PolicyError
from agents.prompting import PromptConfig, Turn, build_messages, prompt_record
from vm.observation import Observation

PROMPT_INFO = "prompt"  # the first step's info key holding the prompt settings (JSON)


@dataclass(frozen=True)
class VLMPolicyConfig:
    prompt: PromptConfig = field(default_factory=PromptConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    response_format: ResponseFormat = "uitars"
    uitars: UITarsStyle = field(default_factory=UITarsStyle)


class VLMPolicy:
    """Asks a backend for the next action given the instruction and recent screens."""

    source = "rollout"

    def __init__(self, backend: Backend, config: VLMPolicyConfig | None = None,
                 policy_version: int | None = None) -> None:
        self.backend = backend
        self.config = config or VLMPolicyConfig()
        self.policy_version = policy_version
        self.name = f"vlm:{backend.name}"
        self.instruction = ""
        self.history: list[Turn] = []

    def reset(self, task: Any, env: Any) -> None:
        self.instruction = getattr(task, "instruction", "") or ""
        self.history = []

    def mapping(self, screen_size: tuple[int, int]) -> CoordinateMapping:
        prompt = self.config.prompt
        return CoordinateMapping.for_screen(screen_size, prompt.budget,
                                            prompt.coordinate_system)

    def act(self, observation: Observation) -> Decision:
        chat = build_messages(observation.instruction or self.instruction, self.history,
                              observation.screenshot, self.config.prompt,
                              observation.accessibility_tree)
        sampling = self.config.sampling
        if sampling.seed is not None:  # reproducible, yet not the same draw at every step
            sampling = replace(sampling, seed=sampling.seed + len(self.history))
        try:
            generation = self.backend.generate([chat], sampling)[0]
        except BackendError as exc:
            raise PolicyError(str(exc)) from exc
        self.history.append(Turn(observation.screenshot, generation.text))
        started = time.perf_counter()
        decision = Decision(response=generation.text, generation=generation)
        try:
            parsed = parse_response(generation.text, self.config.response_format,
                                    self.mapping(observation.screen_size),
                                    self.config.uitars)
        except ParseError as exc:
            decision.parse_error = str(exc)
        else:
            decision.actions, decision.thought = parsed.actions, parsed.thought
            if not parsed.actions:
                decision.parse_error = "the response names no action"
        decision.info["parse_seconds"] = time.perf_counter() - started
        if len(self.history) == 1:  # the episode's first step: how its prompts are built
            decision.info[PROMPT_INFO] = json.dumps(prompt_record(self.config.prompt))
        return decision

    def interrupt(self) -> None:
        pass
