"""The trainable policy: a Qwen2.5-VL-family model with LoRA (peft) or full fine-tuning, its
KL reference, and self-contained versioned checkpoints that rollout backends load."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeGuard, cast, get_args

if TYPE_CHECKING:  # torch is imported where models load: the config stays light
    import torch


FinetuneKind = Literal["lora", "full"]

CHECKPOINT_FORMAT = 1
CHECKPOINT_FILE = "checkpoint.json"
ADAPTER_FOLDER = "adapter"
MODEL_FOLDER = "model"
RUN_CONFIG_FILE = "run_config.toml"
TRAINER_STATE_FILE = "trainer_state.pt"
# LoRA: peft's name for the adapter being trained, and the one a KL reference is loaded as.
TRAINED_ADAPTER = "default"
REFERENCE_ADAPTER = "reference"

# Qwen2-VL and Qwen2.5-VL keep the vision tower under `model.visual`; the same pattern
# verl's Qwen2.5-VL LoRA example passes as exclude_modules.
VISION_TOWER_PATTERN = r".*visual.*"
# The vision blocks' own layer names, which the language-model defaults do not cover:
# attention (both families) and Qwen2-VL's MLP (Qwen2.5-VL's uses gate/up/down_proj).
VISION_TARGET_MODULES = ("qkv", "attn.proj", "fc1", "fc2")
DTYPES = ("auto", "float32", "bfloat16", "float16")
# The first peft whose load_adapter(is_trainable=False) leaves the trained adapter trainable
# and whose set_adapter takes inference_mode (both used for the KL reference; DEVELOPERS.md).
PEFT_FLOOR = "0.21"


class ModelError(RuntimeError):
    """A model folder or checkpoint that cannot be loaded or written."""


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapter added to the policy (peft)."""

    r: int = field(default=16, metadata={"help": "LoRA rank"})
    alpha: int = field(default=32, metadata={"help": "LoRA alpha (scale = alpha / r)"})
    dropout: float = field(default=0.05, metadata={"help": "dropout on the LoRA input"})
    target_modules: tuple[str, ...] = field(
        default=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        metadata={"help": "names of the linear layers that get an adapter"})
    include_vision: bool = field(default=False, metadata={
        "help": "LoRA on the vision tower too (its qkv/proj/MLP); vLLM cannot "
                "roll out such an adapter (rollout.backend = vllm refuses it)"})

    def __post_init__(self) -> None:
        if isinstance(self.target_modules, list):  # TOML gives arrays as lists
            object.__setattr__(self, "target_modules", tuple(self.target_modules))
        if not _is_int(self.r) or self.r <= 0:
            raise ValueError(f"model.lora.r: expected a positive integer, got {self.r!r}")
        if not _is_int(self.alpha) or self.alpha <= 0:
            raise ValueError(f"model.lora.alpha: expected a positive integer, got {self.alpha!r}")
        if (not isinstance(self.dropout, int | float) or isinstance(self.dropout, bool)
                or not 0 <= self.dropout < 1):
            raise ValueError(f"model.lora.dropout: expected a number in [0, 1), "
                             f"got {self.dropout!r}")
        if (not isinstance(self.target_modules, tuple) or not self.target_modules
                or not all(isinstance(name, str) and name for name in self.target_modules)):
            raise ValueError(f"model.lora.target_modules: expected a non-empty list of layer "
                             f"names, got {self.target_modules!r}")
        if not isinstance(self.include_vision, bool):
            raise ValueError(f"model.lora.include_vision: expected true or false, "
                             f"got {self.include_vision!r}")


