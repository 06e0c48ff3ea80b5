"""One LoRA GRPO update of a Qwen2.5-VL model with Qwen2.5-VL-3B-Instruct's shapes: random
weights built in place (no download), the adapter added by the trainer's own code
(trainer.model), the batch padded by trainer.batch and the loss from trainer.grpo, as
`TrainingRun._optimise` runs them for one update (num_iterations 1, beta 0).

    python bench/gpu_update.py --out gpu_update.json      # 3B shapes, bf16, on the GPU
    python bench/gpu_update.py --shape tiny               # the same path on CPU, tiny model

The batch is one GRPO group: --group samples (default 8), each a step of a multi-turn
episode with one --screen screenshot (1280x720, resized within --max-pixels as the prompt
builder does), about --prompt-tokens text tokens of prompt and --response-tokens response
tokens, in micro-batches of --micro-batch (training.micro_batch_size's default, 4).
Reports the parameter counts, the time of one update (forward + backward of every
micro-batch, gradient clipping and the optimizer step; median of --updates after
--warmup, with torch.cuda.synchronize), peak GPU memory (torch.cuda.max_memory_allocated)
and tokens per second; prints a table and writes it as JSON to --out.

Imports only torch, transformers, peft, PIL and numpy beside the project's trainer.model,
trainer.batch and trainer.grpo (not trainer.config: it pulls in the store's sqlite-utils),
so it runs on a machine with a stock PyTorch image.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.parsing.coordinates import ImageBudget  # noqa: E402
from trainer.grpo import GRPOConfig  # noqa: E402
from trainer.model import (  # noqa: E402
    LoraSettings,
    ModelConfig,
    PolicyModel,
    _add_adapter,
    detach_frozen_vision_inputs,
    resolve_device,
    resolve_dtype,
)

# trainer.config.TrainingConfig's defaults (tests check they agree); not imported here
# because trainer.config imports the store, which needs sqlite-utils.
LEARNING_RATE = 1e-6
WEIGHT_DECAY = 0.0
MAX_GRAD_NORM = 1.0
MICRO_BATCH_SIZE = 4

# Qwen2.5-VL-3B-Instruct's config.json, in transformers' Qwen2_5_VLConfig field names.
QWEN25_VL_3B: dict[str, Any] = {
    "text_config": {
        "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 11008,
        "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 2,
        "hidden_act": "silu", "max_position_embeddings": 128000, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "tie_word_embeddings": True,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "bos_token_id": 151643, "eos_token_id": 151645,
    },
    "vision_config": {
        "depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
        "out_hidden_size": 2048, "patch_size": 14, "spatial_merge_size": 2,
        "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
        "hidden_act": "silu", "in_channels": 3, "tokens_per_second": 2,
    },
    "tie_word_embeddings": True,
    "image_token_id": 151655, "video_token_id": 151656,
    "vision_start_token_id": 151652, "vision_end_token_id": 151653,
}
QWEN_SPECIAL = {"endoftext": 151643, "im_start": 151644, "im_end": 151645}

# A few hundred thousand parameters: the CPU check of the same path.
TINY_VOCAB = 512
TINY: dict[str, Any] = {
    "text_config": {
        "vocab_size": TINY_VOCAB, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "max_position_embeddings": 32768, "tie_word_embeddings": True,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
        "bos_token_id": TINY_VOCAB - 8, "eos_token_id": TINY_VOCAB - 6,
        "pad_token_id": TINY_VOCAB - 8,
    },
    "vision_config": {
        "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
        "out_hidden_size": 32, "patch_size": 14, "spatial_merge_size": 2,
        "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [1],
    },
    "tie_word_embeddings": True,
    "image_token_id": TINY_VOCAB - 3, "video_token_id": TINY_VOCAB - 2,
    "vision_start_token_id": TINY_VOCAB - 5, "vision_end_token_id": TINY_VOCAB - 4,
}
TINY_SPECIAL = {"endoftext": TINY_VOCAB - 8, "im_start": TINY_VOCAB - 7,
                "im_end": TINY_VOCAB - 6}


@dataclass(frozen=True)
class Shape:
    """A model configuration and the batch that goes with it."""

    name: str
    config: dict[str, Any]
    special: dict[str, int]
    group: int
    screen: tuple[int, int]
    max_pixels: int
    prompt_tokens: int
    response_tokens: int


SHAPES = {
    "3b": Shape("qwen2.5-vl-3b", QWEN25_VL_3B, QWEN_SPECIAL, group=8, screen=(1280, 720),
                max_pixels=1280 * 28 * 28, prompt_tokens=1000, response_tokens=64),
    "tiny": Shape("tiny", TINY, TINY_SPECIAL, group=8, screen=(128, 72),
                  max_pixels=128 * 28 * 28, prompt_tokens=40, response_tokens=8),
}


def model_config(shape: Shape, layers: int | None = None) -> Any:
    """Qwen2_5_VLConfig of `shape`; `layers` cuts both stacks (a quick check of widths)."""
    from transformers import Qwen2_5_VLConfig

    text = dict(shape.config["text_config"])
    vision = dict(shape.config["vision_config"])
    if layers is not None:
        text["num_hidden_layers"] = layers
        vision["depth"] = layers
        vision["fullatt_block_indexes"] = [i for i in vision["fullatt_block_indexes"]
                                           if i < layers] or [layers - 1]
    top = {k: v for k, v in shape.config.items() if k not in ("text_config", "vision_config")}
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **top)


def build_model(config: Any, dtype: Any, device: Any, attn_implementation: str,
                seed: int) -> Any:
    """The model with random weights, allocated and initialised on `device` in `dtype`."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    torch.manual_seed(seed)
    if attn_implementation:
        config._attn_implementation = attn_implementation
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2_5_VLForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(previous)
    return model


