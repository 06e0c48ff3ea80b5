"""The runtime of a decoupled training run: environment cluster, rollout service, data
manager and trainer (see `roles`); `AsyncTrainingRun` runs all four in this process,
`ClusterTrainingRun` runs them as Ray actors (`[runtime] mode = "ray"`). Both are the
training loop (trainer/loop.py) with a decoupled rollout source (trainer/sources)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.runtime.data import DataManager
from trainer.runtime.roles import (
    DataManagerRole,
    EnvClusterRole,
    GroupTicket,
    PolicySession,
    Publication,
    RolloutServiceRole,
    TrainerRole,
    TrainingBatch,
    WorkerStatus,
)
from trainer.runtime.scheduler import EpisodeScheduler
from trainer.runtime.service import (
    FixedWorker,
    PolicyWorker,
    RolloutService,
    TransformersWorker,
    VLLMServerWorker,
    VLLMWorker,
)

__all__ = [
    "AsyncTrainingRun", "ClusterTrainingRun", "DataManager", "DataManagerRole",
    "EmbeddedSettings", "EnvClusterRole", "EpisodeScheduler", "FixedWorker", "GroupTicket",
    "PolicySession", "PolicyWorker", "Publication", "RolloutService", "RolloutServiceRole",
    "TrainerRole", "TrainingBatch", "TransformersWorker", "VLLMServerWorker", "VLLMWorker",
    "WorkerStatus",
]

if TYPE_CHECKING:
    from trainer.runtime.cluster import ClusterTrainingRun
    from trainer.runtime.embedded import AsyncTrainingRun, EmbeddedSettings

_RUNS = {"AsyncTrainingRun": "trainer.runtime.embedded",
         "EmbeddedSettings": "trainer.runtime.embedded",
         "ClusterTrainingRun": "trainer.runtime.cluster"}


def __getattr__(name: str) -> Any:
    """The runs, imported when first asked for: they import the training loop and its
    sources, which import the roles of this package."""
    if name in _RUNS:
        import importlib

        return getattr(importlib.import_module(_RUNS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
