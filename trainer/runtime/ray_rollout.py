"""The rollout service of a Ray run: policy-worker actors (one policy copy each, on the
GPUs they reserve) behind one service actor that routes requests and follows versions.

- `PolicyWorkerActor`: a transformers copy of the policy; it switches to a requested
  version between requests by loading that version's weights in place, fetched from the
  object store the first time it needs them.
- `RolloutServiceActor`: the embedded `RolloutService` (least-loaded routing, failover,
  version sessions) over `RemotePolicyWorker`s; environment actors open a session per
  episode and generate through it (`RemoteSession`, a Backend for `VLMPolicy`).
- `RemoteRolloutService`: the trainer's handle; `publish` puts the version's weights in
  the object store once (`ray.put`) and hands the reference to the service.

Versions travel through the object store rather than a checkpoint folder: a LoRA adapter
is megabytes, every worker on any machine fetches the one copy without a shared disk, and
the embedded mode's in-place load applies unchanged. Chats go from the environment actor
to the worker that answers them through the object store too (`ray.put` there), so the
screenshots are not copied through the service actor.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.backends.base import BackendError, Generation, SamplingConfig
from trainer.runtime.ray_nodes import NodePath, node_id, require_paths
from trainer.runtime.roles import Publication, WorkerStatus
from trainer.runtime.service import RolloutService, VersionSession

if TYPE_CHECKING:
    from trainer.model import ModelConfig

# A rollout worker whose process died comes back in a new process (Ray's max_restarts):
# requests wait for it this long, asking again every RESTART_POLL_SECONDS.
RESTART_WAIT_SECONDS = 300.0
RESTART_POLL_SECONDS = 0.5


def rollout_paths(model: ModelConfig) -> list[NodePath]:
    """What a rollout worker needs on its node: the base model's folder."""
    return [NodePath("model.path", model.path)]


class PolicyWorkerActor:
    """One rollout worker in its own actor: generates with the version asked for."""

    def __init__(self, name: str, model: ModelConfig, lora: Any) -> None:
        from agents.backends.transformers_backend import _processor_chat_template
        from trainer.model import resolve_device
        from trainer.runtime.policy_copies import rollout_model

        require_paths(name, rollout_paths(model))
        self.name = name
        self.device = str(resolve_device(""))  # the GPU Ray gave this actor, else the CPU
        base_path = Path(model.path).expanduser().resolve()
        self.backend = rollout_model(base_path, model, lora, self.device,
                                     _processor_chat_template(base_path))
        self.version: int | None = None
        self._lock = threading.Lock()

    def ready(self) -> str:
        return self.device

    def where(self) -> tuple[str, int, bool]:
        """(this actor's node id, its process id, whether Ray restarted it): for the run's
        cluster picture, since Ray restarts a worker without telling the driver."""
        import ray

        return (node_id(), os.getpid(),
                bool(ray.get_runtime_context().was_current_actor_reconstructed))

    def load(self, version: int, box: list[Any], blocking: bool) -> float | None:
        """Hold `version` from now on: the seconds the load took, None when busy."""
        if not self._lock.acquire(blocking=blocking):
            return None
        try:
            return self._switch(version, box)
        finally:
            self._lock.release()

    def generate(self, chats_box: list[Any], sampling: SamplingConfig | None,
                 version: int | None, box: list[Any] | None
                 ) -> tuple[list[Generation], float]:
        """(generations, seconds spent loading `version` first)."""
        import ray

        chats = ray.get(chats_box[0])
        with self._lock:
            seconds = self._switch(version, box) if version is not None and box else 0.0
            return list(self.backend.generate(chats, sampling)), seconds

    def _switch(self, version: int, box: list[Any]) -> float:
        import ray

        if self.version == version:
            return 0.0
        seconds = float(self.backend.load_state(ray.get(box[0]), version))
        self.version = version
        return seconds


class RemotePolicyWorker:
    """A `PolicyWorker` that is a `PolicyWorkerActor`; `states` maps each version to
    the object-store reference of its weights (shared by the service's workers)."""

    def __init__(self, actor: Any, name: str, states: dict[int, Any],
                 restart_wait: float = RESTART_WAIT_SECONDS) -> None:
        self.actor = actor
        self.name = name
        self.version: int | None = None
        self._states = states
        self.restart_wait = restart_wait

    def _call(self, method: str, *args: Any) -> Any:
        """`actor.method(*args)`, waiting for an actor that Ray is restarting (its process
        died and `max_restarts` allows another) rather than failing every request that
        comes while its new process loads the model: the call is made again once the
        actor answers, up to `restart_wait` seconds. A dead actor's error goes through."""
        import ray

        deadline = time.monotonic() + self.restart_wait
        while True:
            try:
                return ray.get(getattr(self.actor, method).remote(*args))
            except ray.exceptions.ActorUnavailableError as exc:
                self.version = None  # a restarted process holds the base weights
                if time.monotonic() >= deadline:
                    raise BackendError(f"{self.name} still restarting after "
                                       f"{self.restart_wait:g} s: {exc}") from exc
                time.sleep(RESTART_POLL_SECONDS)

    def load(self, publication: Publication, *, blocking: bool = True) -> bool:
        seconds = self._call("load", publication.version,
                             [self._states[publication.version]], blocking)
        if seconds is None:
            return False
        if seconds:
            publication.record_load(self.name, seconds)
        self.version = publication.version
        return True

    def generate(self, chats: list[Any], sampling: SamplingConfig | None,
                 publication: Publication | None) -> list[Generation]:
        box = None
        if publication is not None:
            box = [self._states[publication.version]]
        generations, seconds = self._call(
            "generate", chats, sampling, None if publication is None else publication.version,
            box)
        if publication is not None:
            if seconds:
                publication.record_load(self.name, seconds)
            self.version = publication.version
        return list(generations)

    def retire(self, version: int) -> None:
        self._states.pop(version, None)

    def close(self) -> None:
        pass  # the driver that made the actor ends it


