"""Generation with vLLM in this process (GPU; the `gpu` extra).

Thin on purpose and written against vLLM's documented offline API: `LLM(...,
limit_mm_per_prompt=...)`, `LLM.generate` with a prompt text and `multi_modal_data`
(the raw images: vLLM expands the image tokens itself, which keeps Qwen2.5-VL's 3D
positions right with mixed image sizes), `SamplingParams(logprobs=k)` and LoRA adapters
through `LoRARequest`. Not exercised on machines without a GPU (vLLM is not installed
there).

Log-probs: the engine runs with `logprobs_mode="processed_logprobs"`, i.e. after the
temperature (and after top-p/top-k/min-p when a request sets them; vLLM's default,
"raw_logprobs", is temperature 1). With top-p and top-k off they are the log-probs of the
temperature-scaled distribution the trainer computes; with truncation on they are of the
truncated one, which the trainer does not compute, so none are returned then (the
sampling record says why). Entropies are estimated from the top-k processed log-probs.
Sampling: the engine ignores the checkpoint's generation_config (`generation_config=
"vllm"`) and every request sends each penalty and cut-off explicitly.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from agents.backends.base import BackendError, Generation, SamplingConfig
from agents.prompting import chat_template_text, resize_images


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise BackendError("the vLLM backend needs vllm: pip install "
                           "'gui-agent-workbench[gpu]' (on a machine with a GPU)") from exc
    return vllm


class VLLMBackend:
    name = "vllm"

    def __init__(self, model_path: str | Path, *, max_images: int = 5,
                 top_logprobs: int = 20, gpu_memory_utilization: float = 0.8,
                 max_model_len: int | None = None, enable_lora: bool = False,
                 max_lora_rank: int = 64, **llm_kwargs: Any) -> None:
        vllm = _import_vllm()
        from transformers import AutoTokenizer

        self.model_path = str(model_path)
        self.top_logprobs = top_logprobs
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        kwargs: dict[str, Any] = {
            "model": self.model_path, "limit_mm_per_prompt": {"image": max_images},
            "gpu_memory_utilization": gpu_memory_utilization,
            # log-probs at the sampling temperature (see the module's docstring)
            "logprobs_mode": "processed_logprobs",
            # vLLM's defaults, not the checkpoint's generation_config.json, for anything
            # a request leaves unset (each request sets all that shape sampling anyway)
            "generation_config": "vllm", **llm_kwargs,
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if enable_lora:
            kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank)
        self.llm = vllm.LLM(**kwargs)
        self._lora: Any = None
        self._lora_id = 0

    def set_adapter(self, adapter_path: str | Path | None, name: str | None = None) -> None:
        """Use a LoRA adapter folder for the next generations (None: the base model).
        A new folder gets a new id, so vLLM loads it rather than reusing a cached one."""
        if adapter_path is None:
            self._lora = None
            return
        from vllm.lora.request import LoRARequest

        self._lora_id += 1
        self._lora = LoRARequest(name or f"adapter-{self._lora_id}", self._lora_id,
                                 str(adapter_path))

    def use_policy_version(self, version: int, adapter_path: str | Path) -> float:
        """Generate with policy `version`'s LoRA adapter folder from now on, with no
        restart: one LoRARequest per version, named v<version>, id version + 1 (vLLM reads
        id 0 as "no adapter"); vLLM loads the folder on its first request. Returns the
        seconds spent here (the load itself happens in that first request)."""
        from vllm.lora.request import LoRARequest

        started = time.perf_counter()
        self._lora = LoRARequest(f"v{version}", version + 1, str(adapter_path))
        return time.perf_counter() - started

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        vllm = _import_vllm()
        sampling = sampling or SamplingConfig()
        sent = sampling_params(sampling, self.top_logprobs)
        params = vllm.SamplingParams(**sent)
        record = sampling.record(**sent)
        if sampling.truncates:
            record["logprobs_dropped"] = ("vLLM's processed log-probs are of the top-p/top-k "
                                          "truncated distribution, not the trainer's")
        requests = []
        for chat in chats:
            prompt: dict[str, Any] = {"prompt": chat_template_text(chat, self.tokenizer)}
            images = resize_images(chat)
            if images:
                prompt["multi_modal_data"] = {"image": images}
            requests.append(prompt)
        started = time.perf_counter()
        try:
            outputs = self.llm.generate(requests, params, lora_request=self._lora,
                                        use_tqdm=False)
        except Exception as exc:  # vLLM raises many kinds; the rollout records it
            raise BackendError(f"vLLM generate failed: {exc}") from exc
        seconds = time.perf_counter() - started
        generations = []
        for output in outputs:
            completion = output.outputs[0]
            token_ids = list(completion.token_ids)
            logprobs: list[float] | None = None
            entropies: list[float] | None = None
            if completion.logprobs and not sampling.truncates:
                logprobs = [float(step[token].logprob)
                            for step, token in zip(completion.logprobs, token_ids, strict=True)]
                entropies = [_entropy_estimate([lp.logprob for lp in step.values()])
                             for step in completion.logprobs]
            generations.append(Generation(
                text=completion.text, token_ids=token_ids, logprobs=logprobs,
                entropies=entropies, prompt_ids=list(output.prompt_token_ids or []) or None,
                finish_reason=completion.finish_reason, seconds=seconds,
                entropy_is_estimate=entropies is not None, sampling=dict(record)))
        return generations

    def close(self) -> None:
        self.llm = None


def sampling_params(sampling: SamplingConfig, top_logprobs: int) -> dict[str, Any]:
    """vLLM SamplingParams keyword arguments: `sampling`'s values and the neutral value of
    every other parameter that shapes the distribution."""
    return {
        "max_tokens": sampling.max_new_tokens, "temperature": sampling.temperature,
        "top_p": sampling.top_p, "top_k": sampling.top_k or -1, "min_p": 0.0,
        "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
        "seed": sampling.seed, "logprobs": top_logprobs, "n": 1,
    }


def _entropy_estimate(logprobs: list[float]) -> float:
    return -sum(math.exp(lp) * lp for lp in logprobs if math.isfinite(lp))
