"""Runtime benchmark: the same workload trained lock-step (ARPO style) and asynchronously
(DART style) on one pool of real sandbox desktops, side by side in one run.

Workload (no model weights):
- N sandbox desktops (`EnvPool` of `SandboxProvider`s, no guest server, small screens);
  the tasks are buttons-family tasks (2x2 grid), so every reset and evaluation is real.
- A scripted policy standing in for generation: it sleeps `--policy-delay` seconds per
  step, moves the pointer to an empty corner (a real `DesktopEnv.step`) and says Done at
  its last step. Episode lengths are long-tailed: min(max_steps, floor(Pareto(alpha)))
  steps, drawn from one seeded stream of jobs that both modes take in the same order.
- A simulated trainer: each update sleeps `--train-seconds` (a GPU update) on a batch of
  `--batch` finished episodes.

Lock-step: per update, roll out a batch with `RolloutRunner.run` (every episode must end)
then train; the desktops idle while training and while the slowest episode finishes.
Asynchronous: the runtime's `EpisodeScheduler` (rollout-wise queue) and `DataManager`
(window of the newest 2 policy versions) with one thread per desktop, as the embedded
runtime runs them; the trainer takes any `--batch` finished episodes, trains and bumps
the version while the desktops keep rolling out.

Figures per mode: wall time, episodes finished and per minute, updates per minute,
environment utilisation (episode time reset->evaluate over N x wall; also the pool's
lease time), trainer idle fraction (time waiting for data over wall); medians over
`--repeats` and the ratios async / lock-step, against DART's reported 5.5x.

Run: `.venv/bin/python bench/runtime.py [--quick] [--json PATH]`. Not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.policies.base import Decision, PolicyError
from agents.rollout import RolloutConfig
from agents.trajectory import Episode
from trainer.rollouts import EpisodeJob, EpisodeOutcome, RolloutRunner
from trainer.runtime.data import DataManager
from trainer.runtime.scheduler import EpisodeScheduler
from trainer.store import Store
from vm.actions import Done, MoveTo
from vm.env import DesktopEnv
from vm.observation import Observation
from vm.pool import EnvPool, PoolClosed
from vm.providers.sandbox import SandboxProvider
from vm.suite.families import button_tasks
from vm.tasks.model import Task
from workbench.signals import sigterm_as_interrupt

DART_ENV_UTILISATION = 5.5  # DART's reported gain in environment utilisation
DART_TRAINING_THROUGHPUT = 1.9
STEPS_KEY = "scripted_steps"  # the job info field holding the episode's drawn length
MAX_VERSION_LAG = 1  # train on the newest 2 versions, as DART does


# -- workload ---------------------------------------------------------------------------


def length_distribution(alpha: float, max_steps: int) -> dict[int, float]:
    """P(length = k) of min(max_steps, floor(Pareto(alpha))), k = 1..max_steps."""
    probs = {k: k ** -alpha - (k + 1) ** -alpha for k in range(1, max_steps)}
    probs[max_steps] = max_steps ** -alpha
    return probs


class JobStream:
    """The seeded sequence of episode jobs: task groups of `group` rollouts of one task,
    each with its own drawn length. Both modes take it in the same order."""

    def __init__(self, tasks: Sequence[Task], group: int, alpha: float, max_steps: int,
                 seed: int) -> None:
        self.tasks = list(tasks)
        self.group = group
        self.alpha = alpha
        self.max_steps = max_steps
        self._rng = random.Random(seed)
        self._groups = 0
        self._lock = threading.Lock()

    def draw_length(self) -> int:
        return min(self.max_steps, int(self._rng.paretovariate(self.alpha)))

    def groups(self, count: int) -> list[EpisodeJob]:
        jobs: list[EpisodeJob] = []
        with self._lock:
            for _ in range(count):
                task = self.tasks[self._groups % len(self.tasks)]
                self._groups += 1
                jobs += [EpisodeJob(task, rollout=r, info={STEPS_KEY: self.draw_length()})
                         for r in range(self.group)]
        return jobs


class ScriptedPolicy:
    """Stands in for a model: `delay` seconds per decision, a pointer move to an empty
    corner, Done at step `steps`. `interrupt()` cuts a pending delay short."""

    name = "scripted-delay"
    source = "rollout"

    def __init__(self, steps: int, delay: float, policy_version: int) -> None:
        self.steps = max(1, steps)
        self.delay = delay
        self.policy_version: int | None = policy_version
        self._index = 0
        self._interrupted = threading.Event()

    def reset(self, task: Any, env: Any) -> None:
        self._index = 0

    def act(self, observation: Observation) -> Decision:
        if self._interrupted.wait(self.delay):
            raise PolicyError("interrupted")
        self._index += 1
        if self._index >= self.steps:
            return Decision(response="DONE", actions=[Done()])
        return Decision(response="moveTo(1, 1)", actions=[MoveTo(1, 1)])

    def interrupt(self) -> None:
        self._interrupted.set()


class Versions:
    """The trainer's current policy version, read by each episode as it starts."""

    def __init__(self) -> None:
        self.current = 0


