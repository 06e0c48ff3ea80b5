"""The embedded decoupled run: DART's four roles as threads of this one process.

- EnvCluster: the run's `EnvPool`; one thread per environment takes the next (task,
  rollout) from the `EpisodeScheduler` as soon as its episode ends (rollout-wise
  scheduling), opens a session at the newest policy version and rolls the episode out
  into the store with that version.
- RolloutService: transformers workers, each with its own copy of the policy (the base
  weights plus the current adapter or weights), so generation never touches the module
  being trained; or, with rollout.backend = "vllm", one vLLM engine that loads each
  version's adapter folder (trainer/vllm_rollouts.py). A version's folder is removed
  when the service retires it (not the newest, no episode or call holds it), and what a
  stopped process left is swept once the run has published its first version
  (trainer/published.py).
- DataManager: task groups of finished episodes within [version - runtime.max_version_lag,
  version], marked consumed as they are handed out.
- Trainer: this object; it takes `training.tasks_per_update` groups, curates and trains
  them as the synchronous loop does, publishes the new version to the workers (copied in
  place; `sync_seconds`) and checkpoints every `training.checkpoint_every` updates.

The trainer trains while the environments keep rolling out. `AsyncTrainingRun.run()`
keeps `TrainingRun.run()`'s contract: Ctrl-C stops the environments, saves a checkpoint
and marks the run "stopped"; `resume=True` continues it, and finished episodes of the
stopped process still in the window are trained after all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agents.backends.base import Backend, SamplingConfig
from trainer.config import RunConfig
from trainer.curation import TaskStatistics
from trainer.loop import TrainingRun, UpdateResult
from trainer.published import PublishedVersions
from trainer.rollouts import (
    EpisodeJob,
    EpisodeOutcome,
    EverySetupFailed,
    RolloutRunner,
    every_setup_failed,
)
from trainer.runtime.data import DataManager
from trainer.runtime.roles import (
    DataManagerRole,
    Publication,
    RolloutServiceRole,
    TrainingBatch,
)
from trainer.runtime.scheduler import EpisodeScheduler
from trainer.runtime.service import (
    PolicyWorker,
    RolloutService,
    TransformersWorker,
    VLLMWorker,
)

if TYPE_CHECKING:
    from agents.backends.transformers_backend import TransformersBackend
    from agents.policies.vlm import VLMPolicy
    from trainer.model import ModelConfig, PolicyModel

log = logging.getLogger(__name__)


class RunDataManager(DataManagerRole, Protocol):
    """The data manager as a run uses it: the role, recovery and running totals."""

    def recover(self, policy_version: int) -> int: ...

    @property
    def finished_episodes(self) -> int: ...

    @property
    def generated_tokens(self) -> int: ...


class RunRolloutService(RolloutServiceRole, Protocol):
    """The rollout service as a run uses it: the role, and whether a publication needs
    an adapter folder."""

    @property
    def needs_adapter_folder(self) -> bool: ...


@dataclass(frozen=True)
class EmbeddedSettings:
    """Knobs of the embedded runtime beyond the run configuration."""

    rollout_workers: int = 1  # policy copies generating for the environments
    request_timeout: float = 600.0  # seconds before a generation is retried elsewhere
    unhealthy_seconds: float = 30.0  # how long a failed worker gets no requests

    def __post_init__(self) -> None:
        if self.rollout_workers < 1:
            raise ValueError(f"rollout_workers: expected >= 1, got {self.rollout_workers}")
        if self.request_timeout <= 0 or self.unhealthy_seconds < 0:
            raise ValueError("request_timeout must be > 0 and unhealthy_seconds >= 0")


def rollout_copy(policy: PolicyModel) -> TransformersBackend:
    """A rollout worker's own copy of `policy`: the base weights from its folder and the
    same adapter layout (LoRA), in eval mode; publishing a version loads the weights."""
    lora = policy.model.peft_config["default"] if policy.config.finetune == "lora" else None
    return rollout_model(policy.base_path, policy.config, lora, str(policy.device),
                         policy.chat_template)


def rollout_model(base_path: Path, config: ModelConfig, lora: Any, device: str,
                  chat_template: str | None) -> TransformersBackend:
    """A policy copy for generation: the base weights of `base_path` on `device` with the
    adapter layout `lora` (a peft LoraConfig; None: full weights), in eval mode."""
    import copy

    import torch
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

    from agents.backends.transformers_backend import TransformersBackend
    from trainer.model import resolve_dtype

    target = torch.device(device)
    kwargs: dict[str, Any] = {"dtype": resolve_dtype(config.dtype, target),
                              "device_map": str(target)}
    if config.attn_implementation:
        kwargs["attn_implementation"] = config.attn_implementation
    model: Any = AutoModelForImageTextToText.from_pretrained(base_path, **kwargs)
    if lora is not None:
        from peft import get_peft_model

        lora = copy.deepcopy(lora)
        lora.inference_mode = True
        model = get_peft_model(model, lora)
    model.requires_grad_(False)
    # a tokenizer of its own: the trainer tokenises in another thread meanwhile
    return TransformersBackend.from_model(model.eval(),
                                          AutoTokenizer.from_pretrained(base_path),
                                          AutoImageProcessor.from_pretrained(base_path),
                                          chat_template)


@dataclass
class _Figures:
    """Running totals at the end of the previous update (rates are over the interval)."""

    at: float
    busy: float
    idle: float
    finished: int
    tokens: int


class AsyncTrainingRun(TrainingRun):
    """A GRPO run whose rollouts and training overlap (see the module docstring).
    `run()` from one thread (the trainer's); the environments get threads of their own."""

    def __init__(self, config: RunConfig, config_text: str, workspace: Path, *,
                 run_id: str | None = None, resume: bool = False, progress: bool = True,
                 on_update: Callable[[UpdateResult], None] | None = None,
                 settings: EmbeddedSettings | None = None,
                 make_workers: Callable[[PolicyModel], Sequence[PolicyWorker | Backend]]
                 | None = None) -> None:
        super().__init__(config, config_text, workspace, run_id=run_id, resume=resume,
                         progress=progress, on_update=on_update)
        self.settings = settings or EmbeddedSettings()
        self.make_workers = make_workers
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._worker_errors: list[str] = []
        self._local = threading.local()
        self._skipped: dict[str, str] = {}
        self._figures_mark: _Figures | None = None
        self.publications: list[Publication] = []
        self.published: PublishedVersions | None = None  # set when workers load folders

    # -- the run ---------------------------------------------------------------------

    def _start_updates(self) -> None:
        self._start_runtime()  # after the warm-up, which ran on the pool

    def _stop_updates(self) -> None:
        self._stop_runtime()

    def _progress_postfix(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"reward": f"{metrics.get('reward_mean', 0):.2f}",
                "lag": f"{metrics.get('version_lag_mean', 0):.1f}"}

    def step(self) -> UpdateResult:
        """Wait for a batch of task groups, then train it (`train`)."""
        started = time.perf_counter()
        batch = self._next_batch()
        return self.train(batch, waited=time.perf_counter() - started)

    def train(self, batch: TrainingBatch, waited: float = 0.0) -> UpdateResult:
        """One update on `batch`: curation, GRPO, a new version published to the rollout
        workers, metrics, maybe a checkpoint."""
        assert self.run_id is not None
        self._claimed = batch.episode_ids
        outcomes = [EpisodeOutcome(EpisodeJob(self.tasks_by_id.get(e.task_id)), e)
                    for e in batch.episodes]
        if every_setup_failed(outcomes):  # the run ends failed, as the synchronous one
            raise EverySetupFailed(outcomes)
        groups, curation_counts, samples, train_metrics, train_seconds = self._train_on(
            batch.episodes)
        # Only a gradient step makes a version to publish.
        publication = self._publish() if samples else None
        metrics = self._metrics(batch.episodes, outcomes, groups, samples, train_metrics)
        metrics.update(curation_counts)
        metrics.update(self._runtime_metrics(batch, waited, train_seconds, publication))
        if train_metrics.get("tokens"):
            metrics["train_tokens_per_second"] = train_metrics["tokens"] / max(1e-9,
                                                                               train_seconds)
        self.store.runs.log_metrics(self.run_id, self.update, metrics)
        self._log_outside(metrics)
        result = UpdateResult(self.update, self.policy_version, metrics, batch.episode_ids)
        self.history.append(result)
        if self.update % self.config.training.checkpoint_every == 0:
            self._save_checkpoint()
        if self.on_update is not None:
            self.on_update(result)
        return result

    def _next_batch(self) -> TrainingBatch:
        groups = self.config.training.tasks_per_update
        while True:
            batch = self.data.take(groups, self.policy_version, timeout=0.5)
            if batch is not None:
                self.scheduler.wake()  # fewer groups outstanding: planning may go on
                return batch
            if not any(thread.is_alive() for thread in self._threads):
                reasons = "; ".join(self._worker_errors) or "no reason recorded"
                raise RuntimeError(f"every environment worker stopped: {reasons}")

    # -- publication -----------------------------------------------------------------

    def publication(self) -> Publication:
        """The current version as the rollout workers load it: a CPU snapshot of the
        adapter (or weights), plus an adapter folder when a worker loads files."""
        started = time.perf_counter()
        state = self.policy.state_for_rollout()
        adapter_path = None
        if self.published is not None:
            adapter_path = self.published.write(self.policy.model, self.policy_version)
        return Publication(self.policy_version, state, adapter_path,
                           snapshot_seconds=time.perf_counter() - started)

    def _publish(self) -> Publication:
        publication = self.service.publish(self.publication())
        self.publications.append(publication)
        return publication

    # -- the environments ------------------------------------------------------------

    def _start_runtime(self) -> None:
        assert self.run_id is not None
        config = self.config
        self.service = self._rollout_service()
        if self.service.needs_adapter_folder:
            self.published = PublishedVersions(
                self.store.layout.run_dir(self.run_id) / "published")
        self._publish()  # the version training starts from
        if self.published is not None:  # what a stopped or crashed process left
            self.published.sweep(keep={self.policy_version})
        lag = config.runtime.max_version_lag
        self.data = self._data_manager()
        if self.resume:
            recovered = self.data.recover(self.policy_version)
            if recovered:
                log.info("run %s: %d task groups of the stopped process still to train",
                         self.run_id, recovered)
        # more groups outstanding than the version window can train would only go stale
        limit = config.training.tasks_per_update * (lag + 1)
        self.scheduler = EpisodeScheduler(
            self._plan_groups, low_water=self.pool.size, on_planned=self.data.expect,
            may_plan=lambda: self.data.open_groups() < limit)
        self._figures_mark = self._figures()
        self._stopping.clear()
        self._start_environments()

    def _rollout_service(self) -> RunRolloutService:
        """The rollout service: `make_workers`' workers, the vLLM engine (rollout.backend =
        vllm: one engine batching every environment's calls, each version's adapter
        folder loaded beside the older ones), or transformers copies."""
        settings = self.settings
        workers: Sequence[PolicyWorker | Backend]
        if self.make_workers is not None:
            workers = self.make_workers(self.policy)
        elif self.config.rollout.backend == "vllm":
            from trainer.vllm_rollouts import start_engine

            workers = [VLLMWorker(start_engine(self.config, self.policy.base_path), "vllm")]
        else:
            workers = [TransformersWorker(rollout_copy(self.policy), f"transformers-{i}")
                       for i in range(settings.rollout_workers)]
        return RolloutService(workers, request_timeout=settings.request_timeout,
                              unhealthy_seconds=settings.unhealthy_seconds,
                              on_retired=self._retired)

    def _retired(self, version: int) -> None:
        """The rollout service retired `version`: no rollout can need its folder."""
        if self.published is not None:
            self.published.remove(version)

    def _data_manager(self) -> RunDataManager:
        assert self.run_id is not None
        return DataManager(self.store, self.run_id,
                           max_version_lag=self.config.runtime.max_version_lag)

    def _start_environments(self) -> None:
        """One thread per environment of the pool, each rolling out the scheduler's jobs."""
        from agents.policies.vlm import VLMPolicyConfig

        rollout = self.config.rollout
        self._policy_config = VLMPolicyConfig(prompt=self.prompt, sampling=SamplingConfig(
            max_new_tokens=rollout.max_new_tokens, temperature=rollout.temperature,
            top_p=rollout.top_p, top_k=rollout.top_k or None))
        self.runner = RolloutRunner(self.store, self.pool, self._session_policy,
                                    self._rollout_config(), run_id=self.run_id,
                                    info={"policy": "vlm:train"})
        for index in range(self.pool.size):
            thread = threading.Thread(target=self._environment_loop,
                                      name=f"environment-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _stop_runtime(self) -> None:
        """Stop the environment loops (running episodes end "aborted") and the workers."""
        if not hasattr(self, "service"):
            return
        self._stopping.set()
        if hasattr(self, "scheduler"):
            self.scheduler.close()
        self._cancel_episodes()
        self.service.close()  # a generation in progress ends now, not at its timeout
        deadline = time.monotonic() + self.config.environments.call_timeout + 30
        for thread in self._threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:
            log.warning("run %s: %s did not stop in time", self.run_id, ", ".join(stuck))
        if self.published is not None and self.publications:
            # The workers are closed: no rollout can load an older folder any more, even
            # one a call left behind at its timeout still held. The newest stays.
            self.published.sweep(keep={self.publications[-1].version})

    def _cancel_episodes(self) -> None:
        """Make every running episode end "aborted" after its current step."""
        if hasattr(self, "runner"):
            self.runner.cancel()

    def _plan_groups(self) -> list[EpisodeJob]:
        """The next task groups, curated on the newest statistics (scheduler's planner)."""
        curation = self.config.curation
        stats = TaskStatistics.from_store(self.store, window=curation.stats_window,
                                          success_threshold=curation.success_threshold,
                                          run_id=self.run_id,
                                          task_ids=list(self.tasks_by_id))
        jobs, self._skipped = self._plan(stats)
        return jobs

    def _session_policy(self, job: EpisodeJob) -> VLMPolicy:
        """The policy of the episode this environment thread starts now: a session at
        the newest published version, closed when the episode ends."""
        from agents.policies.vlm import VLMPolicy

        session = self.service.session()
        self._local.session = session
        return VLMPolicy(session, self._policy_config, policy_version=session.version)

    def _scheduled_jobs(self) -> Iterator[EpisodeJob]:
        """The scheduler's jobs for this environment thread until the run stops; a
        planner that fails (the store, a task) is recorded and ends the thread's work."""
        name = threading.current_thread().name
        while not self._stopping.is_set():
            try:
                job = self.scheduler.next_job(timeout=0.5)
            except Exception as exc:
                self._worker_errors.append(f"{name}: planning: {type(exc).__name__}: {exc}")
                log.error("%s stops: planning failed: %s", name, exc)
                return
            if job is not None:
                yield job

    def _environment_loop(self) -> None:
        from vm.pool import PoolClosed

        name = threading.current_thread().name
        for job in self._scheduled_jobs():
            try:
                outcome = self.runner.run_one(job)
            except PoolClosed as exc:  # every desktop is dead and out of restarts
                self.data.record(EpisodeOutcome(job, None, str(exc)))
                self._worker_errors.append(f"{name}: {exc}")
                return
            except Exception as exc:  # the store failed to open the episode
                log.error("%s: episode of %s lost: %s", name, job.task.id, exc)
                outcome = EpisodeOutcome(job, None, f"{type(exc).__name__}: {exc}")
            finally:
                session = getattr(self._local, "session", None)
                if session is not None:
                    session.close()
                    self._local.session = None
            self.data.record(outcome)

    # -- metrics ---------------------------------------------------------------------

    def _figures(self) -> _Figures:
        usage = self.pool.usage()
        return _Figures(time.perf_counter(), sum(u.busy_seconds for u in usage),
                        sum(u.idle_seconds for u in usage), self.data.finished_episodes,
                        self.data.generated_tokens)

    def _runtime_metrics(self, batch: TrainingBatch, waited: float, train_seconds: float,
                         publication: Publication | None) -> dict[str, float]:
        now = self._figures()
        mark = self._figures_mark or now
        self._figures_mark = now
        interval = max(1e-9, now.at - mark.at)
        busy, idle = now.busy - mark.busy, now.idle - mark.idle
        lags = batch.version_lags()
        return {
            "env_utilisation": busy / (busy + idle) if busy + idle > 0 else 0.0,
            "trainer_idle_fraction": min(1.0, waited / interval),
            "episodes_per_minute": (now.finished - mark.finished) * 60.0 / interval,
            "rollout_tokens_per_second": (now.tokens - mark.tokens) / interval,
            "sync_seconds": publication.sync_seconds if publication is not None else 0.0,
            "version_lag_mean": sum(lags) / len(lags) if lags else 0.0,
            "stale_episodes": float(batch.stale_episodes),
            "skipped_tasks": float(len(self._skipped)),
            "wait_seconds": waited,
            "train_seconds": train_seconds,
            "update_seconds": interval,
            "env_restarts": float(sum(u.restarts for u in self.pool.usage())),
            "policy_version": float(self.policy_version),
        }