def make_policy(shape: Shape, *, device: str = "", dtype: str = "auto",
                gradient_checkpointing: bool = True, attn_implementation: str = "",
                lora: LoraSettings | None = None, layers: int | None = None,
                seed: int = 0, keep_vision_input_grads: bool = False
                ) -> tuple[PolicyModel, Any]:
    """A PolicyModel as PolicyModel.load makes one for finetune = "lora", on the random
    model instead of weights from a folder; and the image processor for the batch."""
    from transformers import Qwen2VLImageProcessor

    config = ModelConfig(path="", finetune="lora", lora=lora or LoraSettings(),
                         gradient_checkpointing=gradient_checkpointing, dtype=dtype,
                         device=device, attn_implementation=attn_implementation)
    torch_device = resolve_device(config.device)
    torch_dtype = resolve_dtype(config.dtype, torch_device)
    model = build_model(model_config(shape, layers), torch_dtype, torch_device,
                        config.attn_implementation, seed)
    # as PolicyModel.load does between loading the weights and adding the adapter
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
    model = _add_adapter(model, config, None)
    if config.gradient_checkpointing and not keep_vision_input_grads:
        detach_frozen_vision_inputs(model)
    model.train()
    processor = Qwen2VLImageProcessor(min_pixels=ImageBudget().min_pixels,
                                      max_pixels=shape.max_pixels)
    policy = PolicyModel(model, None, processor, None, config, torch_device,
                         Path(f"random:{shape.name}"))
    return policy, processor


