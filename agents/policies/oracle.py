"""The scripted oracle of a bundled task (vm.suite.oracle_for), as a policy: proof that
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
        self._provider: Any = None

    def reset(self, task: Any, env: Any) -> None:
        from vm.suite import oracle_for

        self._provider = env.provider
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
        # The script may have waited for its application (a dialog to open) since the
        # observation: the step records the screen it acted on.
        screen = None if isinstance(action, Done) else self._screen()
        return Decision(response=to_pyautogui(action), actions=[action], screen=screen)

    def _screen(self) -> bytes:
        try:
            return bytes(self._provider.screenshot())
        except Exception as exc:  # the desktop failing under it
            raise PolicyError(f"oracle: screenshot: {type(exc).__name__}: {exc}") from exc

    def interrupt(self) -> None:
        pass
