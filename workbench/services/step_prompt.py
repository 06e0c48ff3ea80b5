"""The chat a model saw at one step of a stored episode, rebuilt from the store: the
prompt settings its policy recorded on the first step, the earlier steps' responses and
the screenshots (frames) each turn showed, laid out by `agents.prompting.chat_layout`,
the same function that built the prompt during the rollout."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from agents.policies.vlm import PROMPT_INFO
from agents.prompting import PromptConfig, chat_layout, prompt_from_record
from agents.trajectory import Episode


@dataclass(frozen=True)
class PromptPart:
    role: str  # system, user, assistant
    kind: Literal["text", "screen"]
    text: str = ""
    frame: str | None = None  # a screen's frame (content hash) in the store
    turn: int = -1  # which step's screen


@dataclass(frozen=True)
class StepPrompt:
    parts: tuple[PromptPart, ...]
    note: str = ""  # what is not exact (settings not recorded, a tree not stored)


def step_prompt(episode: Episode, index: int) -> StepPrompt | None:
    """The prompt of step `index`; None for an episode no model played (a person's, an
    oracle's, an import without model output)."""
    steps = episode.steps
    if not 0 <= index < len(steps):
        return None
    first = steps[0]
    record = first.info.get(PROMPT_INFO)
    notes: list[str] = []
    config = PromptConfig()
    if isinstance(record, str):
        try:
            config = prompt_from_record(json.loads(record))
        except ValueError as exc:
            notes.append(f"the recorded prompt settings do not read ({exc}); shown with "
                         f"the defaults")
    elif any(step.prompt_ids for step in steps):
        notes.append("this episode's prompt settings were not recorded (episodes from "
                     "before they were); shown with the default settings")
    else:
        return None
    if config.observation == "screenshot_a11y_tree":
        notes.append("the accessibility tree each step saw is not stored: left out here")
    layout = chat_layout(episode.instruction, [s.response for s in steps[:index]], config)
    parts: list[PromptPart] = []
    for message in layout:
        for item in message["content"]:
            if item["type"] == "screen":
                turn = int(item["turn"])
                parts.append(PromptPart(message["role"], "screen", frame=steps[turn].frame,
                                        turn=turn))
            else:
                parts.append(PromptPart(message["role"], "text", text=str(item["text"])))
    return StepPrompt(tuple(parts), "; ".join(notes))
