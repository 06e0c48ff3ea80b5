"""Any OpenAI-compatible chat server (`vllm serve`, `transformers serve`, hosted APIs).

Images go as PNG data URLs, already resized by the prompt builder. Log-probs come back
when the server returns them (`logprobs`/`top_logprobs`); entropies are then estimated
from the top log-probs. With `vllm_extensions`, vLLM's extra request fields ask for the
response and prompt token ids as well (`return_token_ids`).

Which log-probs a server returns is its own setting: `logprobs_mode` says it ("raw":
temperature 1, before any processing, as `vllm serve` gives by default and as hosted
APIs are taken to; "processed": after the temperature and any top-p/top-k, as
`vllm serve --logprobs-mode processed_logprobs`). Only log-probs at the sampling
temperature before truncation are returned (agents/backends/base.py); others are
dropped, and the sampling record says why. Every sampling parameter is sent explicitly
(penalties at their neutral values), so the server's defaults do not choose them.
`suppress_token_ids` (the model's vision placeholders, which a response must never hold)
go as OpenAI's `logit_bias` of -100, the ban; vLLM applies it before its processed
log-probs, so those are then of the distribution without the banned tokens (docs/vllm.md).
"""

from __future__ import annotations

import concurrent.futures
import math
import time
from collections.abc import Sequence
from typing import Any, Literal

from agents.backends.base import BackendError, Generation, SamplingConfig, logprob_temperature
from agents.prompting import to_openai_messages


class OpenAIBackend:
    name = "openai"

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout: float = 120.0, top_logprobs: int = 5, request_logprobs: bool = True,
                 vllm_extensions: bool = False, max_parallel: int = 8,
                 logprobs_mode: Literal["raw", "processed"] = "raw",
                 suppress_token_ids: Sequence[int] = ()) -> None:
        import requests

        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url: expected an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.top_logprobs = top_logprobs
        self.request_logprobs = request_logprobs
        self.vllm_extensions = vllm_extensions
        self.max_parallel = max_parallel
        if logprobs_mode not in ("raw", "processed"):
            raise ValueError(f"logprobs_mode: expected 'raw' or 'processed', got "
                             f"{logprobs_mode!r}")
        self.logprobs_mode = logprobs_mode
        self.suppress_token_ids = sorted({int(token) for token in suppress_token_ids})
        self._session = requests.Session()
        if api_key:
            self._session.headers["Authorization"] = f"Bearer {api_key}"

    def request_body(self, chat: list[dict[str, Any]], sampling: SamplingConfig
                     ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model, "messages": to_openai_messages(chat),
            "max_tokens": sampling.max_new_tokens, "temperature": sampling.temperature,
            "top_p": sampling.top_p, "frequency_penalty": 0.0, "presence_penalty": 0.0,
            "n": 1,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if self.suppress_token_ids:
            body["logit_bias"] = {str(token): -100 for token in self.suppress_token_ids}
        if self.request_logprobs:
            body["logprobs"] = True
            if self.top_logprobs:
                body["top_logprobs"] = self.top_logprobs
        if self.vllm_extensions:
            body["return_token_ids"] = True
            body["skip_special_tokens"] = True
            # vLLM's own sampling fields, neutral unless set: its defaults would otherwise
            # come from the served checkpoint's generation_config
            body.update(top_k=sampling.top_k or -1, min_p=0.0, repetition_penalty=1.0)
        return body

    def _one(self, chat: list[dict[str, Any]], sampling: SamplingConfig) -> Generation:
        import requests

        started = time.perf_counter()
        url = f"{self.base_url}/chat/completions"
        body = self.request_body(chat, sampling)
        try:
            response = self._session.post(url, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise BackendError(f"{url}: {exc}") from exc
        if response.status_code != 200:
            raise BackendError(f"{url}: HTTP {response.status_code}: {response.text[:500]}")
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise BackendError(f"{url}: not a chat completion: {response.text[:500]}") from exc
        sent = {k: v for k, v in body.items() if k != "messages"}
        record = sampling.record(**sent)
        record["logprobs_mode"] = self.logprobs_mode
        dropped = self._logprobs_dropped(sampling)
        if dropped:
            record["logprobs_dropped"] = dropped
        generation = Generation(text=text, finish_reason=choice.get("finish_reason"),
                                seconds=time.perf_counter() - started, sampling=record)
        content = (choice.get("logprobs") or {}).get("content")
        if content and not dropped:
            generation.logprobs = [float(t["logprob"]) for t in content]
            if all(t.get("top_logprobs") for t in content):
                generation.entropies = [_entropy_estimate(t["top_logprobs"]) for t in content]
                generation.entropy_is_estimate = True
        token_ids = choice.get("token_ids")
        if isinstance(token_ids, list):
            generation.token_ids = [int(t) for t in token_ids]
        prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids")
        if isinstance(prompt_ids, list):
            generation.prompt_ids = [int(t) for t in prompt_ids]
        return generation

    def _logprobs_dropped(self, sampling: SamplingConfig) -> str:
        """Why the server's log-probs are not those of the sampling temperature before
        truncation ('' when they are)."""
        wanted = logprob_temperature(sampling.temperature)
        if self.logprobs_mode == "raw" and wanted != 1.0:
            return (f"the server returns raw log-probs (temperature 1); the sample was "
                    f"drawn at temperature {sampling.temperature}")
        if self.logprobs_mode == "processed" and sampling.truncates:
            return ("the server's processed log-probs are of the top-p/top-k truncated "
                    "distribution")
        return ""

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        sampling = sampling or SamplingConfig()
        if len(chats) <= 1:
            return [self._one(chat, sampling) for chat in chats]
        workers = min(self.max_parallel, len(chats))
        with concurrent.futures.ThreadPoolExecutor(workers, "openai-backend") as pool:
            return list(pool.map(lambda chat: self._one(chat, sampling), chats))

    def close(self) -> None:
        self._session.close()


def _entropy_estimate(top: list[dict[str, Any]]) -> float:
    """Entropy over the top-k tokens only (a lower bound of the full entropy)."""
    total = 0.0
    for item in top:
        logprob = float(item["logprob"])
        if math.isfinite(logprob):
            total -= math.exp(logprob) * logprob
    return total
