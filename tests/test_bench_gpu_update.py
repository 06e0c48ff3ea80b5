"""bench/gpu_update.py's tiny path end to end on CPU: the random Qwen2.5-VL model, the
trainer's LoRA wrapping, one GRPO group through trainer.batch and trainer.grpo, the table
and the JSON; and its copies of the training defaults against trainer.config."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_gpu_update",
                                                  ROOT / "bench" / "gpu_update.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny matrices run faster on one thread, above all on a loaded machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def test_tiny_update_end_to_end(bench: ModuleType, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str], one_thread: None) -> None:
    out = tmp_path / "result.json"
    assert bench.main(["--tiny", "--updates", "2", "--warmup", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for row in ("parameters (base)", "trainable (LoRA r=16)", "update (fwd+bwd+opt)",
                "peak memory", "tokens/s"):
        assert row in printed
    result = json.loads(out.read_text())
    assert result["device"].startswith("cpu") and result["dtype"] == "float32"
    assert result["gradient_checkpointing"] is True
    assert 0 < result["trainable_parameters"] < result["parameters"]
    assert result["samples"] == 8 and result["micro_batches"] == 2
    # every sample shows one screenshot: 140x84 -> (10 x 6 patches) / 4 = 15 image tokens
    assert result["image_size"] == "140x84" and result["image_tokens"] == 8 * 15
    assert result["image_patches"] == 8 * 60
    assert result["response_tokens"] > 0 and result["tokens"] > result["response_tokens"]
    assert len(result["step_seconds"]) == 2 and result["step_seconds_median"] > 0
    assert result["tokens_per_second"] > 0 and result["peak_memory_gib"] is None
    assert all(math.isfinite(v) for v in result["loss"] + result["grad_norm"])
    assert result["grad_norm"][0] > 0
    # after a second step lora_A moves too (lora_B starts at zero, so A's first gradient is 0)
    assert result["trainable_tensors_moved"] == result["trainable_tensors"] > 0


def test_three_b_shape_matches_the_published_model(bench: ModuleType) -> None:
    """Built on the meta device (no memory): Qwen2.5-VL-3B-Instruct has 3,754,622,976
    parameters, its output layer tied to the embedding."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    config = bench.model_config(bench.SHAPES["3b"])
    with torch.device("meta"):
        model = Qwen2_5_VLForConditionalGeneration(config)
    assert sum(p.numel() for p in model.parameters()) == 3_754_622_976
    assert model.lm_head.weight is model.model.language_model.embed_tokens.weight
    assert config.vision_config.fullatt_block_indexes == [7, 15, 23, 31]


def test_defaults_match_the_training_config(bench: ModuleType) -> None:
    from trainer.config import TrainingConfig

    training = TrainingConfig()
    assert training.learning_rate == bench.LEARNING_RATE
    assert training.weight_decay == bench.WEIGHT_DECAY
    assert training.max_grad_norm == bench.MAX_GRAD_NORM
    assert training.micro_batch_size == bench.MICRO_BATCH_SIZE


def test_the_frozen_vision_tower_records_no_graph_and_the_gradients_stay(
        bench: ModuleType, one_thread: None) -> None:
    """Under gradient checkpointing the trainer drops the input-require-grads hook on the
    frozen vision tower's patch embedding (trainer.model.detach_frozen_vision_inputs, as
    PolicyModel.load does): the hook is gone from every vision module, the text side keeps
    its own, and every LoRA gradient is what it is without checkpointing and with the
    hook kept (the behaviour before the fix)."""
    import torch

    from trainer.batch import collate
    from trainer.grpo import GRPOConfig
    from trainer.model import _in_vision_tower

    def hooked(model: Any, vision: bool) -> list[str]:
        return [name for name, module in model.named_modules()
                if _in_vision_tower(name) == vision
                and any(getattr(h, "__name__", "").startswith("make_inputs_require_grad")
                        for h in module._forward_hooks.values())]

    shape = bench.SHAPES["tiny"]
    grads = []
    for checkpointing, keep in ((False, False), (True, False), (True, True)):
        policy, processor = bench.make_policy(shape, gradient_checkpointing=checkpointing,
                                              keep_vision_input_grads=keep)
        if checkpointing:
            assert bool(hooked(policy.model, vision=True)) == keep
            assert hooked(policy.model, vision=False)
        samples = bench.make_samples(shape, bench.ImageBudget(max_pixels=shape.max_pixels),
                                     group=4, images=1, prompt_tokens=20, response_tokens=4,
                                     seed=0)
        batches = [collate(samples, processor, shape.special["endoftext"])]
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.0)
        torch.manual_seed(1)  # the same LoRA dropout masks
        bench.update(policy, optimizer, batches, GRPOConfig(num_generations=4),
                     shape.config["image_token_id"], len(samples), 1.0)
        grads.append({name: p.grad for name, p in policy.model.named_parameters()
                      if p.requires_grad})
    assert grads[0].keys() == grads[1].keys() == grads[2].keys()
    assert any(bool(g.abs().sum() > 0) for g in grads[0].values())
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, msg=name)
        torch.testing.assert_close(grads[2][name], grad, msg=name)
