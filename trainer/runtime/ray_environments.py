"""The environment cluster of a Ray run: one actor per environment, on the machines that
offer the environment resource.

- `EnvironmentActor` owns one desktop (a sandbox started where it runs, or a remote
  OSWorld guest server) through a one-environment `EnvPool` (health checks, restarts of
  a dead desktop) and runs one episode at a time with `RolloutRunner`: reset to the task,
  ask the rollout service for actions, step, evaluate. Steps and screenshots go to the
  data-manager actor, which writes them; the actor itself never touches the store. Each
  episode records the node and host that ran it (info "node", "host").
- `EnvironmentActors` is the driver's side: it starts the actors, replaces one that died,
  gathers their busy/idle figures for the run's metrics, and says where each runs for
  the run's cluster picture (trainer/runtime/ray_status.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from trainer.environments import make_environment
from trainer.rollouts import CANCELLED, EpisodeJob, EpisodeOutcome, RolloutRunner
from trainer.runtime.ray_nodes import NodePath, node_id, require_paths

if TYPE_CHECKING:
    from agents.policies.base import Policy
    from agents.policies.vlm import VLMPolicyConfig
    from agents.rollout import RolloutConfig
    from trainer.config import EnvironmentsConfig
    from trainer.runtime.cluster_status import ActorStatus
    from trainer.runtime.ray_rollout import RemoteSession
    from vm.pool import EnvUsage

log = logging.getLogger(__name__)


@dataclass
class EnvironmentResult:
    """What one `run_episode` call gives back to the driver."""

    outcome: EpisodeOutcome
    lost: str | None = None  # why the actor's desktop is gone for good (replace the actor)


@dataclass
class EnvironmentSpec:
    """Everything an environment actor needs, sent once when it is created."""

    index: int
    sandbox_name: str
    environments: EnvironmentsConfig
    workdir: str
    rollout: RolloutConfig
    policy: VLMPolicyConfig
    run_id: str
    needs: tuple[NodePath, ...] = ()  # checked on the actor's node before its desktop starts


def environment_paths(environments: EnvironmentsConfig, workdir: str,
                      needs: Sequence[NodePath]) -> list[NodePath]:
    """What an environment actor needs on its node: the folder its desktops live in
    (sandbox homes, VM overlays; none for a remote guest) and `needs` (task files)."""
    own = [NodePath("runtime.ray.env_workdir ('' : the workspace)", workdir, True)] \
        if environments.kind != "remote" else []
    return [*own, *needs]


class EnvironmentActor:
    """The Ray actor (threaded: `cancel` and `usage` answer while an episode runs)."""

    def __init__(self, spec: EnvironmentSpec, owner: str, data: Any, service: Any) -> None:
        from trainer.runtime.ray_data import RemoteEpisodeStore
        from vm.pool import EnvPool

        require_paths(owner, environment_paths(spec.environments, spec.workdir, spec.needs))
        self.spec = spec
        self.owner = owner
        self.service = service
        self.store = RemoteEpisodeStore(data, owner)
        self.where = {"node": node_id(), "host": socket.gethostname()}
        workdir = Path(spec.workdir)
        self.pool = EnvPool(lambda index: make_environment(spec.environments, spec.index,
                                                           spec.sandbox_name, workdir), 1)
        self.pool.start()
        usage = self.pool.usage()[0]
        if usage.status == "dead":
            self.pool.close()
            raise RuntimeError(f"{owner}: the environment could not start on "
                               f"{socket.gethostname()}: {usage.last_error}")
        self._stopping = threading.Event()
        self._runner: RolloutRunner | None = None
        self._lock = threading.Lock()

    def ready(self) -> dict[str, str]:
        """Where this actor runs: its node's id ("node") and its host ("host")."""
        return dict(self.where)

    def pid(self) -> int:
        return os.getpid()

    def run_episode(self, job: EpisodeJob, oracle: bool, tags: Sequence[str],
                    info: dict[str, Any], held_out: VLMPolicyConfig | None = None
                    ) -> EnvironmentResult:
        """One episode of `job` with the rollout service's newest version (or the task's
        scripted oracle), streamed to the data manager. Never raises for the episode's
        own failures: they are its status. `held_out`: an episode of the held-out
        evaluation, generated with that configuration and of no run (never trained on)."""
        from agents.policies.oracle import OraclePolicy
        from agents.policies.vlm import VLMPolicy
        from trainer.runtime.ray_rollout import RemoteSession
        from trainer.store import Store
        from vm.pool import PoolClosed

        sessions: list[RemoteSession] = []

        def make_policy(job: EpisodeJob) -> Policy:
            if oracle:
                return OraclePolicy()
            session = RemoteSession(self.service, self.owner)
            sessions.append(session)
            return VLMPolicy(session, held_out or self.spec.policy,
                             policy_version=session.version)

        runner = RolloutRunner(cast(Store, self.store), self.pool, make_policy,
                               self.spec.rollout,
                               run_id=None if held_out is not None else self.spec.run_id,
                               tags=tags, info={**info, **self.where})
        with self._lock:
            if self._stopping.is_set():
                return EnvironmentResult(EpisodeOutcome(job, None, CANCELLED))
            self._runner = runner
        try:
            return EnvironmentResult(runner.run_one(job))
        except PoolClosed as exc:  # the desktop is dead and out of restarts
            return EnvironmentResult(EpisodeOutcome(job, None, str(exc)), lost=str(exc))
        except Exception as exc:  # the data manager failed to open the episode
            log.error("%s: episode of %s lost: %s", self.owner, job.task.id, exc)
            return EnvironmentResult(EpisodeOutcome(job, None, f"{type(exc).__name__}: {exc}"))
        finally:
            with self._lock:
                self._runner = None
            for session in sessions:
                session.close()

    def cancel(self) -> None:
        """The run is stopping: the running episode ends "aborted", no other starts."""
        with self._lock:
            self._stopping.set()
            runner = self._runner
        if runner is not None:
            runner.cancel()

    def usage(self) -> EnvUsage:
        return self.pool.usage()[0]

    def close(self) -> None:
        self.pool.close()


