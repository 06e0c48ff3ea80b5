"""The learner: the policy being trained and its optimizer. One GRPO optimisation over
an update's samples (or the warm-up's supervised steps through the same loss), the KL
reference, and checkpoints holding what a resumed run continues from."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.config import RunConfig
from trainer.samples import Sample
from trainer.store import Store

if TYPE_CHECKING:
    from agents.backends.transformers_backend import TransformersBackend
    from trainer.model import PolicyModel


class Learner:
    """`policy` and its optimizer on a run of `store`. Not thread-safe: the loop's thread
    alone trains (rollout workers generate with copies of their own)."""

    def __init__(self, config: RunConfig, config_text: str, workspace: Path, store: Store,
                 run_id: str, policy: PolicyModel, *, saved_version: int | None = None
                 ) -> None:
        from agents.backends.transformers_backend import TransformersBackend

        self.config = config
        self.config_text = config_text
        self.workspace = workspace
        self.store = store
        self.run_id = run_id
        self.policy = policy
        self.image_token_id = int(policy.model.config.image_token_id)
        self.optimizer = self.new_optimizer()
        # generation on the trained module itself (lock-step rollouts); its pad id collates
        self.backend: TransformersBackend = TransformersBackend.from_model(
            policy.model, policy.tokenizer, policy.image_processor, policy.chat_template)
        self.saved_version = saved_version  # the policy version saved last (no re-save)

    def new_optimizer(self) -> Any:
        import torch

        training = self.config.training
        return torch.optim.AdamW(self.policy.trainable_parameters(),
                                 lr=training.learning_rate,
                                 weight_decay=training.weight_decay)

    def restore(self, state: dict[str, Any]) -> None:
        """The optimizer and torch's random state a checkpoint's trainer state holds."""
        import torch

        self.optimizer.load_state_dict(state["optimizer"])
        if "torch_rng" in state:
            torch.set_rng_state(state["torch_rng"])

    # -- optimisation -----------------------------------------------------------------

    def optimise(self, samples: Sequence[Sample], *, supervised: bool = False,
                  step_scale: float = 1.0) -> dict[str, float]:
        """One GRPO update over `samples` (`training.num_iterations` optimizer steps).
        `supervised`: demonstrations with advantage 1 and no importance correction, so the
        same loss is behaviour cloning (token mean of -log p). `step_scale` multiplies the
        learning rate of this update's steps (training.scale_step_by_signal). With
        `training.target_kl` (or `target_kl_no_signal`, `max_logprob_drop`), each pass
        after the first measures how far the steps so far moved the policy
        (trainer/trust_region.py) and, past a limit, discards its gradient, shrinks the
        step that went past it until the policy is within the limits, and ends the update;
        a measuring pass after the last step does the same."""
        import torch

        from trainer.batch import collate, token_logprobs
        from trainer.grpo import accumulated_loss, clip_gradients, policy_loss
        from trainer.trust_region import Drift, DriftMeter, Limits, StepGuard
        from trainer.update_stats import UpdateStats

        grpo, training = self.config.grpo, self.config.training
        model = self.policy.model
        model.train()
        pad = int(self.backend.pad_id)
        size = training.micro_batch_size
        batches = [collate(samples[i:i + size], self.policy.image_processor, pad).to(
            self.policy.device) for i in range(0, len(samples), size)]
        total_tokens = sum(b.tokens for b in batches)
        iterations = 1 if supervised else training.num_iterations
        # The old log-probs are the first pass's own: no step is taken before the whole
        # accumulated batch has had its pass, and without dropout that pass gives exactly
        # what a separate no-grad pass would (tests/test_trainer_invariants.py), for one
        # forward pass over the batch less per update.
        old: list[torch.Tensor] = []
        stats = UpdateStats()
        grad_norm = 0.0
        if not supervised:
            for group in self.optimizer.param_groups:
                group["lr"] = training.learning_rate * step_scale
        params = self.policy.trainable_parameters()
        limits = Limits() if supervised else Limits(training.target_kl,
                                                    training.target_kl_no_signal,
                                                    training.max_logprob_drop)

        def measure() -> Drift:
            meter = DriftMeter()
            with torch.no_grad():
                for i, b in enumerate(batches):
                    meter.add(old[i], token_logprobs(model, b, self.image_token_id)[0],
                              b.mask, b.advantages)
            return meter.drift(total_tokens)

        guard = StepGuard(params, limits, measure, self.optimizer)
        for iteration in range(iterations):
            self.optimizer.zero_grad(set_to_none=True)
            meter = DriftMeter()
            stats.start_pass()
            for index, batch in enumerate(batches):
                logp, entropy = token_logprobs(model, batch, self.image_token_id,
                                               with_entropy=True)
                assert entropy is not None
                if iteration == 0:
                    old.append(logp.detach())
                old_logp = old[index]
                # measured where it is used: after every step with a limit, else only
                # before the last step (the policy_kl logged)
                if iteration > 0 and (limits.active or iteration == iterations - 1):
                    meter.add(old_logp, logp, batch.mask, batch.advantages)
                ref_logp = None
                if grpo.beta > 0 and not supervised:
                    with torch.no_grad(), self.policy.reference() as reference:
                        ref_logp = token_logprobs(reference, batch, self.image_token_id)[0]
                out = policy_loss(
                    logp, old_logp, batch.advantages, batch.mask, grpo,
                    rollout_logp=None if supervised else batch.rollout_logprobs,
                    entropies=entropy, ref_logp=ref_logp, token_normaliser=total_tokens)
                accumulated_loss(out.loss, grpo, len(batch.samples), len(samples)).backward()
                tokens = float(batch.tokens)
                if iteration == 0:  # the batch as the rollout policy left it
                    stats.add_rollout_batch(
                        tokens, float((entropy * batch.mask).sum().item()),
                        float((logp.detach() * batch.mask).sum().item()))
                stats.add_loss(out.stats, tokens)
            stats.end_pass()
            if iteration > 0 and not guard.within_limits(meter.drift(total_tokens)):
                self.optimizer.zero_grad(set_to_none=True)
                guard.back_within_limits()
                break
            grad_norm = clip_gradients(params, training.max_grad_norm)
            guard.before_step()
            self.optimizer.step()
            guard.stepped()
        else:  # every pass stepped: where did the last step leave the policy?
            if limits.active:
                self.optimizer.zero_grad(set_to_none=True)
                if not guard.within_limits(measure()):
                    guard.back_within_limits()
        guard.release()
        metrics = stats.metrics(total_tokens)
        metrics["grad_norm"] = grad_norm
        if not supervised:
            metrics["optimizer_steps"] = float(guard.steps)
            if limits.active or iterations > 1:
                # with a limit: after the update; without: before its last step
                metrics["policy_kl"] = guard.drift.mean
                metrics["policy_kl_no_signal_max"] = guard.drift.no_signal_max
                metrics["logprob_drop_max"] = guard.drift.drop_max
            if limits.active:
                metrics["last_step_kept"] = guard.kept
        metrics["learning_rate"] = float(self.optimizer.param_groups[0]["lr"])
        metrics["samples"] = float(len(samples))
        return metrics

    # -- warm-up ----------------------------------------------------------------------

    def warm_up(self, samples: Sequence[Sample], rng: random.Random,
                on_step: Callable[[int, dict[str, float]], None]) -> None:
        """training.warmup.steps supervised steps on demonstration `samples` (in an order
        drawn from `rng`), `on_step(step, metrics)` after each; then a fresh optimizer."""
        warmup = self.config.training.warmup
        for group in self.optimizer.param_groups:
            group["lr"] = warmup.learning_rate
        order: list[Sample] = []
        for step in range(warmup.steps):
            if len(order) < warmup.batch_size:
                shuffled = list(samples)
                rng.shuffle(shuffled)
                order += shuffled
            batch, order = order[:warmup.batch_size], order[warmup.batch_size:]
            on_step(step, self.optimise(batch, supervised=True))
        # GRPO starts with a fresh optimizer: Adam's second moments from the supervised
        # steps (gradients 10-100x larger) would otherwise shrink the RL steps for
        # thousands of updates (the learning experiment stalled on exactly that).
        self.optimizer = self.new_optimizer()

    # -- the KL reference and checkpoints ---------------------------------------------

    def save_reference(self) -> None:
        """Save the warmed-up policy as the run's KL reference and refer to it: the KL term
        keeps the updates near what the warm-up taught, not near the untrained base. Its own
        folder, not version 0's: a warm-up interrupted and run again after a resume finishes
        where version 0 already holds the half-trained weights saved at the interruption."""
        folder = self.store.layout.reference_dir(self.run_id)
        fresh = folder.with_name(f"{folder.name}.new")
        shutil.rmtree(fresh, ignore_errors=True)
        self.policy.save_checkpoint(fresh, policy_version=0, run_config=self.config_text,
                                    info={"run_id": self.run_id, "kl_reference": "warm-up"})
        shutil.rmtree(folder, ignore_errors=True)
        fresh.rename(folder)
        self.policy.refer_to(folder)

    def load_reference(self) -> None:
        """On resume: the KL reference the run saved after its warm-up."""
        folder = self.store.layout.reference_dir(self.run_id)
        if not folder.is_dir():
            raise ValueError(f"grpo.beta: {folder} is missing: the KL reference this run "
                             f"saved after its warm-up (start a new run, or set grpo.beta = 0)")
        self.policy.refer_to(folder)

    def save_checkpoint(self, policy_version: int, update: int, state: dict[str, Any]
                        ) -> Path:
        """Save `policy_version` (unless it is saved already) with the optimizer's and
        torch's state beside the run's `state` (counters, replay, Python's random state)."""
        import torch

        folder = self.store.layout.checkpoint_dir(self.run_id, policy_version)
        if self.saved_version == policy_version:
            return folder
        trainer_state = {"optimizer": self.optimizer.state_dict(), **state,
                         "torch_rng": torch.get_rng_state()}
        self.policy.save_checkpoint(folder, policy_version=policy_version,
                                    run_config=self.config_text, trainer_state=trainer_state,
                                    info={"run_id": self.run_id, "update": update})
        relative = folder.relative_to(self.workspace).as_posix()
        self.store.runs.add_checkpoint(self.run_id, policy_version, relative,
                                       {"update": update})
        self.saved_version = policy_version
        return folder
