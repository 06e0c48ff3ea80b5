"""The rollout service: several policy workers behind one `generate`, each following the
published policy versions.

Routing: a request goes to the healthy worker with the fewest requests in flight (one
already holding the request's version wins a tie). A call that raises or runs past
`request_timeout` is retried on another worker, and the worker that failed sits out a
cool-down (`unhealthy_seconds`); only when every worker has failed the request does the
caller get BackendError.

Versions: `publish` hands each new version to the workers; an episode opens a `session`,
which pins the newest version for all its requests. A worker that holds one version at a
time (transformers: weights copied in place) switches between requests when a request of
another version reaches it, so an episode started before a publication still finishes on
its own version. A worker that is idle at publication time, and whose version no open
episode holds, switches at once. Every switch is timed into the publication's
`sync_seconds`. vLLM takes a new LoRARequest per version (versions side by side, calls
batched together); a vLLM OpenAI-compatible server loads each version's adapter under the
name v<version>.

Retirement: a version is retired once it is not the newest, no open session holds it and
no worker call made for it is still running (a call abandoned at its timeout included);
every worker then forgets it, and `on_retired(version)` is called (an asynchronous vLLM
run removes the version's adapter folder there: trainer/published.py). A plain
`generate` holds the newest version for its call the way a session does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from agents.backends.base import Backend, BackendError, Generation, SamplingConfig
from trainer.runtime.roles import Publication, WorkerStatus

log = logging.getLogger(__name__)


# -- workers ---------------------------------------------------------------------------


@runtime_checkable
class PolicyWorker(Protocol):
    """One generation backend that can be brought to a published policy version."""

    name: str
    version: int | None  # the version it holds now; None: never loaded

    def load(self, publication: Publication, *, blocking: bool = True) -> bool:
        """Hold `publication`'s version from now on; False when not blocking and busy."""
        ...

    def generate(self, chats: list[list[dict[str, Any]]], sampling: SamplingConfig | None,
                 publication: Publication | None) -> list[Generation]:
        """Generate with `publication`'s version (None: whatever the worker holds)."""
        ...

    def retire(self, version: int) -> None:
        """No request will ask for `version` again."""
        ...

    def close(self) -> None: ...


class _LockedWorker:
    """A worker that holds one version at a time and generates one call at a time."""

    def __init__(self, backend: Any, name: str) -> None:
        self.backend = backend
        self.name = name
        self.version: int | None = None
        self._lock = threading.Lock()

    def load(self, publication: Publication, *, blocking: bool = True) -> bool:
        if not self._lock.acquire(blocking=blocking):
            return False
        try:
            self._switch(publication)
        finally:
            self._lock.release()
        return True

    def generate(self, chats: list[list[dict[str, Any]]], sampling: SamplingConfig | None,
                 publication: Publication | None) -> list[Generation]:
        with self._lock:
            if publication is not None:
                self._switch(publication)
            return list(self.backend.generate(chats, sampling))

    def _switch(self, publication: Publication) -> None:
        if self.version == publication.version:
            return
        seconds = self._load(publication)
        publication.record_load(self.name, seconds)
        self.version = publication.version

    def _load(self, publication: Publication) -> float:
        raise NotImplementedError

    def retire(self, version: int) -> None:
        pass

    def close(self) -> None:
        self.backend.close()


class TransformersWorker(_LockedWorker):
    """A transformers backend with its own model copy; versions are copied in place
    (`TransformersBackend.load_state`: the adapter, or every weight)."""

    def _load(self, publication: Publication) -> float:
        return float(self.backend.load_state(publication.state, publication.version))


class VLLMWorker(_LockedWorker):
    """vLLM in this process: a new LoRARequest per version, no restart (LoRA only).
    Versions live side by side and calls run concurrently: the backend gathers the calls
    of all threads, each with its version's adapter, into one vLLM batch."""

    needs_adapter_folder = True

    def __init__(self, backend: Any, name: str) -> None:
        super().__init__(backend, name)
        self._loaded: set[int] = set()

    def _switch(self, publication: Publication) -> None:
        if publication.version in self._loaded:
            return
        seconds = self._load(publication)
        publication.record_load(self.name, seconds)
        self._loaded.add(publication.version)
        self.version = max(self._loaded)

    def _load(self, publication: Publication) -> float:
        if publication.adapter_path is None:
            raise BackendError(f"{self.name}: policy version {publication.version} has no "
                               f"adapter folder (vLLM loads LoRA adapters from folders)")
        return float(self.backend.use_policy_version(publication.version,
                                                     publication.adapter_path))

    def generate(self, chats: list[list[dict[str, Any]]], sampling: SamplingConfig | None,
                 publication: Publication | None) -> list[Generation]:
        if publication is None:
            return list(self.backend.generate(chats, sampling))
        with self._lock:  # registering a version only; generation runs unlocked
            self._switch(publication)
        return list(self.backend.generate(chats, sampling,
                                          policy_version=publication.version))

    def retire(self, version: int) -> None:
        with self._lock:
            self._loaded.discard(version)
        self.backend.retire_version(version)