def job_runner(store: Store, pool: EnvPool, versions: Versions, delay: float,
               run_id: str) -> RolloutRunner:
    """A `RolloutRunner` whose scripted policy takes its episode length from the job and
    its version from `versions` as the episode starts."""
    return RolloutRunner(
        store, pool,
        lambda job: ScriptedPolicy(int(job.info[STEPS_KEY]), delay, versions.current),
        RolloutConfig(max_steps=10_000, environment="sandbox"), run_id=run_id,
        info={"policy": "bench:scripted"})


# -- measurement ------------------------------------------------------------------------


@dataclass
class ModeResult:
    mode: str
    wall: float = 0.0
    updates: int = 0
    episodes_finished: int = 0
    episodes_errors: int = 0
    episode_busy: float = 0.0  # seconds of episodes (reset -> evaluate), clipped to wall
    lease_busy: float = 0.0  # seconds of pool leases (pool.usage)
    trainer_wait: float = 0.0
    trained_steps: list[int] = field(default_factory=list)  # length of each trained episode
    episode_seconds: list[float] = field(default_factory=list)  # finished episodes
    stale_episodes: int = 0
    version_lags: list[int] = field(default_factory=list)
    job_wait: float = 0.0  # async: environment threads waiting for a job (throttled)
    straggler_idle: float = 0.0  # lock-step: env-seconds idle in rollout phases

    def figures(self, size: int) -> dict[str, float]:
        wall = max(self.wall, 1e-9)
        return {
            "wall_s": self.wall,
            "updates": float(self.updates),
            "episodes_finished": float(self.episodes_finished),
            "episodes_per_minute": self.episodes_finished * 60.0 / wall,
            "updates_per_minute": self.updates * 60.0 / wall,
            "env_utilisation": self.episode_busy / (size * wall),
            "env_utilisation_leases": self.lease_busy / (size * wall),
            "trainer_idle_fraction": min(1.0, self.trainer_wait / wall),
            "episode_s_median": (statistics.median(self.episode_seconds)
                                 if self.episode_seconds else 0.0),
            "trained_steps_mean": (statistics.fmean(self.trained_steps)
                                   if self.trained_steps else 0.0),
            "stale_episodes": float(self.stale_episodes),
            "version_lag_mean": (statistics.fmean(self.version_lags)
                                 if self.version_lags else 0.0),
            "errors": float(self.episodes_errors),
            "straggler_idle_fraction": self.straggler_idle / (size * wall),
            "train_idle_fraction": 0.0,  # filled in by the caller for lock-step
            "job_wait_fraction": self.job_wait / (size * wall),
        }


