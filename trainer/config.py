"""The run configuration: one typed TOML file per training run, the same file the app
writes and `workbench train CONFIG.toml` reads. Every knob has a default and a comment
(see `example_toml()`); names follow TRL where the meaning is the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from trainer.config_io import ConfigError, knob, load_toml, loads_toml, to_toml
from trainer.curation import CurationConfig
from trainer.grpo import GRPOConfig
from trainer.model import ModelConfig

if TYPE_CHECKING:
    from vm.providers.qemu import QemuConfig

EnvironmentKind = Literal["sandbox", "remote", "qemu"]
SampleLevel = Literal["trajectory", "step"]
RuntimeMode = Literal["embedded", "ray"]
RolloutBackend = Literal["transformers", "vllm"]
DemonstrationSource = Literal["oracle", "pool"]
# The layout version of run configuration files. 2: grpo.importance_sampling_level
# "sequence" is the sum of the token log-ratios (TRL/verl); version 1 files (no
# config_format) used "sequence" for their mean, now "geometric".
CONFIG_FORMAT = 2
MAX_SECONDS = 7 * 24 * 3600.0  # longest timeout a file may set (a week; more overflows waits)
_QEMU_PATHS = ("image", "kernel", "initrd", "uefi_code", "uefi_vars")  # QemuSection's


@dataclass(frozen=True)
class RunSection:
    name: str = knob("", "a name for the run shown in the app ('' : the run id)")
    workspace: str = knob("", "workspace folder ('' : --workspace, $WORKBENCH_WORKSPACE "
                              "or ./workspace)")
    seed: int = knob(0, "seed for task order, sampling and replay draws", ge=0)


@dataclass(frozen=True)
class QemuSection:
    """The [environments.qemu] table: vm.providers.qemu.QemuConfig's fields as TOML
    values: paths as strings relative to the run configuration's folder, '' for no
    path, kernel or snapshot, "none" for no guest_port."""

    image: str = knob("", "the VM's base disk, qcow2 or raw (read-only: each environment "
                          "writes its own overlay), e.g. OSWorld's Ubuntu.qcow2")
    memory_mb: int = knob(4096, "guest RAM in MiB (OSWorld's Ubuntu image wants 4096)", ge=16)
    cpus: int = knob(2, "virtual CPUs per VM", ge=1)
    accel: Literal["auto", "kvm", "tcg"] = knob("auto", "auto: KVM when it runs guests here "
                                                        "(probed once per host), else TCG "
                                                        "(many times slower)")
    kvm_probe_timeout: float = knob(10.0, "seconds a KVM probe guest may show no sign of "
                                          "life before KVM counts as hanging",
                                    gt=0, le=MAX_SECONDS)
    kernel: str = knob("", "direct kernel boot ('' : boot the disk)")
    initrd: str = knob("", "initramfs, with kernel ('' : none)")
    append: str = knob("", "kernel command line, with kernel")
    guest_port: int | None = knob(5000, "the OSWorld guest server's port in the guest "
                                        "(\"none\": no server; commands need serial_shell)",
                                  ge=1, le=65535)
    guest_token: str = knob("", "the guest server's token ('' : $WORKBENCH_GUEST_TOKEN)")
    forward_ports: tuple[int, ...] = knob((), "more guest TCP ports forwarded to the host "
                                              "(9222, 8080, ...)", ge=1, le=65535)
    serial_shell: bool = knob(False, "the guest runs a root shell on its first serial port")
    disk_interface: Literal["virtio", "ide"] = knob("virtio", "how the disk is attached")
    firmware: Literal["bios", "uefi"] = knob("bios", "uefi for GPT/EFI-only images (OVMF)")
    uefi_code: str = knob("/usr/share/OVMF/OVMF_CODE_4M.fd", "uefi: the firmware code")
    uefi_vars: str = knob("/usr/share/OVMF/OVMF_VARS_4M.fd", "uefi: the variables "
                                                             "template, copied per VM")
    network: bool = knob(True, "user-mode networking (needed for the forwarded ports)")
    start_snapshot: str = knob("", "resume from this snapshot of the overlay when it "
                                   "exists ('' : boot)")
    fresh_overlay: bool = knob(False, "discard each VM's overlay and snapshots at start")
    ready_timeout: float = knob(300.0, "seconds for the guest to answer after start",
                                gt=0, le=MAX_SECONDS)
    shutdown_timeout: float = knob(15.0, "seconds a graceful stop waits for the guest",
                                   gt=0, le=MAX_SECONDS)
    qmp_timeout: float = knob(30.0, "seconds for an ordinary QMP command", gt=0, le=MAX_SECONDS)
    snapshot_timeout: float = knob(600.0, "seconds for a snapshot save or load",
                                   gt=0, le=MAX_SECONDS)
    key_interval: float = knob(0.01, "seconds between typed characters", ge=0, le=10)
    qemu_binary: str = knob("qemu-system-x86_64", "the QEMU program")
    extra_args: tuple[str, ...] = knob((), "appended to QEMU's command line as given")

    def table(self) -> dict[str, Any]:
        """The fields that differ from their defaults (and the image), as the TOML table
        vm.providers.qemu.qemu_config reads."""
        defaults = QemuSection()
        table: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "image" or value != getattr(defaults, field.name):
                table[field.name] = list(value) if isinstance(value, tuple) else value
        return table

    def qemu_config(self, where: str, base: Path, check_files: bool = True) -> QemuConfig:
        """The VM's QemuConfig; relative paths resolve against `base`. Raises ConfigError
        naming `where` (e.g. "run.toml: environments.qemu") and the field."""
        from vm.providers.qemu import QemuSettingsError, qemu_config

        try:
            return qemu_config(self.table(), where, base, check_files=check_files)
        except QemuSettingsError as exc:
            raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class EnvironmentsConfig:
    kind: EnvironmentKind = knob("sandbox", "sandbox (Xvfb desktops started here), remote "
                                            "(OSWorld guest servers by URL) or qemu (VMs "
                                            "started here, see [environments.qemu])")
    count: int = knob(2, "environments run at once")
    screen_width: int = knob(1280, "sandbox screen width in pixels (qemu: the guest's)", le=16384)
    screen_height: int = knob(800, "sandbox screen height in pixels (qemu: the guest's)", le=16384)
    urls: tuple[str, ...] = knob((), "remote: one guest-server URL per environment")
    token: str = knob("", "remote: the guest servers' token ('' : $WORKBENCH_GUEST_TOKEN)")
    call_timeout: float = knob(60.0, "seconds before a desktop call counts as hung",
                               gt=0, le=MAX_SECONDS)
    strict_setup: bool = knob(False, "a task's setup command that exits non-zero fails its "
                                     "setup (unless it needs the web or fails on OSWorld's "
                                     "image too); off: the episode notes it")
    qemu: QemuSection = knob(QemuSection(), "kind = qemu: the VM every environment boots "
                                            "from the same base image, each on its own "
                                            "overlay under <workspace>/vms/")

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"environments.count: expected at least 1, got {self.count}")
        if self.screen_width < 64 or self.screen_height < 64:
            raise ValueError("environments.screen_width/screen_height: expected at least 64")
        if self.kind == "remote" and len(self.urls) < self.count:
            raise ValueError(f"environments.urls: remote needs one URL per environment "
                             f"({self.count}), got {len(self.urls)}")
        if self.kind == "qemu" and not self.qemu.image:
            raise ValueError("environments.qemu.image: kind = \"qemu\" needs the VM's base "
                             "disk image (qcow2 or raw)")


@dataclass(frozen=True)
class TasksConfig:
    suite: str = knob("", "an OSWorld evaluation_examples folder or a folder of task "
                          "files ('' : the bundled suite)")
    ids: tuple[str, ...] = knob((), "task ids or fnmatch patterns to take from the suite "
                                    "(empty: all of it, unless buttons or tabs > 0)")
    buttons: int = knob(0, "generated coloured-buttons tasks added to the selection")
    buttons_seed: int = knob(0, "seed of the first generated buttons task", ge=0)
    buttons_grid: tuple[int, ...] = knob((), "[columns, rows]: buttons fill grid cells "
                                             "(empty: free layout)")
    tabs: int = knob(0, "generated tabs tasks added (three steps: open the named tab, "
                        "click the named button on it, Confirm)")
    tabs_seed: int = knob(0, "seed of the first generated tabs task", ge=0)
    tabs_shape: tuple[int, ...] = knob((2, 2), "[tabs, buttons per tab] of tabs tasks")

    def __post_init__(self) -> None:
        if self.buttons < 0:
            raise ValueError(f"tasks.buttons: expected >= 0, got {self.buttons}")
        if self.buttons_grid and (len(self.buttons_grid) != 2 or min(self.buttons_grid) < 1):
            raise ValueError(f"tasks.buttons_grid: expected [columns, rows], got "
                             f"{list(self.buttons_grid)}")
        if self.tabs < 0:
            raise ValueError(f"tasks.tabs: expected >= 0, got {self.tabs}")
        if (len(self.tabs_shape) != 2 or min(self.tabs_shape) < 1
                or self.tabs_shape[0] * (self.tabs_shape[1] + 1) > 8):
            raise ValueError(f"tasks.tabs_shape: expected [tabs, buttons per tab] with "
                             f"tabs x (buttons + 1) <= 8, got {list(self.tabs_shape)}")


@dataclass(frozen=True)
class RolloutSection:
    max_steps: int = knob(15, "model calls per episode", ge=1)
    max_new_tokens: int = knob(512, "longest response per step, in tokens", ge=1)
    temperature: float = knob(1.0, "sampling temperature of rollouts; log-probs, the ratio "
                                    "and entropies are taken at it (0: greedy, scored at 1)",
                              ge=0)
    top_p: float = knob(1.0, "nucleus sampling of rollouts (recorded with each step; the "
                             "trainer scores the distribution before it, as verl and TRL)",
                        gt=0, le=1)
    top_k: int = knob(0, "top-k sampling of rollouts (0: off; recorded like top_p)", ge=0)
    history_images: int = knob(5, "screenshots kept in the prompt, the current one included", ge=1)
    min_pixels: int = knob(4 * 28 * 28, "smallest pixel budget of one screenshot", ge=1)
    max_pixels: int = knob(1280 * 28 * 28, "largest pixel budget of one screenshot", ge=1)
    coordinate_system: Literal["absolute", "relative", "screen"] = knob(
        "absolute", "points in the resized image (Qwen2.5-VL), 0..1000 (Qwen2-VL) or screen")
    system_prompt: str = knob("", "system prompt ('' : the built-in UI-TARS-style prompt; "
                                  "'{coordinates}' is filled in)")
    format_coef: float = knob(0.5, "reward = score + format_coef * format, format = -1 "
                                   "when a response did not parse (ARPO)", ge=0)
    stop_on_parse_error: bool = knob(True, "end an episode at a response that does not parse")
    backend: RolloutBackend = knob("transformers", "what samples the rollouts: transformers (a "
                                                   "copy of the policy in this process) or "
                                                   "vllm (vLLM's engine in this process, "
                                                   "each update's LoRA adapter loaded as a "
                                                   "new policy version; LoRA runs, embedded "
                                                   "runtime; pip install '.[gpu]', on CPU "
                                                   "vLLM's CPU build: docs/vllm.md)")
    vllm_max_model_len: int = knob(0, "backend = vllm: the longest prompt and response in "
                                      "tokens the engine holds (0: the checkpoint's)", ge=0)
    vllm_gpu_memory_utilization: float = knob(
        0.0, "backend = vllm: vLLM's share of the GPU's total memory (0: 90% of what is "
             "free once the policy is loaded; set less to leave training room)", ge=0, le=1)


@dataclass(frozen=True)
class WarmupConfig:
    steps: int = knob(0, "supervised steps on demonstrations before GRPO (0: none)", ge=0)
    learning_rate: float = knob(1e-4, "learning rate of the supervised steps", gt=0)
    source: DemonstrationSource = knob("oracle", "oracle: roll out the tasks' scripted "
                                                 "oracles; pool: the curated success pool")
    episodes: int = knob(32, "oracle demonstrations to record", ge=0)
    batch_size: int = knob(8, "demonstrations per supervised step", ge=1)
    tasks: TasksConfig = knob(TasksConfig(), "tasks the demonstrations come from "
                                             "(oracle source)")


@dataclass(frozen=True)
class TrainingConfig:
    updates: int = knob(100, "GRPO updates (each publishes a new policy version)")
    tasks_per_update: int = knob(8, "task groups rolled out per update")
    learning_rate: float = knob(1e-6, "AdamW learning rate (ARPO 1e-6; LoRA about 10x)")
    weight_decay: float = knob(0.0, "AdamW weight decay", ge=0)
    max_grad_norm: float = knob(1.0, "clip the gradient norm to this (0: no clipping)", ge=0)
    micro_batch_size: int = knob(4, "samples per forward/backward pass")
    num_iterations: int = knob(1, "optimizer passes over each batch (TRL num_iterations)")
    sample_level: SampleLevel = knob("step", "step: one sample per step with the last "
                                             "history_images screenshots (DART); "
                                             "trajectory: one per episode (ARPO)")
    scale_step_by_signal: bool = knob(False, "scale an update's learning rate by the share "
                                             "of its groups whose rewards differ: one group "
                                             "of four left with a signal moves a quarter as "
                                             "far (the others, solved, are not trained on)")
    target_kl: float = knob(0.0, "keep each update within this distance of the policy "
                                 "that sampled its batch: the token mean of k3 KL(old || "
                                 "current) over the batch, measured after each step; past it, "
                                 "the passes end and the step that went past it is halved "
                                 "until within it (taken back after 5 halvings). PPO's "
                                 "target KL with TRPO's backtracking; costs a copy of the "
                                 "trainable parameters and one more forward pass over the "
                                 "batch per update (0: every pass runs)", ge=0)
    target_kl_no_signal: float = knob(0.0, "the same for the samples whose group carries no "
                                           "advantage (solved, or failed alike): the largest "
                                           "sum of k3 KL over one such sample's tokens; the "
                                           "update has no reason to change what they do. "
                                           "Needs grpo.beta > 0 (else those samples are not "
                                           "in the batch; 0: off)", ge=0)
    max_logprob_drop: float = knob(0.0, "the same for the samples the update pushes none "
                                        "of down (advantage 0 or more): none may lose more "
                                        "than this from its log-prob (summed over its "
                                        "tokens, in nats: 0.3 is 26% less likely; 0: off)",
                                   ge=0)
    checkpoint_every: int = knob(1, "save a checkpoint every N updates")
    tensorboard: bool = knob(False, "also write TensorBoard event files under runs/<run>/")
    wandb: bool = knob(False, "also log metrics to Weights & Biases (pip install wandb; "
                              "files under runs/<run>/wandb/, WANDB_MODE=offline keeps "
                              "them there)")
    wandb_project: str = knob("gui-agent-workbench", "the W&B project (the run's W&B name "
                                                     "is run.name, else the run id)")
    wandb_entity: str = knob("", "the W&B team or user ('': your default entity)")
    warmup: WarmupConfig = knob(WarmupConfig(), "optional supervised warm-up")
    eval_every: int = knob(0, "every N updates, roll out the policy on the held-out "
                              "eval_tasks and log heldout/success_rate (0: never)", ge=0)
    stop_at_success: float = knob(0.0, "end the run early (done) once the median success "
                                        "rate of the last stop_window updates reaches "
                                        "this (0: run every update)", ge=0, le=1)
    stop_window: int = knob(10, "updates in the median stop_at_success looks at", ge=1)
    eval_tasks: TasksConfig = knob(TasksConfig(buttons=4, buttons_seed=90_000),
                                   "the held-out tasks (not trained on)")
    eval_rollouts: int = knob(1, "episodes per held-out task", ge=1)
    eval_temperature: float = knob(0.0, "sampling temperature of held-out episodes "
                                        "(0: greedy)", ge=0)

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
                                       "before the run fails", gt=0, le=MAX_SECONDS)
    env_replacements: int = knob(10, "times an environment actor that died is replaced "
                                     "before its slot is given up")
    rollout_restarts: int = knob(3, "times Ray restarts a rollout worker actor whose "
                                    "process died (its requests go to the other workers "
                                    "meanwhile; -1: always)")

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
        if self.rollout_restarts < -1:
            raise ValueError(f"runtime.ray.rollout_restarts: expected -1 (always) or >= 0, "
                             f"got {self.rollout_restarts}")


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
                                         "rollout worker", gt=0, le=MAX_SECONDS)
    unhealthy_seconds: float = knob(30.0, "how long a failed or silent rollout worker gets "
                                          "no requests", ge=0, le=MAX_SECONDS)
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
    config_format: int = knob(CONFIG_FORMAT, "the layout version of this file (a file without "
                                             "it is version 1; see docs/training.md)",
                              ge=1, le=CONFIG_FORMAT)
    run: RunSection = knob(RunSection(), "the run")
    model: ModelConfig = knob(ModelConfig(), "the policy model")
    environments: EnvironmentsConfig = knob(EnvironmentsConfig(), "desktops to roll out on")
    tasks: TasksConfig = knob(TasksConfig(), "tasks to train on")
    rollout: RolloutSection = knob(RolloutSection(), "how episodes are rolled out")
    grpo: GRPOConfig = knob(GRPOConfig(), "the GRPO objective")
    curation: CurationConfig = knob(CurationConfig(), "adaptive data curation")
    training: TrainingConfig = knob(TrainingConfig(), "the optimisation")
    runtime: RuntimeConfig = knob(RuntimeConfig(), "where the roles run")

    def __post_init__(self) -> None:
        if self.training.target_kl_no_signal and not self.grpo.beta:
            raise ValueError("training.target_kl_no_signal: needs grpo.beta > 0 (samples "
                             "without an advantage are left out of the batch at beta = 0, "
                             "so there is nothing to hold)")
        if self.rollout.backend == "vllm":
            self._check_vllm()

    def _check_vllm(self) -> None:
        """rollout.backend = "vllm": what vLLM can follow (LoRA on the language model,
        hot-swapped per version) and where it runs (one engine in this process)."""
        from agents.backends.vllm_backend import LORA_RANKS

        model, runtime = self.model, self.runtime
        if model.finetune != "lora":
            raise ValueError(f"rollout.backend: vllm loads each policy version as a LoRA "
                             f"adapter; model.finetune = {model.finetune!r} needs "
                             f"rollout.backend = \"transformers\" (or finetune = \"lora\")")
        if model.lora.include_vision:
            raise ValueError("rollout.backend: vllm applies LoRA to the language model only; "
                             "set model.lora.include_vision = false (or rollout.backend = "
                             "\"transformers\")")
        if model.lora.r > LORA_RANKS[-1]:
            raise ValueError(f"rollout.backend: vllm takes LoRA ranks up to {LORA_RANKS[-1]}; "
                             f"model.lora.r is {model.lora.r}")
        if runtime.mode != "embedded":
            raise ValueError(f"rollout.backend: vllm runs in this process (runtime.mode = "
                             f"\"embedded\"); runtime.mode = {runtime.mode!r} starts "
                             f"transformers rollout workers")
        if runtime.asynchronous and runtime.rollout_workers != 1:
            raise ValueError(f"rollout.backend: vllm batches every environment's calls in "
                             f"one engine; runtime.rollout_workers must be 1, got "
                             f"{runtime.rollout_workers}")


HEADER = """GUI Agent Workbench run configuration: `workbench train THIS_FILE`.
Every field is optional; the value written here is its default."""


def load_run_config(path: str | Path) -> tuple[RunConfig, str]:
    """(the configuration, the file's text). ConfigError names the file and field;
    paths in [environments.qemu] come back absolute, taken relative to the file."""
    path = Path(path)
    config, text = load_toml(RunConfig, path)
    _check_format(text, str(path))
    return _checked(config, str(path), path.resolve().parent), text


def parse_run_config(text: str, where: str = "<run config>",
                     base: Path | None = None) -> RunConfig:
    """The configuration in `text`; with `base` (the file's folder), relative paths in
    [environments.qemu] are made absolute against it, else they are kept as written."""
    config = loads_toml(RunConfig, text, where)
    _check_format(text, where)
    return _checked(config, where, base)


def _check_format(text: str, where: str) -> None:
    """Refuse a value whose meaning changed since the file's config_format (valid TOML
    already): never train with a different objective than the file's author chose."""
    import tomllib

    data = tomllib.loads(text)
    version = data.get("config_format", 1)
    grpo = data.get("grpo")
    level = grpo.get("importance_sampling_level") if isinstance(grpo, dict) else None
    if version < 2 and level == "sequence":
        raise ConfigError(
            f"{where}: grpo.importance_sampling_level: \"sequence\" in a file without "
            f"config_format = {CONFIG_FORMAT} meant the geometric mean of the token "
            f"ratios; \"sequence\" now means their product (the sum of log-ratios, as in "
            f"TRL and verl). Write \"geometric\" to keep the old meaning, or add "
            f"config_format = {CONFIG_FORMAT} at the top to choose the new one")


def _checked(config: RunConfig, where: str, base: Path | None) -> RunConfig:
    """Check what a field's type cannot: a qemu table as the VM will read it (its files
    are checked where the VMs start, possibly on other machines)."""
    environments = config.environments
    if environments.kind != "qemu":
        return config
    qemu = environments.qemu.qemu_config(f"{where}: environments.qemu", base or Path.cwd(),
                                         check_files=False)
    if base is None:
        return config
    resolved: dict[str, Any] = {name: str(getattr(qemu, name)) for name in _QEMU_PATHS
                                if getattr(environments.qemu, name)}
    return replace(config, environments=replace(
        environments, qemu=replace(environments.qemu, **resolved)))


def run_config_toml(config: RunConfig) -> str:
    return to_toml(config, HEADER)


def example_toml() -> str:
    """Every knob at its default, each with its comment."""
    return run_config_toml(RunConfig())


__all__ = [
    "ConfigError", "EnvironmentsConfig", "QemuSection", "RayConfig", "RolloutBackend",
    "RolloutSection", "RunConfig",
    "RunSection", "RuntimeConfig", "TasksConfig", "TrainingConfig", "WarmupConfig", "example_toml",
    "load_run_config", "parse_run_config", "run_config_toml",
]
