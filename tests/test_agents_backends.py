"""Backends on the tiny Qwen2.5-VL checkpoint: transformers in-process (token ids,
log-probs and entropies that a training forward pass reproduces), an OpenAI-compatible
server (`transformers serve`, the protocol `vllm serve` speaks), and vLLM where installed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from agents.backends import BackendError, SamplingConfig
from agents.parsing import ImageBudget
from agents.prompting import PromptConfig, Turn, build_messages
from tests.conftest_x11 import wait_until
from tests.skip_policy import allowed_skip
from tests.tiny_models import png_screen, served_tiny_model, tiny_qwen25_vl

__all__ = ["served_tiny_model"]  # a fixture used here

CONFIG = PromptConfig(budget=ImageBudget(max_pixels=48 * 28 * 28))


@pytest.fixture(scope="module")
def backend() -> Any:
    from agents.backends.transformers_backend import TransformersBackend

    return TransformersBackend(tiny_qwen25_vl(), device="cpu")


def _chats() -> list[list[dict[str, Any]]]:
    return [
        build_messages("Add a to-do item", [Turn(png_screen(1280, 800, "red"),
                                                 "Action: wait()")],
                       png_screen(1280, 800), CONFIG),
        build_messages("Tick it", [], png_screen(640, 480, "blue"), CONFIG),
    ]


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_transformers_batch_gives_what_training_recomputes(backend: Any,
                                                           temperature: float) -> None:
    """Log-probs and entropies at the sampling temperature (greedy: at 1), as the trainer
    computes them, with how the sample was drawn recorded."""
    import torch

    chats = _chats()
    sampling = SamplingConfig(max_new_tokens=12, seed=7, temperature=temperature, top_p=0.9)
    generations = backend.generate(chats, sampling)
    assert len(generations) == 2
    for chat, generation in zip(chats, generations, strict=True):
        ids = generation.token_ids
        assert ids and len(ids) == len(generation.logprobs) == len(generation.entropies)
        assert generation.finish_reason in ("stop", "length")
        assert all(lp <= 0 for lp in generation.logprobs)
        vocab = backend.model.config.text_config.vocab_size
        assert all(0 <= e <= math.log(vocab) + 1e-4 for e in generation.entropies)
        # token-in/token-out: the prompt ids are the builder's, unpadded
        prompt = backend.encode(chat)
        assert generation.prompt_ids == prompt.prompt_ids
        # a training forward pass over prompt + response gives the same log-probs,
        # although the batch was left-padded and the images differed in size
        sequence = torch.tensor([prompt.prompt_ids + ids])
        with torch.no_grad():
            logits = backend.model(
                input_ids=sequence, attention_mask=torch.ones_like(sequence),
                mm_token_type_ids=(sequence == backend.image_token_id).long(),
                pixel_values=prompt.pixel_values, image_grid_thw=prompt.image_grid_thw,
            ).logits[0, len(prompt.prompt_ids) - 1:-1].float()
        scale = temperature if temperature > 0 else 1.0
        log_probs = torch.log_softmax(logits / scale, -1)
        recomputed = log_probs.gather(-1, torch.tensor(ids)[:, None])
        assert torch.allclose(recomputed.squeeze(-1), torch.tensor(generation.logprobs),
                              atol=1e-4)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        assert torch.allclose(entropy, torch.tensor(generation.entropies), atol=1e-4)
        record = generation.sampling
        assert record["temperature"] == temperature and record["top_p"] == 0.9
        assert record["logprob_temperature"] == scale
        sent = record["sent"]
        assert sent["do_sample"] is (temperature > 0)
        assert sent["repetition_penalty"] == 1.0 and sent["overridden"] == {}


def test_a_checkpoints_generation_config_cannot_change_sampling(backend: Any) -> None:
    """Fields we send override the checkpoint's (and are recorded); a field we cannot
    neutralise makes the backend refuse instead of sampling differently."""
    config = backend.model.generation_config
    chat = _chats()[1]
    sampling = SamplingConfig(max_new_tokens=8, seed=5)
    plain = backend.generate([chat], sampling)[0]
    saved = config.repetition_penalty, config.top_k
    config.repetition_penalty, config.top_k = 50.0, 1
    try:
        changed = backend.generate([chat], sampling)[0]
    finally:
        config.repetition_penalty, config.top_k = saved
    assert changed.token_ids == plain.token_ids and changed.logprobs == plain.logprobs
    assert changed.sampling["sent"]["overridden"] == {"repetition_penalty": 50.0, "top_k": 1}
    config.guidance_scale = 2.0
    try:
        with pytest.raises(BackendError, match="guidance_scale"):
            backend.generate([chat], sampling)
    finally:
        config.guidance_scale = None


def test_transformers_seed_and_greedy_repeat(backend: Any) -> None:
    chat = _chats()[1]
    first = backend.generate([chat], SamplingConfig(max_new_tokens=8, seed=3))[0]
    again = backend.generate([chat], SamplingConfig(max_new_tokens=8, seed=3))[0]
    assert first.token_ids == again.token_ids
    greedy = [backend.generate([chat], SamplingConfig(max_new_tokens=8, temperature=0))[0]
              for _ in range(2)]
    assert greedy[0].token_ids == greedy[1].token_ids


def test_calls_from_several_threads_are_batched_and_each_gets_its_own_answer(
        backend: Any) -> None:
    import threading

    import torch

    chats = [build_messages(f"Click the {colour} button", [], png_screen(320, 200, colour),
                            CONFIG) for colour in ("red", "blue", "green", "yellow")]
    greedy = SamplingConfig(max_new_tokens=6, temperature=0)
    alone = [backend.generate([chat], greedy)[0] for chat in chats]
    answers: dict[int, Any] = {}
    before = backend.batches
    # While the model is busy (its lock held here), the first call waits on it and the
    # other three queue up behind it; then the first goes alone and the three together.
    with backend._lock:
        threads = [threading.Thread(target=lambda i=i: answers.update(
            {i: backend.generate([chats[i]], greedy)[0]})) for i in range(4)]
        threads[0].start()
        wait_until(lambda: backend._batcher.busy, message="the first call to take the model")
        for thread in threads[1:]:
            thread.start()
        wait_until(lambda: backend._batcher.waiting == 3, message="three calls to queue up")
    for thread in threads:
        thread.join()
    assert backend.batches - before == 2
    for i, generation in enumerate(alone):
        batched = answers[i]
        assert batched.prompt_ids == generation.prompt_ids
        assert batched.token_ids == generation.token_ids
        assert torch.allclose(torch.tensor(batched.logprobs), torch.tensor(generation.logprobs),
                              atol=1e-4)


def test_a_failed_batch_fails_its_call_and_the_next_calls_go_on(
        backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = _chats()[1]
    with monkeypatch.context() as patch:  # the model fails once (as out of memory would)
        patch.setattr(backend, "_generate", lambda *_: (_ for _ in ()).throw(
            RuntimeError("CUDA out of memory")))
        with pytest.raises(BackendError, match="generate failed: CUDA out of memory"):
            backend.generate([chat], SamplingConfig(max_new_tokens=2, temperature=0))
    assert not backend._batcher.busy and not backend._batcher.waiting
    assert backend.generate([chat], SamplingConfig(max_new_tokens=2, temperature=0))[0].token_ids


def test_transformers_backend_rejects_a_missing_folder(tmp_path: Path) -> None:
    from agents.backends.transformers_backend import TransformersBackend

    with pytest.raises(BackendError, match="not a folder"):
        TransformersBackend(tmp_path / "nope")


@pytest.mark.slow
def test_openai_backend_against_transformers_serve(served_tiny_model: tuple[str, str]) -> None:
    from agents.backends.openai_backend import OpenAIBackend

    base_url, model = served_tiny_model
    backend = OpenAIBackend(base_url, model, timeout=60)
    generations = backend.generate(_chats(), SamplingConfig(max_new_tokens=10, seed=1))
    assert len(generations) == 2
    for generation in generations:
        assert isinstance(generation.text, str)
        assert generation.finish_reason in ("stop", "length")
        # transformers serve returns no log-probs; vllm serve does when asked
        assert generation.logprobs is None or len(generation.logprobs) > 0
    wrong = OpenAIBackend(base_url.replace("/v1", "/nowhere"), model, timeout=10)
    with pytest.raises(BackendError, match="HTTP 404"):
        wrong.generate(_chats()[:1], SamplingConfig(max_new_tokens=2))
    backend.close()


@pytest.fixture
def logprob_server() -> Any:
    """A local chat-completions server that answers every request with two tokens and
    their log-probs (transformers serve returns none), keeping the request bodies."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            top = [{"token": "a", "logprob": -0.1}, {"token": "b", "logprob": -2.4}]
            answer = {"choices": [{"message": {"content": "ab"}, "finish_reason": "stop",
                                   "logprobs": {"content": [
                                       {"token": "a", "logprob": -0.1, "top_logprobs": top},
                                       {"token": "b", "logprob": -2.4, "top_logprobs": top},
                                   ]}}]}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("mode", "temperature", "top_p", "kept"), [
    ("raw", 1.0, 0.9, True),  # raw log-probs are at temperature 1, before truncation
    ("raw", 0.0, 1.0, True),  # greedy: log-probs at temperature 1
    ("raw", 0.7, 1.0, False),  # raw log-probs of a sample drawn at 0.7: not the trainer's
    ("processed", 0.7, 1.0, True),
    ("processed", 0.7, 0.9, False),  # processed after top-p: the truncated distribution
])
def test_openai_backend_keeps_only_log_probs_at_the_sampling_temperature(
        logprob_server: tuple[str, list[dict[str, Any]]], mode: str, temperature: float,
        top_p: float, kept: bool) -> None:
    from agents.backends.openai_backend import OpenAIBackend

    url, bodies = logprob_server
    backend = OpenAIBackend(url, "m", timeout=10, vllm_extensions=True,
                            logprobs_mode=mode)  # type: ignore[arg-type]
    sampling = SamplingConfig(max_new_tokens=4, temperature=temperature, top_p=top_p)
    generation = backend.generate(_chats()[1:], sampling)[0]
    backend.close()
    assert (generation.logprobs == [-0.1, -2.4]) is kept
    assert (generation.entropies is not None) is kept
    assert generation.sampling is not None
    assert ("logprobs_dropped" not in generation.sampling) is kept
    # every parameter that shapes sampling is sent, and recorded as sent
    body = bodies[-1]
    assert {k: body[k] for k in ("temperature", "top_p", "top_k", "min_p",
                                 "repetition_penalty", "frequency_penalty",
                                 "presence_penalty")} == {
        "temperature": temperature, "top_p": top_p, "top_k": -1, "min_p": 0.0,
        "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
    assert generation.sampling["sent"] == {k: v for k, v in body.items() if k != "messages"}


def test_vllm_backend(tmp_path: Path) -> None:
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None:
        allowed_skip("no-vllm", "vLLM is not installed (the `gpu` extra; needs a GPU)")
    if not torch.cuda.is_available():
        allowed_skip("no-gpu", "vLLM needs a GPU")
    from agents.backends.vllm_backend import VLLMBackend

    backend = VLLMBackend(tiny_qwen25_vl(), max_images=5, gpu_memory_utilization=0.2,
                          max_model_len=4096, enforce_eager=True)
    generations = backend.generate(_chats(), SamplingConfig(max_new_tokens=8, seed=1))
    assert all(g.token_ids and len(g.token_ids) == len(g.logprobs or []) for g in generations)
    assert all(g.sampling and g.sampling["sent"]["repetition_penalty"] == 1.0
               for g in generations)
