"""The vLLM backend's checks and engine arguments, without vLLM: what it refuses before
vLLM would (LoRA off, a rank above the engine's, vision-tower adapters), how it sizes its
GPU share, and the arguments it gives vLLM's `LLM` and `SamplingParams` (vLLM's two
classes replaced by recorders at the import boundary). tests/test_vllm_cpu.py runs the
same backend through vLLM itself."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agents.backends import BackendError, SamplingConfig

VISION_IDS = {"image_token_id": 398, "video_token_id": 399, "vision_start_token_id": 395,
              "vision_end_token_id": 396}


class _RecordingLLM:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class _RecordingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's LLM and SamplingParams as recorders (the real ones need vLLM's build)."""
    module = types.ModuleType("vllm")
    module.LLM = _RecordingLLM  # type: ignore[attr-defined]
    module.SamplingParams = _RecordingParams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the backend reads itself: the tiny tokenizer, a Qwen2.5-VL-shaped config.json
    (vision token ids at the top and in text_config) and a processor chat template."""
    from agents.tiny_model import build_tokenizer

    folder = tmp_path_factory.mktemp("checkpoint")
    build_tokenizer(folder)
    top = {name: token for name, token in VISION_IDS.items() if name != "video_token_id"}
    (folder / "config.json").write_text(json.dumps({
        "model_type": "qwen2_5_vl", **top,
        "text_config": {"video_token_id": VISION_IDS["video_token_id"]}}))
    (folder / "chat_template.jinja").write_text("{{ messages[0]['content'] }} (processor)")
    return folder


def _adapter(folder: Path, rank: int, names: list[str]) -> Path:
    """An adapter folder: adapter_config.json and a safetensors file with `names`."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": "LORA"}))
    save_file({name: torch.zeros(rank, 4) for name in names},
              str(folder / "adapter_model.safetensors"))
    return folder


LANGUAGE = ["base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight"]
VISION = ["base_model.model.model.visual.blocks.0.attn.qkv.lora_A.weight"]


def test_engine_arguments(fake_vllm: None, checkpoint: Path) -> None:
    from agents.backends.vllm_backend import VLLMBackend

    backend = VLLMBackend(checkpoint, enable_lora=True, max_lora_rank=16, max_model_len=4096)
    kwargs = backend.llm.kwargs
    assert kwargs["enable_lora"] is True and kwargs["max_lora_rank"] == 16
    assert kwargs["max_loras"] == 2  # versions overlap while old episodes finish
    assert kwargs["logprobs_mode"] == "processed_logprobs"
    assert kwargs["generation_config"] == "vllm"
    assert "gpu_memory_utilization" not in kwargs  # no GPU here: vLLM's CPU build
    assert backend.suppressed_ids == sorted(VISION_IDS.values())
    sent = backend.sampling_params(SamplingConfig(temperature=0.7))
    assert sent["logit_bias"] == {token: -100.0 for token in sorted(VISION_IDS.values())}
    # the chat template the transformers backend uses (chat_template.jinja)
    assert backend.chat_template == (checkpoint / "chat_template.jinja").read_text()
    with pytest.raises(ValueError, match="max_lora_rank"):
        VLLMBackend(checkpoint, enable_lora=True, max_lora_rank=12)


def test_adapters_vllm_would_reject_are_refused_first(fake_vllm: None, checkpoint: Path,
                                                      tmp_path: Path) -> None:
    from agents.backends.vllm_backend import VLLMBackend, check_adapter

    language = _adapter(tmp_path / "language", 8, LANGUAGE)
    without_lora = VLLMBackend(checkpoint)
    with pytest.raises(BackendError, match="enable_lora=True"):
        without_lora.use_policy_version(1, language)
    with pytest.raises(BackendError, match="enable_lora=True"):
        without_lora.set_adapter(language)
    check_adapter(language, max_lora_rank=8)
    with pytest.raises(BackendError, match=r"r = 32 .* max_lora_rank=32"):
        check_adapter(_adapter(tmp_path / "wide", 32, LANGUAGE), max_lora_rank=16)
    with pytest.raises(BackendError, match="include_vision = false"):
        check_adapter(_adapter(tmp_path / "vision", 8, LANGUAGE + VISION), max_lora_rank=8)
    with pytest.raises(BackendError, match="not a LoRA adapter folder"):
        check_adapter(tmp_path, max_lora_rank=8)


def test_gpu_share_from_free_memory() -> None:
    from agents.backends.vllm_backend import free_memory_share, lora_rank_for

    gib = 2**30
    # an 80 GiB card with 30 GiB taken by the policy being trained: 0.9 of the 50 free
    assert free_memory_share(50 * gib, 80 * gib) == pytest.approx(0.5625)
    with pytest.raises(BackendError, match="too little"):
        free_memory_share(2 * gib, 80 * gib)
    assert [lora_rank_for(r) for r in (1, 4, 8, 9, 64, 100)] == [1, 8, 8, 16, 64, 128]


def test_adapter_folders_are_written_whole(tmp_path: Path) -> None:
    """A published version's adapter folder appears complete or not at all: a save that
    dies half-way leaves the previous folder and no partial one; publishing the version
    again replaces it. Only the trained adapter is written, not the KL reference's."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from trainer.published import write_adapter_folder

    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    model = get_peft_model(Qwen2ForCausalLM(config), LoraConfig(
        r=4, target_modules=["q_proj"], init_lora_weights=False))
    model.add_adapter("reference", LoraConfig(r=4, target_modules=["q_proj"]))
    version = tmp_path / "published" / "v1"
    adapter = write_adapter_folder(model, version)
    assert adapter == version / "adapter"
    assert sorted(p.name for p in adapter.iterdir()) == [
        "README.md", "adapter_config.json", "adapter_model.safetensors"]
    first = load_file(str(adapter / "adapter_model.safetensors"))

    class DiesWhileSaving:
        def save_pretrained(self, folder: Path, **kwargs: Any) -> None:
            model.save_pretrained(str(folder), **kwargs)
            raise OSError("killed")

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B.default" in name:
                parameter.add_(1.0)
    with pytest.raises(OSError, match="killed"):
        write_adapter_folder(DiesWhileSaving(), version)
    assert sorted(p.name for p in version.parent.iterdir()) == ["v1"]
    kept = load_file(str(adapter / "adapter_model.safetensors"))
    assert all(torch.equal(first[name], kept[name]) for name in first)
    write_adapter_folder(model, version)
    replaced = load_file(str(adapter / "adapter_model.safetensors"))
    assert sorted(p.name for p in version.parent.iterdir()) == ["v1"]
    assert any(not torch.equal(first[name], replaced[name]) for name in first)