@dataclass
class _Slot:
    index: int
    actor: Any = None
    ready: Any = None  # the reference of the actor's `ready()` call
    owner: str = ""
    generation: int = 0  # actors made for this slot so far
    node: str = ""  # the current actor's node, once its `ready()` answered
    usage: EnvUsage | None = None  # the current actor's last figures
    carried_busy: float = 0.0  # figures of the slot's earlier actors
    carried_idle: float = 0.0
    carried_restarts: int = 0
    carried_leases: int = 0
    lost: str | None = None  # why the slot was given up


class EnvironmentActors:
    """The driver's handle on the environment actors: `size` slots, each one actor at a
    time; an `EnvClusterRole` without leases (the actors run the episodes)."""

    def __init__(self, size: int, make: Callable[[int, str], Any], *, replacements: int,
                 start_timeout: float, asks: str) -> None:
        self.size = size
        self._make = make  # (slot index, owner name) -> a new actor handle
        self.replacements = replacements
        self.start_timeout = start_timeout
        self.asks = asks  # the resources one actor asks for, for messages
        self._slots = [_Slot(i) for i in range(size)]
        self._lock = threading.Lock()
        # called (with why) once a slot's actor is being replaced, and once the slot has a
        # new actor or is given up: the run's cluster picture is written again
        self.on_change: Callable[[str], None] | None = None

    def start(self) -> list[tuple[str, Any]]:
        """Create every actor: (name, reference that resolves once its desktop is up)
        for each, for the caller to wait on with the other roles."""
        for slot in self._slots:
            self._create(slot)
        return [(slot.owner, slot.ready) for slot in self._slots]

    def _create(self, slot: _Slot) -> None:
        slot.generation += 1
        slot.owner = f"environment-{slot.index}" + (
            f".{slot.generation - 1}" if slot.generation > 1 else "")
        slot.actor = self._make(slot.index, slot.owner)
        slot.ready = slot.actor.ready.remote()
        slot.usage = None
        slot.node = ""

    def actor(self, index: int) -> tuple[Any, str]:
        """The slot's current actor and its name (the owner of what it writes)."""
        with self._lock:
            slot = self._slots[index]
            return slot.actor, slot.owner

    def replace(self, index: int, reason: str) -> bool:
        """The slot's actor died (or lost its desktop): end it and start another. False
        when the slot is out of replacements or the new actor does not start."""
        import ray

        slot = self._slots[index]
        with self._lock:
            old = slot.actor
            if slot.usage is not None:
                slot.carried_busy += slot.usage.busy_seconds
                slot.carried_idle += slot.usage.idle_seconds
                slot.carried_restarts += slot.usage.restarts
                slot.carried_leases += slot.usage.leases
            slot.carried_restarts += 1
            slot.usage = None
            if slot.generation > self.replacements:
                slot.lost = f"replaced {self.replacements} times; last: {reason}"
                slot.actor = None
        try:
            ray.kill(old)
        except ValueError:
            pass  # not an actor any more
        if slot.actor is None:
            self._changed(f"environment-{index} given up: {reason}")
            return False
        log.warning("environment %d: %s; starting another actor", index, reason)
        while True:
            with self._lock:
                self._create(slot)
            self._changed(f"{slot.owner} replaces an actor: {reason}")
            try:
                wait_for_actors([(slot.owner, slot.ready, self.asks)], self.start_timeout)
                self._changed(f"{slot.owner} started")
                return True
            except RuntimeError as exc:
                if not _placed_on_a_lost_node(exc) or slot.generation > self.replacements:
                    slot.lost = str(exc)
                    self._changed(f"environment-{index} given up: {exc}")
                    return False
                # Ray placed it on a machine that was gone but not yet known dead (a lost
                # node's heartbeats are missed for seconds): place it again
                log.warning("environment %d: %s; placing it again", index, exc)
                try:
                    ray.kill(slot.actor)
                except ValueError:
                    pass

    def _changed(self, reason: str) -> None:
        if self.on_change is not None:
            self.on_change(reason)

    def statuses(self, dead_nodes: set[str]) -> list[ActorStatus]:
        """Each slot's actor for the cluster picture: its node (from its `ready()` answer),
        its state, and how many times the slot's actor was replaced. Waits for nothing."""
        import ray

        from trainer.runtime.cluster_status import ActorStatus

        with self._lock:
            slots = [(slot, slot.actor, slot.ready, slot.owner, slot.generation, slot.lost)
                     for slot in self._slots]
        pending = [ready for _, actor, ready, *_ in slots if actor is not None]
        answered, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
        out = []
        for slot, actor, ready, owner, generation, lost in slots:
            state, detail = "alive", ""
            if lost is not None:
                state, detail = "lost", lost
            elif actor is None:
                state = "dead"  # the run closed it
            elif ready not in answered:
                state = "starting"
            else:
                try:
                    where = ray.get(ready)
                    with self._lock:
                        if slot.actor is actor:
                            slot.node = str(where["node"])
                except ray.exceptions.RayError as exc:
                    state, detail = "dead", ray_error_summary(exc)
            node = slot.node
            if state == "alive" and node in dead_nodes:
                state = "dead"
            out.append(ActorStatus("environment", owner, node, state,
                                   max(0, generation - 1), detail))
        return out

    def usage(self) -> list[EnvUsage]:
        """Each slot's figures (its earlier actors' included), for utilisation metrics."""
        import ray

        from vm.pool import EnvUsage

        with self._lock:
            actors = [(slot, slot.actor) for slot in self._slots if slot.actor is not None]
        refs = [actor.usage.remote() for _, actor in actors]
        for (slot, actor), ref in zip(actors, refs, strict=True):
            try:
                figures = ray.get(ref, timeout=30)
            except ray.exceptions.RayError:
                continue  # dead or hung: its last figures stand until it is replaced
            with self._lock:
                if slot.actor is actor:  # not replaced meanwhile (its figures carried)
                    slot.usage = figures
        out = []
        with self._lock:
            for slot in self._slots:
                now = slot.usage
                status = now.status if now is not None else "dead" if slot.lost else "starting"
                out.append(EnvUsage(
                    slot.index, slot.owner, status,
                    slot.carried_busy + (now.busy_seconds if now else 0.0),
                    slot.carried_idle + (now.idle_seconds if now else 0.0),
                    slot.carried_restarts + (now.restarts if now else 0),
                    slot.carried_leases + (now.leases if now else 0),
                    (now.last_error if now else None) or slot.lost))
        return out

    def cancel(self) -> None:
        """Every running episode ends "aborted"; no new one starts."""
        with self._lock:
            actors = [slot.actor for slot in self._slots if slot.actor is not None]
        for actor in actors:
            actor.cancel.remote()

    def close(self) -> None:
        """Stop every desktop, then end the actors (those that never started at once)."""
        import ray

        with self._lock:
            slots = [(slot.actor, slot.ready) for slot in self._slots
                     if slot.actor is not None]
            for slot in self._slots:
                slot.actor = None
        actors = [actor for actor, _ in slots]
        started, _ = ray.wait([ready for _, ready in slots], num_returns=len(slots),
                              timeout=0)
        refs = [actor.close.remote() for actor, ready in slots if ready in started]
        try:
            ray.wait(refs, num_returns=len(refs), timeout=60)
        finally:
            for actor in actors:
                try:
                    ray.kill(actor)
                except ValueError:
                    pass


