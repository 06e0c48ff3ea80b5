"""The decoupled run on Ray (`[runtime] mode = "ray"`): the training loop with the Ray
source (trainer/sources/cluster.py), whose environments, rollout workers and data
manager are Ray actors; the learner trains in this process.

A stopped or killed driver is resumed with `resume=True`, as every run: the newest
checkpoint, the episodes of unsaved updates given back, the finished untrained groups
still in the version window recovered.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.config import RunConfig
from trainer.loop import UpdateResult
from trainer.runtime.embedded import AsyncTrainingRun
from trainer.sources import RolloutSource, RunContext
from trainer.sources.cluster import MISSING_RAY, RaySource, connect
from trainer.sources.embedded import EmbeddedSettings
from trainer.warmup import WarmupProgress

if TYPE_CHECKING:
    from trainer.runtime.ray_environments import EnvironmentActors

__all__ = ["MISSING_RAY", "ClusterTrainingRun", "connect"]


class ClusterTrainingRun(AsyncTrainingRun):
    """A decoupled GRPO run whose environments, rollout workers and data manager are Ray
    actors (see the module docstring). `run()` from one thread, as `TrainingRun.run()`."""

    def __init__(self, config: RunConfig, config_text: str, workspace: Path, *,
                 run_id: str | None = None, resume: bool = False, progress: bool = True,
                 on_update: Callable[[UpdateResult], None] | None = None,
                 on_warmup: Callable[[WarmupProgress], None] | None = None) -> None:
        runtime = config.runtime
        super().__init__(config, config_text, workspace, run_id=run_id, resume=resume,
                         progress=progress, on_update=on_update, on_warmup=on_warmup,
                         settings=EmbeddedSettings(runtime.rollout_workers,
                                                   runtime.request_timeout,
                                                   runtime.unhealthy_seconds))

    def _make_source(self, context: RunContext) -> RolloutSource:
        return RaySource(context, self.settings, self.config.runtime.ray)

    @property
    def ray_source(self) -> RaySource:
        source = self.source
        if not isinstance(source, RaySource):
            raise AttributeError("the run is not open yet")
        return source

    @property
    def data_actor(self) -> Any:
        return self.ray_source.data_actor

    @property
    def worker_actors(self) -> list[Any]:
        return self.ray_source.worker_actors

    @property
    def environments(self) -> EnvironmentActors | None:
        return self.ray_source.environments
