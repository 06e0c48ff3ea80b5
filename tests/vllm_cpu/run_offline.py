"""Runs in vLLM's own environment (.venv-vllm/bin/python, the repository on PYTHONPATH):
our VLLMBackend and VLLMWorker through vLLM's CPU build on the tiny text model, writing
every Generation to a JSON file that tests/test_vllm_cpu.py checks against transformers.

    python -m tests.vllm_cpu.run_offline MODEL ADAPTER_V1 ADAPTER_V2 OUT.json

vLLM starts worker processes: the work happens under the `__main__` guard.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any


def _together(backend: Any, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run `calls` on threads that all reach the backend while its queue is paused, so
    that the next batch takes them together."""
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        results[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    with backend._batcher.paused():
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120
        while backend._batcher.waiting < len(calls):  # every call waiting
            if time.monotonic() > deadline:
                raise RuntimeError("the calls did not reach the backend's queue")
            time.sleep(0.01)
    for thread in threads:
        thread.join()
    return results


def main(model: str, adapter_v1: str, adapter_v2: str, out: str) -> None:
    from agents.backends.base import SamplingConfig
    from agents.backends.vllm_backend import VLLMBackend
    from tests.vllm_cpu.tiny_text_model import PROMPT_CHATS
    from trainer.runtime.roles import Publication
    from trainer.runtime.service import VLLMWorker

    def dump(generations: list[Any]) -> list[dict[str, Any]]:
        return [asdict(generation) for generation in generations]

    started = time.perf_counter()
    backend = VLLMBackend(model, enable_lora=True, max_lora_rank=8, top_logprobs=5,
                          max_model_len=512, dtype="float32", enforce_eager=True)
    results: dict[str, Any] = {"load_seconds": time.perf_counter() - started}
    # the same settings as the vllm serve checks in tests/test_vllm_cpu.py
    sampled = SamplingConfig(max_new_tokens=12, temperature=0.7, seed=5)
    greedy = SamplingConfig(max_new_tokens=6, temperature=0.0)
    results["base_sampled"] = dump(backend.generate(PROMPT_CHATS, sampled))
    results["base_greedy"] = dump(backend.generate(PROMPT_CHATS[:1], greedy))
    truncated = SamplingConfig(max_new_tokens=4, temperature=0.7, top_p=0.9, seed=1)
    results["base_truncated"] = dump(backend.generate(PROMPT_CHATS[:1], truncated))

    # four threads' calls, in one LLM.generate
    before = backend.batches
    calls: list[Callable[[], Any]] = [
        functools.partial(backend.generate, [PROMPT_CHATS[i % 2]], greedy) for i in range(4)]
    together = _together(backend, calls)
    results["batched"] = {"llm_generate_calls": backend.batches - before,
                          "generations": [dump(g) for g in together]}

    # LoRA hot swap through the rollout service's worker: version 1, then version 2
    worker = VLLMWorker(backend, "vllm-cpu")
    v1 = Publication(1, {}, Path(adapter_v1))
    v2 = Publication(2, {}, Path(adapter_v2))
    results["v1_sampled"] = dump(worker.generate(PROMPT_CHATS, sampled, v1))
    results["v1_greedy"] = dump(worker.generate(PROMPT_CHATS[:1], greedy, v1))
    results["v2_sampled"] = dump(worker.generate(PROMPT_CHATS, sampled, v2))
    results["v2_greedy"] = dump(worker.generate(PROMPT_CHATS[:1], greedy, v2))
    results["v1_after_v2_greedy"] = dump(worker.generate(PROMPT_CHATS[:1], greedy, v1))
    # an episode still on version 1 beside one on version 2: one batch, two adapters
    before = backend.batches
    mixed = _together(backend, [
        lambda: worker.generate(PROMPT_CHATS[:1], greedy, v1),
        lambda: worker.generate(PROMPT_CHATS[:1], greedy, v2)])
    results["mixed"] = {"llm_generate_calls": backend.batches - before,
                        "v1": dump(mixed[0]), "v2": dump(mixed[1])}
    # version 1 retired, then published again from version 2's folder (a resumed run
    # re-publishing a version number): a new adapter id, so vLLM's cache gives v2's
    worker.retire(1)
    again = Publication(1, {}, Path(adapter_v2))
    results["v1_republished_greedy"] = dump(worker.generate(PROMPT_CHATS[:1], greedy, again))
    results["load_seconds_recorded"] = {"v1": v1.load_seconds, "v2": v2.load_seconds}
    backend.close()
    Path(out).write_text(json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:5])
