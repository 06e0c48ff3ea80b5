"""Generation with transformers on CPU or GPU, batched, with token ids, log-probs and
entropies of every response token.

Calls from several threads (a rollout per environment) are batched together
(`agents.backends.batching.Batcher`): while one batch generates, the calls that arrive
wait, and the next of them to go takes all the waiting calls with the same sampling
settings (up to `max_batch` chats) into one batch. Nobody waits for a batch to fill: a
call that finds the model free goes at once.

The prompt is encoded by `agents.prompting.encode` (the builder the trainer uses), so
the prompt ids returned here are the ids the trainer will see.

Sampling is ours alone: every generation-config field that shapes the distribution is
sent explicitly (`sampling_settings`), so a checkpoint's generation_config.json (say a
repetition_penalty of 1.05) cannot change sampling behind the trainer's back. Fields of
the checkpoint's that we set are overridden and recorded with each generation
(`sent["overridden"]`); a checkpoint that sets one we have no neutral value for
(`UNCONTROLLED_FIELDS`: bad_words_ids, guidance_scale, ...) is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.backends.base import BackendError, Generation, SamplingConfig, logprob_temperature
from agents.backends.batching import Batcher
from agents.prompting import PromptInputs, encode

MAX_BATCH = 16  # chats in one batched generate call
# Generation-config fields that change which tokens are drawn and have no value meaning
# "off" other than unset (which transformers fills from the checkpoint's config): a
# checkpoint that sets one is refused.
UNCONTROLLED_FIELDS = (
    "bad_words_ids", "sequence_bias", "forced_bos_token_id", "forced_eos_token_id",
    "begin_suppress_tokens", "exponential_decay_length_penalty", "guidance_scale",
    "watermarking_config", "top_h", "stop_strings", "penalty_alpha", "dola_layers",
    "constraints", "force_words_ids", "max_time", "prompt_lookup_num_tokens",
    "assistant_early_exit")


def sampling_settings(sampling: SamplingConfig) -> dict[str, Any]:
    """Every generation-config field that shapes the sampled distribution, explicitly:
    `sampling`'s own and the neutral value of each other one (no penalties, no cut-offs,
    no beams), so that nothing is left for a checkpoint's generation_config to fill."""
    sample = sampling.temperature > 0
    return {
        "max_new_tokens": sampling.max_new_tokens,
        # min_new_tokens set (to 0) also sets min_length, whatever the checkpoint says
        "min_new_tokens": 0,
        "do_sample": sample,
        "temperature": sampling.temperature if sample else 1.0,
        "top_p": sampling.top_p if sample else 1.0,
        "top_k": (sampling.top_k or 0) if sample else 0,  # 0: off
        "min_p": 0.0, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0,
        "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0,
        "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
        "num_beams": 1, "num_beam_groups": 1, "diversity_penalty": 0.0,
        "length_penalty": 1.0, "renormalize_logits": False, "remove_invalid_values": False,
        "num_return_sequences": 1,
    }
Row = tuple[list[int], list[float], list[float], str]  # ids, log-probs, entropies, reason


@dataclass(frozen=True)
class _Request:
    """One generate call's prompts and sampling, for the batcher."""

    prompts: list[PromptInputs]
    sampling: SamplingConfig