def account(result: ModeResult, episodes: Sequence[Episode | None], start: float,
            end: float) -> None:
    """Episode time within [start, end] (unix seconds) and finished-episode counts."""
    for episode in episodes:
        if episode is None:
            continue
        finished = episode.finished_at if episode.finished_at is not None else end
        result.episode_busy += max(0.0, min(finished, end) - max(episode.created_at, start))
        if episode.status == "aborted" or finished > end:
            continue
        result.episodes_finished += 1
        result.episode_seconds.append(finished - episode.created_at)
        if episode.status == "error":
            result.episodes_errors += 1


def lease_busy(pool: EnvPool) -> float:
    return sum(u.busy_seconds for u in pool.usage())


def run_lockstep(pool: EnvPool, store: Store, stream: JobStream, args: argparse.Namespace,
                 label: str) -> ModeResult:
    result = ModeResult("lock-step")
    versions = Versions()
    run_id = store.runs.create(name=label, kind="train").id
    runner = job_runner(store, pool, versions, args.policy_delay, run_id)
    groups = args.batch // args.group
    busy_mark = lease_busy(pool)
    start, started = time.time(), time.perf_counter()
    episodes: list[Episode | None] = []
    for _ in range(args.updates):
        jobs = stream.groups(groups)
        phase = time.perf_counter()
        outcomes = runner.run(jobs)
        phase_seconds = time.perf_counter() - phase
        batch = [o.episode for o in outcomes if o.episode is not None]
        episodes += batch
        result.trainer_wait += phase_seconds
        phase_busy = sum((e.finished_at or time.time()) - e.created_at for e in batch)
        result.straggler_idle += max(0.0, pool.size * phase_seconds - phase_busy)
        store.runs.consume(run_id, [e.id for e in batch], versions.current)
        result.trained_steps += [len(e.steps) for e in batch if e.status == "done"]
        time.sleep(args.train_seconds)  # the GPU update
        versions.current += 1
        result.updates += 1
    result.wall = time.perf_counter() - started
    account(result, episodes, start, time.time())
    result.lease_busy = lease_busy(pool) - busy_mark
    return result


class AsyncRuntime:
    """The embedded runtime's environment side with a scripted policy: one thread per
    desktop takes the next job from the `EpisodeScheduler` as soon as its episode ends
    and records the outcome with the `DataManager` (as `AsyncTrainingRun` does)."""

    def __init__(self, pool: EnvPool, store: Store, stream: JobStream,
                 args: argparse.Namespace, label: str) -> None:
        self.pool = pool
        self.versions = Versions()
        self.run_id = store.runs.create(name=label, kind="train").id
        self.runner = job_runner(store, pool, self.versions, args.policy_delay,
                                 self.run_id)
        self.data = DataManager(store, self.run_id, max_version_lag=MAX_VERSION_LAG)
        self.tasks_per_update = args.batch // args.group
        # as the embedded runtime: no more groups outstanding than the window can train
        limit = self.tasks_per_update * (MAX_VERSION_LAG + 1)
        per_plan = max(1, math.ceil(pool.size / args.group))
        self.scheduler = EpisodeScheduler(
            lambda: stream.groups(per_plan), low_water=pool.size,
            on_planned=self.data.expect, may_plan=lambda: self.data.open_groups() < limit)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.episodes: list[Episode | None] = []
        self.job_wait = 0.0
        self.errors: list[str] = []

    def start(self) -> None:
        for index in range(self.pool.size):
            thread = threading.Thread(target=self._environment_loop, daemon=True,
                                      name=f"bench-environment-{index}")
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self.scheduler.close()
        self.runner.cancel()
        for thread in self._threads:
            thread.join(timeout=60)

    def _environment_loop(self) -> None:
        while not self._stopping.is_set():
            waiting = time.perf_counter()
            job = self.scheduler.next_job(timeout=0.5)
            with self._lock:
                self.job_wait += time.perf_counter() - waiting
            if job is None:
                continue
            try:
                outcome = self.runner.run_one(job)
            except PoolClosed as exc:
                self.errors.append(str(exc))
                return
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                outcome = EpisodeOutcome(job, None, str(exc))
            with self._lock:
                self.episodes.append(outcome.episode)
            self.data.record(outcome)

    def train(self, updates: int, train_seconds: float) -> ModeResult:
        result = ModeResult("async")
        busy_mark = lease_busy(self.pool)
        start, started = time.time(), time.perf_counter()
        self.start()
        try:
            for _ in range(updates):
                waiting = time.perf_counter()
                while True:
                    batch = self.data.take(self.tasks_per_update, self.versions.current,
                                           timeout=0.5)
                    if batch is not None:
                        break
                    if not any(t.is_alive() for t in self._threads):
                        raise RuntimeError(f"every environment thread stopped: {self.errors}")
                self.scheduler.wake()
                result.trainer_wait += time.perf_counter() - waiting
                result.trained_steps += [len(e.steps) for e in batch.episodes
                                         if e.status == "done"]
                result.stale_episodes += batch.stale_episodes
                result.version_lags += batch.version_lags()
                time.sleep(train_seconds)  # the GPU update; rollouts go on meanwhile
                self.versions.current += 1
                result.updates += 1
            result.wall = time.perf_counter() - started
            end = time.time()
            result.lease_busy = lease_busy(self.pool) - busy_mark
        finally:
            self.stop()
        with self._lock:
            account(result, self.episodes, start, end)
            result.job_wait = self.job_wait
        return result


