"""The training loop, one for every mode: take an update's episodes from the rollout
source (trainer/sources: lock-step, embedded-asynchronous or Ray), train them (the
update step, trainer/update.py, with the learner, trainer/learner.py), publish the new
policy version back to the source, evaluate on held-out tasks when due, and record the
update: metrics to the store (and TensorBoard, W&B), maybe a checkpoint.

`TrainingRun(config, ...).run()` is what `workbench train CONFIG.toml` calls (the
decoupled runs are `trainer.runtime.AsyncTrainingRun` and `ClusterTrainingRun`: the same
loop with their source). Ctrl-C stops the rollouts, saves a checkpoint and marks the run
"stopped"; `resume=True` continues the same run from its newest checkpoint, giving back
to training the episodes an unsaved update had taken, so none is trained twice and none
is lost.
"""

from __future__ import annotations

import logging
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.parsing.coordinates import ImageBudget
from agents.prompting import SYSTEM_PROMPT, PromptConfig
from trainer.config import RunConfig
from trainer.curation import PRECOLLECTED_TAG, ReplayBuffer
from trainer.learner import Learner
from trainer.planning import TaskPlanner, select_heldout_tasks, select_run_tasks
from trainer.rollouts import EpisodeJob, EverySetupFailed, every_setup_failed
from trainer.samples import SampleBuilder
from trainer.sources import HELDOUT_TAG, RolloutSource, RunContext
from trainer.sources.synchronous import SynchronousSource
from trainer.store import Store
from trainer.update import UpdateStep, episode_metrics, groups_with_signal, untrained_reason
from trainer.update_log import UpdateLog, UpdateResult
from trainer.vllm_rollouts import require_vllm
from trainer.warmup import (
    DEMONSTRATION_TAG,
    WARMUP_REPORTS,
    WarmupProgress,
    precollect,
    warm_up,
)

log = logging.getLogger(__name__)

__all__ = [
    "DEMONSTRATION_TAG", "HELDOUT_TAG", "PRECOLLECTED_TAG", "WARMUP_REPORTS", "RunSummary",
    "TrainingRun", "UpdateResult", "WarmupProgress", "groups_with_signal", "prompt_config",
    "select_run_tasks", "untrained_reason",
]


@dataclass
class RunSummary:
    run_id: str
    status: str  # done, stopped, failed
    updates: int
    policy_version: int
    checkpoint: Path | None
    history: list[UpdateResult] = field(default_factory=list)


def prompt_config(config: RunConfig) -> PromptConfig:
    rollout = config.rollout
    return PromptConfig(history_images=rollout.history_images,
                        budget=ImageBudget(rollout.min_pixels, rollout.max_pixels),
                        coordinate_system=rollout.coordinate_system,
                        system_prompt=rollout.system_prompt or SYSTEM_PROMPT)


