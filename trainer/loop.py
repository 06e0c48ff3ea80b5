"""The synchronous training loop: roll out a batch of task groups on the environment pool,
store every episode, curate the groups, train one GRPO update, checkpoint, publish the
new policy version; metrics go to the store at every update.

`TrainingRun(config, ...).run()` is what `workbench train CONFIG.toml` calls. Ctrl-C stops
the rollouts, saves a checkpoint and marks the run "stopped"; `resume=True` continues the
same run from its newest checkpoint, giving back to training the episodes an unsaved
update had taken, so none is trained twice and none is lost.
"""

from __future__ import annotations

import logging
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agents.backends.base import SamplingConfig
from agents.parsing.coordinates import ImageBudget
from agents.prompting import SYSTEM_PROMPT, PromptConfig
from agents.rollout import RolloutConfig
from agents.trajectory import Episode
from trainer.config import RunConfig, TasksConfig
from trainer.curation import (
    PRECOLLECTED_TAG,
    Group,
    GroupMember,
    ReplayBuffer,
    SuccessSource,
    TaskFilter,
    TaskStatistics,
    apply_precollected,
    dynamic_rollout_count,
    inject_replay,
    step_budget,
    trainable_steps,
)
from trainer.rollouts import EpisodeJob, EpisodeOutcome, RolloutRunner
from trainer.samples import Sample, SampleBuilder, SampleError, episode_reward, step_mean_entropies
from trainer.store import Store
from trainer.vllm_rollouts import VLLMVersions, require_vllm, start_engine
from trainer.wandb_logger import WandbLogger
from vm.tasks.model import Task

log = logging.getLogger(__name__)

DEMONSTRATION_TAG = "demonstration"
HELDOUT_TAG = "heldout"  # episodes of the held-out evaluation (heldout:<run> names the run)


@dataclass
class UpdateResult:
    """What one update did (also written to the store as metrics)."""

    update: int  # 1-based
    policy_version: int  # the version this update published
    metrics: dict[str, float] = field(default_factory=dict)
    episode_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class WarmupProgress:
    """Where the supervised warm-up is, for a log: recording (or reading) its
    demonstrations, how many it kept, then its steps."""

    stage: Literal["collecting", "collected", "step"]
    done: int  # collected: demonstrations kept; step: steps taken (1-based)
    total: int  # demonstrations asked for (the pool's size), or steps
    source: str = "oracle"  # where the demonstrations come from (training.warmup.source)
    nll: float | None = None  # step: its mean negative log-likelihood per token


WARMUP_REPORTS = 10  # progress lines over the warm-up's steps (and its last)


@dataclass
class RunSummary:
    run_id: str
    status: str  # done, stopped, failed
    updates: int
    policy_version: int
    checkpoint: Path | None
    history: list[UpdateResult] = field(default_factory=list)


def untrained_reason(episodes: Sequence[Episode], groups: Sequence[Group]) -> str:
    """Why an update gave no sample to train on, as a metric name's last part."""
    if not any(e.status == "done" for e in episodes):
        return "no_finished_episode"
    if not groups:
        return "every_group_dropped"  # curation: no success to pre-collect for any task
    scores = [[m.score for m in g.members] for g in groups]
    if all(len(set(group)) <= 1 for group in scores):
        return "equal_rewards_in_every_group"  # e.g. every response unparseable
    return "no_sample_built"


def groups_with_signal(groups: Sequence[Group]) -> int:
    """How many groups carry an advantage: not every member got the same reward."""
    return sum(len({m.score for m in g.members}) > 1 for g in groups)


def prompt_config(config: RunConfig) -> PromptConfig:
    rollout = config.rollout
    return PromptConfig(history_images=rollout.history_images,
                        budget=ImageBudget(rollout.min_pixels, rollout.max_pixels),
                        coordinate_system=rollout.coordinate_system,
                        system_prompt=rollout.system_prompt or SYSTEM_PROMPT)


def select_run_tasks(tasks: TasksConfig, screen_size: tuple[int, int]) -> list[Task]:
    """The tasks a configuration names: suite ids/patterns and generated buttons and tabs
    tasks."""
    from vm.tasks.families import button_tasks, tabs_tasks
    from vm.tasks.selection import select_tasks, tasks_in_folder
    from vm.tasks.suite import bundled_suite

    chosen: list[Task] = []
    if tasks.ids or not (tasks.buttons or tasks.tabs):
        suite_tasks = None
        if tasks.suite:
            folder = Path(tasks.suite).expanduser()
            if not folder.is_dir():
                raise ValueError(f"tasks.suite: {folder} is not a folder")
            found = tasks_in_folder(folder)
            from vm.tasks.model import TaskSuite

            suite_tasks = TaskSuite(root=folder, tasks={t.id: t for t in found},
                                    indexes={})
        chosen += select_tasks(list(tasks.ids), suite_tasks or bundled_suite(), "tasks.ids")
    if tasks.buttons:
        grid = (tasks.buttons_grid[0], tasks.buttons_grid[1]) if tasks.buttons_grid else None
        chosen += button_tasks(tasks.buttons, tasks.buttons_seed, screen_size, grid=grid)
    if tasks.tabs:
        chosen += tabs_tasks(tasks.tabs, tasks.tabs_seed, screen_size, *tasks.tabs_shape[:2])
    return chosen


