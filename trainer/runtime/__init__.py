"""The runtime of a decoupled training run: environment cluster, rollout service, data
manager and trainer (see `roles`); `AsyncTrainingRun` runs all four in this process,
`ClusterTrainingRun` runs them as Ray actors (`[runtime] mode = "ray"`)."""

from __future__ import annotations

from trainer.runtime.cluster import ClusterTrainingRun
from trainer.runtime.data import DataManager
from trainer.runtime.embedded import AsyncTrainingRun, EmbeddedSettings
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

