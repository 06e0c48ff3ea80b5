"""The run configuration: one typed TOML file per training run, the same file the app
writes and `workbench train CONFIG.toml` reads. Every knob has a default and a comment
(see `example_toml()`); names follow TRL where the meaning is the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from trainer.config_io import ConfigError, knob, load_toml, loads_toml, to_toml
from trainer.curation import CurationConfig
from trainer.grpo import GRPOConfig
from trainer.model import ModelConfig

EnvironmentKind = Literal["sandbox", "remote"]
SampleLevel = Literal["trajectory", "step"]
RuntimeMode = Literal["embedded", "ray"]
DemonstrationSource = Literal["oracle", "pool"]


@dataclass(frozen=True)
class RunSection:
    name: str = knob("", "a name for the run shown in the app ('' : the run id)")
    workspace: str = knob("", "workspace folder ('' : --workspace, $WORKBENCH_WORKSPACE "
                              "or ./workspace)")
    seed: int = knob(0, "seed for task order, sampling and replay draws")


@dataclass(frozen=True)
class EnvironmentsConfig:
    kind: EnvironmentKind = knob("sandbox", "sandbox (Xvfb desktops started here) or "
                                            "remote (OSWorld guest servers by URL)")
    count: int = knob(2, "environments run at once")
    screen_width: int = knob(1280, "sandbox screen width in pixels")
    screen_height: int = knob(800, "sandbox screen height in pixels")
    urls: tuple[str, ...] = knob((), "remote: one guest-server URL per environment")
    token: str = knob("", "remote: the guest servers' token ('' : $WORKBENCH_GUEST_TOKEN)")
    call_timeout: float = knob(60.0, "seconds before a desktop call counts as hung")

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"environments.count: expected at least 1, got {self.count}")
        if self.screen_width < 64 or self.screen_height < 64:
            raise ValueError("environments.screen_width/screen_height: expected at least 64")
        if self.kind == "remote" and len(self.urls) < self.count:
            raise ValueError(f"environments.urls: remote needs one URL per environment "
                             f"({self.count}), got {len(self.urls)}")


@dataclass(frozen=True)
class TasksConfig:
    suite: str = knob("", "an OSWorld evaluation_examples folder or a folder of task "
                          "files ('' : the bundled suite)")
    ids: tuple[str, ...] = knob((), "task ids or fnmatch patterns to take from the suite "
                                    "(empty: all of it, unless buttons > 0)")
    buttons: int = knob(0, "generated coloured-buttons tasks added to the selection")
    buttons_seed: int = knob(0, "seed of the first generated buttons task")
    buttons_grid: tuple[int, ...] = knob((), "[columns, rows]: buttons fill grid cells "
                                             "(empty: free layout)")

    def __post_init__(self) -> None:
        if self.buttons < 0:
            raise ValueError(f"tasks.buttons: expected >= 0, got {self.buttons}")
        if self.buttons_grid and (len(self.buttons_grid) != 2 or min(self.buttons_grid) < 1):
            raise ValueError(f"tasks.buttons_grid: expected [columns, rows], got "
                             f"{list(self.buttons_grid)}")


@dataclass(frozen=True)
class RolloutSection:
    max_steps: int = knob(15, "model calls per episode")
    max_new_tokens: int = knob(512, "longest response per step, in tokens")
    temperature: float = knob(1.0, "sampling temperature of rollouts")
    top_p: float = knob(1.0, "nucleus sampling of rollouts")
    history_images: int = knob(5, "screenshots kept in the prompt, the current one included")
    min_pixels: int = knob(4 * 28 * 28, "smallest pixel budget of one screenshot")
    max_pixels: int = knob(1280 * 28 * 28, "largest pixel budget of one screenshot")
    coordinate_system: Literal["absolute", "relative", "screen"] = knob(
        "absolute", "points in the resized image (Qwen2.5-VL), 0..1000 (Qwen2-VL) or screen")
    system_prompt: str = knob("", "system prompt ('' : the built-in UI-TARS-style prompt; "
                                  "'{coordinates}' is filled in)")
    format_coef: float = knob(0.5, "reward = score + format_coef * format, format = -1 "
                                   "when a response did not parse (ARPO)")
    stop_on_parse_error: bool = knob(True, "end an episode at a response that does not parse")


@dataclass(frozen=True)
class WarmupConfig:
    steps: int = knob(0, "supervised steps on demonstrations before GRPO (0: none)")
    learning_rate: float = knob(1e-4, "learning rate of the supervised steps")
    source: DemonstrationSource = knob("oracle", "oracle: roll out the tasks' scripted "
                                                 "oracles; pool: the curated success pool")
    episodes: int = knob(32, "oracle demonstrations to record")
    batch_size: int = knob(8, "demonstrations per supervised step")
    tasks: TasksConfig = knob(TasksConfig(), "tasks the demonstrations come from "
                                             "(oracle source)")


@dataclass(frozen=True)
class TrainingConfig:
    updates: int = knob(100, "GRPO updates (each publishes a new policy version)")
    tasks_per_update: int = knob(8, "task groups rolled out per update")
    learning_rate: float = knob(1e-6, "AdamW learning rate (ARPO 1e-6; LoRA about 10x)")
    weight_decay: float = knob(0.0, "AdamW weight decay")
    max_grad_norm: float = knob(1.0, "clip the gradient norm to this (0: no clipping)")
    micro_batch_size: int = knob(4, "samples per forward/backward pass")
    num_iterations: int = knob(1, "optimizer passes over each batch (TRL num_iterations)")
    sample_level: SampleLevel = knob("step", "step: one sample per step with the last "
                                             "history_images screenshots (DART); "
                                             "trajectory: one per episode (ARPO)")
    checkpoint_every: int = knob(1, "save a checkpoint every N updates")
    tensorboard: bool = knob(False, "also write TensorBoard event files under runs/<run>/")
    warmup: WarmupConfig = knob(WarmupConfig(), "optional supervised warm-up")

    def __post_init__(self) -> None:
        for name in ("updates", "tasks_per_update", "micro_batch_size", "num_iterations",
                     "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"training.{name}: expected at least 1, got "
                                 f"{getattr(self, name)}")
        if self.learning_rate <= 0:
            raise ValueError(f"training.learning_rate: expected > 0, got {self.learning_rate}")


@dataclass(frozen=True)
class RayConfig:
    address: str = knob("local", "local: start Ray on this machine; auto: join the cluster "
                                 "this machine belongs to (ray start); or the head's host:port")
    env_resource: str = knob("env_node", "custom resource of the machines environment actors "
                                         "run on, declared with ray start --resources "
                                         "(local: declared here; '' : any machine)")
    env_resource_per_actor: float = knob(1.0, "how much of env_resource one environment "
                                              "actor takes")
    env_num_cpus: float = knob(0.5, "CPUs reserved for each environment actor")
    env_workdir: str = knob("", "folder for sandbox homes and snapshots on the environment "
                                "machines ('' : the workspace, when they share its disk)")
    rollout_num_cpus: float = knob(1.0, "CPUs reserved for each rollout worker actor")
    rollout_num_gpus: float = knob(0.0, "GPUs for each rollout worker actor (1 on GPU "
                                        "nodes; 0: generate on CPU)")
    start_timeout: float = knob(300.0, "seconds an actor may take to be placed and started "
                                       "before the run fails")
    env_replacements: int = knob(10, "times an environment actor that died is replaced "
                                     "before its slot is given up")

    def __post_init__(self) -> None:
        if not self.address:
            raise ValueError("runtime.ray.address: expected local, auto or host:port")
        if self.address.startswith("ray://"):
            raise ValueError(f"runtime.ray.address: {self.address!r}: Ray Client is not "
                             f"supported (the trainer and the data manager share the "
                             f"workspace's disk); run `workbench train` on a cluster machine "
                             f"with address = \"auto\"")
        for name in ("env_num_cpus", "rollout_num_cpus", "rollout_num_gpus"):
            if getattr(self, name) < 0:
                raise ValueError(f"runtime.ray.{name}: expected >= 0, got "
                                 f"{getattr(self, name)}")
        if self.env_resource and self.env_resource_per_actor <= 0:
            raise ValueError(f"runtime.ray.env_resource_per_actor: expected > 0, got "
                             f"{self.env_resource_per_actor}")
        if self.start_timeout <= 0:
            raise ValueError(f"runtime.ray.start_timeout: expected > 0, got "
                             f"{self.start_timeout}")
        if self.env_replacements < 0:
            raise ValueError(f"runtime.ray.env_replacements: expected >= 0, got "
                             f"{self.env_replacements}")


@dataclass(frozen=True)
class RuntimeConfig:
    mode: RuntimeMode = knob("embedded", "embedded: every role on this machine; ray: roles "
                                         "as Ray actors, see [runtime.ray] (the cluster extra)")
    asynchronous: bool = knob(False, "decoupled training (DART): environments keep rolling "
                                     "out while the trainer trains; false: lock-step (ray "
                                     "mode is always decoupled)")
    max_version_lag: int = knob(1, "train only on episodes made at most N policy versions "
                                   "before the trainer's current one (1: DART's newest 2)")
    rollout_workers: int = knob(1, "asynchronous runs: policy copies generating for the "
                                   "environments (ray: one actor each)")
    request_timeout: float = knob(600.0, "seconds before a generation is retried on another "
                                         "rollout worker")
    unhealthy_seconds: float = knob(30.0, "how long a failed or silent rollout worker gets "
                                          "no requests")
    ray: RayConfig = knob(RayConfig(), "mode = ray: the Ray cluster and where each role's "
                                       "actors run")

    def __post_init__(self) -> None:
        if self.max_version_lag < 0:
            raise ValueError(f"runtime.max_version_lag: expected >= 0, got "
                             f"{self.max_version_lag}")
        if self.rollout_workers < 1:
            raise ValueError(f"runtime.rollout_workers: expected at least 1, got "
                             f"{self.rollout_workers}")
        if self.request_timeout <= 0:
            raise ValueError(f"runtime.request_timeout: expected > 0, got "
                             f"{self.request_timeout}")


@dataclass(frozen=True)
class RunConfig:
    run: RunSection = knob(RunSection(), "the run")
    model: ModelConfig = knob(ModelConfig(), "the policy model")
    environments: EnvironmentsConfig = knob(EnvironmentsConfig(), "desktops to roll out on")
    tasks: TasksConfig = knob(TasksConfig(), "tasks to train on")
    rollout: RolloutSection = knob(RolloutSection(), "how episodes are rolled out")
    grpo: GRPOConfig = knob(GRPOConfig(), "the GRPO objective")
    curation: CurationConfig = knob(CurationConfig(), "adaptive data curation")
    training: TrainingConfig = knob(TrainingConfig(), "the optimisation")
    runtime: RuntimeConfig = knob(RuntimeConfig(), "where the roles run")


HEADER = """GUI Agent Workbench run configuration: `workbench train THIS_FILE`.
Every field is optional; the value written here is its default."""


def load_run_config(path: str | Path) -> tuple[RunConfig, str]:
    """(the configuration, the file's text). ConfigError names the file and field."""
    return load_toml(RunConfig, Path(path))


def parse_run_config(text: str, where: str = "<run config>") -> RunConfig:
    return loads_toml(RunConfig, text, where)


def run_config_toml(config: RunConfig) -> str:
    return to_toml(config, HEADER)


def example_toml() -> str:
    """Every knob at its default, each with its comment."""
    return run_config_toml(RunConfig())


__all__ = [
    "ConfigError", "EnvironmentsConfig", "RayConfig", "RolloutSection", "RunConfig",
    "RunSection", "RuntimeConfig", "TasksConfig", "TrainingConfig", "WarmupConfig", "example_toml",
    "load_run_config", "parse_run_config", "run_config_toml",
]
