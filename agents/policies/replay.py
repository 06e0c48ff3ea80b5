"""Re-run a stored episode's actions on an environment, step by step (e.g. to check that
an imported or human episode still reaches the same score).

Two ways of not acting before the applications are ready, both on by default:
- **Recorded pace**: each step waits at least as long after the previous one as it did
  when recorded (step timestamps), because whoever acted then also waited for the
  applications; `min_gap_seconds` adds a floor for machines slower now than then.
- **Synchronised screens** (when given the recorded screenshots, `frames`): before a
  step's actions, wait until the desktop shows what the recorded step acted on (at most
  `sync_tolerance` of its pixels different, e.g. a blinking cursor), for at most
  `sync_timeout_seconds`; then act anyway. A busy machine opens a dialog later than the
  recording did, and time alone cannot know that. Each replayed step says in its info
  how long it waited ("replay_sync_seconds") and whether the screens matched
  ("replay_in_sync"; absent when the step had no recorded screenshot).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from agents.policies.base import Decision, PolicyError
from agents.trajectory import Episode, Step
from vm.observation import Observation
from vm.screen_compare import decode, fraction_changed

SYNC_POLL_SECONDS = 0.1


class ReplayPolicy:
    name = "replay"
    source = "replay"

    def __init__(self, episode: Episode, recorded_pace: bool = True,
                 min_gap_seconds: float = 0.2, max_gap_seconds: float = 30.0,
                 frames: Callable[[str], bytes] | None = None,
                 sync_timeout_seconds: float = 20.0, sync_tolerance: float = 0.002) -> None:
        if not 0.0 <= sync_tolerance < 1.0:
            raise ValueError(f"replay: sync_tolerance must be in [0, 1), not {sync_tolerance}")
        self.episode = episode
        self.policy_version = episode.policy_version
        self.recorded_pace = recorded_pace
        self.min_gap_seconds = min_gap_seconds
        self.max_gap_seconds = max_gap_seconds
        self.frames = frames  # recorded screenshot by frame id, e.g. Store.frames.get
        self.sync_timeout_seconds = sync_timeout_seconds
        self.sync_tolerance = sync_tolerance
        self._next = 0
        self._previous: Step | None = None
        self._previous_at = 0.0
        self._env: Any = None
        self._interrupted = threading.Event()

    def reset(self, task: Any, env: Any) -> None:
        self._next = 0
        self._previous = None
        self._env = env
        self._interrupted.clear()

    def act(self, observation: Observation) -> Decision:
        steps = self.episode.steps
        while self._next < len(steps) and not steps[self._next].actions:
            self._next += 1  # steps that did nothing (parse errors) are not replayed
        if self._next >= len(steps):
            return Decision(response="", end=True)
        step = steps[self._next]
        self._next += 1
        self._keep_pace(step)
        info: dict[str, Any] = {"replayed_step": step.index, "replayed_episode": self.episode.id}
        screen = self._sync(step, observation, info)
        self._previous, self._previous_at = step, time.monotonic()
        return Decision(response=step.response, actions=list(step.actions), info=info,
                        screen=screen)

    def _keep_pace(self, step: Step) -> None:
        previous = self._previous
        if (not self.recorded_pace or previous is None or previous.timestamp is None
                or step.timestamp is None):
            return
        gap = min(max(step.timestamp - previous.timestamp, self.min_gap_seconds),
                  self.max_gap_seconds)
        remaining = self._previous_at + gap - time.monotonic()
        if remaining > 0 and self._interrupted.wait(remaining):
            raise PolicyError("replay: interrupted")

    def _sync(self, step: Step, observation: Observation, info: dict[str, Any]
              ) -> bytes | None:
        """Wait until the screen looks like the one `step` acted on; returns the screenshot
        taken last when it is newer than the observation's."""
        if self.frames is None or step.frame is None:
            return None
        try:
            recorded = decode(self.frames(step.frame), f"frame {step.frame}")
        except Exception as exc:  # a frame missing from the store: replay without it
            info["replay_sync_error"] = f"frame {step.frame}: {type(exc).__name__}: {exc}"
            return None
        started = time.monotonic()
        screen, newer = observation.screenshot, None
        while True:
            in_sync = bool(screen) and fraction_changed(
                recorded, decode(screen)) <= self.sync_tolerance
            waited = time.monotonic() - started
            if in_sync or waited >= self.sync_timeout_seconds:
                break
            if self._interrupted.wait(SYNC_POLL_SECONDS):
                raise PolicyError("replay: interrupted")
            try:
                screen = newer = bytes(self._env.provider.screenshot())
            except Exception as exc:  # the desktop failing under it
                raise PolicyError(f"replay: screenshot: {type(exc).__name__}: {exc}") from exc
        info["replay_in_sync"] = in_sync
        info["replay_sync_seconds"] = round(waited, 3)
        return newer

    def interrupt(self) -> None:
        self._interrupted.set()