# -- report -----------------------------------------------------------------------------


ROWS: list[tuple[str, str, str]] = [  # key, label, format
    ("wall_s", "wall (s)", "{:.1f}"),
    ("updates", "updates", "{:.0f}"),
    ("episodes_finished", "episodes finished", "{:.0f}"),
    ("episodes_per_minute", "episodes per minute", "{:.1f}"),
    ("updates_per_minute", "updates per minute (training throughput)", "{:.2f}"),
    ("env_utilisation", "environment utilisation (reset->evaluate)", "{:.1%}"),
    ("env_utilisation_leases", "environment utilisation (pool leases)", "{:.1%}"),
    ("trainer_idle_fraction", "trainer idle fraction (waiting for data)", "{:.1%}"),
    ("episode_s_median", "episode seconds, median", "{:.2f}"),
    ("trained_steps_mean", "steps per trained episode, mean", "{:.2f}"),
    ("version_lag_mean", "version lag of trained episodes, mean", "{:.2f}"),
    ("stale_episodes", "stale episodes (outside the window)", "{:.0f}"),
    ("errors", "episodes ending in error", "{:.0f}"),
]
RATIOS = {"wall_s", "episodes_per_minute", "updates_per_minute", "env_utilisation",
          "env_utilisation_leases", "trainer_idle_fraction", "episode_s_median"}


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def print_table(lock: dict[str, float], conc: dict[str, float], repeats: int) -> None:
    print(f"\nmedians over {repeats} repeat(s)")
    print(f"{'metric':44} {'lock-step':>10} {'async':>10} {'async/lock':>11}")
    for key, label, fmt in ROWS:
        ratio = (f"{conc[key] / lock[key]:10.2f}x" if key in RATIOS and lock[key] > 0
                 else f"{'-':>11}")
        print(f"{label:44} {fmt.format(lock[key]):>10} {fmt.format(conc[key]):>10} {ratio}")


