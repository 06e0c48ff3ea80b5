"""Samples to padded tensors, and the per-token log-probs and entropies a model gives the
response tokens of a batch (the trainer's half of the importance ratio).

Two rules hold for every log-prob pass here (old, current, reference), by construction
rather than by a flag the caller sets:
- the distribution is the one each sample was drawn from: logits divided by the sample's
  temperature (`Sample.temperature`; 1 for greedy samples), as verl's actor and TRL divide
  them, and as every backend records its log-probs (agents/backends/base.py);
- no dropout: `token_logprobs` turns every dropout of the model off (`disable_dropout`)
  before it runs it, so two passes over the same weights give the same numbers and the
  ratio is exactly 1 on the first pass over fresh samples (TRL's disable_dropout, for the
  same reason). Off for good, not for the pass: a layer that checkpoints its activations
  runs its forward again during backward, after any "for the pass" switch is undone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trainer.samples import Sample


@dataclass
class Batch:
    """Right-padded samples. Token tensors are (samples, length); position t of the
    response mask / log-prob tensors refers to token t+1 of input_ids (the token
    predicted from position t)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    mask: torch.Tensor  # float, 1 for response tokens to train on (shifted)
    rollout_logprobs: torch.Tensor  # NaN where unknown (shifted)
    rollout_entropies: torch.Tensor  # NaN where unknown (shifted)
    advantages: torch.Tensor  # (samples,)
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    samples: list[Sample]
    temperatures: torch.Tensor  # (samples,): each sample's Sample.temperature

    @property
    def tokens(self) -> int:
        return int(self.mask.sum().item())

    def to(self, device: torch.device | str) -> Batch:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return Batch(self.input_ids.to(device), self.attention_mask.to(device),
                     self.mask.to(device), self.rollout_logprobs.to(device),
                     self.rollout_entropies.to(device), self.advantages.to(device),
                     move(self.pixel_values), move(self.image_grid_thw), self.samples,
                     self.temperatures.to(device))


def collate(samples: Sequence[Sample], image_processor: Any, pad_id: int) -> Batch:
    """Pad `samples` on the right and process their images in order."""
    if not samples:
        raise ValueError("collate: no samples")
    width = max(len(s.input_ids) for s in samples)
    n = len(samples)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width - 1))
    rollout = torch.full((n, width - 1), float("nan"))
    entropies = torch.full((n, width - 1), float("nan"))
    for row, sample in enumerate(samples):
        length = len(sample.input_ids)
        input_ids[row, :length] = torch.tensor(sample.input_ids)
        attention[row, :length] = 1
        # token t is predicted at position t-1
        mask[row, :length - 1] = torch.tensor(sample.response_mask[1:], dtype=torch.float)
        rollout[row, :length - 1] = torch.tensor(sample.rollout_logprobs[1:])
        entropies[row, :length - 1] = torch.tensor(sample.entropies[1:])
    images = [image for sample in samples for image in sample.images]
    pixel_values = grid = None
    if images:
        processed = image_processor(images=images, return_tensors="pt")
        pixel_values, grid = processed["pixel_values"], processed["image_grid_thw"]
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float)
    temperatures = torch.tensor([s.temperature for s in samples], dtype=torch.float)
    if not bool((temperatures > 0).all()):
        raise ValueError(f"collate: sample temperatures must be > 0 (greedy samples are "
                         f"scored at 1), got {temperatures.tolist()}")
    return Batch(input_ids, attention, mask, rollout, entropies, advantages, pixel_values,
                 grid, list(samples), temperatures)


def disable_dropout(model: Any) -> int:
    """Turn off every dropout in `model` for good, whatever its train/eval mode: dropout
    modules (LoRA's included) get p = 0 and attention layers an attention_dropout of 0
    (transformers applies it functionally while training). Idempotent and cheap; returns
    how many were on. The policy is trained without dropout (see the module's
    docstring); gradient checkpointing and the train mode are left as they are."""
    changed = 0
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p != 0:
            module.p = 0.0
            changed += 1
        rate = getattr(module, "attention_dropout", None)
        if isinstance(rate, float) and rate != 0:
            module.attention_dropout = 0.0
            changed += 1
    return changed


def token_logprobs(model: Any, batch: Batch, image_token_id: int, *,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of every next token under `model` (samples x length-1, float32), and the
    entropy of each position's distribution when asked, both at each sample's temperature
    (logits / batch.temperatures) and with the model's dropout off (see the module's
    docstring).
    Logits are computed only at the positions that predict a response token, which keeps
    memory to the responses."""
    inputs: dict[str, Any] = {
        "input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
        "mm_token_type_ids": (batch.input_ids == image_token_id).long(), "use_cache": False,
    }
    if batch.pixel_values is not None:
        dtype = next(p for p in model.parameters()).dtype
        inputs["pixel_values"] = batch.pixel_values.to(dtype)
        inputs["image_grid_thw"] = batch.image_grid_thw
    positions = torch.nonzero(batch.mask.sum(dim=0) > 0).flatten()
    if positions.numel() == 0:
        zeros = torch.zeros_like(batch.mask)
        return zeros, (zeros if with_entropy else None)
    inputs["logits_to_keep"] = positions
    disable_dropout(model)  # every pass, so an adapter loaded since has none either
    logits = model(**inputs).logits.float()  # samples x kept positions x vocab
    temperatures = batch.temperatures.to(logits.device, logits.dtype)
    log_probs = torch.log_softmax(logits / temperatures[:, None, None], dim=-1)
    targets = batch.input_ids[:, positions + 1]
    chosen = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    out = torch.zeros(batch.mask.shape, dtype=chosen.dtype, device=chosen.device)
    out = out.index_copy(1, positions, chosen)
    entropy = None
    if with_entropy:
        values = -(log_probs.exp() * log_probs).sum(-1)
        entropy = torch.zeros(batch.mask.shape, dtype=values.dtype,
                              device=values.device).index_copy(1, positions, values.detach())
    return out, entropy
