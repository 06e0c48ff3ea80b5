"""Training runs as the Training screen sees them: where a run's configuration and log
live, the command line that starts or resumes the trainer, the list of runs with their
checkpoints, and metric series read incrementally for live plots. Qt-free.

The trainer always runs as its own process (`workbench train CONFIG --run-id RUN`); the
app writes the run configuration file that process reads, follows the run through the
store, and cleans up after a trainer it had to kill.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shlex
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainer.config import ConfigError, RunConfig, parse_run_config, run_config_toml
from trainer.environments import is_run_desktop
from trainer.store import Store, StoreError
from trainer.store.layout import WORKSPACE_ENV, WorkspaceLayout
from trainer.store.runs import Checkpoint, MetricPoint, Run
from vm.atomic_write import write_atomic
from workbench.services.cluster_status import ClusterReading, read_cluster

RUN_CONFIG_FILE = "run_config.toml"  # runs/<run>/run_config.toml: what the trainer read
TRAINER_LOG_FILE = "trainer.log"  # runs/<run>/trainer.log: the trainer's output
CONFIGS_FOLDER = "configs"  # <workspace>/configs/: configurations saved from the form
STOPPED_EXIT_CODE = 130  # `workbench train` after Ctrl-C: checkpoint saved, run "stopped"
PER_TASK_PREFIX = "success_rate/"  # per-task success metrics: success_rate/<task id>

# -- files of a run -----------------------------------------------------------------------


def new_run_id() -> str:
    """A fresh run id in the store's own format (time, then a random suffix)."""
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


DEFAULT_RUN_NAME = "run"
_NUMBERED_NAME = re.compile(r"^(?P<base>.*?)\s*#(?P<number>\d+)$")


def next_run_name(name: str, taken: Iterable[str]) -> str:
    """A run name like `name` that no run of the workspace has: "<base> #<n>" with n one
    above the highest number already given to that base ("run #1", "run #2", ...; a form
    prefilled from "lr sweep #3" offers "lr sweep #4"). `taken`: the names and ids of the
    workspace's runs."""
    found = _NUMBERED_NAME.match(name.strip())
    base = (found.group("base") if found else name.strip()) or DEFAULT_RUN_NAME
    taken = {t.strip() for t in taken}
    numbers = [0]
    for other in taken:
        match = _NUMBERED_NAME.match(other)
        if match and match.group("base") == base:
            numbers.append(int(match.group("number")))
        elif other == base:
            numbers.append(1)
    number = max(numbers) + 1
    while f"{base} #{number}" in taken:  # (only if a number was written by hand oddly)
        number += 1
    return f"{base} #{number}"


_TABLE_HEADER = re.compile(r"^\s*\[")
_NAME_LINE = re.compile(r"""^(\s*name\s*=\s*)("(?:[^"\\]|\\.)*"|'[^']*')(.*)$""")


def with_run_name(text: str, name: str) -> str:
    """The run configuration file's text with `run.name` set to `name`, the rest of the
    file (comments, order) as it was; a file this cannot edit in place is written anew."""
    lines = text.splitlines(keepends=True)
    value = json.dumps(name)  # a TOML basic string: the same escapes
    start = next((i for i, line in enumerate(lines) if line.strip() == "[run]"), None)
    edited: list[str] | None = None
    if start is None:
        edited = [f"[run]\nname = {value}\n\n", *lines]
    else:
        end = next((i for i in range(start + 1, len(lines))
                    if _TABLE_HEADER.match(lines[i])), len(lines))
        for i in range(start + 1, end):
            found = _NAME_LINE.match(lines[i].rstrip("\n"))
            if found:
                ending = "\n" if lines[i].endswith("\n") else ""
                edited = [*lines[:i], f"{found.group(1)}{value}{found.group(3)}{ending}",
                          *lines[i + 1:]]
                break
        else:
            edited = [*lines[:start + 1], f"name = {value}\n", *lines[start + 1:]]
    result = "".join(edited)
    try:
        if parse_run_config(result).run.name == name:
            return result
    except ConfigError:
        pass
    config = parse_run_config(text)
    return run_config_toml(dataclasses.replace(
        config, run=dataclasses.replace(config.run, name=name)))