def bound_lines(lock: dict[str, float], conc: dict[str, float],
                args: argparse.Namespace) -> list[str]:
    """What limits the utilisation ratio here, from the measured figures."""
    ratio = conc["env_utilisation"] / max(lock["env_utilisation"], 1e-9)
    ceiling = 1.0 / max(lock["env_utilisation"], 1e-9)
    waste = 1.0 - lock["env_utilisation"]
    throughput = conc["updates_per_minute"] / max(lock["updates_per_minute"], 1e-9)
    lines = [f"DART reference: {DART_ENV_UTILISATION}x environment utilisation "
             f"({DART_TRAINING_THROUGHPUT}x training throughput); measured here: "
             f"{ratio:.2f}x ({throughput:.2f}x)."]
    if ratio >= DART_ENV_UTILISATION:
        return lines
    # lock-step env time: busy + idle during training + idle waiting for stragglers
    # (+ a little outside both: runner set-up, store writes)
    lines.append(
        f"Bound: with a {args.train_seconds:g} s trainer and batch {args.batch} "
        f"({args.envs} desktops), lock-step wastes {waste:.0%} of environment time "
        f"({lock['train_idle_fraction']:.0%} idle during training, "
        f"{lock['straggler_idle_fraction']:.0%} waiting for the slowest episode), so even a "
        f"100%-busy async run gains at most 1/{lock['env_utilisation']:.2f} = {ceiling:.2f}x; "
        f"async reached {conc['env_utilisation']:.0%} "
        f"({conc['job_wait_fraction']:.0%} of environment time waiting for a job).")
    # the trainer update at which lock-step would sit at 1/5.5 utilisation, everything
    # else (rollout phases) as measured
    rollout_wall = lock["wall_s"] - lock["updates"] * args.train_seconds
    busy = lock["env_utilisation"] * lock["wall_s"]  # per desktop
    needed_wall = busy * DART_ENV_UTILISATION
    if lock["updates"] > 0 and needed_wall > rollout_wall:
        train_needed = (needed_wall - rollout_wall) / lock["updates"]
        lines.append(f"For {DART_ENV_UTILISATION}x, lock-step utilisation must fall to "
                     f"{1 / DART_ENV_UTILISATION:.0%}: at these rollout phases that takes a "
                     f"~{train_needed:.0f} s update (or longer rollout phases: a longer tail, "
                     f"a slower policy), with async still near 100% busy.")
    return lines


# -- main -------------------------------------------------------------------------------