class FixedWorker:
    """A backend that cannot change versions (a plain OpenAI-compatible endpoint, a
    scripted backend): it serves every request with what it has."""

    version: int | None = None

    def __init__(self, backend: Backend, name: str | None = None) -> None:
        self.backend = backend
        self.name = name or backend.name

    def load(self, publication: Publication, *, blocking: bool = True) -> bool:
        return True

    def generate(self, chats: list[list[dict[str, Any]]], sampling: SamplingConfig | None,
                 publication: Publication | None) -> list[Generation]:
        return list(self.backend.generate(chats, sampling))

    def retire(self, version: int) -> None:
        pass

    def close(self) -> None:
        self.backend.close()


class VLLMServerWorker:
    """A `vllm serve` server started with --enable-lora and runtime LoRA updating
    (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True): each version's adapter folder is loaded under
    the name v<version> (POST /v1/load_lora_adapter) and requested by that model name;
    retired versions are unloaded. Requests run concurrently (the server batches them)."""

    needs_adapter_folder = True

    def __init__(self, base_url: str, *, name: str | None = None, timeout: float = 600.0,
                 **backend_options: Any) -> None:
        import requests

        self.base_url = base_url.rstrip("/")  # ends with /v1, as for OpenAIBackend
        self.name = name or self.base_url
        self.version: int | None = None
        self.timeout = timeout
        self._options = backend_options
        self._session = requests.Session()
        self._backends: dict[int, Any] = {}
        self._lock = threading.Lock()

    def load(self, publication: Publication, *, blocking: bool = True) -> bool:
        self._backend(publication)
        return True

    def _backend(self, publication: Publication) -> Any:
        from agents.backends.openai_backend import OpenAIBackend

        with self._lock:
            backend = self._backends.get(publication.version)
            if backend is not None:
                return backend
            if publication.adapter_path is None:
                raise BackendError(f"{self.name}: policy version {publication.version} has "
                                   f"no adapter folder to load")
            started = time.perf_counter()
            self._post("load_lora_adapter", {"lora_name": f"v{publication.version}",
                                             "lora_path": str(publication.adapter_path)})
            publication.record_load(self.name, time.perf_counter() - started)
            backend = OpenAIBackend(self.base_url, f"v{publication.version}",
                                    timeout=self.timeout, **self._options)
            self._backends[publication.version] = backend
            self.version = max(self._backends)
            return backend

    def generate(self, chats: list[list[dict[str, Any]]], sampling: SamplingConfig | None,
                 publication: Publication | None) -> list[Generation]:
        if publication is None:
            raise BackendError(f"{self.name}: a served LoRA worker needs a policy version")
        return list(self._backend(publication).generate(chats, sampling))

    def retire(self, version: int) -> None:
        with self._lock:
            backend = self._backends.pop(version, None)
        if backend is not None:
            backend.close()
            try:
                self._post("unload_lora_adapter", {"lora_name": f"v{version}"})
            except BackendError as exc:  # the adapter only costs server memory
                log.warning("%s", exc)

    def _post(self, endpoint: str, body: dict[str, Any]) -> None:
        import requests

        url = f"{self.base_url}/{endpoint}"
        try:
            response = self._session.post(url, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise BackendError(f"{url}: {exc}") from exc
        if response.status_code != 200:
            raise BackendError(f"{url}: HTTP {response.status_code}: {response.text[:300]}")

    def close(self) -> None:
        for version in list(self._backends):
            self.retire(version)
        self._session.close()


def as_worker(backend: PolicyWorker | Backend, name: str) -> PolicyWorker:
    """A worker for `backend`: in-place loads for transformers, LoRARequests for vLLM,
    fixed otherwise."""
    if isinstance(backend, PolicyWorker):
        return backend
    if callable(getattr(backend, "load_state", None)):
        return TransformersWorker(backend, name)
    if callable(getattr(backend, "use_policy_version", None)):
        return VLLMWorker(backend, name)
    return FixedWorker(backend, name)


# -- the service -----------------------------------------------------------------------


class _Slot:
    def __init__(self, worker: PolicyWorker) -> None:
        self.worker = worker
        self.in_flight = 0
        self.unhealthy_until = 0.0
        self.requests = 0
        self.failures = 0
        self.last_error: str | None = None


class VersionSession:
    """An episode's hold on one policy version (a Backend for `VLMPolicy`)."""

    name = "rollout-service"

    def __init__(self, service: RolloutService, publication: Publication | None) -> None:
        self._service = service
        self.publication = publication
        self.version = publication.version if publication is not None else None
        self._closed = False

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        if self._closed:
            raise BackendError("the episode's policy session is closed")
        return self._service.route(chats, sampling, self.publication)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._service._end_session(self)

    def __enter__(self) -> VersionSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RolloutService:
    """Least-loaded routing with failover over several policy workers (see the module
    docstring). Thread-safe. Also a Backend itself: `generate` uses the newest version."""

    name = "rollout-service"

    def __init__(self, workers: Sequence[PolicyWorker | Backend], *,
                 request_timeout: float = 600.0, unhealthy_seconds: float = 30.0,
                 on_retired: Callable[[int], None] | None = None) -> None:
        """`on_retired(version)`: called once every worker has retired `version` (see
        the module docstring)."""
        if not workers:
            raise ValueError("a rollout service needs at least one worker")
        if request_timeout <= 0 or unhealthy_seconds < 0:
            raise ValueError("request_timeout must be > 0 and unhealthy_seconds >= 0")
        self._slots = [_Slot(as_worker(w, f"worker-{i}")) for i, w in enumerate(workers)]
        self.request_timeout = request_timeout
        self.unhealthy_seconds = unhealthy_seconds
        self._lock = threading.Lock()
        self._publications: dict[int, Publication] = {}
        self._newest: Publication | None = None
        self._sessions: Counter[int] = Counter()  # open sessions per version
        self._calls: Counter[int] = Counter()  # worker calls running per version
        self.on_retired = on_retired
        self._closed = threading.Event()

    @property
    def needs_adapter_folder(self) -> bool:
        """Whether some worker loads versions from adapter folders (vLLM)."""
        return any(getattr(s.worker, "needs_adapter_folder", False) for s in self._slots)

    # -- versions --------------------------------------------------------------------

    @property
    def newest_version(self) -> int | None:
        newest = self._newest
        return newest.version if newest is not None else None

    def publication(self, version: int) -> Publication | None:
        with self._lock:
            return self._publications.get(version)

    def publish(self, publication: Publication) -> Publication:
        """Make `publication` the version new sessions get. Workers that no open session
        needs at their current version switch now (when idle); others switch lazily."""
        with self._lock:
            newest = self._newest
            if newest is not None and publication.version <= newest.version:
                raise ValueError(f"policy version {publication.version} is not newer than "
                                 f"{newest.version}")
            self._publications[publication.version] = publication
            self._newest = publication
            eager = [s for s in self._slots if s.worker.version is None
                     or not self._sessions[s.worker.version]]
            retired = self._drop_unused()
        for slot in eager:
            try:
                slot.worker.load(publication, blocking=False)
            except Exception as exc:  # the worker will fail its requests as well
                self._failed(slot, f"loading version {publication.version}: "
                                   f"{type(exc).__name__}: {exc}")
        self._retire(retired)
        return publication

    def session(self) -> VersionSession:
        with self._lock:
            newest = self._newest
            if newest is not None:
                self._sessions[newest.version] += 1
        return VersionSession(self, newest)

    def _end_session(self, session: VersionSession) -> None:
        if session.version is None:
            return
        with self._lock:
            self._sessions[session.version] -= 1
            retired = self._drop_unused()
        self._retire(retired)

    def _drop_unused(self) -> list[int]:
        """Forget the versions nothing holds any more (under the lock); they are to be
        retired."""
        newest = self._newest
        unused = [v for v in self._publications
                  if (newest is None or v != newest.version) and self._sessions[v] <= 0
                  and self._calls[v] <= 0]
        for version in unused:
            del self._publications[version]
            self._sessions.pop(version, None)
            self._calls.pop(version, None)
        return unused

    def _retire(self, versions: list[int]) -> None:
        for version in versions:
            for slot in self._slots:
                try:
                    slot.worker.retire(version)
                except Exception as exc:  # the others still retire it
                    log.warning("rollout worker %s: retiring version %d: %s",
                                slot.worker.name, version, exc)
            if self.on_retired is not None:
                try:
                    self.on_retired(version)
                except Exception as exc:  # a folder left behind costs disk, not the run
                    log.warning("retired policy version %d: %s", version, exc)

    # -- generation ------------------------------------------------------------------

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        with self.session() as session:  # the newest version, held for this call
            return session.generate(chats, sampling)

    def route(self, chats: list[list[dict[str, Any]]], sampling: SamplingConfig | None,
              publication: Publication | None) -> list[Generation]:
        """Generate on the least-loaded healthy worker; on a failure or timeout, on the
        next one. Raises BackendError when every worker failed this request."""
        tried: set[int] = set()
        errors: list[str] = []
        while True:
            index = self._pick(tried, publication)
            if index is None:
                raise BackendError("every rollout worker failed: " + "; ".join(errors))
            tried.add(index)
            slot = self._slots[index]
            try:
                result = self._call(slot, chats, sampling, publication)
            except BackendError as exc:
                errors.append(f"{slot.worker.name}: {exc}")
                self._failed(slot, str(exc))
                if self._closed.is_set():
                    raise
                continue
            return result

    def _pick(self, tried: set[int], publication: Publication | None) -> int | None:
        now = time.monotonic()
        version = publication.version if publication is not None else None
        with self._lock:
            choices = [i for i in range(len(self._slots)) if i not in tried]
            if not choices:
                return None

            def load(i: int) -> tuple[bool, int, bool, int]:
                slot = self._slots[i]
                return (slot.unhealthy_until > now, slot.in_flight,
                        version is not None and slot.worker.version != version, i)

            index = min(choices, key=load)
            slot = self._slots[index]
            slot.in_flight += 1
            slot.requests += 1
            if version is not None:
                self._calls[version] += 1
        return index

    def _call(self, slot: _Slot, chats: list[list[dict[str, Any]]],
              sampling: SamplingConfig | None, publication: Publication | None
              ) -> list[Generation]:
        """The worker's call in its own thread, so that a worker that stops answering
        costs this request `request_timeout` and no more (the thread is left behind)."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def target() -> None:
            retired: list[int] = []
            try:
                box["result"] = slot.worker.generate(chats, sampling, publication)
            except BaseException as exc:  # handed to the waiting caller
                box["error"] = exc
            finally:
                with self._lock:
                    slot.in_flight -= 1
                    if publication is not None:
                        self._calls[publication.version] -= 1
                        retired = self._drop_unused()
                done.set()
                self._retire(retired)

        threading.Thread(target=target, name=f"generate-{slot.worker.name}",
                         daemon=True).start()
        deadline = time.monotonic() + self.request_timeout
        while not done.wait(min(0.25, max(0.0, deadline - time.monotonic()))):
            if self._closed.is_set():
                raise BackendError("the rollout service is closed")
            if time.monotonic() >= deadline:
                raise BackendError(f"no answer within {self.request_timeout:g} s")
        error = box.get("error")
        if error is not None:
            if isinstance(error, BackendError):
                raise error
            if not isinstance(error, Exception):
                raise error
            raise BackendError(f"{type(error).__name__}: {error}") from error
        return list(box["result"])

    def _failed(self, slot: _Slot, message: str) -> None:
        log.warning("rollout worker %s: %s; it sits out %g s", slot.worker.name, message,
                    self.unhealthy_seconds)
        with self._lock:
            slot.failures += 1
            slot.last_error = message
            slot.unhealthy_until = time.monotonic() + self.unhealthy_seconds

    # -- figures and shutdown --------------------------------------------------------

    def workers(self) -> list[WorkerStatus]:
        now = time.monotonic()
        with self._lock:
            return [WorkerStatus(s.worker.name, s.worker.version, s.in_flight,
                                 s.unhealthy_until <= now, s.requests, s.failures,
                                 s.last_error) for s in self._slots]

    def close(self) -> None:
        """Stop waiting for answers and release every worker."""
        self._closed.set()
        for slot in self._slots:
            try:
                slot.worker.close()
            except Exception as exc:  # closing the others matters more
                log.warning("closing rollout worker %s: %s", slot.worker.name, exc)

