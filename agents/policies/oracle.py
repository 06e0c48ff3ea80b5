"""The scripted oracle of a bundled task (vm.tasks.oracle_for), as a policy: proof that
the task is solvable, and demonstrations for the success pool."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agents.policies.base import Decision, PolicyError
from vm.actions import Action, Done, to_pyautogui
from vm.observation import Observation


class OraclePolicy:
    name = "oracle"
    source = "oracle"  # a scripted solution, not a policy's rollout
    policy_version: int | None = None

    def __init__(self) -> None:
        self._actions: Iterator[Action] | None = None

    def reset(self, task: Any, env: Any) -> None:
        from vm.tasks import oracle_for

        try:
            self._actions = oracle_for(task)(env.provider)
        except KeyError as exc:
            raise PolicyError(str(exc.args[0] if exc.args else exc)) from None

    def act(self, observation: Observation) -> Decision:
        if self._actions is None:
            raise PolicyError("oracle: act() before reset()")
        try:
            action = next(self._actions)
        except StopIteration:
            action = Done()  # an oracle that runs out has done its part
        except Exception as exc:  # OracleError, or the desktop failing under it
            raise PolicyError(f"oracle: {type(exc).__name__}: {exc}") from exc
        return Decision(response=to_pyautogui(action), actions=[action])

    def interrupt(self) -> None:
        pass
