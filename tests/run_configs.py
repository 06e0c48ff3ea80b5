"""Small run configurations for tests that train the tiny model on sandboxes: two
buttons tasks on 448x280 screens, groups of two, LoRA with a KL term."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.tiny_models import tiny_qwen25_vl

if TYPE_CHECKING:
    from trainer.loop import TrainingRun

SYSTEM_PROMPT = "Click the named button."
# A run this long cannot end by itself within a test: a test that interrupts it is sure the
# interrupt, not the end of the run, stopped it (resume it with a shorter `updates`).
UNENDING_UPDATES = 100_000


def tiny_run_config(updates: int, *, seed: int = 3, model: Path | None = None,
                    max_steps: int = 2, temperature: float = 1.0, warmup_steps: int = 0,
                    warmup_learning_rate: float = 1e-4, lora_dropout: float = 0.05,
                    rollout: str = "", extra: str = "") -> str:
    """The TOML text; `rollout` is added to [rollout] (more lines), `extra` is appended
    (more sections, e.g. [runtime])."""
    warmup = "" if not warmup_steps else f"""
[training.warmup]
steps = {warmup_steps}
learning_rate = {warmup_learning_rate}
episodes = 2
batch_size = 2
[training.warmup.tasks]
buttons = 2
buttons_seed = 100
buttons_grid = [2, 2]
"""
    return f"""
[run]
seed = {seed}
[model]
path = "{model or tiny_qwen25_vl()}"
finetune = "lora"
[model.lora]
r = 4
alpha = 8
dropout = {lora_dropout}
[environments]
count = 2
screen_width = 448
screen_height = 280
[tasks]
buttons = 2
buttons_grid = [2, 2]
[rollout]
max_steps = {max_steps}
max_new_tokens = 12
temperature = {temperature}
history_images = 2
max_pixels = 31360
system_prompt = "{SYSTEM_PROMPT}"
stop_on_parse_error = false
{rollout}
[grpo]
num_generations = 2
beta = 0.05
[training]
updates = {updates}
tasks_per_update = 2
learning_rate = 1e-3
micro_batch_size = 2
{warmup}{extra}"""


def ray_runtime(resource: str, *, address: str = "auto", env_num_cpus: float = 0.0,
                env_workdir: str = "", start_timeout: float = 600.0) -> str:
    """The [runtime] sections of a Ray run (for `tiny_run_config(extra=...)`): environment
    actors on the nodes offering `resource`, each asking for `env_num_cpus`; the rollout
    worker asks for one CPU."""
    return f"""[runtime]
mode = "ray"
max_version_lag = 1
[runtime.ray]
address = "{address}"
env_resource = "{resource}"
env_num_cpus = {env_num_cpus}
rollout_num_cpus = 1.0
env_workdir = "{env_workdir}"
start_timeout = {start_timeout}
"""


def with_environments(text: str, count: int) -> str:
    """The run configuration `text` with `count` environments."""
    from dataclasses import replace

    from trainer.config import parse_run_config, run_config_toml

    config = parse_run_config(text)
    return run_config_toml(replace(config, environments=replace(config.environments,
                                                                count=count)))


def ignoring_sigint(command: list[str]) -> list[str]:
    """`command` started with SIGINT ignored, as a background job of a shell script (or
    anything under nohup) starts: `workbench` must still stop on Ctrl-C. (A test run
    started that way once made every Ctrl-C test fail; this makes it the only way.)"""
    return ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]


# How long a stopping run may take to exit: a safety net for a hang, not a race (the
# stop waits for the running episodes to end and saves a checkpoint: 4.5 s measured
# alone, one update in; slower beside a second copy of the suite).
STOP_DEADLINE = 300


def train_then_interrupt(config: Path, workspace: Path, run_id: str,
                         signum: int = signal.SIGINT) -> tuple[int, str]:
    """`workbench train CONFIG --run-id RUN_ID` in its own process (started with SIGINT
    ignored), sent Ctrl-C (SIGINT; or `signum`, e.g. SIGTERM) once its first update's
    metrics are in the store: (exit status, output)."""
    import os
    import subprocess
    import sys

    from tests.conftest import wait_until
    from trainer.store import Store
    from vm.providers.sandbox import SandboxProvider

    command = ignoring_sigint([sys.executable, "-m", "workbench", "--workspace",
                               str(workspace), "train", str(config), "--run-id", run_id])
    # PYTHONFAULTHANDLER: a process that has not ended by the deadline is sent SIGABRT,
    # and the stack of each of its threads comes back in its output (a hang explained)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env={**os.environ, "TQDM_DISABLE": "1",
                                               "PYTHONFAULTHANDLER": "1"})

    def first_update_done() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"workbench train exited with {process.returncode} before "
                                 f"its first update: {process.communicate()[0]}")
        if not (workspace / "workbench.db").exists():
            return False
        with Store.open(workspace) as store:
            return any(r.id == run_id for r in store.runs.all()) and bool(
                store.runs.metrics(run_id, ["reward_mean"]))

    try:
        wait_until(first_update_done, timeout=240, message="the first update's metrics")
        process.send_signal(signum)
        try:
            output, _ = process.communicate(timeout=STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            output, _ = process.communicate(timeout=60)
            for sandbox in SandboxProvider.running(workspace):  # its desktops, left behind
                sandbox.stop()
            stacks = output.split("\nExtension modules:")[0]  # not the list of modules
            raise AssertionError(f"workbench train still running {STOP_DEADLINE} s after "
                                 f"signal {signum}; its threads then:\n{stacks[-12000:]}"
                                 ) from None
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, output


def episode_mid_run(run: TrainingRun) -> str | None:
    """A running episode of `run` that has written a step (its desktop is busy)."""
    from trainer.store.queries import EpisodeFilter

    running = run.store.queries.page(EpisodeFilter(statuses=["running"],
                                                   run_ids=[run.run_id or ""]))
    return next((e.id for e in running if e.step_count >= 1), None)


def episode_ended(run: TrainingRun, episode_id: str) -> Any:
    """The episode once it is no longer running, else None."""
    episode = run.store.episodes.load(episode_id, steps=False)
    return episode if episode.status != "running" else None


def gradient_steps(history: Any) -> int:
    """How many of a run's updates made a gradient step, and so a new policy version (an
    update that trained nothing, e.g. a resumed first update with no finished episode,
    keeps the version: trainer.loop.untrained_reason)."""
    return sum(int(result.metrics["gradient_step"]) for result in history)


def train_documented_run(config_path: Path, tmp_path: Path) -> tuple[Any, Any, list[float]]:
    """Train a documented learning config (assets/configs/learn-*.toml) as
    `bench/learning.py` does, on a fresh tiny model, in `tmp_path / "ws"`: (config,
    summary, success rate per update). Checks that the run ended done and that the store
    holds the same curve."""
    from dataclasses import replace

    import pytest

    from tests.tiny_models import build_tiny_qwen25_vl
    from trainer.config import load_run_config, run_config_toml
    from trainer.loop import TrainingRun
    from trainer.store import Store

    config, _ = load_run_config(config_path)
    model = build_tiny_qwen25_vl(tmp_path / "model")
    config = replace(config, model=replace(config.model, path=str(model)))
    summary = TrainingRun(config, run_config_toml(config), tmp_path / "ws",
                          progress=False).run()
    assert summary.status == "done"
    rates = [r.metrics["success_rate"] for r in summary.history]
    with Store.open(tmp_path / "ws") as store:  # the same curve is in the store
        stored = [p.value for p in store.runs.metrics(summary.run_id, ["success_rate"])]
        assert stored == pytest.approx(rates)
    return config, summary, rates
