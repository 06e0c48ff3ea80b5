"""The demo workspace behind `make run` (`workbench demo`): the bundled tasks, two sandbox
desktops with snapshots, episodes from the tasks' scripted oracles and from a tiny random
model, curated successes, a tiny model folder, a run configuration, a short training run
and a small evaluation (the oracle, random clicks and the run's checkpoint on some of the
run's tasks), so that a newcomer sees every screen of the app populated with real data.

Everything in it is made here, for real: episodes are rollouts on Xvfb sandboxes, the
model is a random Qwen2.5-VL (it fails nearly every task, which is what a random model
does), the run is a few GRPO updates of that model. A marker file says whether a demo is
complete; building again is a no-op unless forced.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from trainer.store.layout import DB_NAME

MARKER = "demo.json"  # in the workspace: {"status": "building" | "complete", ...}
MODEL_FOLDER = "models/tiny-qwen25-vl"  # the tiny model, inside the workspace
RUN_ID = "demo-train"
EXAMPLE_CONFIG = "configs/demo-tiny.toml"  # where the Training screen's form saves configs
RUN_CONFIG = f"runs/{RUN_ID}/run_config.toml"  # what the demo run read (the same text)
RUN_LOG = f"runs/{RUN_ID}/trainer.log"  # the demo run's output, for the Training screen
EVALUATION = "demo"  # the demo's evaluation: evaluations/demo/ (its plan, tasks, report)
ORACLE_TAG = "oracle"
MODEL_TAG = "tiny-model"
DEMO_TAG = "demo"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DemoPlan:
    """What goes into a demo workspace; the defaults build one in well under a minute of
    rollouts plus a short training run on 2 CPU cores."""

    sandboxes: tuple[str, ...] = ("demo-1", "demo-2")  # also the rollout pool
    screen_size: tuple[int, int] = (1280, 800)
    oracle_tasks: tuple[str, ...] = (
        "buttons-0", "buttons-1", "todo-add", "todo-tick", "todo-delete", "form-name",
        "form-checkboxes", "settings-dark-mode", "settings-language-ok", "terminal-touch",
        "terminal-greeting", "editor-append-line", "files-new-folder", "files-rename")
    pooled: int = 8  # oracle successes put in the success pool (the first ones, by task)
    model_tasks: tuple[str, ...] = ("buttons-0", "buttons-1", "todo-add", "form-name",
                                    "settings-dark-mode", "terminal-touch")
    model_rollouts: int = 2  # episodes per model task
    model_steps: int = 3  # model calls per episode (responses that do not parse go on)
    model_max_pixels: int = 256 * 28 * 28  # screenshot budget in the model's prompt
    model_seed: int = 0  # weights and sampling
    snapshot_task: str = "todo-add"  # a snapshot of a sandbox with this task set up
    train_updates: int = 40  # at most (it stops once learned); 0: no training run
    eval_tasks: int = 3  # the evaluation's tasks: the first of the run's (0: none)


@dataclass(frozen=True)
class DemoSummary:
    """What the demo workspace holds (also the marker file's content)."""

    workspace: str
    tasks: int
    sandboxes: list[str]
    snapshots: int
    oracle_episodes: int
    oracle_successes: int
    model_episodes: int
    model_successes: int
    pooled: int
    model_folder: str
    run_config: str
    run_id: str | None
    run_status: str | None
    metric_points: int
    seconds: float
    created: bool = True  # False: the demo existed already and nothing was changed
    notes: list[str] = field(default_factory=list)
    evaluation: str | None = None  # its name (None: no evaluation)
    evaluation_episodes: int = 0
    evaluation_results: list[str] = field(default_factory=list)  # "oracle 3/3", per policy

    def lines(self) -> list[str]:
        run = (f"run {self.run_id}: {self.run_status}, {self.metric_points} metric points"
               if self.run_id else "no training run")
        return [
            f"workspace   {self.workspace}",
            f"tasks       {self.tasks} bundled tasks registered",
            f"sandboxes   {', '.join(self.sandboxes)} (stopped; {self.snapshots} snapshots)",
            f"episodes    {self.oracle_episodes} by the scripted oracles "
            f"({self.oracle_successes} solved), {self.model_episodes} by the tiny random "
            f"model ({self.model_successes} solved)",
            f"pool        {self.pooled} curated successes",
            f"model       {self.model_folder}",
            f"config      {self.run_config}",
            f"training    {run}",
            f"evaluation  {self.evaluation}: {self.evaluation_episodes} episodes; solved "
            f"{', '.join(self.evaluation_results)}" if self.evaluation
            else "evaluation  none",
            *self.notes,
        ]


class DemoError(RuntimeError):
    """The demo cannot be built where asked (the message says why and what to do)."""


def read_marker(workspace: Path) -> dict[str, Any] | None:
    """The marker's content, or None when there is none (or it is unreadable)."""
    path = Path(workspace) / MARKER
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def demo_complete(workspace: Path) -> bool:
    marker = read_marker(workspace)
    return marker is not None and marker.get("status") == "complete"


def build_demo_workspace(workspace: Path, *, force: bool = False,
                         plan: DemoPlan | None = None,
                         progress: Progress | None = None) -> DemoSummary:
    """Make the demo workspace at `workspace` unless a complete one is there already
    (then return its summary, changing nothing). `force` rebuilds a demo workspace from
    scratch. A folder holding anything that is not a demo workspace is left alone
    (DemoError), forced or not."""
    plan = plan or DemoPlan()
    say = progress or (lambda _text: None)
    workspace = Path(workspace).expanduser().resolve()
    marker = read_marker(workspace)
    if marker is not None and marker.get("status") == "complete" and not force:
        return _summary_from_marker(marker, workspace)
    _prepare_folder(workspace, marker, say)
    started = time.perf_counter()
    _write_marker(workspace, {"status": "building", "started": time.time()})
    builder = _DemoBuilder(workspace, plan, say)
    summary = replace(builder.build(), seconds=time.perf_counter() - started)
    _write_marker(workspace, {"status": "complete", "finished": time.time(),
                              "summary": asdict(summary)})
    return summary


# ---------------------------------------------------------------------- the folder


def _prepare_folder(workspace: Path, marker: dict[str, Any] | None, say: Progress) -> None:
    """An empty folder to build in: a demo (complete or half-built) is removed first;
    anything else is refused."""
    if not workspace.exists():
        workspace.mkdir(parents=True)
        return
    if not workspace.is_dir():
        raise DemoError(f"{workspace}: exists and is not a folder")
    if marker is None:
        if any(workspace.iterdir()):
            what = "a workspace" if (workspace / DB_NAME).exists() else "files"
            raise DemoError(f"{workspace} holds {what} that are not a demo workspace; "
                            f"left alone. Give another folder: workbench demo --workspace "
                            f"demo-workspace")
        return
    state = "a half-built demo" if marker.get("status") != "complete" else "the demo"
    say(f"removing {state} in {workspace}")
    from vm.providers.sandbox import SandboxProvider

    for sandbox in SandboxProvider.running(workspace):  # the app may have started them
        sandbox.stop()
    for child in workspace.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _write_marker(workspace: Path, data: dict[str, Any]) -> None:
    from vm.atomic_write import write_atomic

    write_atomic(workspace / MARKER, json.dumps(data, indent=2) + "\n", mode=0o644)


def _summary_from_marker(marker: dict[str, Any], workspace: Path) -> DemoSummary:
    data = marker.get("summary")
    try:
        summary = DemoSummary(**data) if isinstance(data, dict) else None
    except TypeError:  # written by another version of this module
        summary = None
    if summary is None:
        return DemoSummary(str(workspace), 0, [], 0, 0, 0, 0, 0, 0, MODEL_FOLDER,
                           EXAMPLE_CONFIG, None, None, 0, 0.0, created=False,
                           notes=[f"note: {workspace / MARKER} has no summary this version "
                                  "reads; --force rebuilds the demo"])
    return replace(summary, created=False, seconds=0.0)


# ---------------------------------------------------------------------- building


class _DemoBuilder:
    def __init__(self, workspace: Path, plan: DemoPlan, say: Progress) -> None:
        self.workspace = workspace
        self.plan = plan
        self.say = say
        self.notes: list[str] = []

    def build(self) -> DemoSummary:
        from trainer.store import Store

        plan = self.plan
        steps = 6 if plan.train_updates else 5
        self.say(f"[1/{steps}] registering the bundled tasks")
        store = Store.open(self.workspace)
        try:
            tasks = self._register_tasks(store)
            self.say(f"[2/{steps}] saving a tiny random Qwen2.5-VL model to {MODEL_FOLDER}; "
                     "writing the run configuration")
            model = self._save_model()
            config_path = self._write_run_config(model)
        finally:
            store.close()
        # The training run first, the oracles last: the Trajectories screen lists the newest
        # episodes first, and a newcomer should meet solved episodes there, not the run's
        # (which a random model mostly fails).
        run_status: str | None = None
        if plan.train_updates:
            self.say(f"[3/{steps}] training run {RUN_ID}: a warm-up on oracle "
                     f"demonstrations, then {plan.train_updates} GRPO updates of the tiny "
                     "model on 4 small sandboxes (a few minutes)")
            run_status = self._train(config_path)
        step = 4 if plan.train_updates else 3
        store = Store.open(self.workspace)
        try:
            self.say(f"[{step}/{steps}] starting sandboxes {', '.join(plan.sandboxes)}; "
                     f"{len(plan.model_tasks) * plan.model_rollouts} episodes of the tiny "
                     "model (random weights: expect failures)")
            pool = self._start_pool()
            try:
                model_outcomes = self._model_rollouts(store, pool, model)
                evaluation = self._evaluate(store, pool, config_path, run_status)
                # the oracles' last: their solved episodes are the newest, listed first
                self.say(f"[{step + 1}/{steps}] {len(plan.oracle_tasks)} oracle episodes")
                oracle = self._oracle_rollouts(store, pool)
                self._snapshot(pool)
            finally:
                pool.close()
            self.say(f"[{step + 2}/{steps}] curating: {plan.pooled} oracle successes into "
                     "the success pool")
            pooled = self._pool_successes(store, oracle)
        finally:
            store.close()
        with Store.open(self.workspace) as store:
            # every update logs its episode count (the warm-up logs other names)
            points = len(store.runs.metrics(RUN_ID, ["episodes"])) \
                if run_status is not None else 0
        snapshots = sum(1 for p in (self.workspace / "snapshots").glob("*/*/snapshot.json"))
        return DemoSummary(
            workspace=str(self.workspace), tasks=tasks, sandboxes=list(plan.sandboxes),
            snapshots=snapshots, oracle_episodes=len(oracle),
            oracle_successes=sum(_solved(o) for o in oracle),
            model_episodes=len(model_outcomes),
            model_successes=sum(_solved(o) for o in model_outcomes), pooled=pooled,
            model_folder=MODEL_FOLDER, run_config=EXAMPLE_CONFIG,
            run_id=RUN_ID if run_status is not None else None, run_status=run_status,
            metric_points=points, seconds=0.0, notes=self.notes,
            evaluation=evaluation[0], evaluation_episodes=evaluation[1],
            evaluation_results=evaluation[2])

    # -- tasks and model ----------------------------------------------------------------

    def _register_tasks(self, store: Any) -> int:
        from trainer.store import TaskRecord
        from vm.suite import bundled_suite

        suite = bundled_suite()
        for task in suite:
            store.tasks.put(TaskRecord(task.id, instruction=task.instruction,
                                       domain=task.domain, source="bundled",
                                       config=task.to_json()))
        return len(suite)

    def _save_model(self) -> Path:
        from agents.tiny_model import build_tiny_qwen25_vl

        return build_tiny_qwen25_vl(self.workspace / MODEL_FOLDER, seed=self.plan.model_seed)

    # -- rollouts -----------------------------------------------------------------------

    def _start_pool(self) -> Any:
        from vm.env import DesktopEnv
        from vm.pool import EnvPool
        from vm.providers.sandbox import SandboxProvider

        names = self.plan.sandboxes

        def make_env(index: int) -> DesktopEnv:
            provider = SandboxProvider(names[index], self.workspace,
                                       screen_size=self.plan.screen_size, guest_server=False)
            return DesktopEnv(provider)

        return EnvPool(make_env, len(names)).start_some("sandbox desktop")

    def _run(self, store: Any, pool: Any, tasks: Sequence[str],
             make_policy: Callable[[Any], Any], config: Any, tag: str, policy: str,
             rollouts: int = 1) -> list[Any]:
        from trainer.rollouts import EpisodeJob, RolloutRunner
        from vm.suite.selection import select_tasks

        if not tasks:  # (select_tasks would take an empty list as "the whole suite")
            return []
        jobs = [EpisodeJob(task, k) for task in select_tasks(list(tasks), where="demo tasks")
                for k in range(rollouts)]
        # a demo goes on past tasks whose setup fails here: each is noted (report below)
        runner = RolloutRunner(store, pool, make_policy, config,
                               tags=[DEMO_TAG, tag], info={"policy": policy},
                               fail_if_every_setup_fails=False)
        outcomes: list[Any] = []

        def report(outcome: Any) -> None:
            outcomes.append(outcome)
            episode = outcome.episode
            score = "-" if episode is None or episode.score is None else f"{episode.score:g}"
            steps = 0 if episode is None else len(episode.steps)
            self.say(f"      {outcome.status:7} score {score:>3} {steps:2} steps  "
                     f"{outcome.job.task.id}")
            if outcome.status == "error":
                reason = outcome.error or (episode.error if episode is not None else "?")
                self.notes.append(f"note: {policy} on {outcome.job.task.id} ended in an "
                                  f"error: {reason}")

        runner.run(jobs, report)
        return outcomes

    def _oracle_rollouts(self, store: Any, pool: Any) -> list[Any]:
        from agents.policies import OraclePolicy
        from agents.rollout import RolloutConfig

        return self._run(store, pool, self.plan.oracle_tasks, lambda job: OraclePolicy(),
                         RolloutConfig(max_steps=30, environment="sandbox"), ORACLE_TAG,
                         "oracle")

    def _model_rollouts(self, store: Any, pool: Any, model: Path) -> list[Any]:
        from agents.backends.base import SamplingConfig
        from agents.backends.transformers_backend import TransformersBackend
        from agents.parsing import ImageBudget
        from agents.parsing.coordinates import DEFAULT_MIN_PIXELS
        from agents.policies import VLMPolicy, VLMPolicyConfig
        from agents.prompting import PromptConfig
        from agents.rollout import RolloutConfig

        plan = self.plan
        backend = TransformersBackend(model, device="cpu")
        prompt = PromptConfig(history_images=2, budget=ImageBudget(
            min_pixels=min(DEFAULT_MIN_PIXELS, plan.model_max_pixels),
            max_pixels=plan.model_max_pixels))

        def make_policy(job: Any) -> VLMPolicy:  # a seed per episode: the same every build
            seed = plan.model_seed + 100 * job.rollout + plan.model_tasks.index(job.task.id)
            sampling = SamplingConfig(max_new_tokens=32, temperature=1.0, seed=seed)
            return VLMPolicy(backend, VLMPolicyConfig(prompt=prompt, sampling=sampling),
                             policy_version=0)

        try:
            return self._run(
                store, pool, plan.model_tasks, make_policy,
                RolloutConfig(max_steps=plan.model_steps, stop_on_parse_error=False,
                              environment="sandbox"),
                MODEL_TAG, f"{MODEL_FOLDER} (random weights)", plan.model_rollouts)
        finally:
            backend.close()

    def _snapshot(self, pool: Any) -> None:
        """A second snapshot on one sandbox: its desktop with a task set up, ready to try
        by hand from the Environments screen."""
        from vm.suite.selection import select_tasks

        task = select_tasks([self.plan.snapshot_task], where="demo snapshot task")[0]
        with pool.lease() as env:
            env.reset(task)
            env.save_snapshot(f"{task.id}-ready",
                              description=f"task {task.id} set up: {task.instruction}")

    # -- the evaluation -----------------------------------------------------------------

    def _evaluate(self, store: Any, pool: Any, config_path: Path, run_status: str | None
                  ) -> tuple[str | None, int, list[str]]:
        """A small evaluation, as `workbench eval` keeps one (plan, episodes tagged
        eval:demo, report): the oracle, random clicks and the run's newest checkpoint on
        the run's first `eval_tasks` tasks, one seed, on the demo's desktops. The tasks
        are generated for those desktops' screen (a grid layout scales with it) and saved
        as files beside the plan, so `workbench eval demo` reads them again (resume,
        report). (name, episodes, "label solved/scored" per policy); (None, 0, []) when the
        plan asks for none."""
        from agents.rollout import RolloutConfig
        from trainer.config import load_run_config
        from trainer.evaluation.plan import (
            EvalPlan,
            episode_tags,
            evaluation_folder,
            parse_policy,
            save_plan,
        )
        from trainer.evaluation.stored import report_of, write_report
        from trainer.loop import select_run_tasks
        from trainer.rollouts import EpisodeJob, RolloutRunner
        from vm.atomic_write import write_atomic
        from workbench.cli.evaluate import policy_makers
        from workbench.vetting.check import MAX_ORACLE_ACTIONS

        plan = self.plan
        if not plan.eval_tasks:
            return None, 0, []
        config, _ = load_run_config(config_path)
        tasks = select_run_tasks(config.tasks, plan.screen_size)[:plan.eval_tasks]
        files = []  # tasks/<domain>/<id>.json: a task file's folder names its domain
        for task in tasks:
            file = evaluation_folder(self.workspace, EVALUATION) / "tasks" / task.domain / \
                f"{task.id}.json"
            write_atomic(file, json.dumps(task.to_json(), indent=2) + "\n", mode=0o644)
            files.append(str(file))
        policies = [parse_policy("oracle"), parse_policy("random")]
        if run_status is not None and store.runs.checkpoints(RUN_ID):
            policies.append(parse_policy(f"checkpoint:{RUN_ID}"))
        rollout = config.rollout
        # the run's own prompt and sampling: what its checkpoint was trained to answer
        settings: dict[str, Any] = {
            "response_format": "uitars", "max_new_tokens": rollout.max_new_tokens,
            "temperature": rollout.temperature, "top_p": rollout.top_p,
            "history_images": rollout.history_images, "max_pixels": rollout.max_pixels,
            "observation": "screenshot", "keep_going": not rollout.stop_on_parse_error,
            "size": list(plan.screen_size), "system_prompt": rollout.system_prompt,
            "strict": False}
        evaluation = EvalPlan(EVALUATION, policies, [t.id for t in tasks], files, seeds=(0,),
                              max_steps=rollout.max_steps, settings=settings)
        save_plan(self.workspace, evaluation)
        self.say(f"      evaluation {EVALUATION}: {', '.join(p.label for p in policies)} on "
                 f"{len(tasks)} of the run's tasks")
        options = argparse.Namespace(**settings, device=None, dtype="auto")
        makers, backends = policy_makers(evaluation, options, self.workspace, store,
                                         {p.label for p in policies})
        jobs = [EpisodeJob(task, 0, max_steps=MAX_ORACLE_ACTIONS if p.kind == "oracle"
                           else None, info={"eval": EVALUATION, "policy": p.label,
                                            "seed": 0},
                           tags=episode_tags(EVALUATION, p.label, 0))
                for p in policies for task in tasks]
        runner = RolloutRunner(
            store, pool, lambda job: makers[job.info["policy"]](job.rollout),
            RolloutConfig(max_steps=rollout.max_steps,
                          stop_on_parse_error=rollout.stop_on_parse_error,
                          environment="sandbox"),
            tags=[DEMO_TAG], info={"evaluation": EVALUATION}, fail_if_every_setup_fails=False)
        outcomes: list[Any] = []

        def report(outcome: Any) -> None:
            outcomes.append(outcome)
            episode = outcome.episode
            score = "-" if episode is None or episode.score is None else f"{episode.score:g}"
            self.say(f"      {outcome.status:7} score {score:>3}  {outcome.job.info['policy']}"
                     f" on {outcome.job.task.id}")
            if outcome.status == "error":
                reason = outcome.error or (episode.error if episode is not None else "?")
                self.notes.append(f"note: evaluation {EVALUATION}: "
                                  f"{outcome.job.info['policy']} on {outcome.job.task.id} "
                                  f"ended in an error: {reason}")

        try:
            runner.run(jobs, report)
        finally:
            for backend in backends:
                backend.close()
        result = report_of(store, evaluation, resamples=1000)
        write_report(self.workspace, result)
        return EVALUATION, len(outcomes), [f"{p.label} {p.successes}/{p.episodes}"
                                           for p in result.policies]

    # -- curation and training ----------------------------------------------------------

    def _pool_successes(self, store: Any, oracle: Sequence[Any]) -> int:
        solved = sorted((o.episode for o in oracle if _solved(o)),
                        key=lambda e: self.plan.oracle_tasks.index(e.task_id))
        for episode in solved[:self.plan.pooled]:
            store.pool.add(episode.id, added_by="demo",
                           note="scripted oracle demonstration")
        return min(len(solved), self.plan.pooled)

    def _write_run_config(self, model: Path) -> Path:
        """The example configuration, and a copy as the demo run's own."""
        from vm.atomic_write import write_atomic

        text = demo_run_config(model, self.workspace, self.plan.train_updates or 3)
        for name in (EXAMPLE_CONFIG, RUN_CONFIG):
            write_atomic(self.workspace / name, text, mode=0o644)
        return self.workspace / RUN_CONFIG

    def _train(self, config_path: Path) -> str:
        from trainer.config import load_run_config
        from trainer.loop import TrainingRun
        from workbench.cli.train import warmup_line

        config, text = load_run_config(config_path)
        log = (self.workspace / RUN_LOG).open("a", encoding="utf-8")

        def updated(result: Any) -> None:
            metrics = result.metrics
            line = (f"update {result.update}: policy version {result.policy_version}, "
                    f"reward {metrics.get('reward_mean', float('nan')):.2f}, success "
                    f"{metrics.get('success_rate', 0.0):.0%}, "
                    f"{metrics.get('update_seconds', 0.0):.1f} s")
            log.write(line + "\n")
            log.flush()
            self.say(f"      {line}")

        def warming_up(progress: Any) -> None:
            line = warmup_line(progress)
            log.write(line + "\n")
            log.flush()
            self.say(f"      {line}")

        try:
            log.write(f"demo run {RUN_ID}: {config.training.updates} updates of "
                      f"{config.model.path}\n")
            run = TrainingRun(config, text, self.workspace, run_id=RUN_ID, progress=False,
                              on_update=updated, on_warmup=warming_up)
            summary = run.run()
            log.write(f"run {summary.run_id}: {summary.status} after {summary.updates} "
                      f"updates; policy version {summary.policy_version}\n")
        finally:
            log.close()
        if summary.status != "done":
            self.notes.append(f"note: training run {RUN_ID} ended {summary.status}")
        return summary.status


DEMO_STOP_WINDOW = 8  # the demo run stops once the median of this many updates is 0.8


def demo_run_config(model: Path, workspace: Path, updates: int) -> str:
    """The demo's run configuration (TOML): the tiny model, warmed up on oracle
    demonstrations of other coloured-buttons tasks, then trained with GRPO on four of them
    shown on small 448x280 sandboxes, with the learning proof's settings; an update takes
    seconds on a CPU and the success curve rises within the run. Every other knob keeps
    its default (`workbench train --example` lists them all)."""
    from trainer.config import parse_run_config

    text = f"""# The demo workspace's training run ({RUN_ID}); another like it starts from the
# Training screen or with
#   workbench --workspace {workspace} train {workspace / EXAMPLE_CONFIG}
# A tiny random model learns to click the named one of four coloured buttons, on four
# tasks with the colours in different cells, so it must read the instruction. The
# warm-up (supervised steps on oracle demonstrations of 64 *other* tasks) teaches the
# action format, not where the colour is, so the first update clicks about at random
# (chance: 0.25); GRPO (8 episodes per task, 32 per update) then moves the clicks onto
# the named button. These are the settings of the learning proof
# (assets/configs/learn-buttons.toml) on 4 desktops; the run stops once the median
# success rate of its last 8 updates is 0.80 or more (at most {updates} updates).

[run]
name = "demo: tiny model learns a buttons task"
seed = 3

[model]
path = {json.dumps(str(model))}
finetune = "full"
cpu_threads = 1

[environments]
count = 4
screen_width = 448
screen_height = 280

[tasks]
buttons = 4
buttons_seed = 46
buttons_grid = [2, 2]

[rollout]
max_steps = 1
max_new_tokens = 32
history_images = 1
max_pixels = 31360
system_prompt = "Click the named button."
temperature = 0.7

[grpo]
num_generations = 8
beta = 0.1  # KL to the warmed-up policy: no collapse once most groups succeed

[curation]
precollected = true
precollect_oracle = 1

[training]
updates = {updates}  # at most
stop_at_success = 0.8
stop_window = {DEMO_STOP_WINDOW}
checkpoint_every = 10
tasks_per_update = 4
learning_rate = 2.5e-3
num_iterations = 4
micro_batch_size = 16

[training.warmup]
steps = 200
learning_rate = 5e-3
episodes = 64
batch_size = 16

[training.warmup.tasks]
buttons = 64
buttons_seed = 1000
buttons_grid = [2, 2]
"""
    parse_run_config(text, "the demo run configuration")  # fails here, not mid-build
    return text


def _solved(outcome: Any) -> bool:
    episode = outcome.episode
    return bool(episode is not None and episode.status == "done"
                and (episode.score or 0.0) >= 1.0)


__all__ = ["EVALUATION", "DemoError", "DemoPlan", "DemoSummary", "build_demo_workspace",
           "demo_complete", "demo_run_config", "read_marker"]