def wait_for_actors(waits: Sequence[tuple[str, Any, str]], timeout: float) -> None:
    """Wait until every actor of `waits` (name, reference of a call that answers once it
    is up, the resources it asks for) has started; RuntimeError naming those that were
    not placed or not started within `timeout` seconds, or that failed to start."""
    import ray

    refs = [ref for _, ref, _ in waits]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    late = [f"{name} (asks for {asks})" for name, ref, asks in waits if ref not in ready]
    if late:
        raise RuntimeError(f"runtime.ray: not started within start_timeout = {timeout:g} s: "
                           f"{'; '.join(late)}; the cluster has "
                           f"{_free(ray.available_resources())} free")
    for name, ref, _ in waits:
        try:
            ray.get(ref)
        except ray.exceptions.RayError as exc:
            raise RuntimeError(f"runtime.ray: {name} failed to start: "
                               f"{ray_error_summary(exc)}") from exc


def _placed_on_a_lost_node(exc: RuntimeError) -> bool:
    """Whether `wait_for_actors`' error is of an actor that died before its constructor
    ended without raising (its machine went), rather than one whose constructor failed."""
    import ray

    cause = exc.__cause__
    return isinstance(cause, ray.exceptions.RayActorError) and not cause.actor_init_failed


def _free(resources: dict[str, float]) -> str:
    """Resources without Ray's own bookkeeping (memory, node ids)."""
    shown = {k: v for k, v in resources.items()
             if not k.startswith("node:") and "memory" not in k}
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(shown.items())) + "}"


def ray_error_summary(exc: BaseException) -> str:
    """The first and last lines of a Ray error (its middle is actor ids and addresses)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"