class TrainingRun:
    """One GRPO run on a workspace, its episodes rolled out lock-step (`_make_source`
    says where they come from). Not thread-safe: call `run()` from one thread."""

    def __init__(self, config: RunConfig, config_text: str, workspace: Path, *,
                 run_id: str | None = None, resume: bool = False, progress: bool = True,
                 on_update: Callable[[UpdateResult], None] | None = None,
                 on_warmup: Callable[[WarmupProgress], None] | None = None) -> None:
        if resume and not run_id:
            raise ValueError("resume needs the run id")
        self.config = config
        self.config_text = config_text
        self.workspace = Path(workspace)
        self.run_id = run_id
        self.resume = resume
        self.progress = progress
        self.on_update = on_update
        self.on_warmup = on_warmup  # the warm-up's progress (a log line each)
        self.rng = random.Random(config.run.seed)
        self.screen_size = (config.environments.screen_width,
                            config.environments.screen_height)
        self.prompt = prompt_config(config)
        self.history: list[UpdateResult] = []
        self.policy_version = 0
        self.update = 0
        self._threads_before = 0  # torch's thread count before model.cpu_threads changed it
        self.warmup_done = False
        self._claimed: list[str] = []  # episodes taken by the update in progress
        self.source: RolloutSource | None = None  # made once the run is open

    # -- set-up -----------------------------------------------------------------------

    def _make_source(self, context: RunContext) -> RolloutSource:
        """Where the episodes come from: here lock-step rollouts on the run's pool."""
        return SynchronousSource(context)

    def _open(self) -> None:
        config = self.config
        if config.rollout.backend == "vllm":
            require_vllm()  # before anything loads or a run is recorded
        import torch

        from trainer.model import PolicyModel

        self.store = Store.open(self.workspace)
        checkpoint: Path | None = None
        state: dict[str, Any] | None = None
        saved_version: int | None = None
        if self.resume:
            assert self.run_id is not None
            run = self.store.runs.get(self.run_id)
            checkpoints = self.store.runs.checkpoints(run.id)
            if checkpoints:
                newest = checkpoints[-1]
                checkpoint = self.workspace / newest.path
                state = PolicyModel.trainer_state(checkpoint)
                self.policy_version = saved_version = newest.policy_version
                given_back = self.store.runs.unconsume(run.id,
                                                       from_version=newest.policy_version)
                if given_back:
                    log.info("run %s: %d episodes of unsaved updates given back", run.id,
                             given_back)
            self.store.runs.set_status(run.id, "running")
        else:
            run = self.store.runs.create(self.run_id, name=config.run.name, kind="train",
                                         config=self.config_text,
                                         info={"workspace": str(self.workspace)})
            self.run_id = run.id
            self.store.runs.set_status(run.id, "running")
        run_id = run.id
        self.tasks = select_run_tasks(config.tasks, self.screen_size)
        if not self.tasks:
            raise ValueError("tasks: the configuration selects no task")
        self.tasks_by_id = {t.id: t for t in self.tasks}
        self.heldout_tasks = select_heldout_tasks(config, self.screen_size,
                                                  list(self.tasks_by_id))
        self.policy = PolicyModel.load(config.model, checkpoint)
        if config.model.cpu_threads and self.policy.device.type == "cpu":
            # On a few cores, torch's spare threads spin while the rollout threads and
            # the desktops need the CPU: one learning update took 8 CPU-s of training
            # with two threads, 1 with one (bench/update_profile.py).
            self._threads_before = torch.get_num_threads()
            torch.set_num_threads(config.model.cpu_threads)
        self.learner = Learner(config, self.config_text, self.workspace, self.store, run_id,
                               self.policy, saved_version=saved_version)
        capacity = config.curation.replay_capacity
        self.replay = ReplayBuffer(capacity, config.curation.replay_success_score)
        cursor = 0
        if state is not None:
            self.learner.restore(state)
            self.update = int(state.get("update", self.policy_version))
            self.warmup_done = bool(state.get("warmup_done", False))
            cursor = int(state.get("task_cursor", 0))
            if "replay" in state:
                self.replay = ReplayBuffer.from_dict(state["replay"])
            if "python_rng" in state:
                self.rng.setstate(state["python_rng"])
        elif self.resume and config.curation.replay:
            self.replay = ReplayBuffer.from_store(self.store, run_id, capacity,
                                                  config.curation.replay_success_score)
        if config.grpo.beta > 0 and self.warmup_done and config.training.warmup.steps:
            self.learner.load_reference()
        # steps with no sampling record (demonstrations) train at the rollout temperature
        self.builder = SampleBuilder(self.policy.tokenizer, self.policy.image_processor,
                                     self.prompt, self.store.frames.get,
                                     self.policy.chat_template,
                                     temperature=config.rollout.temperature)
        self.planner = TaskPlanner(config, self.store, run_id, self.tasks, cursor)
        self.update_step = UpdateStep(config, self.store, self.builder, self.learner,
                                      self.replay, self.rng, run_id)
        self.update_log = UpdateLog(config, self.config_text, self.store, run_id)
        self.source = self._make_source(RunContext(
            config, self.workspace, self.store, run_id, self.prompt, self.planner,
            self.learner, self.resume, policy_version=lambda: self.policy_version,
            next_update=lambda: self.update + 1))
        self.source.open()

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> RunSummary:
        """Warm up (when configured), then train until `training.updates`; Ctrl-C stops
        cleanly (KeyboardInterrupt is not raised; the summary's status is "stopped")."""
        status = "failed"
        try:
            self._open()
        except BaseException as exc:  # Ctrl-C or a failure while loading or starting
            interrupted = isinstance(exc, KeyboardInterrupt)
            self._abandon_open("stopped" if interrupted else "failed")
            if interrupted and self.run_id is not None:
                log.warning("run %s: interrupted while starting", self.run_id)
                return RunSummary(self.run_id, "stopped", self.update, self.policy_version,
                                  None, self.history)
            raise
        assert self.run_id is not None and self.source is not None
        source = self.source
        bar = None
        try:
            self.update_log.start()
            if self.config.training.warmup.steps and not self.warmup_done:
                self._warmup()
            if self.config.curation.precollect_oracle and self.update == 0:
                precollect(self.config, self.store, self.run_id, source, self.tasks)
            source.start()
            if self.progress:
                from tqdm import tqdm

                bar = tqdm(total=self.config.training.updates, initial=self.update,
                           desc=f"train {self.run_id}", unit="update", disable=None,
                           dynamic_ncols=True)
            while self.update < self.config.training.updates:
                result = self.step()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(source.progress_postfix(result.metrics), refresh=False)
                if self._reached_target():
                    log.warning("run %s: the median success rate of the last %d updates "
                                "reached %.2f; done after %d of %d updates", self.run_id,
                                self.config.training.stop_window,
                                self.config.training.stop_at_success, self.update,
                                self.config.training.updates)
                    break
            status = "done"
        except KeyboardInterrupt:
            status = "stopped"
            log.warning("run %s: interrupted; saving a checkpoint", self.run_id)
        finally:
            if bar is not None:
                bar.close()
            checkpoint = None
            try:
                source.stop()
                if self._claimed:  # the interrupted update trained on none of them
                    self.store.runs.unconsume(self.run_id, episode_ids=self._claimed)
                    self._claimed = []
                if status != "failed" or self.update:
                    checkpoint = self._save_checkpoint()
            finally:
                self.update_log.finish(status)
                self.store.runs.set_status(self.run_id, status)
                source.close()
                self.store.close()
                self._restore_threads()
                if status != "failed":  # a failed run's desktops keep their logs
                    self._remove_sandboxes()
        return RunSummary(self.run_id, status, self.update, self.policy_version, checkpoint,
                          self.history)

    def step(self) -> UpdateResult:
        """One update: the source's episodes curated and trained, the new version
        published back to the source, the held-out evaluation when due, the record."""
        assert self.source is not None
        batch = self.source.next_batch()
        self._claimed = batch.claimed
        if every_setup_failed(batch.outcomes):  # the run ends failed, nothing was scored
            raise EverySetupFailed(batch.outcomes)
        trained = self.update_step(batch.episodes)
        self._claimed = []
        self.update += 1
        if trained.gradient_step:
            self.policy_version += 1  # a gradient step: a new version
        else:  # the weights are unchanged: no new version, no new checkpoint
            log.warning("run %s: update %d trained nothing (%s); policy version %d stays",
                        self.run_id, self.update, trained.reason, self.policy_version)
        if trained.samples:  # only a gradient step makes a version to publish
            trained.metrics.update(self.source.publish())
        metrics = episode_metrics(batch.episodes, batch.outcomes, trained.groups,
                                  trained.metrics, self.config)
        metrics.update(trained.curation_counts)
        metrics.update(self._held_out())
        metrics.update(self.source.update_metrics(batch, trained.seconds))
        if trained.metrics.get("tokens"):
            metrics["train_tokens_per_second"] = trained.metrics["tokens"] / max(
                1e-9, trained.seconds)
        return self._record(metrics, batch.episode_ids)

    def _record(self, metrics: dict[str, float], episode_ids: list[str]) -> UpdateResult:
        """The one place an update is recorded: its metrics (store, TensorBoard, W&B), the
        run's history, a checkpoint every training.checkpoint_every updates, on_update."""
        self.update_log.write(self.update, metrics)
        result = UpdateResult(self.update, self.policy_version, metrics, episode_ids)
        self.history.append(result)
        if self.update % self.config.training.checkpoint_every == 0:
            self._save_checkpoint()
        if self.on_update is not None:
            self.on_update(result)
        return result

    def _held_out(self) -> dict[str, float]:
        """Every training.eval_every updates: the policy on the held-out tasks, as
        heldout/success_rate, heldout/score_mean and heldout/episodes."""
        training = self.config.training
        if not training.eval_every or not self.heldout_tasks or (
                self.update % training.eval_every):
            return {}
        assert self.source is not None
        jobs = [EpisodeJob(task, k) for task in self.heldout_tasks
                for k in range(training.eval_rollouts)]
        finished = [o.episode for o in self.source.evaluate(jobs)
                    if o.episode is not None and o.episode.status == "done"]
        metrics = {"heldout/episodes": float(len(finished))}
        if finished:
            threshold = self.config.curation.success_threshold
            metrics["heldout/success_rate"] = sum(
                (e.score or 0.0) >= threshold for e in finished) / len(finished)
            metrics["heldout/score_mean"] = sum(e.score or 0.0 for e in finished) / len(
                finished)
        return metrics

    def _warmup(self) -> None:
        """Supervised steps on demonstrations (trainer/warmup.py); version 0 is the
        warmed-up policy (and, with grpo.beta > 0, the KL reference)."""
        assert self.run_id is not None and self.source is not None
        warm_up(self.config, self.store, self.run_id, self.source, self.learner,
                self.builder, self.rng, self.screen_size, self._warmup_progress)
        self.warmup_done = True
        if self.config.grpo.beta > 0:
            self.learner.save_reference()
        self._save_checkpoint()  # version 0: the warmed-up policy

    def _warmup_progress(self, progress: WarmupProgress) -> None:
        if self.on_warmup is not None:
            self.on_warmup(progress)

    def _save_checkpoint(self) -> Path | None:
        """Save the current policy version unless it is saved already, with what a
        resumed run continues from."""
        return self.learner.save_checkpoint(self.policy_version, self.update, {
            "update": self.update, "policy_version": self.policy_version,
            "warmup_done": self.warmup_done, "task_cursor": self.planner.cursor,
            "replay": self.replay.to_dict(), "python_rng": self.rng.getstate()})

    # -- the end ----------------------------------------------------------------------

    def _reached_target(self) -> bool:
        """training.stop_at_success met: the median success rate of the last stop_window
        updates (read from the store, so a resumed run counts its earlier updates)."""
        training = self.config.training
        if not training.stop_at_success:
            return False
        assert self.run_id is not None
        rates = [p.value for p in self.store.runs.metrics(self.run_id, ["success_rate"])
                 if p.value is not None]
        recent = rates[-training.stop_window:]
        return (len(recent) == training.stop_window
                and statistics.median(recent) >= training.stop_at_success)

    def _restore_threads(self) -> None:
        if self._threads_before:
            import torch

            torch.set_num_threads(self._threads_before)
            self._threads_before = 0

    def _remove_sandboxes(self) -> None:
        """Delete the folders of the run's own sandboxes (`train-<run>-<n>`, stopped with
        the pool): throwaway desktops that would otherwise pile up on the Environments
        screen. QEMU overlays stay (they may hold the snapshot runs start from)."""
        from trainer.environments import remove_environment_folders, run_desktop_name

        if self.config.environments.kind != "sandbox" or self.run_id is None:
            return
        remove_environment_folders(self.workspace, [
            run_desktop_name(self.run_id, index)
            for index in range(self.config.environments.count)],
            qemu=False)

    def _abandon_open(self, status: str) -> None:
        """`_open` did not finish: close what it started, and give the run (when it was
        already created) its final status instead of leaving it "running"."""
        self._restore_threads()
        if self.source is not None:
            self.source.close()
        store = self.__dict__.get("store")
        if store is None:
            return
        try:
            if self.run_id is not None and any(r.id == self.run_id for r in store.runs.all()):
                store.runs.set_status(self.run_id, status)
        finally:
            store.close()
