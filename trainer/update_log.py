"""Where a run's updates are written: the store's metrics (what the app plots and a resumed
run reads back), and TensorBoard and Weights & Biases when the run asks for them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from trainer.config import RunConfig
from trainer.store import Store
from trainer.wandb_logger import WandbLogger

log = logging.getLogger(__name__)


@dataclass
class UpdateResult:
    """What one update did (also written to the store as metrics)."""

    update: int  # 1-based
    policy_version: int  # the version this update published
    metrics: dict[str, float] = field(default_factory=dict)
    episode_ids: list[str] = field(default_factory=list)


class UpdateLog:
    """An update's metrics to the store and the loggers the run configured."""

    def __init__(self, config: RunConfig, config_text: str, store: Store, run_id: str
                 ) -> None:
        self.config = config
        self.config_text = config_text
        self.store = store
        self.run_id = run_id
        self._wandb: WandbLogger | None = None  # training.wandb: started with the run
        self._writer: Any = None  # training.tensorboard: made at the first update

    def start(self) -> None:
        """training.wandb: a W&B run beside this one (files under runs/<run>/wandb/)."""
        training = self.config.training
        if not training.wandb or self._wandb is not None:
            return
        self._wandb = WandbLogger.start(
            project=training.wandb_project, entity=training.wandb_entity,
            run_id=self.run_id, name=self.config.run.name, config_text=self.config_text,
            folder=self.store.layout.run_dir(self.run_id))

    def write(self, update: int, metrics: dict[str, float]) -> None:
        self.store.runs.log_metrics(self.run_id, update, metrics)
        self._tensorboard(update, metrics)
        if self._wandb is not None:
            self._wandb.log(metrics, update)

    def finish(self, status: str) -> None:
        """End the W&B run; its failure is logged, never in the way of the run's own end."""
        if self._wandb is None:
            return
        try:
            self._wandb.finish(status)
        except Exception as exc:  # W&B's own failure: the store has every metric anyway
            log.warning("run %s: Weights & Biases did not finish: %s", self.run_id, exc)
        self._wandb = None

    def _tensorboard(self, update: int, metrics: dict[str, float]) -> None:
        if not self.config.training.tensorboard:
            return
        if self._writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise RuntimeError("training.tensorboard needs the tensorboard package "
                                   "(pip install tensorboard)") from exc
            self._writer = SummaryWriter(str(self.store.layout.run_dir(self.run_id)))
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, update)
        self._writer.flush()
