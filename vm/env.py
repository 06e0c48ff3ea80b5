"""`DesktopEnv`: OSWorld's environment surface over any Provider.

`reset(task) -> obs`, `step(action) -> (obs, reward, done, info)`, `evaluate() -> float`,
`close()`, with OSWorld's observation dict, plus snapshot calls. Every provider call runs
with a deadline: a dead or hung desktop raises EnvironmentDead instead of blocking.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from vm.actions import (
    ACTION_TYPES,
    Action,
    Click,
    Done,
    DragTo,
    Fail,
    KeyDown,
    MouseDown,
    MouseUp,
    MoveTo,
    ParseError,
    Wait,
    from_computer13,
    parse_pyautogui,
)
from vm.errors import EnvironmentDead
from vm.observation import Observation
from vm.providers.base import Provider, Snapshot
from vm.waiting import poll_until

log = logging.getLogger(__name__)

ActionSpace = Literal["pyautogui", "computer_13", "actions"]
T = TypeVar("T")
DEFAULT_SNAPSHOT = "init_state"
ACK_TIMEOUT = 5.0  # seconds to wait for an app to acknowledge the clicks sent to it
WARM_RESET_TIMEOUT = 5.0  # seconds for a running app to load a new task's layout


class WarmResetFailed(RuntimeError):
    """The running app did not take the new task; a full reset follows."""


class DesktopEnv:
    """One desktop environment. Use as a context manager to close it."""

    def __init__(self, provider: Provider, *, snapshot_name: str | None = DEFAULT_SNAPSHOT,
                 action_space: ActionSpace = "pyautogui", require_a11y_tree: bool = False,
                 pause: float = 0.0, call_timeout: float = 30.0, setup_attempts: int = 3,
                 settle: float = 0.25, start: bool = True, strict_setup: bool = False
                 ) -> None:
        if action_space not in ("pyautogui", "computer_13", "actions"):
            raise ValueError(f"action_space: expected pyautogui, computer_13 or actions, "
                             f"got {action_space!r}")
        self.provider = provider
        self.snapshot_name = snapshot_name
        self.action_space: ActionSpace = action_space
        self.require_a11y_tree = require_a11y_tree
        self.pause = pause
        # Apps record what happened a moment after it happens; evaluate() waits this long
        # after the last action (OSWorld's runner sleeps 20 s before evaluating). A task
        # whose app acknowledges clicks (its "input_ack": the app's state file, with
        # "inputs", the clicks it has handled) also makes step() wait for that after a
        # step that clicked, so the screenshot it returns shows what the clicks did, and
        # evaluate() needs no settle when every input was such an acknowledged click.
        self.settle = settle
        self._last_action_at = 0.0
        self._clicks_sent = 0  # mouse-button releases sent since the last reset
        self._acked = 0  # of those, how many the app has acknowledged (input_ack tasks)
        self.last_evaluation: Any = None  # vm.tasks.Evaluation of the last evaluate()
        # the last reset's setup steps that did nothing where OSWorld goes on (a window
        # they name that is not there): vm.tasks.setup.run_steps
        self.setup_warnings: list[str] = []
        # ... and its commands that exited non-zero (vm.tasks.setup_report.FailedCommand);
        # with strict_setup one that is not marked (needs the web, fails on OSWorld's image
        # too) makes the setup fail
        self.setup_failures: list[Any] = []
        self.strict_setup = strict_setup
        self.call_timeout = call_timeout
        self.setup_attempts = setup_attempts
        self.task: Any = None
        self.instruction = ""
        self.actions: list[Action] = []  # performed since the last reset
        self.used = False
        self.dead_reason: str | None = None
        self.last_revert_seconds: float | None = None
        self.last_reset_kind = ""  # "warm" (the running app took the task) or "full"
        self._executor = concurrent.futures.ThreadPoolExecutor(1, f"env-{provider.name}")
        self._closed = False  # close() is final: its executor is shut down
        if start:
            self.start()

    # ------------------------------------------------------------------ plumbing

    @property
    def name(self) -> str:
        return self.provider.name

    def _call(self, what: str, fn: Callable[..., T], *args: Any,
              timeout: float | None = None, even_if_dead: bool = False, **kwargs: Any) -> T:
        if self.dead_reason is not None and not even_if_dead:
            raise EnvironmentDead(f"environment {self.name} is dead: {self.dead_reason}")
        limit = timeout or self.call_timeout
        future = self._executor.submit(fn, *args, **kwargs)
        try:
            return future.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            self._mark_dead(f"{what} did not finish within {limit:.0f} s")
            # the stuck call keeps its thread; later calls get a fresh one
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = concurrent.futures.ThreadPoolExecutor(1, f"env-{self.name}")
            raise EnvironmentDead(f"environment {self.name}: {self.dead_reason}") from None
        except EnvironmentDead as exc:
            self._mark_dead(str(exc))
            raise

    def _mark_dead(self, reason: str) -> None:
        if self.dead_reason is None:
            log.warning("environment %s is dead: %s", self.name, reason)
        self.dead_reason = reason

    def is_alive(self) -> bool:
        """Health check with a deadline; a failed check marks the environment dead."""
        if self.dead_reason is not None:
            return False
        try:
            health = self._call("health check", self.provider.health, timeout=10.0)
        except EnvironmentDead:
            return False
        if not health.alive:
            self._mark_dead(health.detail)
        return health.alive

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the desktop; take the base snapshot the first time if it has none."""
        self.dead_reason = None
        # A VM may take its own ready_timeout to boot (OSWorld's image: up to 300 s).
        config = getattr(self.provider, "config", None)
        boot = float(getattr(config, "ready_timeout", 0.0)) + 60.0
        self._call("start", self.provider.start,
                   timeout=max(self.call_timeout, 120.0, boot))
        if self.snapshot_name is not None and self._has_snapshots():
            names = {s.name for s in self.list_snapshots()}
            if self.snapshot_name not in names:
                self.save_snapshot(self.snapshot_name, description="clean desktop")
            else:
                self.revert_snapshot(self.snapshot_name)
        self.used = False

    def _has_snapshots(self) -> bool:
        return getattr(self.provider, "kind", "") != "remote"

    def restart(self) -> None:
        """Stop whatever is left of the desktop and start it again."""
        try:
            self.provider.stop()
        except Exception as exc:  # the desktop is already broken; keep going
            log.warning("stopping %s before restart: %s", self.name, exc)
        self.start()

    def close(self) -> None:
        """Stop the desktop; a second close does nothing. A dead desktop is stopped too:
        what is left of it (window manager, apps, its accessibility bus, the state file)
        must not outlive the environment."""
        if self._closed:
            return
        self._closed = True
        try:
            self._call("stop", self.provider.stop, timeout=30.0, even_if_dead=True)
        except EnvironmentDead:
            pass
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> DesktopEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ OSWorld surface

    def reset(self, task: Any = None, seed: int | None = None) -> dict[str, Any]:
        """Revert to the base snapshot if the desktop was used, then run the task's setup.

        `task` is a vm.tasks.Task, an OSWorld task dict, or None (a bare reset).
        """
        del seed  # accepted for gym-style callers; the desktop has no randomness to seed
        task = _coerce_task(task)
        self.setup_warnings, self.setup_failures = [], []
        if self._can_warm_reset(task):
            try:
                self._warm_reset(task)
                return self.observe().to_osworld()
            except WarmResetFailed as exc:
                log.info("environment %s: warm reset for %s failed, reverting: %s",
                         self.name, getattr(task, "id", "?"), exc)
        self.last_reset_kind = "full"
        last_error: Exception | None = None
        for attempt in range(1, self.setup_attempts + 1):
            if ((self.used or attempt > 1) and self.snapshot_name is not None
                    and self._has_snapshots()):
                self.revert_snapshot(self.snapshot_name)
            self._begin(task)  # used: setup itself changes the desktop
            if task is None:
                break
            try:
                from vm.tasks import run_setup

                report = self._call("task setup", run_setup, self.provider, task,
                                    self.strict_setup,
                                    timeout=max(self.call_timeout, 600.0))
                self.setup_warnings = list(report.warnings)
                self.setup_failures = list(report.failed_commands)
                break
            except EnvironmentDead:
                raise
            except Exception as exc:
                last_error = exc
                log.warning("setup of task %s failed (attempt %d/%d): %s",
                            getattr(task, "id", "?"), attempt, self.setup_attempts, exc)
        else:
            from vm.tasks import TaskSetupError

            raise TaskSetupError(f"setup of task {getattr(task, 'id', '?')} failed "
                                 f"{self.setup_attempts} times: {last_error}") from last_error
        return self.observe().to_osworld()

    def _can_warm_reset(self, task: Any) -> bool:
        """A warm reset needs: a task that says how (its "warm_reset"), a desktop whose
        last task was on the same app, alive, and no key or button left held down (the
        actions since then are exactly what differs from a fresh start of that app)."""
        new, old = _warm_reset_spec(task), _warm_reset_spec(self.task)
        return (new is not None and old is not None and self.used
                and self.dead_reason is None
                and (new["request"], new["state"]) == (old["request"], old["state"])
                and not any(isinstance(a, (MouseDown, KeyDown)) for a in self.actions))

    def _warm_reset(self, task: Any) -> None:
        """Ask the running app to load `task`'s layout (a fresh window, nothing clicked)
        and wait until its state file says it has, instead of revert and setup."""
        spec = _warm_reset_spec(task)
        assert spec is not None
        request_id = secrets.token_hex(8)
        request = json.dumps({"id": request_id, "layout": spec["layout"]}).encode()
        self._call("load request", self.provider.write_file, spec["request"], request)
        if not self._wait_for_state(spec["state"], lambda state: state.get("loaded")
                                    == request_id and state.get("ready") is True,
                                    WARM_RESET_TIMEOUT):
            raise WarmResetFailed(f"{spec['state']} did not show the load of "
                                  f"{spec['request']} within {WARM_RESET_TIMEOUT:.0f} s")
        self._begin(task)
        self.last_reset_kind = "warm"

    def _begin(self, task: Any) -> None:
        """The desktop now holds `task` at its start: nothing done in it yet."""
        self.used = True
        self.task = task
        self.instruction = getattr(task, "instruction", "") if task is not None else ""
        self.actions = []
        self._clicks_sent = self._acked = 0

    def observe(self) -> Observation:
        screenshot = self._call("screenshot", self.provider.screenshot)
        tree = None
        if self.require_a11y_tree:
            tree = self._call("accessibility tree", self.provider.accessibility_tree)
        return Observation(screenshot=screenshot, screen_size=self.provider.screen_size(),
                           instruction=self.instruction, accessibility_tree=tree)

    def parse_action(self, action: Any) -> list[Action]:
        """Actions from what an agent gave: Action(s) always; pyautogui code or computer_13
        dicts according to the action space. Raises ParseError; never executes code."""
        if isinstance(action, ACTION_TYPES):
            return [action]  # type: ignore[list-item]
        if isinstance(action, list) and all(isinstance(a, ACTION_TYPES) for a in action):
            return list(action)
        if self.action_space == "pyautogui" and isinstance(action, str):
            return parse_pyautogui(action)
        if self.action_space == "computer_13" and isinstance(action, (dict, str)):
            try:
                return [from_computer13(action)]
            except ValueError as exc:
                raise ParseError(str(exc)) from None
        raise ParseError(f"action space {self.action_space}: cannot use {type(action).__name__} "
                         f"{action!r}")

    def step(self, action: Any, pause: float | None = None
             ) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        """Perform `action`, then observe. OSWorld's contract: reward is always 0; DONE and
        FAIL end the episode with info {"done": True} / {"fail": True}."""
        actions = self.parse_action(action)
        self.used = True
        done = False
        info: dict[str, Any] = {}
        started = time.perf_counter()
        clicks_before = self._clicks_sent
        for act in actions:
            self.actions.append(act)
            if isinstance(act, Done):
                done, info["done"] = True, True
                break
            if isinstance(act, Fail):
                done, info["fail"] = True, True
                break
            if isinstance(act, Wait):
                time.sleep(act.seconds)
                continue
            self._call("action", self.provider.perform, act)
            self._last_action_at = time.monotonic()
            self._clicks_sent += _releases(act)
        if self._clicks_sent > clicks_before:
            self._wait_for_ack()  # so the screenshot below shows what the clicks did
        info["action_seconds"] = time.perf_counter() - started
        wait = self.pause if pause is None else pause
        if wait > 0 and not done:
            time.sleep(wait)
        return self.observe().to_osworld(), 0.0, done, info

    def evaluate(self) -> float:
        """Score the current task (0..1) with its evaluator. Why a part scored 0 without
        being computed (a file the agent never saved, ...) is in `last_evaluation`."""
        if self.task is None:
            raise ValueError("evaluate() needs a task: call reset(task) first")
        from vm.tasks import evaluate_task

        last = self.actions[-1] if self.actions else None
        # A dead desktop can leave an app's last state file behind; never score from it.
        if not self.is_alive():
            raise EnvironmentDead(f"{self.name}: the desktop died before evaluation: "
                                  f"{self.dead_reason}")
        # The settle: unless the app has acknowledged every input of the episode (its
        # state file, written after each click's effects, is what the evaluator reads).
        wait = self._last_action_at + self.settle - time.monotonic()
        if wait > 0 and not self._all_acknowledged():
            time.sleep(wait)
        self.last_evaluation = None
        result = self._call("evaluation", evaluate_task, self.provider, self.task, last,
                            timeout=max(self.call_timeout, 600.0))
        self.last_evaluation = result
        return float(result.score)

    def _all_acknowledged(self) -> bool:
        """True when the task's app acknowledges clicks, every click sent was acknowledged,
        and nothing else was sent that could change the app (a key, a scroll, a button
        held down)."""
        return (self._ack_path() is not None and self._acked >= self._clicks_sent
                and all(isinstance(a, _ACKNOWLEDGED) for a in self.actions))

    def _ack_path(self) -> str | None:
        extra = getattr(self.task, "extra", None)
        path = extra.get("input_ack") if isinstance(extra, dict) else None
        return path if isinstance(path, str) and path else None

    def _wait_for_ack(self) -> None:
        """For a task whose app acknowledges clicks: wait until it has handled every click
        sent since the reset (ACK_TIMEOUT at most, then go on with a warning)."""
        path = self._ack_path()
        if path is None or self._clicks_sent == 0:
            return
        sent = self._clicks_sent
        try:
            acked = self._wait_for_state(path, lambda s: int(s.get("inputs", 0)) >= sent,
                                         ACK_TIMEOUT)
        except EnvironmentDead:
            return  # the step's next call (its screenshot) says so
        if acked:
            self._acked = sent
        else:
            log.warning("environment %s: %s acknowledged fewer than the %d clicks sent "
                        "within %.0f s", self.name, path, sent, ACK_TIMEOUT)

    def _wait_for_state(self, path: str, accept: Callable[[dict[str, Any]], bool],
                        timeout: float) -> bool:
        """Poll the app's state file `path` until `accept(state)` (True), or `timeout`
        seconds (False). A read that fails (not written yet, between writes) is tried
        again; a dead desktop raises EnvironmentDead."""
        def accepted() -> bool:
            try:
                state = json.loads(self._call("read state", self.provider.read_file, path))
                return isinstance(state, dict) and bool(accept(state))
            except EnvironmentDead:
                raise
            except Exception:
                return False

        return poll_until(accepted, timeout, 0.005)

    # ------------------------------------------------------------------ snapshots

    def list_snapshots(self) -> list[Snapshot]:
        return self._call("list snapshots", self.provider.list_snapshots)

    def save_snapshot(self, name: str, description: str = "",
                      task_id: str | None = None) -> Snapshot:
        return self._call("save snapshot", self.provider.save_snapshot, name, description,
                          task_id, timeout=max(self.call_timeout, 300.0))

    def revert_snapshot(self, name: str) -> float:
        """Revert; returns (and keeps in last_revert_seconds) how long it took."""
        started = time.perf_counter()
        self._call("revert snapshot", self.provider.revert_snapshot, name,
                   timeout=max(self.call_timeout, 300.0))
        self.last_revert_seconds = time.perf_counter() - started
        self.used = False
        return self.last_revert_seconds

    def rename_snapshot(self, old: str, new: str) -> None:
        self._call("rename snapshot", self.provider.rename_snapshot, old, new)
        if self.snapshot_name == old:
            self.snapshot_name = new

    def delete_snapshot(self, name: str) -> None:
        self._call("delete snapshot", self.provider.delete_snapshot, name)


# What an acknowledging app's state fully reflects once its clicks are acknowledged.
_ACKNOWLEDGED = (Click, MoveTo, DragTo, MouseUp, Wait, Done, Fail)


def _releases(action: Action) -> int:
    """Mouse-button releases an action sends (what acknowledging apps count)."""
    if isinstance(action, Click):
        return action.count
    return 1 if isinstance(action, (DragTo, MouseUp)) else 0


def _warm_reset_spec(task: Any) -> dict[str, Any] | None:
    """A task's "warm_reset": {"request": the app's load request file, "state": its state
    file, "layout": what to load}, when it has a complete one."""
    extra = getattr(task, "extra", None)
    spec = extra.get("warm_reset") if isinstance(extra, dict) else None
    if (isinstance(spec, dict) and isinstance(spec.get("request"), str)
            and isinstance(spec.get("state"), str) and "layout" in spec):
        return spec
    return None


def _coerce_task(task: Any) -> Any:
    if task is None or not isinstance(task, dict):
        return task
    from vm.tasks import Task

    return Task.from_dict(task, source="<dict>")
