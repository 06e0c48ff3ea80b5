"""A random-action baseline: each step one random click, key press, short typing or
scroll on the screen, seeded per episode. The floor a trained policy must beat, and a
probe for evaluators that a policy can game (a task a random agent solves is suspect)."""

from __future__ import annotations

import random
import string
from typing import Any

from agents.policies.base import Decision
from vm.actions import Action, Click, Press, Scroll, TypeText, to_pyautogui
from vm.observation import Observation

_KEYS = ("enter", "tab", "esc", "backspace", "space", "up", "down", "left", "right")


class RandomPolicy:
    name = "random"
    source = "rollout"
    policy_version: int | None = None

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    def reset(self, task: Any, env: Any) -> None:
        # the same (seed, task) gives the same actions, whatever ran before
        self._rng = random.Random(f"{self.seed}:{task.id}")

    def act(self, observation: Observation) -> Decision:
        action = self.random_action(observation.screen_size)
        return Decision(response=to_pyautogui(action), actions=[action])

    def random_action(self, screen_size: tuple[int, int]) -> Action:
        rng = self._rng
        width, height = screen_size
        kind = rng.choices(("click", "press", "type", "scroll"), weights=(6, 2, 1, 1))[0]
        if kind == "click":
            return Click(rng.randrange(width), rng.randrange(height),
                         rng.choice(("left", "left", "left", "right")), rng.choice((1, 1, 2)))
        if kind == "press":
            return Press(rng.choice(_KEYS))
        if kind == "type":
            return TypeText("".join(rng.choices(string.ascii_letters + string.digits + " ",
                                                k=rng.randint(1, 8))))
        return Scroll(dy=rng.choice((-5, -3, 3, 5)), x=rng.randrange(width),
                      y=rng.randrange(height))

    def interrupt(self) -> None:
        pass