class TransformersBackend:
    """A Qwen2.5-VL-family model loaded from a local folder (optionally with a LoRA
    adapter through peft)."""

    name = "transformers"

    def __init__(self, model_path: str | Path, *, device: str | None = None,
                 dtype: str = "auto", adapter_path: str | Path | None = None,
                 attn_implementation: str | None = None) -> None:
        import torch
        from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

        self.model_path = Path(model_path)
        if not self.model_path.is_dir():
            raise BackendError(f"model_path: {self.model_path} is not a folder")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.image_processor = AutoImageProcessor.from_pretrained(self.model_path)
        self.chat_template = _processor_chat_template(self.model_path)
        kwargs: dict[str, Any] = {"dtype": dtype}
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        model: Any = AutoModelForImageTextToText.from_pretrained(self.model_path, **kwargs)
        if adapter_path is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter_path))
        self._setup(model.to(self.device).eval())

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, image_processor: Any,
                   chat_template: str | None = None) -> TransformersBackend:
        """A backend over a model already in memory (the trainer's own policy in an
        embedded run: rollouts see each update at once, with no copy and no reload).
        The caller owns the model's train/eval mode."""
        backend = cls.__new__(cls)
        backend.model_path = Path(getattr(model, "name_or_path", "") or ".")
        backend.tokenizer = tokenizer
        backend.image_processor = image_processor
        backend.chat_template = chat_template
        backend.device = str(next(model.parameters()).device)
        backend._setup(model)
        return backend

    def _setup(self, model: Any) -> None:
        self.model = model
        config = self.model.config
        self.image_token_id = int(config.image_token_id)
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        if not self.eos_ids and self.tokenizer.eos_token_id is not None:
            self.eos_ids = {int(self.tokenizer.eos_token_id)}
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else next(iter(self.eos_ids)))
        # A response must never hold vision placeholders: the model would look for image
        # features there (an untrained model samples them otherwise).
        self.suppressed_ids = sorted({
            i for i in (getattr(config, name, None) for name in (
                "image_token_id", "video_token_id", "vision_start_token_id",
                "vision_end_token_id")) if isinstance(i, int) and i >= 0})
        self._lock = threading.Lock()  # one generate (or weight load) at a time per model
        self.max_batch = MAX_BATCH
        self._batcher: Batcher[_Request, list[Row]] = Batcher(
            self._run_batch, what="transformers generate", select=self._select,
            errors=(RuntimeError, ValueError))  # torch errors, OOM, shape problems

    @property
    def batches(self) -> int:
        """Generate calls made on the model (fewer than calls when batched)."""
        return self._batcher.batches

    def encode(self, chat: list[dict[str, Any]]) -> PromptInputs:
        return encode(chat, self.tokenizer, self.image_processor, self.chat_template)

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        if not chats:
            return []
        sampling = sampling or SamplingConfig()
        started = time.perf_counter()
        prompts = [self.encode(chat) for chat in chats]
        rows = self._batcher.submit(_Request(prompts, sampling))
        seconds = time.perf_counter() - started
        record = sampling.record(**sampling_settings(sampling),
                                 suppress_tokens=list(self.suppressed_ids),
                                 eos_token_id=sorted(self.eos_ids),
                                 overridden=self.overridden_fields(sampling))
        out = []
        for prompt, (ids, logprobs, entropies, reason) in zip(prompts, rows, strict=True):
            text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
            out.append(Generation(text=text, token_ids=ids, logprobs=logprobs,
                                  entropies=entropies, prompt_ids=prompt.prompt_ids,
                                  finish_reason=reason, seconds=seconds,
                                  sampling=dict(record)))
        return out

    def check_generation_config(self) -> None:
        """Refuse a model whose generation_config sets a field that would shape sampling
        and that `sampling_settings` cannot neutralise."""
        config = self.model.generation_config
        found = {name: getattr(config, name, None) for name in UNCONTROLLED_FIELDS}
        found = {name: value for name, value in found.items() if value is not None}
        if found:
            raise BackendError(
                f"{self.model_path}: generation_config.json sets {found}, which would change "
                f"how responses are sampled without the trainer knowing; remove "
                f"{'it' if len(found) == 1 else 'them'} from the checkpoint's "
                f"generation_config.json")

    def overridden_fields(self, sampling: SamplingConfig) -> dict[str, Any]:
        """The checkpoint's generation_config values that our explicit settings replace
        (recorded with each generation; JSON values)."""
        config = self.model.generation_config
        out: dict[str, Any] = {}
        for name, ours in sampling_settings(sampling).items():
            theirs = getattr(config, name, None)
            if theirs is not None and theirs != ours:
                out[name] = theirs if isinstance(theirs, (bool, int, float, str)) else repr(
                    theirs)
        return out

    def _run_batch(self, batch: list[_Request]) -> list[list[Row]]:
        """One generate over every prompt of `batch` (same sampling, see `_select`)."""
        with self._lock:
            rows = self._generate([p for r in batch for p in r.prompts], batch[0].sampling)
        out, start = [], 0
        for request in batch:
            out.append(rows[start:start + len(request.prompts)])
            start += len(request.prompts)
        return out

    def _select(self, waiting: Sequence[_Request]) -> list[int]:
        """The first waiting call and those after it with the same sampling, up to
        max_batch chats. A seeded call goes alone (its seed is set for its batch)."""
        first = waiting[0]
        chosen, size = [0], len(first.prompts)
        if first.sampling.seed is None:
            for index, request in enumerate(waiting[1:], start=1):
                if (request.sampling == first.sampling
                        and size + len(request.prompts) <= self.max_batch):
                    chosen.append(index)
                    size += len(request.prompts)
        return chosen

    def _generate(self, prompts: list[PromptInputs], sampling: SamplingConfig) -> list[Row]:
        import torch

        width = max(len(p.prompt_ids) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: generation continues at the end
            input_ids[row, width - len(prompt.prompt_ids):] = torch.tensor(prompt.prompt_ids)
            attention[row, width - len(prompt.prompt_ids):] = 1
        inputs: dict[str, Any] = {
            "input_ids": input_ids.to(self.device),
            "attention_mask": attention.to(self.device),
            # which tokens are image tokens: Qwen2.5-VL's 3D positions need it
            "mm_token_type_ids": (input_ids == self.image_token_id).long().to(self.device),
        }
        with_images = [p for p in prompts if p.pixel_values is not None]
        if with_images:
            inputs["pixel_values"] = torch.cat([p.pixel_values for p in with_images]).to(
                self.device, self.model.dtype)
            inputs["image_grid_thw"] = torch.cat([p.image_grid_thw for p in with_images]).to(
                self.device)
        settings = sampling_settings(sampling)
        self.check_generation_config()
        generate_kwargs: dict[str, Any] = {
            **settings, "return_dict_in_generate": True, "output_logits": True,
            "pad_token_id": self.pad_id, "eos_token_id": sorted(self.eos_ids),
            "suppress_tokens": self.suppressed_ids,
        }
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        with torch.inference_mode():
            result = self.model.generate(**inputs, **generate_kwargs)
        sequences = result.sequences[:, width:].cpu()
        logits = torch.stack(result.logits, dim=1).float().cpu()  # batch x steps x vocab
        # the raw logits at the sampling temperature (before top-p/top-k; see base.py)
        log_probs = torch.log_softmax(logits / logprob_temperature(sampling.temperature),
                                      dim=-1)
        chosen = log_probs.gather(-1, sequences.unsqueeze(-1)).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        rows = []
        for row in range(len(prompts)):
            ids = sequences[row].tolist()
            length, reason = len(ids), "length"
            for position, token in enumerate(ids):
                if token in self.eos_ids:
                    length, reason = position + 1, "stop"
                    break
            rows.append((ids[:length], chosen[row, :length].tolist(),
                         entropy[row, :length].tolist(), reason))
        return rows

    def load_state(self, state: dict[str, Any], version: int) -> float:
        """Copy a published policy version into this model in place, between generations:
        LoRA adapter tensors under peft's saved names (a peft model) or a full state dict.
        Returns the seconds the copy took; a state that does not fit raises BackendError."""
        started = time.perf_counter()
        with self._lock:
            try:
                if hasattr(self.model, "peft_config"):
                    from peft import set_peft_model_state_dict

                    result: Any = set_peft_model_state_dict(self.model, state)
                    if result.unexpected_keys:
                        raise BackendError(f"policy version {version}: adapter tensors "
                                           f"this model lacks: {result.unexpected_keys[:5]}")
                else:
                    self.model.load_state_dict(state, strict=True)
            except (RuntimeError, ValueError, KeyError) as exc:  # shapes, names, devices
                raise BackendError(f"policy version {version}: cannot load its weights: "
                                   f"{exc}") from exc
        return time.perf_counter() - started

    def close(self) -> None:
        self.model = None


def _processor_chat_template(model_path: Path) -> str | None:
    """The processor's chat template when the checkpoint keeps one apart from the
    tokenizer's (chat_template.jinja / chat_template.json); None: use the tokenizer's."""
    import json

    jinja = model_path / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    js = model_path / "chat_template.json"
    if js.is_file():
        template = json.loads(js.read_text()).get("chat_template")
        return template if isinstance(template, str) else None
    return None