@dataclass(frozen=True)
class ModelConfig:
    """Which model is trained and how."""

    path: str = field(default="", metadata={
        "help": "local model folder (Qwen2.5-VL or Qwen2-VL family)"})
    finetune: FinetuneKind = field(default="lora", metadata={
        "help": "lora: train an adapter; full: train the weights themselves"})
    lora: LoraSettings = field(default_factory=LoraSettings, metadata={
        "help": "the adapter's settings (finetune = 'lora')"})
    freeze_vision: bool = field(default=True, metadata={
        "help": "full fine-tuning: keep the vision tower frozen"})
    gradient_checkpointing: bool = field(default=False, metadata={
        "help": "recompute activations in backward: less memory, about 25% slower"})
    dtype: str = field(default="auto", metadata={
        "help": "auto (bfloat16 on GPU, float32 on CPU), float32, bfloat16 or float16"})
    device: str = field(default="", metadata={
        "help": "torch device, e.g. cuda:0; empty picks cuda when available, else cpu"})
    attn_implementation: str = field(default="", metadata={
        "help": "attention kernel (eager, sdpa, flash_attention_2); empty: transformers picks"})
    cpu_threads: int = field(default=0, metadata={
        "help": "torch threads while a run trains on CPU (0: torch's default, one per "
                "core; 1 stops idle threads spinning beside the rollouts)"})

    def __post_init__(self) -> None:
        if not isinstance(self.path, str):
            raise ValueError(f"model.path: expected a folder path string, got {self.path!r}")
        if self.finetune not in get_args(FinetuneKind):
            raise ValueError(f"model.finetune: expected 'lora' or 'full', got {self.finetune!r}")
        if not isinstance(self.lora, LoraSettings):
            raise ValueError(f"model.lora: expected LoRA settings, got {self.lora!r}")
        for name in ("freeze_vision", "gradient_checkpointing"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"model.{name}: expected true or false, "
                                 f"got {getattr(self, name)!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"model.dtype: expected one of {', '.join(DTYPES)}, "
                             f"got {self.dtype!r}")
        if self.device:
            import torch

            try:
                torch.device(self.device)
            except (RuntimeError, TypeError) as exc:
                raise ValueError(f"model.device: expected '', 'cpu', 'cuda' or 'cuda:N', "
                                 f"got {self.device!r}") from exc
        if not _is_int(self.cpu_threads) or self.cpu_threads < 0:
            raise ValueError(f"model.cpu_threads: expected an integer >= 0, "
                             f"got {self.cpu_threads!r}")
        if not isinstance(self.attn_implementation, str):
            raise ValueError(f"model.attn_implementation: expected a string, "
                             f"got {self.attn_implementation!r}")


@dataclass(frozen=True)
class CheckpointInfo:
    """What checkpoint.json says about a checkpoint folder."""

    policy_version: int
    finetune: FinetuneKind
    base_model: Path  # the base weights a LoRA adapter applies to
    created_at: str  # ISO 8601, UTC
    info: dict[str, Any]
    folder: Path


