"""A rollout worker's own copy of the policy: the base weights with the trainer's
adapter layout, in eval mode, for generation beside the module being trained (the
embedded rollout service's transformers workers; the Ray policy-worker actors)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents.backends.transformers_backend import TransformersBackend
    from trainer.model import ModelConfig, PolicyModel


def rollout_copy(policy: PolicyModel) -> TransformersBackend:
    """A rollout worker's own copy of `policy`: the base weights from its folder and the
    same adapter layout (LoRA), in eval mode; publishing a version loads the weights."""
    lora = policy.model.peft_config["default"] if policy.config.finetune == "lora" else None
    return rollout_model(policy.base_path, policy.config, lora, str(policy.device),
                         policy.chat_template)


def rollout_model(base_path: Path, config: ModelConfig, lora: Any, device: str,
                  chat_template: str | None) -> TransformersBackend:
    """A policy copy for generation: the base weights of `base_path` on `device` with the
    adapter layout `lora` (a peft LoraConfig; None: full weights), in eval mode."""
    import copy

    import torch
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

    from agents.backends.transformers_backend import TransformersBackend
    from trainer.model import resolve_dtype

    target = torch.device(device)
    kwargs: dict[str, Any] = {"dtype": resolve_dtype(config.dtype, target),
                              "device_map": str(target)}
    if config.attn_implementation:
        kwargs["attn_implementation"] = config.attn_implementation
    model: Any = AutoModelForImageTextToText.from_pretrained(base_path, **kwargs)
    if lora is not None:
        from peft import get_peft_model

        lora = copy.deepcopy(lora)
        lora.inference_mode = True
        model = get_peft_model(model, lora)
    model.requires_grad_(False)
    # a tokenizer of its own: the trainer tokenises in another thread meanwhile
    return TransformersBackend.from_model(model.eval(),
                                          AutoTokenizer.from_pretrained(base_path),
                                          AutoImageProcessor.from_pretrained(base_path),
                                          chat_template)