def run_config_path(workspace: Path, run_id: str) -> Path:
    return WorkspaceLayout(Path(workspace)).run_dir(run_id) / RUN_CONFIG_FILE


def trainer_log_path(workspace: Path, run_id: str) -> Path:
    return WorkspaceLayout(Path(workspace)).run_dir(run_id) / TRAINER_LOG_FILE


def configs_folder(workspace: Path) -> Path:
    return Path(workspace) / CONFIGS_FOLDER


def check_run_workspace(config: RunConfig, workspace: Path, where: str) -> None:
    """The app trains in its open workspace: a configuration naming another one would send
    the run's metrics where the app does not look."""
    named = config.run.workspace
    if named and Path(named).expanduser().resolve() != Path(workspace).resolve():
        raise ConfigError(f"{where}.run.workspace: the app trains in the open workspace "
                          f"{workspace}; expected '' or that folder, got {named!r}")


def save_run_config(path: Path, text: str) -> RunConfig:
    """Validate `text` as a run configuration and write it to `path` atomically (temp
    file + rename); ConfigError names the file and field when it does not fit."""
    config = parse_run_config(text, str(path))
    write_atomic(path, text)
    return config


def config_for_resume(store: Store, run_id: str) -> Path:
    """The configuration file a resumed run reads: the one it was started with, written
    back from the store when the run was started elsewhere (the command line)."""
    path = run_config_path(store.layout.root, run_id)
    if path.is_file():
        return path
    run = store.runs.get(run_id)
    if not run.config.strip():
        raise ConfigError(f"run {run_id}: the store holds no run configuration to resume "
                          f"with")
    save_run_config(path, run.config)
    return path


def read_tail(path: Path, max_bytes: int = 64_000) -> str:
    """The end of a text file (a run's log), at most `max_bytes`; '' when there is none."""
    try:
        with path.open("rb") as source:
            source.seek(0, os.SEEK_END)
            size = source.tell()
            source.seek(max(0, size - max_bytes))
            data = source.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if len(data) >= max_bytes and "\n" in text:
        text = text.split("\n", 1)[1]  # drop the partial first line
    return text


def terminal_lines(text: str) -> list[str]:
    """Output lines as a terminal would leave them: a carriage return (progress bars)
    overwrites the line, so only what follows the last one stays."""
    return [line.rsplit("\r", 1)[-1] for line in text.split("\n")]


# -- the trainer process -----------------------------------------------------------------


@dataclass(frozen=True)
class TrainerCommand:
    """How to start `workbench train` for one run (program, arguments, extra environment)."""

    program: str
    arguments: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)

    def display(self) -> str:
        return shlex.join([self.program, *self.arguments])


def trainer_command(workspace: Path, config: Path, run_id: str, *, resume: bool = False,
                    python: str | None = None) -> TrainerCommand:
    """`python -m workbench train CONFIG --run-id RUN [--resume RUN]` on `workspace`.

    A frozen build (packaging/) is itself the `workbench` command, so it gets the
    sub-command without `-m workbench`."""
    program = python or sys.executable
    frozen = python is None and bool(getattr(sys, "frozen", False))
    arguments = ([] if frozen else ["-m", "workbench"]) + [
        "train", str(config), "--run-id", run_id]
    if resume:
        arguments += ["--resume", run_id]
    environment = {WORKSPACE_ENV: str(Path(workspace).resolve()),
                   "PYTHONUNBUFFERED": "1",  # lines reach the log tail as they are written
                   "TQDM_DISABLE": "1"}  # progress bars are for terminals, not a log
    return TrainerCommand(program, tuple(arguments), environment)