class PolicyModel:
    """The trainable policy: model (peft-wrapped for LoRA), tokenizer, image processor,
    chat template."""

    def __init__(self, model: Any, tokenizer: Any, image_processor: Any,
                 chat_template: str | None, config: ModelConfig, device: torch.device,
                 base_path: Path) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.chat_template = chat_template
        self.config = config
        self.device = device
        self.base_path = base_path
        self._reference_model: Any = None  # full fine-tuning: loaded on first use
        # the policy the KL term refers to, when not the base (see refer_to)
        self._reference_checkpoint: Path | None = None

    @classmethod
    def load(cls, config: ModelConfig, checkpoint: Path | None = None) -> PolicyModel:
        """Load the base model from `config.path`, make it trainable as `config.finetune`
        says and, given a checkpoint folder from `save_checkpoint`, resume its weights.
        Resuming a LoRA run uses the adapter settings stored in the checkpoint."""
        from transformers import AutoImageProcessor, AutoTokenizer

        from agents.backends.transformers_backend import _processor_chat_template

        if not config.path:
            raise ModelError("model.path: not set (expected a local model folder)")
        base_path = Path(config.path).expanduser().resolve()
        _check_model_folder(base_path, "model.path")
        saved = PolicyModel.read_checkpoint(checkpoint) if checkpoint is not None else None
        if saved is not None and saved.finetune != config.finetune:
            raise ModelError(f"{saved.folder / CHECKPOINT_FILE}: finetune is "
                             f"{saved.finetune!r} but model.finetune is {config.finetune!r}")
        device = resolve_device(config.device)
        dtype = resolve_dtype(config.dtype, device)
        try:
            tokenizer = AutoTokenizer.from_pretrained(base_path)
            image_processor = AutoImageProcessor.from_pretrained(base_path)
            chat_template = _processor_chat_template(base_path)
        except (OSError, ValueError, KeyError) as exc:
            raise ModelError(f"model.path: cannot load the tokenizer or image processor of "
                             f"{base_path}: {exc}") from exc

        if config.finetune == "full" and saved is not None:
            weights = saved.folder / MODEL_FOLDER
            _check_model_folder(weights, f"checkpoint {saved.folder}")
        else:
            weights = base_path
        model = _load_weights(weights, dtype, device, config.attn_implementation)
        if config.gradient_checkpointing:
            # use_reentrant=False: gradients reach the trainable layers even when the
            # checkpointed block's inputs do not require grad (frozen base, LoRA)
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
        if config.finetune == "lora":
            model = _add_adapter(model, config, saved)
        else:
            model.requires_grad_(True)
            if config.freeze_vision:
                for name, parameter in model.named_parameters():
                    if _in_vision_tower(name):
                        parameter.requires_grad_(False)
        vision_frozen = (not config.lora.include_vision if config.finetune == "lora"
                         else config.freeze_vision)
        if config.gradient_checkpointing and vision_frozen:
            detach_frozen_vision_inputs(model)
        model.train()
        return cls(model, tokenizer, image_processor, chat_template, config, device, base_path)

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def parameter_counts(self) -> tuple[int, int]:
        """(trainable, total) parameter counts; LoRA's total includes the adapter."""
        parameters = list(self.model.parameters())
        return (sum(p.numel() for p in parameters if p.requires_grad),
                sum(p.numel() for p in parameters))

    @contextmanager
    def reference(self) -> Iterator[torch.nn.Module]:
        """The KL reference model, in eval mode with gradients off inside the block (so
        compute only the reference log-probs here): the base model, or the policy of the
        checkpoint given to `refer_to`. LoRA: this same model with its adapter disabled (or
        switched to the reference's adapter); full fine-tuning: a frozen copy of the
        reference's weights, loaded on first use."""
        import torch

        if self.config.finetune == "lora":
            was_training = self.model.training
            self.model.eval()  # same mode as the full reference: no dropout anywhere
            try:
                if self._reference_checkpoint is None:
                    with torch.no_grad(), self.model.disable_adapter():
                        yield self.model
                else:
                    self.model.set_adapter(REFERENCE_ADAPTER, inference_mode=True)
                    try:
                        with torch.no_grad():
                            yield self.model
                    finally:  # the trained adapter active and trainable again
                        self.model.set_adapter(TRAINED_ADAPTER)
            finally:
                self.model.train(was_training)
            return
        if self._reference_model is None:
            source = (self.base_path if self._reference_checkpoint is None
                      else self._reference_checkpoint / MODEL_FOLDER)
            reference = _load_weights(source, resolve_dtype(self.config.dtype, self.device),
                                      self.device, self.config.attn_implementation)
            reference.requires_grad_(False)
            self._reference_model = reference.eval()
        with torch.no_grad():
            yield self._reference_model

    @property
    def reference_checkpoint(self) -> Path | None:
        """The checkpoint folder the KL reference comes from; None: the base model."""
        return self._reference_checkpoint

    def refer_to(self, checkpoint: Path) -> None:
        """Make the policy saved in `checkpoint` (a folder from `save_checkpoint`) the KL
        reference from now on. The trainer passes its warmed-up policy: a KL term to the
        untrained base would pull every update back across what the warm-up taught. LoRA
        loads the checkpoint's adapter beside the trained one (frozen; still no second copy
        of the base weights); full fine-tuning loads its weights on first use."""
        saved = PolicyModel.read_checkpoint(checkpoint)
        if saved.finetune != self.config.finetune:
            raise ModelError(f"{saved.folder / CHECKPOINT_FILE}: finetune is "
                             f"{saved.finetune!r} but model.finetune is "
                             f"{self.config.finetune!r} (KL reference)")
        if self.config.finetune == "full":
            _check_model_folder(saved.folder / MODEL_FOLDER, f"checkpoint {saved.folder}")
            self._reference_model = None
        else:
            if saved.base_model != self.base_path:
                raise ModelError(f"{saved.folder / CHECKPOINT_FILE}: its adapter applies to "
                                 f"{saved.base_model}, not to model.path {self.base_path} "
                                 f"(KL reference)")
            adapter = _checked_adapter_folder(saved)
            _require_peft_floor(f"{adapter} (KL reference)")
            if REFERENCE_ADAPTER in self.model.peft_config:
                self.model.delete_adapter(REFERENCE_ADAPTER)
            was_training = self.model.training
            try:
                self.model.load_adapter(str(adapter), adapter_name=REFERENCE_ADAPTER,
                                        is_trainable=False)
            except (OSError, ValueError, KeyError, RuntimeError) as exc:
                raise ModelError(f"{adapter}: cannot load the LoRA adapter as the KL "
                                 f"reference: {exc}") from exc
            finally:
                self.model.train(was_training)  # peft puts the model in eval mode
        self._reference_checkpoint = saved.folder

    def save_checkpoint(self, folder: Path, *, policy_version: int, run_config: str = "",
                        trainer_state: dict[str, Any] | None = None,
                        info: dict[str, Any] | None = None) -> Path:
        """Write a self-contained checkpoint folder atomically: everything goes to a hidden
        sibling folder, is fsynced and then renamed, so `folder` is either complete or
        absent. Returns the folder's absolute path."""
        import torch

        folder = Path(folder).expanduser().absolute()
        if folder.exists():
            raise ModelError(f"checkpoint: {folder} already exists (expected a new folder; "
                             f"checkpoints are never overwritten)")
        if not _is_int(policy_version) or policy_version < 0:
            raise ModelError(f"checkpoint: policy_version: expected a non-negative integer, "
                             f"got {policy_version!r}")
        record = {
            "format": CHECKPOINT_FORMAT, "policy_version": policy_version,
            "finetune": self.config.finetune, "base_model": str(self.base_path),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "info": info or {},
        }
        try:
            text = json.dumps(record, indent=2) + "\n"
        except (TypeError, ValueError) as exc:
            raise ModelError(f"checkpoint: info: expected JSON-serialisable values: "
                             f"{exc}") from exc
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = folder.with_name(f".{folder.name}.partial-{uuid.uuid4().hex[:12]}")
        partial.mkdir()
        try:
            weights = partial / (ADAPTER_FOLDER if self.config.finetune == "lora"
                                 else MODEL_FOLDER)
            if self.config.finetune == "lora":  # not the KL reference's adapter
                self.model.save_pretrained(weights, selected_adapters=[TRAINED_ADAPTER])
            else:
                self.model.save_pretrained(weights)
            # the weights folder also loads on its own: tokenizer, processor, template
            self.tokenizer.save_pretrained(weights)
            self.image_processor.save_pretrained(weights)
            if self.chat_template is not None:
                (weights / "chat_template.jinja").write_text(self.chat_template)
            (partial / RUN_CONFIG_FILE).write_text(run_config)
            if trainer_state is not None:
                torch.save(trainer_state, partial / TRAINER_STATE_FILE)
            (partial / CHECKPOINT_FILE).write_text(text)
            _fsync_tree(partial)
            try:
                partial.rename(folder)
            except OSError as exc:  # another writer took the name meanwhile
                raise ModelError(f"checkpoint: cannot move {partial.name} to {folder}: "
                                 f"{exc}") from exc
            _fsync_path(folder.parent)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        return folder

    @staticmethod
    def read_checkpoint(folder: Path) -> CheckpointInfo:
        """checkpoint.json of a checkpoint folder, validated."""
        folder = Path(folder).expanduser().absolute()
        path = folder / CHECKPOINT_FILE
        if not folder.is_dir():
            raise ModelError(f"checkpoint: {folder} is not a folder")
        if not path.is_file():
            raise ModelError(f"{path}: missing (expected a checkpoint folder written by "
                             f"save_checkpoint)")
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ModelError(f"{path}: not valid JSON ({exc})") from exc
        if not isinstance(record, dict):
            raise ModelError(f"{path}: expected a JSON object, got {type(record).__name__}")

        def bad(name: str, expected: str) -> ModelError:
            return ModelError(f"{path}: field {name!r}: expected {expected}, "
                              f"got {record.get(name)!r}")

        if record.get("format") != CHECKPOINT_FORMAT:
            raise bad("format", str(CHECKPOINT_FORMAT))
        version = record.get("policy_version")
        if not _is_int(version) or version < 0:
            raise bad("policy_version", "a non-negative integer")
        finetune = record.get("finetune")
        if finetune not in get_args(FinetuneKind):
            raise bad("finetune", "'lora' or 'full'")
        base_model = record.get("base_model")
        if not isinstance(base_model, str) or not base_model:
            raise bad("base_model", "the base model's folder path")
        created_at = record.get("created_at")
        if not isinstance(created_at, str):
            raise bad("created_at", "an ISO 8601 time")
        info = record.get("info", {})
        if not isinstance(info, dict):
            raise bad("info", "a JSON object")
        return CheckpointInfo(policy_version=version, finetune=cast(FinetuneKind, finetune),
                              base_model=Path(base_model), created_at=created_at, info=info,
                              folder=folder)

    @staticmethod
    def trainer_state(folder: Path) -> dict[str, Any] | None:
        """The trainer state saved with a checkpoint (optimizer, scheduler, RNG...), or None."""
        import torch

        path = Path(folder) / TRAINER_STATE_FILE
        if not path.is_file():
            return None
        try:
            # weights-only: tensors, numbers, strings and containers (the optimizer, the RNG
            # states, the replay buffer); a file that pickles anything else (code) is refused
            state = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise ModelError(f"{path}: refused: it holds more than tensors and plain values "
                             f"(a checkpoint folder can only carry data) ({exc})") from exc
        except (OSError, RuntimeError, EOFError, ValueError) as exc:
            raise ModelError(f"{path}: cannot be read ({exc})") from exc
        if not isinstance(state, dict):
            raise ModelError(f"{path}: expected a dict, got {type(state).__name__}")
        return state

    def state_for_rollout(self) -> dict[str, torch.Tensor]:
        """The tensors a rollout worker needs to refresh its copy in place: the adapter
        weights under peft's saved names (LoRA) or the full state dict (full), as a CPU
        snapshot that later training steps do not change."""
        if self.config.finetune == "lora":
            from peft import get_peft_model_state_dict

            state = get_peft_model_state_dict(self.model)
        else:
            state = self.model.state_dict()
        return {name: _cpu_copy(tensor) for name, tensor in state.items()}