class TrainingRun:
    """One GRPO run on a workspace. Not thread-safe: call `run()` from one thread."""

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
        self.saved_version: int | None = None
        self.warmup_done = False
        self._task_cursor = 0
        self._claimed: list[str] = []  # episodes taken by the update in progress
        self._wandb: WandbLogger | None = None  # training.wandb: started with the run
        self.sampler: Any = None  # what samples the rollouts (rollout.backend)
        self.vllm_versions: VLLMVersions | None = None  # rollout.backend = vllm

    # -- set-up -----------------------------------------------------------------------

    def _open(self) -> None:
        config = self.config
        if config.rollout.backend == "vllm":
            require_vllm()  # before anything loads or a run is recorded
        import torch

        from agents.backends.transformers_backend import TransformersBackend
        from trainer.model import PolicyModel

        self.store = Store.open(self.workspace)
        checkpoint: Path | None = None
        state: dict[str, Any] | None = None
        if self.resume:
            assert self.run_id is not None
            run = self.store.runs.get(self.run_id)
            checkpoints = self.store.runs.checkpoints(run.id)
            if checkpoints:
                newest = checkpoints[-1]
                checkpoint = self.workspace / newest.path
                state = PolicyModel.trainer_state(checkpoint)
                self.policy_version = newest.policy_version
                self.saved_version = newest.policy_version
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
        self.tasks = select_run_tasks(config.tasks, self.screen_size)
        if not self.tasks:
            raise ValueError("tasks: the configuration selects no task")
        self.tasks_by_id = {t.id: t for t in self.tasks}
        self.heldout_tasks = self._select_heldout_tasks()
        self.policy = PolicyModel.load(config.model, checkpoint)
        if config.model.cpu_threads and self.policy.device.type == "cpu":
            # On a few cores, torch's spare threads spin while the rollout threads and
            # the desktops need the CPU: one learning update took 8 CPU-s of training
            # with two threads, 1 with one (bench/update_profile.py).
            self._threads_before = torch.get_num_threads()
            torch.set_num_threads(config.model.cpu_threads)
        model = self.policy.model
        self.image_token_id = int(model.config.image_token_id)
        self.optimizer = self._new_optimizer()
        capacity = config.curation.replay_capacity
        self.replay = ReplayBuffer(capacity, config.curation.replay_success_score)
        if state is not None:
            self.optimizer.load_state_dict(state["optimizer"])
            self.update = int(state.get("update", self.policy_version))
            self.warmup_done = bool(state.get("warmup_done", False))
            self._task_cursor = int(state.get("task_cursor", 0))
            if "replay" in state:
                self.replay = ReplayBuffer.from_dict(state["replay"])
            if "python_rng" in state:
                self.rng.setstate(state["python_rng"])
            if "torch_rng" in state:
                torch.set_rng_state(state["torch_rng"])
        elif self.resume and config.curation.replay:
            assert self.run_id is not None
            self.replay = ReplayBuffer.from_store(self.store, self.run_id, capacity,
                                                  config.curation.replay_success_score)
        if config.grpo.beta > 0 and self.warmup_done and config.training.warmup.steps:
            self._load_reference()
        self.backend = TransformersBackend.from_model(model, self.policy.tokenizer,
                                                      self.policy.image_processor,
                                                      self.policy.chat_template)
        self.sampler = self.backend  # rollout.backend = vllm: the engine (_start_updates)
        # steps with no sampling record (demonstrations) train at the rollout temperature
        self.builder = SampleBuilder(self.policy.tokenizer, self.policy.image_processor,
                                     self.prompt, self.store.frames.get,
                                     self.policy.chat_template,
                                     temperature=config.rollout.temperature)
        self.pool = self._start_pool()

    def _select_heldout_tasks(self) -> list[Task]:
        training = self.config.training
        if not training.eval_every:
            return []
        tasks = select_run_tasks(training.eval_tasks, self.screen_size)
        if not tasks:
            raise ValueError("training.eval_tasks: selects no task")
        shared = sorted({t.id for t in tasks} & set(self.tasks_by_id))
        if shared:
            raise ValueError(f"training.eval_tasks: {', '.join(shared[:5])} also trained "
                             f"on; held-out tasks must not be training tasks")
        return tasks

    def _new_optimizer(self) -> Any:
        import torch

        training = self.config.training
        return torch.optim.AdamW(self.policy.trainable_parameters(),
                                 lr=training.learning_rate,
                                 weight_decay=training.weight_decay)

    def _start_pool(self) -> Any:
        from vm.pool import EnvPool

        environments = self.config.environments
        pool = EnvPool(self._make_env, environments.count)
        self.pool = pool  # before it starts: an interrupted start still closes it
        return pool.start_some("environment")

    def _make_env(self, index: int) -> Any:
        from trainer.environments import make_environment

        return make_environment(self.config.environments, index,
                                f"train-{self.run_id}-{index}", self.workspace)

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
        assert self.run_id is not None
        bar = None
        try:
            self._start_wandb()
            if self.config.training.warmup.steps and not self.warmup_done:
                self._warmup()
            if self.config.curation.precollect_oracle and self.update == 0:
                self._precollect()
            self._start_updates()
            if self.progress:
                from tqdm import tqdm

                bar = tqdm(total=self.config.training.updates, initial=self.update,
                           desc=f"train {self.run_id}", unit="update", disable=None,
                           dynamic_ncols=True)
            while self.update < self.config.training.updates:
                result = self.step()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(self._progress_postfix(result.metrics), refresh=False)
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
                self._stop_updates()
                if self._claimed:  # the interrupted update trained on none of them
                    self.store.runs.unconsume(self.run_id, episode_ids=self._claimed)
                    self._claimed = []
                if status != "failed" or self.update:
                    checkpoint = self._save_checkpoint()
            finally:
                self._finish_wandb(status)
                self.store.runs.set_status(self.run_id, status)
                self.pool.close()
                self.store.close()
                self._restore_threads()
                if status != "failed":  # a failed run's desktops keep their logs
                    self._remove_sandboxes()
        return RunSummary(self.run_id, status, self.update, self.policy_version, checkpoint,
                          self.history)

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
        from trainer.environments import remove_environment_folders

        if self.config.environments.kind != "sandbox" or self.run_id is None:
            return
        remove_environment_folders(self.workspace, [
            f"train-{self.run_id}-{index}" for index in range(self.config.environments.count)],
            qemu=False)

    def _abandon_open(self, status: str) -> None:
        """`_open` did not finish: close what it started, and give the run (when it was
        already created) its final status instead of leaving it "running"."""
        self._restore_threads()
        pool = self.__dict__.get("pool")
        if pool is not None:
            pool.close()
        store = self.__dict__.get("store")
        if store is None:
            return
        try:
            if self.run_id is not None and any(r.id == self.run_id for r in store.runs.all()):
                store.runs.set_status(self.run_id, status)
        finally:
            store.close()

    def _start_updates(self) -> None:
        """Hook: start what runs beside the updates (the asynchronous run's workers; here,
        with rollout.backend = vllm, the engine, at the version training starts from)."""
        if self.config.rollout.backend == "vllm":
            assert self.run_id is not None
            engine = start_engine(self.config, self.policy.base_path)
            self.vllm_versions = VLLMVersions(
                engine, self.store.layout.run_dir(self.run_id) / "published")
            self.sampler = engine
            self.vllm_versions.publish(self.policy.model, self.policy_version)

    def _stop_updates(self) -> None:
        """Hook: stop it again, before the final checkpoint."""
        if self.vllm_versions is not None:
            self.vllm_versions.close()
            self.vllm_versions = None
            self.sampler = self.backend

    def _progress_postfix(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"reward": f"{metrics.get('reward_mean', 0):.2f}",
                "success": f"{metrics.get('success_rate', 0):.2f}"}

    def step(self) -> UpdateResult:
        """One update: rollouts, curation, one GRPO optimisation, maybe a checkpoint."""
        assert self.run_id is not None
        config = self.config
        started = time.perf_counter()
        stats = TaskStatistics.from_store(self.store, window=config.curation.stats_window,
                                          success_threshold=config.curation.success_threshold,
                                          run_id=self.run_id,
                                          task_ids=list(self.tasks_by_id))
        jobs, skipped = self._plan(stats)
        rollout_started = time.perf_counter()
        outcomes = self._roll_out(jobs)
        extra = self._dynamic_sampling(outcomes, stats)
        outcomes += extra
        rollout_seconds = time.perf_counter() - rollout_started
        episodes = [o.episode for o in outcomes if o.episode is not None]
        self._claimed = self.store.runs.consume(self.run_id, [e.id for e in episodes],
                                                self.policy_version)
        groups, curation_counts, samples, train_metrics, train_seconds = self._train_on(
            episodes)
        if self.vllm_versions is not None and samples:  # a new version for vLLM
            train_metrics["sync_seconds"] = self.vllm_versions.publish(self.policy.model,
                                                                       self.policy_version)
        metrics = self._metrics(episodes, outcomes, groups, samples, train_metrics)
        metrics.update(curation_counts)
        metrics.update(self._held_out())
        generated = sum(len(s.token_ids or []) for e in episodes for s in e.steps)
        metrics.update(
            skipped_tasks=float(len(skipped)), extra_rollouts=float(len(extra)),
            rollout_seconds=rollout_seconds,
            train_seconds=train_seconds,
            update_seconds=time.perf_counter() - started,
            rollout_time_fraction=rollout_seconds / max(1e-9, rollout_seconds + train_seconds),
            rollout_tokens_per_second=generated / max(1e-9, rollout_seconds),
            policy_version=float(self.policy_version))
        if train_metrics.get("tokens"):
            metrics["train_tokens_per_second"] = train_metrics["tokens"] / max(1e-9,
                                                                               train_seconds)
        self.store.runs.log_metrics(self.run_id, self.update, metrics)
        self._log_outside(metrics)
        result = UpdateResult(self.update, self.policy_version, metrics,
                              [e.id for e in episodes])
        self.history.append(result)
        if self.update % config.training.checkpoint_every == 0:
            self._save_checkpoint()
        if self.on_update is not None:
            self.on_update(result)
        return result

    def _train_on(self, episodes: Sequence[Episode]) -> tuple[
            list[Group], dict[str, float], list[Sample], dict[str, float], float]:
        """Curate `episodes` (claimed already) into groups, train one update on them and
        publish the next version number: (groups, curation counts, samples, training
        metrics, training seconds)."""
        groups, curation_counts = self._groups(episodes)
        started = time.perf_counter()
        signal = groups_with_signal(groups)
        scale = 1.0
        if self.config.training.scale_step_by_signal and groups:
            scale = signal / len(groups)
        # no group with a signal and a step scaled to 0: nothing to train (not even the
        # KL term of beta > 0, which has no step to pull back)
        samples = self._samples(groups) if scale > 0 else []
        train_metrics = self._optimise(samples, step_scale=scale) if samples else {}
        train_metrics.update(groups_with_signal=float(signal), step_scale=scale)
        seconds = time.perf_counter() - started
        self._claimed = []
        self.update += 1
        if samples and train_metrics.get("optimizer_steps", 1.0) > 0:
            self.policy_version += 1  # a gradient step: a new version
            train_metrics["gradient_step"] = 1.0
        else:  # the weights are unchanged: no new version, no new checkpoint
            # (training.target_kl takes back a first step it cannot shrink within it)
            reason = (untrained_reason(episodes, groups) if not samples
                      else "first_step_past_kl_limit")
            log.warning("run %s: update %d trained nothing (%s); policy version %d stays",
                        self.run_id, self.update, reason, self.policy_version)
            train_metrics.update({"gradient_step": 0.0, f"no_gradient_step/{reason}": 1.0})
        return groups, curation_counts, samples, train_metrics, seconds

    # -- rollouts ---------------------------------------------------------------------

    def _plan(self, stats: TaskStatistics) -> tuple[list[EpisodeJob], dict[str, str]]:
        config = self.config
        curation = config.curation
        task_ids = list(self.tasks_by_id)
        skipped: dict[str, str] = {}
        if curation.task_filter:
            task_ids, skipped = TaskFilter(curation).select(task_ids, stats)
            if not task_ids:  # everything filtered out: keep training on all rather than stop
                task_ids = list(self.tasks_by_id)
        chosen = []
        for _ in range(min(config.training.tasks_per_update, len(task_ids))):
            chosen.append(task_ids[self._task_cursor % len(task_ids)])
            self._task_cursor += 1
        jobs = []
        for task_id in chosen:
            count = config.grpo.num_generations
            if curation.dynamic_rollouts:
                count = dynamic_rollout_count(stats.success_rate(task_id), count,
                                              curation.rollout_threshold,
                                              curation.min_rollouts)
            max_steps = None
            if curation.dynamic_step_budget:
                max_steps = step_budget(task_id, stats, factor=curation.step_budget_factor,
                                        max_steps=config.rollout.max_steps)
            jobs += [EpisodeJob(self.tasks_by_id[task_id], k, max_steps,
                                {"update": self.update + 1}) for k in range(count)]
        return jobs, skipped

    def _dynamic_sampling(self, outcomes: Sequence[EpisodeOutcome], stats: TaskStatistics
                          ) -> list[EpisodeOutcome]:
        """DAPO's dynamic sampling (curation.dynamic_sampling_groups): further rounds of
        groups, planned as an update plans them, while fewer tasks than asked have
        episodes whose rewards differ, up to dynamic_sampling_rounds rounds. A task
        rolled out again adds to its group. The extra episodes."""
        curation = self.config.curation
        extra: list[EpisodeOutcome] = []
        for _ in range(curation.dynamic_sampling_rounds if curation.dynamic_sampling_groups
                       else 0):
            rewards: dict[str, set[float]] = {}
            for outcome in [*outcomes, *extra]:
                episode = outcome.episode
                if episode is not None and episode.status == "done":
                    rewards.setdefault(episode.task_id, set()).add(
                        episode_reward(episode, self.config.rollout.format_coef))
            if sum(len(r) > 1 for r in rewards.values()) >= curation.dynamic_sampling_groups:
                break
            jobs, _ = self._plan(stats)
            extra += self._roll_out(jobs)
        return extra

    def _rollout_config(self) -> RolloutConfig:
        return RolloutConfig(max_steps=self.config.rollout.max_steps,
                             stop_on_parse_error=self.config.rollout.stop_on_parse_error,
                             environment=self.config.environments.kind)

    def _roll_out(self, jobs: Sequence[EpisodeJob], *, held_out: bool = False
                  ) -> list[EpisodeOutcome]:
        """Episodes of the current policy: the run's own (trained on), or held-out ones
        (greedy unless eval_temperature, tagged, with no run so never trained on)."""
        from agents.policies.vlm import VLMPolicy, VLMPolicyConfig

        rollout = self.config.rollout
        temperature = (self.config.training.eval_temperature if held_out
                       else rollout.temperature)
        sampling = SamplingConfig(max_new_tokens=rollout.max_new_tokens,
                                  temperature=temperature, top_p=rollout.top_p,
                                  top_k=rollout.top_k or None)
        policy_config = VLMPolicyConfig(prompt=self.prompt, sampling=sampling)
        version = self.policy_version

        def make_policy(job: EpisodeJob) -> Any:
            return VLMPolicy(self.sampler, policy_config, policy_version=version)

        self.policy.model.eval()
        if held_out:
            runner = RolloutRunner(self.store, self.pool, make_policy, self._rollout_config(),
                                   tags=[HELDOUT_TAG, f"{HELDOUT_TAG}:{self.run_id}"],
                                   info={"policy": "vlm:held-out", "run": self.run_id})
        else:
            runner = RolloutRunner(self.store, self.pool, make_policy, self._rollout_config(),
                                   run_id=self.run_id, info={"policy": "vlm:train"})
        return runner.run(jobs)

    def _held_out(self) -> dict[str, float]:
        """Every training.eval_every updates: the policy on the held-out tasks, as
        heldout/success_rate, heldout/score_mean and heldout/episodes."""
        training = self.config.training
        if not training.eval_every or not self.heldout_tasks or (
                self.update % training.eval_every):
            return {}
        jobs = [EpisodeJob(task, k) for task in self.heldout_tasks
                for k in range(training.eval_rollouts)]
        finished = [o.episode for o in self._roll_out(jobs, held_out=True)
                    if o.episode is not None and o.episode.status == "done"]
        metrics = {"heldout/episodes": float(len(finished))}
        if finished:
            threshold = self.config.curation.success_threshold
            metrics["heldout/success_rate"] = sum(
                (e.score or 0.0) >= threshold for e in finished) / len(finished)
            metrics["heldout/score_mean"] = sum(e.score or 0.0 for e in finished) / len(
                finished)
        return metrics

    # -- curation and samples ---------------------------------------------------------

    def _groups(self, episodes: Sequence[Episode]) -> tuple[list[Group], dict[str, float]]:
        curation = self.config.curation
        finished = [e for e in episodes if e.status == "done"]
        summaries = {s.id: s for s in self.store.queries.summaries([e.id for e in finished])}
        by_task: dict[str, list[GroupMember]] = {}
        for episode in finished:
            member = GroupMember.from_summary(summaries[episode.id])
            # the reward (with its format term) sets the advantage; success is the
            # evaluator's score (curation.apply_precollected)
            member.score = episode_reward(episode, self.config.rollout.format_coef)
            member.evaluator_score = float(episode.score or 0.0)
            by_task.setdefault(episode.task_id, []).append(member)
        counts: Counter[str] = Counter()
        groups = []
        source = SuccessSource(self.store, curation.success_threshold) \
            if curation.precollected else None
        for task_id, members in by_task.items():
            group: Group | None = Group(task_id, members, [])
            if source is not None and group is not None:
                group = apply_precollected(group, source)
                if group is None:
                    counts["tasks_without_success"] += 1
                    continue
            if curation.replay and group is not None:
                group = inject_replay(group, self.replay, self.rng,
                                      std_below=curation.replay_std_below,
                                      mean_below=curation.replay_mean_below)
            assert group is not None
            counts["replayed"] += sum(m.origin == "replay" for m in group.members)
            counts["precollected"] += sum(m.origin == "precollected" for m in group.members)
            groups.append(group)
        if curation.replay:  # after injection: a batch never replays its own successes
            for members in by_task.values():
                self.replay.add(members)
        return groups, {k: float(v) for k, v in counts.items()}

    def _samples(self, groups: Sequence[Group]) -> list[Sample]:
        from trainer.grpo import group_advantages, select_high_entropy_steps

        config = self.config
        members = [m for g in groups for m in g.members]
        if not members:
            return []
        advantages = group_advantages([m.score for m in members],
                                      [m.task_id for m in members],
                                      config.grpo.scale_rewards)
        samples: list[Sample] = []
        stats = None
        for member, advantage in zip(members, advantages, strict=True):
            if advantage == 0.0 and config.grpo.beta == 0.0:
                continue  # no gradient from it
            episode = self.store.episodes.load(member.episode_id)
            steps = list(range(len(episode.steps)))
            if config.grpo.step_entropy_ratio < 1.0:
                entropies = step_mean_entropies(episode)
                chosen = set(select_high_entropy_steps(entropies,
                                                       config.grpo.step_entropy_ratio))
                steps = [s for s in steps if s in chosen]
            if config.curation.dynamic_step_budget:
                if stats is None:
                    stats = TaskStatistics.from_store(
                        self.store, window=config.curation.stats_window,
                        success_threshold=config.curation.success_threshold,
                        run_id=self.run_id)
                keep = set(trainable_steps(
                    len(episode.steps),
                    (episode.score or 0.0) >= config.curation.success_threshold,
                    stats.mean_success_length(episode.task_id)))
                steps = [s for s in steps if s in keep]
            try:
                built = (self.builder.trajectory_samples(episode, steps)
                         if config.training.sample_level == "trajectory"
                         else self.builder.step_samples(episode, steps))
            except SampleError as exc:
                log.warning("skipped %s", exc)
                continue
            for sample in built:
                sample.advantage = advantage
                sample.origin = member.origin
            samples += built
        return samples

    # -- optimisation -----------------------------------------------------------------

    def _optimise(self, samples: Sequence[Sample], *, supervised: bool = False,
                  step_scale: float = 1.0) -> dict[str, float]:
        """One GRPO update over `samples` (`training.num_iterations` optimizer steps).
        `supervised`: demonstrations with advantage 1 and no importance correction, so the
        same loss is behaviour cloning (token mean of -log p). `step_scale` multiplies the
        learning rate of this update's steps (training.scale_step_by_signal). With
        `training.target_kl` (or `target_kl_no_signal`, `max_logprob_drop`), each pass
        after the first measures how far the steps so far moved the policy
        (trainer/trust_region.py) and, past a limit, discards its gradient, shrinks the
        step that went past it until the policy is within the limits, and ends the update;
        a measuring pass after the last step does the same."""
        import torch

        from trainer.batch import collate, token_logprobs
        from trainer.grpo import accumulated_loss, clip_gradients, policy_loss
        from trainer.trust_region import Drift, DriftMeter, Limits, StepGuard
        from trainer.update_stats import UpdateStats

        grpo, training = self.config.grpo, self.config.training
        model = self.policy.model
        model.train()
        pad = int(self.backend.pad_id)
        size = training.micro_batch_size
        batches = [collate(samples[i:i + size], self.policy.image_processor, pad).to(
            self.policy.device) for i in range(0, len(samples), size)]
        total_tokens = sum(b.tokens for b in batches)
        iterations = 1 if supervised else training.num_iterations
        # The old log-probs are the first pass's own: no step is taken before the whole
        # accumulated batch has had its pass, and without dropout that pass gives exactly
        # what a separate no-grad pass would (tests/test_trainer_invariants.py), for one
        # forward pass over the batch less per update.
        old: list[torch.Tensor] = []
        stats = UpdateStats()
        grad_norm = 0.0
        if not supervised:
            for group in self.optimizer.param_groups:
                group["lr"] = training.learning_rate * step_scale
        params = self.policy.trainable_parameters()
        limits = Limits() if supervised else Limits(training.target_kl,
                                                    training.target_kl_no_signal,
                                                    training.max_logprob_drop)

        def measure() -> Drift:
            meter = DriftMeter()
            with torch.no_grad():
                for i, b in enumerate(batches):
                    meter.add(old[i], token_logprobs(model, b, self.image_token_id)[0],
                              b.mask, b.advantages)
            return meter.drift(total_tokens)

        guard = StepGuard(params, limits, measure, self.optimizer)
        for iteration in range(iterations):
            self.optimizer.zero_grad(set_to_none=True)
            meter = DriftMeter()
            stats.start_pass()
            for index, batch in enumerate(batches):
                logp, entropy = token_logprobs(model, batch, self.image_token_id,
                                               with_entropy=True)
                assert entropy is not None
                if iteration == 0:
                    old.append(logp.detach())
                old_logp = old[index]
                # measured where it is used: after every step with a limit, else only
                # before the last step (the policy_kl logged)
                if iteration > 0 and (limits.active or iteration == iterations - 1):
                    meter.add(old_logp, logp, batch.mask, batch.advantages)
                ref_logp = None
                if grpo.beta > 0 and not supervised:
                    with torch.no_grad(), self.policy.reference() as reference:
                        ref_logp = token_logprobs(reference, batch, self.image_token_id)[0]
                out = policy_loss(
                    logp, old_logp, batch.advantages, batch.mask, grpo,
                    rollout_logp=None if supervised else batch.rollout_logprobs,
                    entropies=entropy, ref_logp=ref_logp, token_normaliser=total_tokens)
                accumulated_loss(out.loss, grpo, len(batch.samples), len(samples)).backward()
                tokens = float(batch.tokens)
                if iteration == 0:  # the batch as the rollout policy left it
                    stats.add_rollout_batch(
                        tokens, float((entropy * batch.mask).sum().item()),
                        float((logp.detach() * batch.mask).sum().item()))
                stats.add_loss(out.stats, tokens)
            stats.end_pass()
            if iteration > 0 and not guard.within_limits(meter.drift(total_tokens)):
                self.optimizer.zero_grad(set_to_none=True)
                guard.back_within_limits()
                break
            grad_norm = clip_gradients(params, training.max_grad_norm)
            guard.before_step()
            self.optimizer.step()
            guard.stepped()
        else:  # every pass stepped: where did the last step leave the policy?
            if limits.active:
                self.optimizer.zero_grad(set_to_none=True)
                if not guard.within_limits(measure()):
                    guard.back_within_limits()
        guard.release()
        metrics = stats.metrics(total_tokens)
        metrics["grad_norm"] = grad_norm
        if not supervised:
            metrics["optimizer_steps"] = float(guard.steps)
            if limits.active or iterations > 1:
                # with a limit: after the update; without: before its last step
                metrics["policy_kl"] = guard.drift.mean
                metrics["policy_kl_no_signal_max"] = guard.drift.no_signal_max
                metrics["logprob_drop_max"] = guard.drift.drop_max
            if limits.active:
                metrics["last_step_kept"] = guard.kept
        metrics["learning_rate"] = float(self.optimizer.param_groups[0]["lr"])
        metrics["samples"] = float(len(samples))
        return metrics

    # -- warm-up ----------------------------------------------------------------------

    def _warmup(self) -> None:
        """Supervised steps on demonstrations through the same loss (see _optimise)."""
        warmup = self.config.training.warmup
        asked = (len(self.store.pool.entries()) if warmup.source == "pool"
                 else warmup.episodes)
        self._warmup_progress(WarmupProgress("collecting", 0, asked, warmup.source))
        demonstrations = self._demonstrations()
        self._warmup_progress(WarmupProgress("collected", len(demonstrations), asked,
                                             warmup.source))
        if not demonstrations:
            raise RuntimeError("training.warmup: no demonstration to learn from")
        samples: list[Sample] = []
        for episode in demonstrations:
            for sample in self.builder.step_samples(episode):
                # behaviour cloning of the model's own distribution (temperature 1), as
                # supervised fine-tuning does; GRPO then scores at the sampling temperature
                sample.advantage, sample.origin = 1.0, "demonstration"
                sample.temperature = 1.0
                samples.append(sample)
        for group in self.optimizer.param_groups:
            group["lr"] = warmup.learning_rate
        order: list[Sample] = []
        for step in range(warmup.steps):
            if len(order) < warmup.batch_size:
                shuffled = list(samples)
                self.rng.shuffle(shuffled)
                order += shuffled
            batch, order = order[:warmup.batch_size], order[warmup.batch_size:]
            metrics = self._optimise(batch, supervised=True)
            assert self.run_id is not None
            nll = -metrics.get("logprob_mean", 0.0)
            self.store.runs.log_metrics(self.run_id, -warmup.steps + step, {
                "warmup_nll": nll, "warmup_entropy": metrics.get("entropy", 0.0)})
            every = max(1, warmup.steps // WARMUP_REPORTS)
            if (step + 1) % every == 0 or step + 1 == warmup.steps:
                self._warmup_progress(WarmupProgress("step", step + 1, warmup.steps,
                                                     warmup.source, nll))
        # GRPO starts with a fresh optimizer: Adam's second moments from the supervised
        # steps (gradients 10-100x larger) would otherwise shrink the RL steps for
        # thousands of updates (the learning experiment stalled on exactly that).
        self.optimizer = self._new_optimizer()
        self.warmup_done = True
        if self.config.grpo.beta > 0:
            self._save_reference()
        self._save_checkpoint()  # version 0: the warmed-up policy

    def _warmup_progress(self, progress: WarmupProgress) -> None:
        if self.on_warmup is not None:
            self.on_warmup(progress)

    def _demonstrations(self) -> list[Episode]:
        warmup = self.config.training.warmup
        if warmup.source == "pool":
            ids = [entry.episode_id for entry in self.store.pool.entries()]
            return [self.store.episodes.load(i) for i in ids]
        tasks = select_run_tasks(warmup.tasks, self.screen_size)
        if not tasks:
            raise ValueError("training.warmup.tasks: selects no task")
        jobs = [EpisodeJob(tasks[i % len(tasks)], i // len(tasks))
                for i in range(warmup.episodes)]
        return self._successes(self._oracle_outcomes(jobs, [DEMONSTRATION_TAG]))

    def _precollect(self) -> None:
        """Pre-collected successes (DART) for the training tasks that have none yet: the
        scripted oracle's episodes, which `precollected` curation then puts into groups
        that found no success. They are tagged and never trained on as rollouts."""
        from vm.tasks.oracles import has_oracle

        source = SuccessSource(self.store, self.config.curation.success_threshold)
        count = self.config.curation.precollect_oracle
        tasks = [t for t in self.tasks
                 if has_oracle(t) and source.newest_success(t.id) is None]
        jobs = [EpisodeJob(task, i) for task in tasks for i in range(count)]
        if not jobs:
            return
        found = self._successes(self._oracle_outcomes(jobs, [PRECOLLECTED_TAG]))
        assert self.run_id is not None
        log.info("run %s: %d pre-collected successes for %d tasks", self.run_id,
                 len(found), len(tasks))

    def _oracle_outcomes(self, jobs: list[EpisodeJob], tags: list[str]
                         ) -> list[EpisodeOutcome]:
        """Run `jobs` with the tasks' scripted oracles on the run's desktops."""
        from agents.policies.oracle import OraclePolicy

        runner = RolloutRunner(self.store, self.pool, lambda job: OraclePolicy(),
                               self._rollout_config(), run_id=self.run_id, tags=tags,
                               info={"policy": "oracle"})
        return runner.run(jobs)

    def _successes(self, outcomes: Sequence[EpisodeOutcome]) -> list[Episode]:
        threshold = self.config.curation.success_threshold
        return [self.store.episodes.load(o.episode.id) for o in outcomes
                if o.episode is not None and o.episode.status == "done"
                and (o.episode.score or 0.0) >= threshold]

    # -- metrics and checkpoints ------------------------------------------------------

    def _metrics(self, episodes: Sequence[Episode], outcomes: Sequence[EpisodeOutcome],
                 groups: Sequence[Group], samples: Sequence[Sample],
                 train: dict[str, float]) -> dict[str, float]:
        threshold = self.config.curation.success_threshold
        finished = [e for e in episodes if e.status == "done"]
        rewards = [episode_reward(e, self.config.rollout.format_coef) for e in finished]
        metrics: dict[str, float] = dict(train)
        metrics["episodes"] = float(len(outcomes))
        metrics["error_rate"] = sum(o.status != "done" for o in outcomes) / max(1, len(outcomes))
        metrics["format_error_rate"] = sum(
            any(s.parse_error is not None for s in e.steps) for e in finished) / max(
                1, len(finished))
        if rewards:
            mean = sum(rewards) / len(rewards)
            metrics["reward_mean"] = mean
            metrics["reward_std"] = math.sqrt(sum((r - mean) ** 2 for r in rewards)
                                              / len(rewards))
            metrics["success_rate"] = sum((e.score or 0.0) >= threshold
                                          for e in finished) / len(finished)
            metrics["steps_mean"] = sum(len(e.steps) for e in finished) / len(finished)
        per_task: dict[str, list[bool]] = {}
        for e in finished:
            per_task.setdefault(e.task_id, []).append((e.score or 0.0) >= threshold)
        for task_id, results in per_task.items():
            metrics[f"success_rate/{task_id}"] = sum(results) / len(results)
        metrics["groups"] = float(len(groups))
        return metrics

    def _start_wandb(self) -> None:
        """training.wandb: a W&B run beside this one (files under runs/<run>/wandb/)."""
        training = self.config.training
        if not training.wandb or self._wandb is not None:
            return
        assert self.run_id is not None
        self._wandb = WandbLogger.start(
            project=training.wandb_project, entity=training.wandb_entity,
            run_id=self.run_id, name=self.config.run.name, config_text=self.config_text,
            folder=self.store.layout.run_dir(self.run_id))

    def _finish_wandb(self, status: str) -> None:
        """End the W&B run; its failure is logged, never in the way of the run's own end."""
        if self._wandb is None:
            return
        try:
            self._wandb.finish(status)
        except Exception as exc:  # W&B's own failure: the store has every metric anyway
            log.warning("run %s: Weights & Biases did not finish: %s", self.run_id, exc)
        self._wandb = None

    def _log_outside(self, metrics: dict[str, float]) -> None:
        """An update's metrics to the loggers the run asked for besides the store."""
        self._tensorboard(metrics)
        if self._wandb is not None:
            self._wandb.log(metrics, self.update)

    def _tensorboard(self, metrics: dict[str, float]) -> None:
        if not self.config.training.tensorboard:
            return
        if not hasattr(self, "_writer"):
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise RuntimeError("training.tensorboard needs the tensorboard package "
                                   "(pip install tensorboard)") from exc
            assert self.run_id is not None
            self._writer = SummaryWriter(str(self.store.layout.run_dir(self.run_id)))
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, self.update)
        self._writer.flush()

    def _save_reference(self) -> None:
        """Save the warmed-up policy as the run's KL reference and refer to it: the KL term
        keeps the updates near what the warm-up taught, not near the untrained base. Its own
        folder, not version 0's: a warm-up interrupted and run again after a resume finishes
        where version 0 already holds the half-trained weights saved at the interruption."""
        import shutil

        assert self.run_id is not None
        folder = self.store.layout.reference_dir(self.run_id)
        fresh = folder.with_name(f"{folder.name}.new")
        shutil.rmtree(fresh, ignore_errors=True)
        self.policy.save_checkpoint(fresh, policy_version=0, run_config=self.config_text,
                                    info={"run_id": self.run_id, "kl_reference": "warm-up"})
        shutil.rmtree(folder, ignore_errors=True)
        fresh.rename(folder)
        self.policy.refer_to(folder)

    def _load_reference(self) -> None:
        """On resume: the KL reference the run saved after its warm-up."""
        assert self.run_id is not None
        folder = self.store.layout.reference_dir(self.run_id)
        if not folder.is_dir():
            raise ValueError(f"grpo.beta: {folder} is missing: the KL reference this run "
                             f"saved after its warm-up (start a new run, or set grpo.beta = 0)")
        self.policy.refer_to(folder)

    def _save_checkpoint(self) -> Path | None:
        """Save the current policy version unless it is saved already."""
        import torch

        assert self.run_id is not None
        if self.saved_version == self.policy_version:
            return self.store.layout.checkpoint_dir(self.run_id, self.policy_version)
        folder = self.store.layout.checkpoint_dir(self.run_id, self.policy_version)
        state = {"optimizer": self.optimizer.state_dict(), "update": self.update,
                 "policy_version": self.policy_version, "warmup_done": self.warmup_done,
                 "task_cursor": self._task_cursor, "replay": self.replay.to_dict(),
                 "python_rng": self.rng.getstate(), "torch_rng": torch.get_rng_state()}
        self.policy.save_checkpoint(folder, policy_version=self.policy_version,
                                    run_config=self.config_text, trainer_state=state,
                                    info={"run_id": self.run_id, "update": self.update})
        relative = folder.relative_to(self.workspace).as_posix()
        self.store.runs.add_checkpoint(self.run_id, self.policy_version, relative,
                                       {"update": self.update})
        self.saved_version = self.policy_version
        return folder