def exit_summary(exit_code: int, crashed: bool) -> str:
    """What a trainer's exit status means, in words."""
    if crashed:
        return "the trainer process ended abnormally (killed or crashed)"
    if exit_code == 0:
        return "the run finished"
    if exit_code == STOPPED_EXIT_CODE:
        return "the run stopped (checkpoint saved)"
    return f"the trainer failed (exit status {exit_code}); see the log"


def episodes_outcome(store: Store, run_id: str) -> str:
    """What a run that finished did with its episodes, when that is not a success: ""
    unless every episode ended in an error (e.g. each task's setup raised), which then
    says how many and the first reason. A run whose episodes all failed is not "finished"
    to a person, whatever the trainer's exit status."""
    from trainer.store import EpisodeFilter

    total = store.queries.count(EpisodeFilter(run_ids=[run_id]))
    errors = store.queries.page(EpisodeFilter(run_ids=[run_id], statuses=["error"]),
                                limit=1)
    if not total or store.queries.count(EpisodeFilter(run_ids=[run_id],
                                                      statuses=["error"])) < total:
        return ""
    reason = errors[0].error if errors and errors[0].error else "no reason recorded"
    return (f"but every one of its {total} episode(s) ended in an error (the first: "
            f"{reason}); see Trajectories, status error")


def finish_abandoned_run(store: Store, run_id: str, status: str) -> bool:
    """Give a run whose trainer was killed (so it could not say how it ended) `status`;
    False when the run is unknown or already ended."""
    try:
        run = store.runs.get(run_id)
    except StoreError:  # no such run: the trainer died before creating it
        return False
    if run.status not in ("created", "running"):
        return False
    store.runs.set_status(run_id, status)
    return True


def stop_run_sandboxes(workspace: Path, run_id: str) -> list[str]:
    """Stop the sandboxes a killed trainer left running (`train-<run>-<n>`); their names."""
    from vm.errors import EnvironmentDead
    from vm.providers.sandbox import SandboxProvider

    root = Path(workspace) / "sandboxes"
    stopped = []
    for state in sorted(root.glob("*/state.json")):
        name = state.parent.name
        if not is_run_desktop(name, run_id):  # run "a" leaves run "a-1"'s alone
            continue
        try:
            SandboxProvider.attach(name, workspace).stop()
        except EnvironmentDead:
            continue
        stopped.append(name)
    return stopped


# -- runs and checkpoints ------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow:
    """One run in the past-runs table."""

    id: str
    name: str
    kind: str
    status: str
    created_at: float
    finished_at: float | None
    latest_version: int | None
    checkpoints: int

    @property
    def title(self) -> str:
        return self.name or self.id

    @property
    def resumable(self) -> bool:
        """A training run that ended without finishing (stopped, failed) can continue."""
        return self.kind == "train" and self.status in ("stopped", "failed")


def list_runs(store: Store) -> list[RunRow]:
    """Every run of the workspace, newest first, with its newest policy version (two
    queries, whatever the number of runs: the screen reads this every second)."""
    return _read_runs(store)[1]


def distinct_titles(runs: Sequence[RunRow]) -> dict[str, str]:
    """Each run's title (id -> title), made distinct: runs sharing a name get their start
    time after it, and their id as well where that is shared too."""
    by_title: dict[str, list[RunRow]] = {}
    for run in runs:
        by_title.setdefault(run.title, []).append(run)
    titles = {}
    for title, same in by_title.items():
        if len(same) == 1:
            titles[same[0].id] = title
            continue
        started = {run.id: time.strftime("%m-%d %H:%M", time.localtime(run.created_at))
                   for run in same}
        for run in same:
            twins = sum(1 for other in same if started[other.id] == started[run.id])
            titles[run.id] = f"{title} · {started[run.id]}" + (
                f" · {run.id}" if twins > 1 else "")
    return titles