def backend_paths(checkpoint: Path) -> tuple[Path, Path | None]:
    """(model_path, adapter_path) for `TransformersBackend` to load a checkpoint folder:
    LoRA -> (base model, checkpoint/adapter); full -> (checkpoint/model, None)."""
    saved = PolicyModel.read_checkpoint(checkpoint)
    if saved.finetune == "lora":
        return saved.base_model, saved.folder / ADAPTER_FOLDER
    return saved.folder / MODEL_FOLDER, None


def resolve_device(device: str) -> torch.device:
    import torch

    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    import torch

    if dtype == "auto":
        # bfloat16 halves memory on GPUs; CPUs run it slowly and imprecisely
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16,
            "float16": torch.float16}[dtype]


def _check_model_folder(path: Path, what: str) -> None:
    if not path.is_dir():
        raise ModelError(f"{what}: {path} is not a folder")
    if not (path / "config.json").is_file():
        raise ModelError(f"{what}: {path} has no config.json (expected a Hugging Face "
                         f"model folder)")


def _load_weights(path: Path, dtype: torch.dtype, device: torch.device,
                  attn_implementation: str) -> Any:
    from transformers import AutoModelForImageTextToText

    kwargs: dict[str, Any] = {"dtype": dtype, "device_map": str(device)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    try:
        return AutoModelForImageTextToText.from_pretrained(path, **kwargs)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelError(f"{path}: cannot load the model weights: {exc}") from exc


def _add_adapter(model: Any, config: ModelConfig, saved: CheckpointInfo | None) -> Any:
    from peft import LoraConfig, PeftModel, get_peft_model

    if saved is not None:
        adapter = _checked_adapter_folder(saved)
        try:
            return PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
        except (OSError, ValueError, KeyError) as exc:
            raise ModelError(f"{adapter}: cannot load the LoRA adapter: {exc}") from exc
    settings = config.lora
    targets = list(settings.target_modules)
    if settings.include_vision:
        targets += [name for name in VISION_TARGET_MODULES if name not in targets]
    lora = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                      target_modules=targets, task_type="CAUSAL_LM",
                      # a string is matched in full against each module name
                      exclude_modules=None if settings.include_vision else VISION_TOWER_PATTERN)
    try:
        return get_peft_model(model, lora)
    except ValueError as exc:  # peft's error when no target module matched
        raise ModelError(f"model.lora.target_modules: {exc}") from exc