def screenshot(width: int, height: int, budget: ImageBudget, rng: random.Random) -> Any:
    """A screenshot-like image (flat panels, some noise) resized as the prompt builder
    resizes it (smart_resize within the budget, sides multiples of 28)."""
    import numpy as np
    from PIL import Image

    generator = np.random.default_rng(rng.randrange(2**32))
    pixels = np.full((height, width, 3), 235, dtype=np.uint8)
    for _ in range(12):  # windows and toolbars
        x0, y0 = int(generator.integers(0, width)), int(generator.integers(0, height))
        x1 = min(width, x0 + int(generator.integers(20, max(21, width // 2))))
        y1 = min(height, y0 + int(generator.integers(10, max(11, height // 3))))
        pixels[y0:y1, x0:x1] = generator.integers(0, 256, 3, dtype=np.uint8)
    noise = generator.integers(0, 256, (height, width, 3), dtype=np.uint8)
    text = generator.random((height, width)) < 0.05  # glyph-like speckle
    pixels[text] = noise[text]
    image = Image.fromarray(pixels, "RGB")
    size = budget.resized_size(width, height)
    return image if image.size == size else image.resize(size, Image.Resampling.BICUBIC)


def make_samples(shape: Shape, budget: ImageBudget, *, group: int, images: int,
                 prompt_tokens: int, response_tokens: int, seed: int) -> list[Any]:
    """One GRPO group of step-level samples, laid out as SampleBuilder lays out a step of a
    multi-turn chat (system, instruction and earlier responses as text, the screenshots,
    the response closed by <|im_end|>), with rollout log-probs on the response tokens and
    group advantages from binary rewards. Lengths vary by about 10% around the asked ones."""
    from trainer.grpo import group_advantages
    from trainer.samples import Sample

    rng = random.Random(seed)
    special = shape.special
    config = shape.config
    text_ids = min(special.values())  # ordinary tokens lie below the special ones
    merge = int(config["vision_config"]["spatial_merge_size"])
    patch = int(config["vision_config"]["patch_size"])
    width, height = shape.screen
    nan = float("nan")

    def words(count: int) -> list[int]:
        return [rng.randrange(text_ids) for _ in range(count)]

    samples = []
    for index in range(group):
        pictures = [screenshot(width, height, budget, rng) for _ in range(images)]
        prompt_length = max(8, round(prompt_tokens * rng.uniform(0.9, 1.1)))
        response_length = max(2, round(response_tokens * rng.uniform(0.75, 1.25)))
        # <|im_start|>system ... <|im_end|> <|im_start|>user <text> [images] <|im_end|>
        # <|im_start|>assistant  -- the text split between the system prompt and the turn
        system = prompt_length // 3
        ids = [special["im_start"], *words(system), special["im_end"], special["im_start"],
               *words(prompt_length - system)]
        for picture in pictures:
            w, h = picture.size
            ids += [config["vision_start_token_id"],
                    *[config["image_token_id"]] * ((w // patch) * (h // patch)
                                                   // (merge * merge)),
                    config["vision_end_token_id"]]
        ids += [special["im_end"], special["im_start"], *words(2)]
        response = [*words(response_length - 1), special["im_end"]]
        logprobs = [-rng.expovariate(2.0) for _ in response]
        samples.append(Sample(
            episode_id=f"bench-{index}", task_id="bench-task", input_ids=ids + response,
            response_mask=[0] * len(ids) + [1] * len(response),
            rollout_logprobs=[nan] * len(ids) + logprobs,
            entropies=[nan] * (len(ids) + len(response)), images=pictures,
            step_indices=[rng.randrange(1, 15)], policy_version=0))
    # a group that half succeeds: every member gets a non-zero advantage
    rewards = [1.0 if i % 2 == 0 else 0.0 for i in range(group)]
    advantages = group_advantages(rewards, [s.task_id for s in samples], "group")
    for sample, advantage in zip(samples, advantages, strict=True):
        sample.advantage = advantage
    return samples


def update(policy: PolicyModel, optimizer: Any, batches: list[Any], grpo: GRPOConfig,
           image_token_id: int, sample_count: int, max_grad_norm: float) -> dict[str, float]:
    """One GRPO update as TrainingRun._optimise makes it with num_iterations = 1 and
    beta = 0: per micro-batch the policy's log-probs and entropies (trainer.batch), the
    clipped, importance-corrected loss (trainer.grpo) and backward; then the gradient
    norm is clipped and the optimizer steps."""
    from trainer.batch import token_logprobs
    from trainer.grpo import accumulated_loss, clip_gradients, policy_loss

    model = policy.model
    model.train()
    total_tokens = sum(b.tokens for b in batches)
    params = policy.trainable_parameters()
    optimizer.zero_grad(set_to_none=True)
    losses = []
    for batch in batches:
        logp, entropy = token_logprobs(model, batch, image_token_id, with_entropy=True)
        out = policy_loss(logp, logp.detach(), batch.advantages, batch.mask, grpo,
                          rollout_logp=batch.rollout_logprobs, entropies=entropy,
                          token_normaliser=total_tokens)
        accumulated_loss(out.loss, grpo, len(batch.samples), sample_count).backward()
        losses.append(out.stats["loss"])
    norm = clip_gradients(params, max_grad_norm)
    optimizer.step()
    return {"loss": float(sum(losses)), "grad_norm": norm}


def run(shape: Shape, *, device: str = "", dtype: str = "auto", group: int | None = None,
        images: int = 1, prompt_tokens: int | None = None, response_tokens: int | None = None,
        micro_batch: int = MICRO_BATCH_SIZE, updates: int = 3, warmup: int = 1,
        gradient_checkpointing: bool = True, attn_implementation: str = "",
        layers: int | None = None, keep_vision_input_grads: bool = False,
        seed: int = 0) -> dict[str, Any]:
    """Build the policy and the batch, run `warmup` + `updates` updates; the results."""
    import torch

    from trainer.batch import collate

    started = time.perf_counter()
    policy, processor = make_policy(shape, device=device, dtype=dtype,
                                    gradient_checkpointing=gradient_checkpointing,
                                    attn_implementation=attn_implementation,
                                    layers=layers, seed=seed,
                                    keep_vision_input_grads=keep_vision_input_grads)
    cuda = policy.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(policy.device)
    build_seconds = time.perf_counter() - started
    trainable, total = policy.parameter_counts()
    model_dtype = next(policy.model.parameters()).dtype
    budget = ImageBudget(max_pixels=shape.max_pixels)
    samples = make_samples(shape, budget, group=group or shape.group, images=images,
                           prompt_tokens=prompt_tokens or shape.prompt_tokens,
                           response_tokens=response_tokens or shape.response_tokens,
                           seed=seed)
    started = time.perf_counter()
    pad = shape.special["endoftext"]
    batches = [collate(samples[i:i + micro_batch], processor, pad).to(policy.device)
               for i in range(0, len(samples), micro_batch)]
    collate_seconds = time.perf_counter() - started
    image_token_id = int(shape.config["image_token_id"])
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=LEARNING_RATE,
                                  weight_decay=WEIGHT_DECAY)
    grpo = GRPOConfig(num_generations=max(2, len(samples)))
    before = {name: p.detach().clone() for name, p in policy.model.named_parameters()
              if p.requires_grad}
    weights_bytes = 0
    if cuda:
        torch.cuda.synchronize(policy.device)
        weights_bytes = torch.cuda.memory_allocated(policy.device)
        torch.cuda.reset_peak_memory_stats(policy.device)

    times: list[float] = []
    stats: list[dict[str, float]] = []
    for index in range(warmup + updates):
        if cuda:
            torch.cuda.synchronize(policy.device)
        started = time.perf_counter()
        result = update(policy, optimizer, batches, grpo, image_token_id, len(samples),
                        MAX_GRAD_NORM)
        if cuda:
            torch.cuda.synchronize(policy.device)
        elapsed = time.perf_counter() - started
        if index >= warmup:
            times.append(elapsed)
        stats.append(result)
    moved = sum(not torch.equal(before[name], p.detach())
                for name, p in policy.model.named_parameters() if p.requires_grad)

    tokens = sum(int(b.attention_mask.sum()) for b in batches)
    response = sum(b.tokens for b in batches)
    image_tokens = sum(int((b.input_ids == image_token_id).sum()) for b in batches)
    patches = sum(int(b.pixel_values.shape[0]) for b in batches if b.pixel_values is not None)
    step = statistics.median(times)
    gib = 1024.0 ** 3
    return {
        "model": shape.name,
        "device": torch.cuda.get_device_name(policy.device) if cuda
        else f"cpu ({platform.processor() or platform.machine()})",
        "dtype": str(model_dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "peft": __import__("peft").__version__,
        "attn_implementation": str(getattr(policy.model.config, "_attn_implementation", "")),
        "gradient_checkpointing": gradient_checkpointing,
        "keep_vision_input_grads": keep_vision_input_grads,
        "layers": layers,
        "parameters": total - trainable,
        "trainable_parameters": trainable,
        "lora": {"r": policy.config.lora.r, "alpha": policy.config.lora.alpha,
                 "target_modules": list(policy.config.lora.target_modules)},
        "samples": len(samples),
        "micro_batch_size": micro_batch,
        "micro_batches": len(batches),
        "screen": f"{shape.screen[0]}x{shape.screen[1]}",
        "image_size": "x".join(str(v) for v in samples[0].images[0].size),
        "images_per_sample": images,
        "image_patches": patches,
        "tokens": tokens,
        "padded_tokens": sum(int(b.input_ids.numel()) for b in batches),
        "image_tokens": image_tokens,
        "response_tokens": response,
        "tokens_per_sample_mean": tokens / len(samples),
        "warmup_updates": warmup,
        "step_seconds": times,
        "step_seconds_median": step,
        "tokens_per_second": tokens / step,
        "response_tokens_per_second": response / step,
        "peak_memory_gib": torch.cuda.max_memory_allocated(policy.device) / gib if cuda
        else None,
        "peak_reserved_gib": torch.cuda.max_memory_reserved(policy.device) / gib if cuda
        else None,
        "weights_memory_gib": weights_bytes / gib if cuda else None,
        "build_seconds": build_seconds,
        "collate_seconds": collate_seconds,
        "loss": [s["loss"] for s in stats],
        "grad_norm": [s["grad_norm"] for s in stats],
        "trainable_tensors_moved": moved,
        "trainable_tensors": len(before),
    }


def table(result: dict[str, Any]) -> str:
    def count(n: int) -> str:
        return f"{n / 1e9:.3f} B" if n >= 1e9 else f"{n / 1e6:.2f} M"

    def gib(value: float | None) -> str:
        return "n/a (CPU)" if value is None else f"{value:.2f} GiB"

    kept = ", the frozen vision tower's input-grad hook kept (as before the fix)"
    rows = [
        ("device", result["device"]),
        ("model", f"{result['model']} ({result['dtype']}, attention "
                  f"{result['attn_implementation']}, gradient checkpointing "
                  f"{'on' if result['gradient_checkpointing'] else 'off'}"
                  f"{kept if result['keep_vision_input_grads'] else ''})"),
        ("parameters (base)", count(result["parameters"])),
        (f"trainable (LoRA r={result['lora']['r']})", count(result["trainable_parameters"])),
        ("batch", f"{result['samples']} samples in {result['micro_batches']} micro-batches "
                  f"of {result['micro_batch_size']}; {result['images_per_sample']} x "
                  f"{result['screen']} -> {result['image_size']} per sample"),
        ("tokens", f"{result['tokens']} ({result['image_tokens']} image, "
                   f"{result['response_tokens']} response; "
                   f"{result['tokens_per_sample_mean']:.0f} per sample)"),
        ("update (fwd+bwd+opt)", f"{result['step_seconds_median']:.3f} s median of "
                                 f"{len(result['step_seconds'])} "
                                 f"({', '.join(f'{t:.3f}' for t in result['step_seconds'])})"),
        ("peak memory", f"{gib(result['peak_memory_gib'])} allocated, "
                        f"{gib(result['peak_reserved_gib'])} reserved; weights "
                        f"{gib(result['weights_memory_gib'])}"),
        ("tokens/s", f"{result['tokens_per_second']:.0f} "
                     f"({result['response_tokens_per_second']:.0f} response tokens/s)"),
        ("loss, grad norm", f"{result['loss'][-1]:+.4f}, {result['grad_norm'][-1]:.4f} "
                            f"({result['trainable_tensors_moved']}/"
                            f"{result['trainable_tensors']} LoRA tensors moved)"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="3b",
                        help="3b: Qwen2.5-VL-3B-Instruct's shapes; tiny: a CPU-sized model")
    parser.add_argument("--tiny", action="store_true", help="same as --shape tiny")
    parser.add_argument("--device", default="",
                        help="torch device (default: cuda when available, else cpu)")
    parser.add_argument("--dtype", default="auto",
                        help="auto (bfloat16 on GPU, float32 on CPU), bfloat16, float32")
    parser.add_argument("--group", type=int, default=None, help="samples (default 8)")
    parser.add_argument("--images", type=int, default=1, help="screenshots per sample")
    parser.add_argument("--prompt-tokens", type=int, default=None,
                        help="text tokens of each prompt, about (default 1000; tiny 40)")
    parser.add_argument("--response-tokens", type=int, default=None,
                        help="response tokens of each sample, about (default 64; tiny 8)")
    parser.add_argument("--micro-batch", type=int, default=MICRO_BATCH_SIZE)
    parser.add_argument("--updates", type=int, default=3, help="timed updates")
    parser.add_argument("--warmup", type=int, default=1, help="untimed updates first")
    parser.add_argument("--no-gradient-checkpointing", action="store_true")
    parser.add_argument("--keep-vision-input-grads", action="store_true",
                        help="keep the hook that makes the frozen vision tower record a graph "
                             "under gradient checkpointing, as before the fix (see "
                             "trainer.model.detach_frozen_vision_inputs)")
    parser.add_argument("--attn", default="", help="attn_implementation (default sdpa)")
    parser.add_argument("--layers", type=int, default=None,
                        help="cut the text and vision stacks to this many layers")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run the 3b shape without a GPU (with --layers, a width check)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    for name in ("group", "images", "prompt_tokens", "response_tokens", "micro_batch",
                 "updates", "layers"):
        value = getattr(args, name)
        if value is not None and value < (2 if name == "group" else 1):
            parser.error(f"--{name.replace('_', '-')}: expected at least "
                         f"{2 if name == 'group' else 1}, got {value}")
    if args.warmup < 0:
        parser.error(f"--warmup: expected at least 0, got {args.warmup}")
    shape = SHAPES["tiny" if args.tiny else args.shape]
    import torch

    if shape.name != "tiny" and not args.allow_cpu and not args.device \
            and not torch.cuda.is_available():
        parser.error("no GPU here: --shape tiny runs the same path on CPU "
                     "(or --allow-cpu --layers 1 for the 3B widths)")
    result = run(shape, device=args.device, dtype=args.dtype, group=args.group,
                 images=args.images, prompt_tokens=args.prompt_tokens,
                 response_tokens=args.response_tokens, micro_batch=args.micro_batch,
                 updates=args.updates, warmup=args.warmup,
                 gradient_checkpointing=not args.no_gradient_checkpointing,
                 attn_implementation=args.attn, layers=args.layers,
                 keep_vision_input_grads=args.keep_vision_input_grads)
    print(table(result), flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    failed = not all(math.isfinite(v) for v in result["loss"] + result["grad_norm"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
