"""Weights & Biases logging of a run's metrics beside the store and TensorBoard
(`training.wandb = true`): optional, imported only when a run asks for it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

INSTALL_HINT = ("training.wandb = true needs the wandb package: pip install wandb (the "
                "dev extra has it), or set training.wandb = false")


def wandb_run_id(run_id: str) -> str:
    """The run id as W&B accepts one (no / \\ # ? % :, at most 64 characters)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", run_id)[:64]


class WandbLogger:
    """One W&B run per training run. Its id is the run's id, so a resumed run logs into
    the same W&B run; its files go under `folder` (runs/<run>/ : W&B adds wandb/). With
    WANDB_MODE=offline nothing leaves the machine; `wandb sync` uploads it later."""

    def __init__(self, run: Any) -> None:
        self._run = run

    @classmethod
    def start(cls, *, project: str, entity: str, run_id: str, name: str, config_text: str,
              folder: Path) -> WandbLogger:
        try:
            import wandb
        except ImportError as exc:
            raise RuntimeError(INSTALL_HINT) from exc
        folder.mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=project, entity=entity or None, id=wandb_run_id(run_id),
            name=name or run_id, dir=str(folder), resume="allow",
            # the run configuration as W&B's config: its table compares runs' settings
            config=tomllib.loads(config_text) if config_text.strip() else {},
            # the trainer's output is read line by line (the app's Log panel, a pipe):
            # W&B's console capture would wrap stdout and stderr
            settings=wandb.Settings(console="off"))
        return cls(run)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def finish(self, status: str) -> None:
        """End the W&B run: finished for a done or stopped run, failed otherwise."""
        self._run.finish(exit_code=0 if status in ("done", "stopped") else 1)
