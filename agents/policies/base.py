"""What a policy is to the rollout: reset for a task, then one Decision per step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vm.actions import Action
from vm.observation import Observation

if TYPE_CHECKING:
    from agents.backends.base import Generation


class PolicyError(RuntimeError):
    """The policy could not decide (its model or script failed); ends the episode."""


@dataclass
class Decision:
    """What the policy answered for one screen."""

    response: str  # the model's text, or a description of scripted/human actions
    actions: list[Action] = field(default_factory=list)
    parse_error: str | None = None  # set when `response` did not parse; actions is empty
    thought: str = ""
    generation: Generation | None = None  # token ids, log-probs, entropies when a model
    end: bool = False  # no more actions (a replay ran out); the episode ends here
    info: dict[str, Any] = field(default_factory=dict)
    # The screenshot (PNG) the actions were decided on, when the policy looked at the
    # screen again after the observation (a script that waited for its application): the
    # step records it as its frame, so a replay or a training sample pairs the actions
    # with the screen they were meant for. None: the observation's screenshot.
    screen: bytes | None = None


@runtime_checkable
class Policy(Protocol):
    name: str
    source: str  # the Episode source it produces: "rollout", "human" or "replay"
    policy_version: int | None

    def reset(self, task: Any, env: Any) -> None:
        """Start an episode of `task` on `env` (a vm.env.DesktopEnv)."""
        ...

    def act(self, observation: Observation) -> Decision:
        """The next Decision for the screen in `observation`."""
        ...

    def interrupt(self) -> None:
        """Stop waiting (a cancelled rollout); act() may raise PolicyError after this."""
        ...