class RolloutServiceActor:
    """The Ray actor around `RolloutService` (threaded: one thread per request)."""

    def __init__(self, workers: Sequence[tuple[str, Any]], request_timeout: float,
                 unhealthy_seconds: float) -> None:
        self._states: dict[int, Any] = {}
        self.service = RolloutService(
            [RemotePolicyWorker(actor, name, self._states) for name, actor in workers],
            request_timeout=request_timeout, unhealthy_seconds=unhealthy_seconds)
        self._sessions: dict[str, tuple[str, VersionSession]] = {}
        self._lock = threading.Lock()

    def ready(self) -> bool:
        return True

    def publish(self, version: int, box: list[Any], snapshot_seconds: float
                ) -> dict[str, float]:
        """Make `version` (its weights' reference in `box`) the newest; the seconds each
        worker spent loading it at once (idle workers switch now, busy ones later)."""
        self._states[version] = box[0]
        publication = Publication(version, {}, snapshot_seconds=snapshot_seconds)
        self.service.publish(publication)
        return dict(publication.load_seconds)

    def open_session(self, owner: str) -> tuple[str, int | None]:
        """A session at the newest version for one episode of `owner`: (id, version)."""
        session = self.service.session()
        session_id = uuid.uuid4().hex
        with self._lock:
            self._sessions[session_id] = (owner, session)
        return session_id, session.version

    def generate(self, session_id: str, chats_box: list[Any],
                 sampling: SamplingConfig | None) -> list[Generation]:
        with self._lock:
            found = self._sessions.get(session_id)
        if found is None:
            raise BackendError(f"no open policy session {session_id}")
        return found[1].generate(chats_box, sampling)

    def close_session(self, session_id: str) -> None:
        with self._lock:
            found = self._sessions.pop(session_id, None)
        if found is not None:
            found[1].close()

    def close_sessions(self, owner: str) -> int:
        """Close every session of `owner` (an environment actor that died)."""
        with self._lock:
            ids = [i for i, (o, _) in self._sessions.items() if o == owner]
            found = [self._sessions.pop(i)[1] for i in ids]
        for session in found:
            session.close()
        return len(found)

    def workers(self) -> list[WorkerStatus]:
        return self.service.workers()

    def close(self) -> None:
        self.service.close()


class RemoteSession:
    """An episode's policy session in an environment actor (a Backend for VLMPolicy):
    one version for the whole episode, generated by whichever worker the service picks."""

    name = "rollout-service"

    def __init__(self, service: Any, owner: str) -> None:
        import ray

        self.service = service
        self.session_id, self.version = ray.get(service.open_session.remote(owner))
        self._closed = False

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        import ray

        if self._closed:
            raise BackendError("the episode's policy session is closed")
        try:
            generations: list[Generation] = ray.get(self.service.generate.remote(
                self.session_id, [ray.put(chats)], sampling))
        except ray.exceptions.RayTaskError as exc:  # the service failed the request
            cause = exc.cause if isinstance(exc.cause, Exception) else exc
            raise BackendError(str(cause)) from exc
        except ray.exceptions.RayError as exc:  # the service actor is gone
            raise BackendError(f"rollout service: {type(exc).__name__}: {exc}") from exc
        return generations

    def close(self) -> None:
        import ray

        if self._closed:
            return
        self._closed = True
        try:
            ray.get(self.service.close_session.remote(self.session_id))
        except ray.exceptions.RayError:
            pass  # the service is gone: nothing holds the version any more


class RemoteRolloutService:
    """The trainer's handle on the service actor (a `RunRolloutService`)."""

    needs_adapter_folder = False  # transformers workers load the weights in place

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self._newest: int | None = None

    @property
    def newest_version(self) -> int | None:
        return self._newest

    def publish(self, publication: Publication) -> Publication:
        """Put the version's weights in the object store and make it the newest; the
        workers' load times so far go into `publication.load_seconds`."""
        import time

        import ray

        started = time.perf_counter()
        reference = ray.put(publication.state)
        publication.record_load("object-store", time.perf_counter() - started)
        loads = ray.get(self.actor.publish.remote(publication.version, [reference],
                                                  publication.snapshot_seconds))
        for worker, seconds in loads.items():
            publication.record_load(worker, seconds)
        self._newest = publication.version
        return publication

    def session(self) -> VersionSession:
        raise NotImplementedError("in a Ray run the environment actors open the sessions "
                                  "(RemoteSession)")

    def workers(self) -> list[WorkerStatus]:
        import ray

        statuses: list[WorkerStatus] = ray.get(self.actor.workers.remote())
        return statuses

    def close_sessions(self, owner: str) -> int:
        import ray

        return int(ray.get(self.actor.close_sessions.remote(owner)))

    def close(self) -> None:
        """Generations in progress end now (their episodes end "aborted" or "error")."""
        import ray

        try:
            ray.get(self.actor.close.remote(), timeout=30)
        except ray.exceptions.RayError:
            pass  # already gone
