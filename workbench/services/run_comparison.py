"""Several training runs side by side, as TensorBoard and W&B show them: the exponential
moving average that smooths a curve, a run's value at an update, and the table of the
runs' settings and final figures. Qt-free.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainer.config import ConfigError, RunConfig, parse_run_config
from workbench.services.training_runs import MetricHistory

MAX_SMOOTHING = 0.99


def smooth(values: Sequence[float], weight: float) -> list[float]:
    """TensorBoard's smoothing: an exponential moving average started at zero and
    debiased (divided by 1 - weight**n), so the first points are not pulled to zero.
    Non-finite values pass through without entering the average; a constant series stays
    as it is (TensorBoard's own rule: no floating-point wobble on a flat line)."""
    weight = min(max(weight, 0.0), MAX_SMOOTHING)
    finite = [v for v in values if math.isfinite(v)]
    if weight == 0.0 or not finite or all(v == finite[0] for v in finite):
        return list(values)
    last, count, out = 0.0, 0, []
    for value in values:
        if not math.isfinite(value):
            out.append(value)
            continue
        last = last * weight + (1.0 - weight) * value
        count += 1
        out.append(last / (1.0 - weight ** count))
    return out


def value_at(steps: Sequence[int], values: Sequence[float], step: float) -> float | None:
    """The run's value at `step`: its point there, else its newest point before it (a run
    that logs a metric only every few updates still shows what it last had); None before
    its first point."""
    index = bisect.bisect_right(steps, step) - 1
    return values[index] if index >= 0 else None


def nearest_step(steps: Sequence[int], x: float) -> int | None:
    """The step among `steps` (sorted) closest to `x`."""
    if not steps:
        return None
    index = bisect.bisect_left(steps, x)
    near = [steps[i] for i in (index - 1, index) if 0 <= i < len(steps)]
    return min(near, key=lambda s: (abs(s - x), s))


# -- the comparison table ----------------------------------------------------------------


@dataclass(frozen=True)
class ComparedRun:
    """What the comparison table knows of one run: its row in the runs list, the text of
    its run configuration and the metrics read so far."""

    id: str
    title: str
    status: str
    config_text: str
    history: MetricHistory


def _config(run: ComparedRun) -> RunConfig | None:
    if not run.config_text.strip():
        return None
    try:
        return parse_run_config(run.config_text, f"run {run.id}")
    except ConfigError:
        return None


def _model(config: RunConfig) -> str:
    path = config.model.path.rstrip("/")
    return Path(path).name if path else "(none set)"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def format_number(value: float | None) -> str:
    """A metric's value in a few characters (the plots' titles and hover, the table)."""
    if value is None:
        return "–"
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.3g}"


def _best(history: MetricHistory, name: str) -> float | None:
    values = history.series(name)[1]
    return max(values) if values else None


SETTINGS: tuple[tuple[str, Callable[[RunConfig], str]], ...] = (
    ("Model", _model),
    ("Fine-tuning", lambda c: c.model.finetune if c.model.finetune != "lora"
        else f"lora (r {c.model.lora.r})"),
    ("Group size", lambda c: str(c.grpo.num_generations)),
    ("Loss", lambda c: c.grpo.loss_type),
    ("Learning rate", lambda c: f"{c.training.learning_rate:g}"),
    ("Replay", lambda c: "on" if c.curation.replay else "off"),
    ("Updates planned", lambda c: str(c.training.updates)),
    ("Environments", lambda c: f"{c.environments.count} {c.environments.kind}"),
    ("Max steps", lambda c: str(c.rollout.max_steps)),
)
FIGURES: tuple[tuple[str, Callable[[ComparedRun], str]], ...] = (
    ("Status", lambda r: r.status),
    ("Updates done", lambda r: "0" if r.history.last_step is None
        else str(r.history.last_step)),
    ("Success (last)", lambda r: _percent(r.history.latest("success_rate"))),
    ("Success (best)", lambda r: _percent(_best(r.history, "success_rate"))),
    ("Held-out success (last)",
     lambda r: _percent(r.history.latest("heldout/success_rate"))),
    ("Reward (last)", lambda r: format_number(r.history.latest("reward_mean"))),
    ("Reward (best)", lambda r: format_number(_best(r.history, "reward_mean"))),
    ("Format errors (last)", lambda r: _percent(r.history.latest("format_error_rate"))),
)


@dataclass(frozen=True)
class ComparisonRow:
    """One line of the comparison table: a setting or figure, its value for each run,
    and whether the runs differ in it."""

    label: str
    values: tuple[str, ...]
    section: str  # "run", "settings" or "figures"

    @property
    def differs(self) -> bool:
        """The runs differ here (never said of the run ids, which always do)."""
        return self.section != "run" and len(set(self.values)) > 1


def comparison_rows(runs: Sequence[ComparedRun]) -> list[ComparisonRow]:
    """The table's rows, one column per run: the settings from each run's configuration
    ('?' where it cannot be read), then its final figures."""
    configs = [_config(run) for run in runs]
    rows = [ComparisonRow("Run id", tuple(run.id for run in runs), "run")]
    for label, getter in SETTINGS:
        rows.append(ComparisonRow(label, tuple(
            "?" if config is None else getter(config) for config in configs), "settings"))
    for label, figure in FIGURES:
        rows.append(ComparisonRow(label, tuple(figure(run) for run in runs), "figures"))
    return rows