def _read_runs(store: Store) -> tuple[list[Run], list[RunRow]]:
    with store.database.read():
        runs = store.runs.all()
        counts = {row["run_id"]: (row["latest"], row["saved"]) for row in store.database.rows(
            "SELECT run_id, MAX(policy_version) AS latest, COUNT(*) AS saved "
            "FROM checkpoints GROUP BY run_id")}
    return runs, [_run_row(run, *counts.get(run.id, (None, 0))) for run in runs]


def _run_row(run: Run, latest: int | None, saved: int) -> RunRow:
    return RunRow(run.id, run.name, run.kind, run.status, run.created_at, run.finished_at,
                  None if latest is None else int(latest), int(saved))


# -- metrics -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlotSpec:
    """One live plot: its title and the metrics drawn on it (`per_task`: a heatmap of
    every success_rate/<task> metric instead)."""

    title: str
    names: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()  # legend entries, one per name
    per_task: bool = False
    note: str = ""  # shown while the run has none of these metrics


PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec("Reward", ("reward_mean",), ("mean",)),
    PlotSpec("Success rate", ("success_rate", "heldout/success_rate"),
             ("training", "held-out")),
    PlotSpec("Error rates", ("format_error_rate", "error_rate", "setup_failed_rate"),
             ("unparsable reply", "episode error", "setup failed")),
    PlotSpec("Per-task success", per_task=True),
    PlotSpec("Entropy", ("entropy",), ("token mean",)),
    PlotSpec("KL", ("kl", "policy_kl"), ("k3 to the reference", "moved in the update"),
             note="needs grpo.beta > 0 or training.num_iterations > 1"),
    PlotSpec("IS ratio", ("is_ratio_min", "is_ratio_mean", "is_ratio_max"),
             ("min", "mean", "max")),
    PlotSpec("Clip fraction", ("clip_fraction",), ("clipped tokens",)),
    PlotSpec("Grad norm", ("grad_norm",), ("before clipping",)),
    PlotSpec("Tokens / s", ("rollout_tokens_per_second",
                                       "train_tokens_per_second"), ("rollout", "train")),
    PlotSpec("Episodes / min", ("episodes_per_minute",), ("finished",)),
    PlotSpec("Env. utilisation", ("env_utilisation",), ("busy fraction",),
             note="asynchronous runs"),
    PlotSpec("Policy version", ("policy_version",), ("published",)),
)


WARMUP_METRIC = "warmup_nll"  # logged at each warm-up step (trainer/loop.py _warmup)


