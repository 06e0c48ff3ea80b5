"""Runs in vLLM's own environment (.venv-vllm/bin/python, the repository on PYTHONPATH):
our VLLMBackend and VLLMWorker through vLLM's CPU build on the tiny text model, writing
every Generation to a JSON file that tests/test_vllm_cpu.py checks against transformers;
last, an asynchronous run's versions through the rollout service, each version's folder
removed once it is retired (`_retirement`).

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
    results["retirement"] = _retirement(backend, greedy, Path(adapter_v1), Path(adapter_v2),
                                        Path(out).parent / "async-published")
    Path(out).write_text(json.dumps(results))


def _retirement(backend: Any, greedy: Any, adapter_v1: Path, adapter_v2: Path,
                folder: Path) -> dict[str, Any]:
    """Versions 3, 4 and 5 (the adapters of 1, 2 and 1 again) published into `folder` as
    AsyncTrainingRun publishes them, with episodes' sessions opened and closed between:
    the folders in place after each step and each session's greedy tokens. Closes the
    service, and with it the backend."""
    import shutil

    from tests.vllm_cpu.tiny_text_model import PROMPT_CHATS
    from trainer.published import PublishedVersions
    from trainer.runtime.roles import Publication
    from trainer.runtime.service import RolloutService, VLLMWorker

    class Saved:  # the trainer's model, saving the adapter `source` holds
        def __init__(self, source: Path) -> None:
            self.source = source

        def save_pretrained(self, target: Path, **kwargs: Any) -> None:
            shutil.copytree(self.source, target)

    versions = PublishedVersions(folder)
    service = RolloutService([VLLMWorker(backend, "vllm-cpu")], on_retired=versions.remove)
    found: dict[str, Any] = {}

    def publish(version: int, source: Path) -> None:
        service.publish(Publication(version, {}, versions.write(Saved(source), version)))

    def tokens(session: Any) -> list[int]:
        return list(session.generate(PROMPT_CHATS[:1], greedy)[0].token_ids)

    try:
        publish(3, adapter_v1)
        first = service.session()
        found["first_tokens"] = tokens(first)
        publish(4, adapter_v2)
        second = service.session()
        found["second_tokens"] = tokens(second)
        found["both_in_use"] = versions.versions()
        first.close()
        found["first_closed"] = versions.versions()
        found["second_tokens_after"] = tokens(second)
        publish(5, adapter_v1)
        third = service.session()
        found["third_tokens"] = tokens(third)
        found["third_published"] = versions.versions()
        second.close()
        third.close()
        found["all_closed"] = versions.versions()
        found["entries"] = sorted(p.name for p in folder.iterdir())
    finally:
        service.close()
    return found


if __name__ == "__main__":
    main(*sys.argv[1:5])