def _require_peft_floor(what: str) -> None:
    """Refuse a peft older than PEFT_FLOOR: there, loading a second adapter froze the one
    being trained (the optimizer found nothing to train) and set_adapter lacked the
    keyword the reference switch passes."""
    import peft
    from packaging.version import Version

    if Version(peft.__version__) < Version(PEFT_FLOOR):
        raise ModelError(f"{what}: needs peft>={PEFT_FLOOR} (installed: {peft.__version__}); "
                         f"pip install 'peft>={PEFT_FLOOR}'")


def _checked_adapter_folder(saved: CheckpointInfo) -> Path:
    adapter = saved.folder / ADAPTER_FOLDER
    if not (adapter / "adapter_config.json").is_file():
        raise ModelError(f"checkpoint {saved.folder}: {ADAPTER_FOLDER}/adapter_config.json "
                         f"is missing (expected a LoRA adapter saved by save_checkpoint)")
    return adapter


def detach_frozen_vision_inputs(model: torch.nn.Module) -> int:
    """Remove the hooks that make the vision tower's input embedding output require grad;
    how many there were.

    Under gradient checkpointing peft calls `enable_input_require_grads()`, and transformers
    hooks every input embedding it finds, the vision tower's patch embedding too. A frozen
    tower (LoRA without include_vision) then records a graph, is recomputed in backward and
    back-propagated through though none of its weights trains: one LoRA update of a
    Qwen2.5-VL-3B-shaped model took 8.6-10.1 s with the hook and 2.94 s without it on an
    H200, peak memory 13.7 GiB -> 12.0 GiB (bench/gpu_update.py), with the same LoRA
    gradients. The text side's hook stays (checkpointing uses use_reentrant=False, which
    needs none, but it costs nothing there)."""
    removed = 0
    for name, module in model.named_modules():
        if not _in_vision_tower(name):
            continue
        for key, hook in list(module._forward_hooks.items()):
            if getattr(hook, "__name__", "").startswith("make_inputs_require_grad"):
                del module._forward_hooks[key]
                removed += 1
    return removed


def _in_vision_tower(name: str) -> bool:
    return re.fullmatch(VISION_TOWER_PATTERN, name) is not None


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _cpu_copy(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor.detach()
    # .cpu() of a CPU tensor returns the same storage: copy so the snapshot stays fixed
    return tensor.clone() if tensor.device.type == "cpu" else tensor.cpu()


def _fsync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _fsync_tree(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            _fsync_path(Path(folder) / name)
        _fsync_path(Path(folder))
