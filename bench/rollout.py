"""Rollout benchmark: generation speed of the tiny Qwen2.5-VL on CPU (batch 1 and 4,
with the baseline of plain `model.generate` on the processor's inputs measured in the same
run), and episode wall time on a sandbox for the scripted oracle and the tiny model, with
the split into reset, model, environment and evaluation time.

Run: `.venv/bin/python bench/rollout.py [--rounds N]`. Prints medians. Not a test.
The tiny model is random: its numbers measure the machinery, not a real model's speed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.backends import SamplingConfig
from agents.backends.transformers_backend import TransformersBackend
from agents.parsing import ImageBudget
from agents.policies import OraclePolicy, VLMPolicy, VLMPolicyConfig
from agents.prompting import PromptConfig, build_messages
from agents.rollout import Rollout, RolloutConfig
from tests.tiny_models import png_screen, tiny_qwen25_vl
from trainer.store import Store
from vm.env import DesktopEnv
from vm.providers.sandbox import SandboxProvider
from vm.suite import bundled_suite

NEW_TOKENS = 32


def bench_generation(backend: TransformersBackend, rounds: int) -> None:
    import torch
    from transformers import AutoProcessor

    prompt = PromptConfig(budget=ImageBudget(max_pixels=64 * 28 * 28))
    chat = build_messages("Add a to-do item", [], png_screen(1280, 800), prompt)
    sampling = SamplingConfig(max_new_tokens=NEW_TOKENS, seed=0)
    encode_seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        backend.encode(chat)
        encode_seconds.append(time.perf_counter() - started)
    print(f"prompt building (resize, image processor, tokenizer): "
          f"{statistics.median(encode_seconds) * 1000:.0f} ms per chat")
    per_batch: dict[int, float] = {}
    for batch in (1, 4):
        seconds, tokens = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            generations = backend.generate([chat] * batch, sampling)
            seconds.append(time.perf_counter() - started)
            tokens.append(sum(len(g.token_ids or []) for g in generations))
        median = statistics.median(seconds)
        per_batch[batch] = median
        print(f"transformers backend, batch {batch}: {median * 1000:.0f} ms per call, "
              f"{statistics.median(tokens) / median:.0f} generated tokens/s "
              f"(prompt {len(generations[0].prompt_ids or [])} tokens)")
    processor = AutoProcessor.from_pretrained(backend.model_path)
    encoded = backend.encode(chat)
    baseline = []
    for _ in range(rounds):
        started = time.perf_counter()
        inputs = processor(text=[encoded.text], images=encoded.images, return_tensors="pt")
        with torch.inference_mode():
            out = backend.model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=True)
        baseline.append(time.perf_counter() - started)
    produced = out.shape[1] - inputs["input_ids"].shape[1]
    print(f"baseline: processor + model.generate (no log-probs), batch 1: "
          f"{statistics.median(baseline) * 1000:.0f} ms, {produced} tokens; "
          f"ours batch 1 / baseline: {per_batch[1] / statistics.median(baseline):.2f}x")


def bench_episodes(backend: TransformersBackend, rounds: int) -> None:
    suite = bundled_suite()
    task = suite.tasks["todo-add"]
    folder = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    prompt = PromptConfig(budget=ImageBudget(max_pixels=64 * 28 * 28), history_images=2)
    vlm = VLMPolicy(backend, VLMPolicyConfig(prompt=prompt, sampling=SamplingConfig(
        max_new_tokens=NEW_TOKENS, seed=0)))
    with DesktopEnv(SandboxProvider("bench", folder / "sb", guest_server=False)) as env, \
            Store.open(folder / "store") as store:
        for label, policy, config in (
                ("oracle", OraclePolicy(), RolloutConfig()),
                ("tiny model, 5 steps", vlm, RolloutConfig(max_steps=5,
                                                           stop_on_parse_error=False))):
            walls: list[float] = []
            split: dict[str, list[float]] = {"reset": [], "model": [], "env": [],
                                             "evaluate": []}
            steps, scores = 0, []  # type: tuple[int, list[float | None]]
            for _ in range(rounds):
                started = time.perf_counter()
                with store.episodes.begin(task.id, source="rollout") as writer:
                    result = Rollout(env, policy, writer, config).run(
                        task, episode_id=writer.episode_id)
                walls.append(time.perf_counter() - started)
                steps = len(result.episode.steps)
                scores.append(result.episode.score)
                split["reset"].append(result.timings.get("reset", 0.0))
                split["evaluate"].append(result.timings.get("evaluate", 0.0))
                split["model"].append(sum(s.timings.get("model", 0) for s in result.episode.steps))
                split["env"].append(sum(s.timings.get("env", 0) for s in result.episode.steps))
            parts = ", ".join(f"{k} {statistics.median(v) * 1000:.0f} ms" for k, v in split.items())
            print(f"episode ({label}, {steps} steps, scores {scores}, stored): "
                  f"{statistics.median(walls) * 1000:.0f} ms wall; {parts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    backend = TransformersBackend(tiny_qwen25_vl(), device="cpu")
    bench_generation(backend, args.rounds)
    bench_episodes(backend, args.rounds)


if __name__ == "__main__":
    main()
