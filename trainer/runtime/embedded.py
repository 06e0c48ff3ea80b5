"""The embedded decoupled run (`runtime.asynchronous = true`): the training loop with the
embedded source (trainer/sources/embedded.py), whose environments, rollout workers and
data manager are threads of this process, rolling out while the learner trains.

`AsyncTrainingRun.run()` keeps `TrainingRun.run()`'s contract: Ctrl-C stops the
environments, saves a checkpoint and marks the run "stopped"; `resume=True` continues it,
and finished episodes of the stopped process still in the window are trained after all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer.config import RunConfig
from trainer.loop import TrainingRun, UpdateResult
from trainer.runtime.policy_copies import rollout_copy, rollout_model
from trainer.runtime.roles import Publication
from trainer.sources import RolloutSource, RunContext
from trainer.sources.decoupled import DecoupledSource, RunDataManager, RunRolloutService
from trainer.sources.embedded import EmbeddedSettings, EmbeddedSource, MakeWorkers
from trainer.warmup import WarmupProgress

__all__ = ["AsyncTrainingRun", "EmbeddedSettings", "RunDataManager", "RunRolloutService",
           "rollout_copy", "rollout_model"]


class AsyncTrainingRun(TrainingRun):
    """A GRPO run whose rollouts and training overlap (see the module docstring).
    `run()` from one thread (the trainer's); the environments get threads of their own."""

    def __init__(self, config: RunConfig, config_text: str, workspace: Path, *,
                 run_id: str | None = None, resume: bool = False, progress: bool = True,
                 on_update: Callable[[UpdateResult], None] | None = None,
                 on_warmup: Callable[[WarmupProgress], None] | None = None,
                 settings: EmbeddedSettings | None = None,
                 make_workers: MakeWorkers | None = None) -> None:
        super().__init__(config, config_text, workspace, run_id=run_id, resume=resume,
                         progress=progress, on_update=on_update, on_warmup=on_warmup)
        self.settings = settings or EmbeddedSettings()
        self.make_workers = make_workers

    def _make_source(self, context: RunContext) -> RolloutSource:
        return EmbeddedSource(context, self.settings, self.make_workers)

    @property
    def decoupled(self) -> DecoupledSource:
        """The run's source (once the run is open)."""
        source = self.source
        if not isinstance(source, DecoupledSource):
            raise AttributeError("the run is not open yet")
        return source

    @property
    def publications(self) -> list[Publication]:
        """Every version published to the rollout workers, in order."""
        return self.decoupled.publications

    @property
    def data(self) -> Any:
        """The data manager (once the environments roll out)."""
        return self.decoupled.data
