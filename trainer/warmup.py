"""What a run does before its first update: the supervised warm-up on demonstrations
(training.warmup: the scripted oracle's episodes, or the success pool's), and DART's
pre-collected successes for the tasks that have none yet (curation.precollect_oracle).
The oracle's episodes run on the rollout source's environments."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agents.trajectory import Episode
from trainer.config import RunConfig
from trainer.curation import PRECOLLECTED_TAG, SuccessSource
from trainer.learner import Learner
from trainer.planning import select_run_tasks
from trainer.rollouts import EpisodeJob, EpisodeOutcome
from trainer.samples import Sample, SampleBuilder
from trainer.sources import RolloutSource
from trainer.store import Store
from vm.tasks.model import Task

log = logging.getLogger(__name__)

DEMONSTRATION_TAG = "demonstration"
WARMUP_REPORTS = 10  # progress lines over the warm-up's steps (and its last)


@dataclass(frozen=True)
class WarmupProgress:
    """Where the supervised warm-up is, for a log: recording (or reading) its
    demonstrations, how many it kept, then its steps."""

    stage: Literal["collecting", "collected", "step"]
    done: int  # collected: demonstrations kept; step: steps taken (1-based)
    total: int  # demonstrations asked for (the pool's size), or steps
    source: str = "oracle"  # where the demonstrations come from (training.warmup.source)
    nll: float | None = None  # step: its mean negative log-likelihood per token


def successes(store: Store, config: RunConfig, outcomes: Sequence[EpisodeOutcome]
              ) -> list[Episode]:
    """The finished episodes of `outcomes` that succeeded, loaded whole."""
    threshold = config.curation.success_threshold
    return [store.episodes.load(o.episode.id) for o in outcomes
            if o.episode is not None and o.episode.status == "done"
            and (o.episode.score or 0.0) >= threshold]


def demonstrations(config: RunConfig, store: Store, source: RolloutSource,
                   screen_size: tuple[int, int]) -> list[Episode]:
    """training.warmup's demonstrations: the success pool's episodes, or the successes
    of the oracle's episodes on training.warmup.tasks."""
    warmup = config.training.warmup
    if warmup.source == "pool":
        ids = [entry.episode_id for entry in store.pool.entries()]
        return [store.episodes.load(i) for i in ids]
    tasks = select_run_tasks(warmup.tasks, screen_size)
    if not tasks:
        raise ValueError("training.warmup.tasks: selects no task")
    jobs = [EpisodeJob(tasks[i % len(tasks)], i // len(tasks))
            for i in range(warmup.episodes)]
    return successes(store, config, source.oracle_outcomes(jobs, [DEMONSTRATION_TAG]))


def warm_up(config: RunConfig, store: Store, run_id: str, source: RolloutSource,
            learner: Learner, builder: SampleBuilder, rng: random.Random,
            screen_size: tuple[int, int], report: Callable[[WarmupProgress], None]) -> None:
    """Supervised steps on demonstrations through the GRPO loss (Learner.optimise), each
    step's negative log-likelihood logged at steps -steps..-1; `report` hears where it
    is. The learner ends with a fresh optimizer."""
    warmup = config.training.warmup
    asked = len(store.pool.entries()) if warmup.source == "pool" else warmup.episodes
    report(WarmupProgress("collecting", 0, asked, warmup.source))
    found = demonstrations(config, store, source, screen_size)
    report(WarmupProgress("collected", len(found), asked, warmup.source))
    if not found:
        raise RuntimeError("training.warmup: no demonstration to learn from")
    samples: list[Sample] = []
    for episode in found:
        for sample in builder.step_samples(episode):
            # behaviour cloning of the model's own distribution (temperature 1), as
            # supervised fine-tuning does; GRPO then scores at the sampling temperature
            sample.advantage, sample.origin = 1.0, "demonstration"
            sample.temperature = 1.0
            samples.append(sample)
    every = max(1, warmup.steps // WARMUP_REPORTS)

    def logged(step: int, metrics: dict[str, float]) -> None:
        nll = -metrics.get("logprob_mean", 0.0)
        store.runs.log_metrics(run_id, -warmup.steps + step, {
            "warmup_nll": nll, "warmup_entropy": metrics.get("entropy", 0.0)})
        if (step + 1) % every == 0 or step + 1 == warmup.steps:
            report(WarmupProgress("step", step + 1, warmup.steps, warmup.source, nll))

    learner.warm_up(samples, rng, logged)


def precollect(config: RunConfig, store: Store, run_id: str, source: RolloutSource,
               tasks: Sequence[Task]) -> None:
    """Pre-collected successes (DART) for the training tasks that have none yet: the
    scripted oracle's episodes, which `precollected` curation then puts into groups
    that found no success. They are tagged and never trained on as rollouts."""
    from vm.suite.oracles import has_oracle

    success = SuccessSource(store, config.curation.success_threshold)
    count = config.curation.precollect_oracle
    missing = [t for t in tasks if has_oracle(t) and success.newest_success(t.id) is None]
    jobs = [EpisodeJob(task, i) for task in missing for i in range(count)]
    if not jobs:
        return
    found = successes(store, config, source.oracle_outcomes(jobs, [PRECOLLECTED_TAG]))
    log.info("run %s: %d pre-collected successes for %d tasks", run_id, len(found),
             len(missing))