class MetricHistory:
    """The metric series of one run, grown point by point as the store gains rows.

    `last_step` is the newest training step seen: the next read asks only for rows after
    it (a step's metrics are written in one transaction, so a step seen is complete).
    Episodes per minute is derived for runs that do not write it (the lock-step loop:
    episodes / update_seconds)."""

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id
        self.last_step: int | None = None
        self.points = 0
        self._series: dict[str, tuple[list[int], list[float]]] = {}

    def add(self, points: Iterable[MetricPoint]) -> int:
        """Add points (in step order); returns how many were new."""
        added = 0
        by_step: dict[int, dict[str, float]] = {}
        for point in points:
            if self.last_step is not None and point.step <= self.last_step:
                continue
            if point.value is None or not math.isfinite(point.value):
                continue
            steps, values = self._series.setdefault(point.name, ([], []))
            steps.append(point.step)
            values.append(point.value)
            by_step.setdefault(point.step, {})[point.name] = point.value
            added += 1
        for step, values_at in sorted(by_step.items()):
            episodes, seconds = values_at.get("episodes"), values_at.get("update_seconds")
            if "episodes_per_minute" not in values_at and episodes is not None \
                    and seconds and seconds > 0:
                steps, values = self._series.setdefault("episodes_per_minute", ([], []))
                steps.append(step)
                values.append(episodes * 60.0 / seconds)
        if by_step:
            newest = max(by_step)
            self.last_step = newest if self.last_step is None else max(self.last_step, newest)
        self.points += added
        return added

    def names(self) -> list[str]:
        return sorted(self._series)

    def warmup(self) -> tuple[int, int] | None:
        """(steps done, steps in all) while the run is in its supervised warm-up, else
        None. The trainer logs the warm-up's N steps at updates -N .. -1 (update 0 is the
        first of GRPO), so the first warm-up point says how many there are."""
        if self.last_step is None or self.last_step >= 0:
            return None
        steps = self._series.get(WARMUP_METRIC, ([], []))[0]
        if not steps:
            return None
        total = -min(steps)
        return self.last_step - min(steps) + 1, total

    def series(self, name: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one metric; empty lists when the run has none."""
        steps, values = self._series.get(name, ([], []))
        return list(steps), list(values)

    def latest(self, name: str) -> float | None:
        found = self._series.get(name)
        return found[1][-1] if found and found[1] else None

    def task_ids(self) -> list[str]:
        return sorted(n[len(PER_TASK_PREFIX):] for n in self._series
                      if n.startswith(PER_TASK_PREFIX))

    def task_grid(self) -> tuple[list[str], list[int], list[list[float]]]:
        """(task ids, steps, rows): the per-task success rate at each step (NaN where a
        task was not rolled out at that step) for a heatmap."""
        tasks = self.task_ids()
        steps = sorted({s for t in tasks for s in self._series[PER_TASK_PREFIX + t][0]})
        column = {step: i for i, step in enumerate(steps)}
        rows = []
        for task in tasks:
            row = [math.nan] * len(steps)
            for step, value in zip(*self._series[PER_TASK_PREFIX + task], strict=True):
                row[column[step]] = value
            rows.append(row)
        return tasks, steps, rows


def read_new_metrics(store: Store, run_id: str, after_step: int | None) -> list[MetricPoint]:
    """The run's metric rows after `after_step` (all of them for None), in step order."""
    return store.runs.metrics(run_id, after_step=after_step)


@dataclass(frozen=True)
class RunsSnapshot:
    """What one poll of the store found: the runs, the chosen run's checkpoints and cluster
    picture (a Ray run's), and, for each plotted run, its metric rows newer than the last
    step seen (`after`) and the text of its run configuration."""

    runs: list[RunRow]
    run_id: str | None  # the chosen run (checkpoints, log)
    after: dict[str, int | None]  # the plotted runs, each with the last step seen
    checkpoints: list[Checkpoint]
    points: dict[str, list[MetricPoint]]
    configs: dict[str, str]
    cluster: ClusterReading | None = None  # None: no run chosen


def poll_runs(store: Store, run_id: str | None, after: Mapping[str, int | None]
              ) -> RunsSnapshot:
    """One cheap read for the Training screen's timer (indexed queries only): the runs,
    `run_id`'s checkpoints and cluster file, and the new metrics of every run in `after`
    (the plotted ones)."""
    with store.database.read():
        runs, rows = _read_runs(store)
        known = {run.id for run in runs}
        configs = {run.id: run.config for run in runs if run.id in after}
        checkpoints = store.runs.checkpoints(run_id) if run_id in known else []
        points = {plotted: read_new_metrics(store, plotted, step)
                  for plotted, step in after.items() if plotted in known}
    cluster = read_cluster(store.layout.run_dir(run_id)) if run_id else None
    return RunsSnapshot(rows, run_id, dict(after), checkpoints, points, configs, cluster)


# -- configuration errors ------------------------------------------------------------------

_FIELD_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def error_field(message: str, known: Sequence[str]) -> str | None:
    """The configuration field a ConfigError message names, among `known` dotted paths
    (e.g. 'grpo.num_generations'); the most specific one mentioned, or None."""
    found = None
    for candidate in _FIELD_PATH.findall(message):
        for path in known:
            if (candidate == path or candidate.endswith("." + path)) and (
                    found is None or len(path) > len(found)):
                found = path
    return found