def parse_size(text: str) -> tuple[int, int]:
    width, _, height = text.lower().partition("x")
    return int(width), int(height)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=4, help="desktops in the pool (N)")
    parser.add_argument("--policy-delay", type=float, default=0.3,
                        help="seconds per policy decision (stands in for generation)")
    parser.add_argument("--max-steps", type=int, default=15, help="longest episode")
    parser.add_argument("--alpha", type=float, default=1.2,
                        help="Pareto tail index of the episode length (smaller: longer tail)")
    parser.add_argument("--train-seconds", type=float, default=2.0,
                        help="seconds per trainer update (stands in for a GPU update)")
    parser.add_argument("--batch", type=int, default=None,
                        help="episodes per update (default 2 x envs)")
    parser.add_argument("--group", type=int, default=1,
                        help="rollouts per task group (the batch is whole groups)")
    parser.add_argument("--updates", type=int, default=None, help="updates per mode")
    parser.add_argument("--repeats", type=int, default=1,
                        help="repeats, each running both modes in alternation")
    parser.add_argument("--screen", type=parse_size, default=(448, 280), help="WxH")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="fewer updates (smoke run)")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args()
    args.batch = args.batch or 2 * args.envs
    args.updates = args.updates or (3 if args.quick else 8)
    if args.batch % args.group:
        parser.error(f"--batch {args.batch} must be a multiple of --group {args.group}")
    if min(args.envs, args.batch, args.updates, args.repeats, args.max_steps) < 1:
        parser.error("--envs, --batch, --updates, --repeats and --max-steps must be >= 1")

    probs = length_distribution(args.alpha, args.max_steps)
    mean = sum(k * p for k, p in probs.items())
    print(f"workload: {args.envs} sandbox desktops {args.screen[0]}x{args.screen[1]}, "
          f"buttons tasks (grid 2x2); policy {args.policy_delay:g} s per step; trainer "
          f"{args.train_seconds:g} s per update on {args.batch} episodes "
          f"(groups of {args.group}); {args.updates} updates per mode")
    print(f"episode length: min({args.max_steps}, floor(Pareto(alpha={args.alpha:g}))) steps "
          f"(the last one Done): P(1-3) = {sum(probs[k] for k in range(1, 4)):.0%}, "
          f"P({args.max_steps}) = {probs[args.max_steps]:.1%}, mean {mean:.2f}")

    sigterm_as_interrupt()  # Ctrl-C and SIGTERM both end in the finally below
    workspace = Path(tempfile.mkdtemp(prefix="bench-runtime-"))
    tasks = button_tasks(16, seed=args.seed, screen_size=args.screen, grid=(2, 2))
    # no health monitor: its checks would take idle desktops out of the busy/idle figures
    pool = EnvPool(lambda i: DesktopEnv(SandboxProvider(
        f"bench-rt{i}", workspace / "sandboxes", screen_size=args.screen,
        guest_server=False)), args.envs, health_interval=None)
    runs: dict[str, list[dict[str, float]]] = {"lock-step": [], "async": []}
    drawn: list[int] = []
    try:
        started = time.perf_counter()
        pool.start()
        print(f"pool of {args.envs} desktops up in {time.perf_counter() - started:.1f} s")
        with Store.open(workspace / "store") as store:
            # warm-up: one episode per desktop (first launches of the task app)
            warm = JobStream(tasks, 1, args.alpha, 2, args.seed + 999)
            run_id = store.runs.create(name="warm-up", kind="rollout").id
            job_runner(store, pool, Versions(), 0.0, run_id).run(warm.groups(args.envs))
            for repeat in range(args.repeats):
                order = ["lock-step", "async"] if repeat % 2 == 0 else ["async", "lock-step"]
                for mode in order:
                    stream = JobStream(tasks, args.group, args.alpha, args.max_steps,
                                       args.seed + repeat)
                    label = f"{mode}-{repeat}"
                    if mode == "lock-step":
                        result = run_lockstep(pool, store, stream, args, label)
                    else:
                        result = AsyncRuntime(pool, store, stream, args, label).train(
                            args.updates, args.train_seconds)
                    figures = result.figures(args.envs)
                    if mode == "lock-step":
                        figures["train_idle_fraction"] = (
                            result.updates * args.train_seconds / max(result.wall, 1e-9))
                    runs[mode].append(figures)
                    print(f"repeat {repeat + 1}/{args.repeats} {mode:9}: "
                          f"{figures['wall_s']:.1f} s, {result.updates} updates, "
                          f"{result.episodes_finished} episodes, utilisation "
                          f"{figures['env_utilisation']:.0%}, trainer idle "
                          f"{figures['trainer_idle_fraction']:.0%}")
                    if repeat == 0 and mode == "lock-step":
                        drawn = result.trained_steps
    except KeyboardInterrupt:
        print("\ninterrupted: closing the desktops", file=sys.stderr)
        return 130
    finally:
        pool.close()
        shutil.rmtree(workspace, ignore_errors=True)

    lock, conc = medians(runs["lock-step"]), medians(runs["async"])
    if drawn:
        counts = Counter(drawn)
        print("steps of the lock-step episodes (both modes draw the same stream): "
              + ", ".join(f"{k}: {counts[k]}" for k in sorted(counts)))
    print_table(lock, conc, args.repeats)
    print()
    lines = bound_lines(lock, conc, args)
    for line in lines:
        print(line)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()
                  if k != "json"}
        ratios = {k: conc[k] / lock[k] for k in sorted(RATIOS) if lock[k] > 0}
        args.json.write_text(json.dumps({
            "config": config, "length_distribution": probs, "runs": runs,
            "medians": {"lock-step": lock, "async": conc}, "ratios_async_over_lockstep": ratios,
            "dart_reference": {"env_utilisation": DART_ENV_UTILISATION,
                               "training_throughput": DART_TRAINING_THROUGHPUT},
            "bound": lines}, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
