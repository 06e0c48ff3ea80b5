"""Invariants of the training math, on hand-made tensors and a tiny model built here (no
training run): the first pass over fresh samples has ratio exactly 1 and clips nothing,
even with LoRA dropout configured; one batch and four accumulated micro-batches give the
same gradient; log-probs are at each sample's temperature; k3 KL is zero at equal
policies; each importance-sampling level gives its hand-computed weight."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

from agents.backends.base import logprob_temperature
from tests.tiny_models import tiny_qwen25_vl
from trainer.batch import Batch, collate, disable_dropout, token_logprobs
from trainer.grpo import (
    GRPOConfig,
    ISLevel,
    LossType,
    accumulated_loss,
    kl_k3,
    policy_loss,
    truncated_is_weights,
)
from trainer.model import LoraSettings, ModelConfig, PolicyModel
from trainer.samples import Sample

NAN = float("nan")


def _policy(dropout: float, checkpointing: bool = False) -> PolicyModel:
    torch.manual_seed(0)  # the same LoRA initialisation for every call
    policy = PolicyModel.load(ModelConfig(
        path=str(tiny_qwen25_vl()), finetune="lora", device="cpu",
        lora=LoraSettings(r=4, alpha=8, dropout=dropout),
        gradient_checkpointing=checkpointing))
    # LoRA starts as the identity (B = 0); move B so that the adapter, and its dropout,
    # change the output
    with torch.no_grad():
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.5)
    return policy


def _batch(policy: PolicyModel, temperatures: tuple[float, ...] = (0.7, 1.3)) -> Batch:
    """Hand-made samples: text tokens (no images), responses of 5 and 3 tokens, the
    second sample shorter (right padding), rollout log-probs unknown."""
    generator = torch.Generator().manual_seed(1)
    samples = []
    for row, (length, response) in enumerate(((12, 5), (9, 3))):
        ids = torch.randint(10, 200, (length,), generator=generator).tolist()
        mask = [0] * (length - response) + [1] * response
        samples.append(Sample(episode_id=f"e{row}", task_id="t", input_ids=ids,
                              response_mask=mask, rollout_logprobs=[NAN] * length,
                              entropies=[NAN] * length, images=[], step_indices=[0],
                              advantage=1.0 if row == 0 else -1.0,
                              temperature=temperatures[row]))
    return collate(samples, policy.image_processor, pad_id=0)


def _image_token(policy: PolicyModel) -> int:
    return int(policy.model.config.image_token_id)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_first_pass_over_fresh_samples_has_ratio_one_and_clips_nothing(
        checkpointing: bool) -> None:
    policy = _policy(dropout=0.5, checkpointing=checkpointing)
    model = policy.model
    batch = _batch(policy)
    assert model.training
    # the dropout is real: two plain training-mode passes disagree
    inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
              "mm_token_type_ids": torch.zeros_like(batch.input_ids), "use_cache": False}
    with torch.no_grad():
        assert not torch.equal(model(**inputs).logits, model(**inputs).logits)

    with torch.no_grad():  # the old log-probs, as the loop computes them before an update
        old, _ = token_logprobs(model, batch, _image_token(policy))
    logp, entropy = token_logprobs(model, batch, _image_token(policy), with_entropy=True)
    assert model.training  # the train mode is left as it was
    assert torch.equal(logp.detach(), old)
    config = GRPOConfig(epsilon=0.2, epsilon_high=0.28, dual_clip=3.0, loss_type="dapo")
    out = policy_loss(logp, old, batch.advantages, batch.mask, config, entropies=entropy)
    assert out.stats["ratio_mean"] == 1.0
    assert out.stats["clip_fraction"] == 0.0 and out.stats["dual_clip_fraction"] == 0.0
    out.loss.backward()  # checkpointed layers recompute their forward: also dropout-free
    gradients = [p.grad for p in policy.trainable_parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in gradients)
    if checkpointing:  # the same gradient as without checkpointing
        plain = _policy(dropout=0.5)
        plain_logp, _ = token_logprobs(plain.model, batch, _image_token(plain))
        policy_loss(plain_logp, plain_logp.detach(), batch.advantages, batch.mask,
                    config).loss.backward()
        for mine, theirs in zip(gradients, [p.grad for p in plain.trainable_parameters()],
                                strict=True):
            assert theirs is not None and mine is not None
            assert_close(mine, theirs, atol=1e-6, rtol=1e-5)


def test_disable_dropout_turns_off_module_and_attention_dropout() -> None:
    policy = _policy(dropout=0.5)
    policy.model.config.text_config.attention_dropout = 0.1
    attention = [m for m in policy.model.modules() if hasattr(m, "attention_dropout")]
    assert attention
    for module in attention:
        module.attention_dropout = 0.1
    changed = disable_dropout(policy.model)
    assert changed >= 14 + len(attention)  # 14 LoRA layers' dropout, every attention
    assert all(m.attention_dropout == 0.0 for m in attention)
    assert all(m.p == 0.0 for m in policy.model.modules()
               if isinstance(m, torch.nn.Dropout))
    assert disable_dropout(policy.model) == 0  # idempotent


def test_log_probs_and_entropies_are_at_each_samples_temperature() -> None:
    policy = _policy(dropout=0.0)
    model = policy.model.eval()
    batch = _batch(policy, temperatures=(0.7, 1.3))
    with torch.no_grad():
        logp, entropy = token_logprobs(model, batch, _image_token(policy), with_entropy=True)
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       mm_token_type_ids=torch.zeros_like(batch.input_ids),
                       use_cache=False).logits.float()
    assert entropy is not None
    for row, temperature in enumerate((0.7, 1.3)):
        for position in torch.nonzero(batch.mask[row]).flatten().tolist():
            # by hand: softmax of logits / T at the position that predicts the next token
            scaled = logits[row, position] / temperature
            probabilities = scaled.exp() / scaled.exp().sum()
            token = int(batch.input_ids[row, position + 1])
            assert logp[row, position].item() == pytest.approx(
                math.log(probabilities[token].item()), abs=1e-5)
            hand_entropy = -(probabilities * probabilities.log()).sum().item()
            assert entropy[row, position].item() == pytest.approx(hand_entropy, abs=1e-5)
    # at temperature 1 nothing is scaled; greedy samples are scored at 1; 0 never reaches
    # a batch
    assert logprob_temperature(0.0) == 1.0 and logprob_temperature(0.7) == 0.7
    with pytest.raises(ValueError, match="temperatures must be > 0"):
        _batch(policy, temperatures=(0.0, 1.0))


def test_k3_kl_is_zero_at_equal_policies(tmp_path: Path) -> None:
    logp = torch.log(torch.rand(3, 7, generator=torch.Generator().manual_seed(2)))
    assert torch.equal(kl_k3(logp, logp), torch.zeros(3, 7))
    # in the loss: no KL and no gradient from it, however large beta
    current = logp.clone().requires_grad_(True)
    config = GRPOConfig(beta=10.0, importance_sampling_cap=None, dual_clip=None)
    out = policy_loss(current, logp, torch.zeros(3), torch.ones(3, 7), config, ref_logp=logp)
    assert out.stats["kl"] == 0.0
    out.loss.backward()
    assert current.grad is not None and torch.equal(current.grad, torch.zeros(3, 7))
    # the tiny policy (LoRA dropout 0.5, train mode) against a KL reference that holds the
    # same weights (the warmed-up policy the trainer refers to, saved and loaded as the
    # frozen reference adapter): the same log-probs, so KL exactly 0
    policy = _policy(dropout=0.5)
    policy.refer_to(policy.save_checkpoint(tmp_path / "reference", policy_version=0))
    batch = _batch(policy)
    assert policy.model.training
    with torch.no_grad():
        mine, _ = token_logprobs(policy.model, batch, _image_token(policy))
        with policy.reference() as reference:
            theirs, _ = token_logprobs(reference, batch, _image_token(policy))
    assert float((kl_k3(mine, theirs) * batch.mask).sum()) == 0.0


LOSS_TYPES: tuple[LossType, ...] = ("grpo", "bnpo", "dapo", "dr_grpo")


def _accumulation_case(equal_tokens: bool) -> tuple[torch.Tensor, ...]:
    """16 sequences of 6 positions: log-probs, old and rollout log-probs, references,
    advantages and masks (4 tokens each when equal_tokens, else 1-6)."""
    generator = torch.Generator().manual_seed(3)
    logp = -torch.rand(16, 6, generator=generator) * 2
    old = logp + (torch.rand(16, 6, generator=generator) - 0.5) * 0.6
    rollout = old + (torch.rand(16, 6, generator=generator) - 0.5) * 0.4
    reference = logp + (torch.rand(16, 6, generator=generator) - 0.5) * 0.3
    advantages = torch.randn(16, generator=generator)
    lengths = [4] * 16 if equal_tokens else [1 + (i * 5) % 6 for i in range(16)]
    mask = torch.tensor([[1.0] * n + [0.0] * (6 - n) for n in lengths])
    return logp, old, rollout, reference, advantages, mask


def _gradient(loss_type: LossType, micro_batches: int, equal_tokens: bool) -> torch.Tensor:
    logp, old, rollout, reference, advantages, mask = _accumulation_case(equal_tokens)
    config = GRPOConfig(loss_type=loss_type, beta=0.1, importance_sampling_cap=2.0,
                        dual_clip=3.0, max_completion_length=6)
    current = logp.clone().requires_grad_(True)
    total_tokens = float(mask.sum())
    size = 16 // micro_batches
    for start in range(0, 16, size):
        part = slice(start, start + size)
        out = policy_loss(current[part], old[part], advantages[part], mask[part], config,
                          rollout_logp=rollout[part], ref_logp=reference[part],
                          token_normaliser=total_tokens)
        accumulated_loss(out.loss, config, size, 16).backward()
    assert current.grad is not None
    return current.grad


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_one_batch_and_four_accumulated_micro_batches_give_the_same_gradient(
        loss_type: LossType) -> None:
    """With clipping, dual clip, truncated IS and KL on. bnpo is the token mean of each
    micro-batch by definition (TRL's too), so it matches only when the micro-batches hold
    as many tokens each; every other type matches for any lengths."""
    equal = loss_type == "bnpo"
    assert_close(_gradient(loss_type, 4, equal), _gradient(loss_type, 1, equal),
                 atol=1e-7, rtol=1e-5)
    if loss_type == "bnpo":
        assert not torch.allclose(_gradient("bnpo", 4, False), _gradient("bnpo", 1, False))


# Two sequences; log ratios old - rollout per token: (0.1, -0.3, 0.5) and (0.4, 0.4, pad).
OLD = torch.tensor([[0.1, -0.3, 0.5], [0.4, 0.4, 9.0]])
ROLLOUT = torch.zeros(2, 3)
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


@pytest.mark.parametrize(("level", "first", "second"), [
    # token: one weight per token, exp(log ratio), truncated at 1.5
    ("token", [math.exp(0.1), math.exp(-0.3), math.exp(0.5)], [math.exp(0.4)] * 2),
    # sequence (TRL, verl): exp of the sum: exp(0.3) = 1.3499; exp(0.8) = 2.2255 -> 1.5
    ("sequence", [math.exp(0.3)] * 3, [1.5] * 2),
    # geometric (verl): exp of the mean: exp(0.1) = 1.1052; exp(0.4) = 1.4918
    ("geometric", [math.exp(0.1)] * 3, [math.exp(0.4)] * 2),
])
def test_each_importance_sampling_level_gives_its_hand_computed_weight(
        level: str, first: list[float], second: list[float]) -> None:
    weights, _ = truncated_is_weights(OLD, ROLLOUT, MASK, level=level,  # type: ignore[arg-type]
                                      mode="truncate", cap=1.5)
    expected = torch.tensor([first, [*second, 1.0]])  # padding weighs 1
    assert_close(weights, expected.clamp(max=1.5))


def test_is_weights_multiply_the_policy_term_and_its_gradient() -> None:
    """One token, ratio 1, A = 1: the loss is -w and its gradient -w, for w of each level."""
    logp = torch.zeros(1, 2, requires_grad=True)
    rollout = torch.tensor([[-0.2, -0.2]])  # log ratio 0.2 per token
    levels: tuple[tuple[ISLevel, float], ...] = (
        ("token", math.exp(0.2)), ("sequence", math.exp(0.4)), ("geometric", math.exp(0.2)))
    for level, weight in levels:
        config = replace(GRPOConfig(loss_type="bnpo", dual_clip=None, beta=0.0),
                         importance_sampling_level=level, importance_sampling_cap=10.0)
        out = policy_loss(logp, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2),
                          config, rollout_logp=rollout)
        assert out.loss.item() == pytest.approx(-weight, rel=1e-6)
        (gradient,) = torch.autograd.grad(out.loss, logp)
        assert_close(gradient, torch.full((1, 2), -weight / 2))
