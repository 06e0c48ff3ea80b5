"""Proof that the trainer learns: a tiny random Qwen2.5-VL model, warmed up on oracle
demonstrations of other instances, trained with GRPO on the coloured-buttons family on
real sandboxes; prints the success-rate curve per update.

    python bench/learning.py                      # the proof (assets/configs/learn-buttons.toml)
    python bench/learning.py --config assets/configs/learn-tabs.toml --sample-level both
                                                  # three steps: open a tab, click, confirm;
                                                  # step-level, then trajectory-level samples
    python bench/learning.py --replay-comparison --seeds 3
                                                  # a sparse-success variant, replay off vs
                                                  # on, each over three seeds

Not a test: `tests/test_trainer_learning.py` runs the same proof with assertions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.tiny_models import build_tiny_qwen25_vl  # noqa: E402
from trainer.config import (  # noqa: E402
    RunConfig,
    SampleLevel,
    load_run_config,
    run_config_toml,
)
from trainer.loop import TrainingRun  # noqa: E402
from workbench.signals import sigterm_as_interrupt  # noqa: E402

DEFAULT_CONFIG = ROOT / "assets" / "configs" / "learn-buttons.toml"


def train(config: RunConfig, workspace: Path, label: str = "") -> dict[str, Any]:
    """Run `config`; the per-update curves (success rate, reward, format errors)."""
    text = run_config_toml(config)
    summary = TrainingRun(config, text, workspace, progress=False,
                          on_update=lambda r: print(
                              f"{label}update {r.update:2d}  success "
                              f"{r.metrics.get('success_rate', 0):.3f}  reward "
                              f"{r.metrics.get('reward_mean', 0):+.3f}  format errors "
                              f"{r.metrics.get('format_error_rate', 0):.3f}  "
                              f"replayed {r.metrics.get('replayed', 0):.0f}  "
                              f"pre-collected {r.metrics.get('precollected', 0):.0f}  "
                              f"{r.metrics.get('update_seconds', 0):.1f} s",
                              flush=True)).run()
    history = summary.history
    return {
        "run_id": summary.run_id, "status": summary.status,
        "success_rate": [r.metrics.get("success_rate", 0.0) for r in history],
        "reward_mean": [r.metrics.get("reward_mean", 0.0) for r in history],
        "format_error_rate": [r.metrics.get("format_error_rate", 0.0) for r in history],
        "replayed": [r.metrics.get("replayed", 0.0) for r in history],
        "update_seconds": [r.metrics.get("update_seconds", 0.0) for r in history],
    }


def sparse_variant(config: RunConfig) -> RunConfig:
    """Rarer successes: 8 cells instead of 4 and groups of 4, so most groups of an
    untrained policy fail entirely and give GRPO no signal unless replay steps in.
    Pre-collected successes are off: they would fill those groups instead of replay.
    Every run is the config's full length (no stop at success: the arms are compared
    over the same updates), with the settings the README's recorded comparison ran
    with (sampling at 1.0, 100 warm-up steps, 2 optimizer passes at 5e-3), whatever
    the learning proof's config has since moved to."""
    grid = (4, 2)
    training = config.training
    return replace(config,
                   tasks=replace(config.tasks, buttons_grid=grid),
                   rollout=replace(config.rollout, temperature=1.0),
                   curation=replace(config.curation, precollected=False,
                                    precollect_oracle=0),
                   grpo=replace(config.grpo, num_generations=4),
                   training=replace(training, stop_at_success=0.0, learning_rate=5e-3,
                                    num_iterations=2, warmup=replace(
                                        training.warmup, steps=100, tasks=replace(
                                            training.warmup.tasks, buttons_grid=grid))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--model", type=Path, default=None,
                        help="model folder (default: build the tiny random model)")
    parser.add_argument("--workspace", type=Path, default=None)
    parser.add_argument("--updates", type=int, default=None)
    parser.add_argument("--sample-level", choices=["config", "step", "trajectory", "both"],
                        default="config", help="training samples: one per step (DART), one "
                                               "per episode (ARPO), or a run of each")
    parser.add_argument("--replay-comparison", action="store_true",
                        help="run the sparse-success variant without and with replay")
    parser.add_argument("--seeds", type=int, default=1,
                        help="--replay-comparison: runs per arm (run seeds 1, 2, ...)")
    parser.add_argument("--out", type=Path, default=None, help="write the curves as JSON")
    args = parser.parse_args(argv)
    # Ctrl-C or SIGTERM stops the run in progress (its desktops closed); the curves so
    # far are still printed, and no further run starts.
    sigterm_as_interrupt()
    root = Path(tempfile.mkdtemp(prefix="learning-"))
    workspace = args.workspace or root / "workspace"
    model = args.model or build_tiny_qwen25_vl(root / "model")
    config, _ = load_run_config(args.config)
    config = replace(config, model=replace(config.model, path=str(model)))
    if args.updates:
        config = replace(config, training=replace(config.training, updates=args.updates))
    results: dict[str, Any] = {}
    runs: list[tuple[str, RunConfig]] = []
    if args.replay_comparison:
        sparse = sparse_variant(config)
        for seed in range(1, args.seeds + 1):
            for replay in (False, True):
                runs.append((f"{'replay' if replay else 'no-replay'} seed {seed}",
                             replace(sparse, run=replace(sparse.run, seed=seed),
                                     curation=replace(sparse.curation, replay=replay))))
    else:
        levels: dict[str, list[SampleLevel]] = {
            "config": [config.training.sample_level], "step": ["step"],
            "trajectory": ["trajectory"], "both": ["step", "trajectory"]}
        for level in levels[args.sample_level]:
            runs.append((f"{level}-level", replace(
                config, training=replace(config.training, sample_level=level))))
    for label, variant in runs:
        results[label] = train(variant, workspace, f"[{label}] ")
        if results[label]["status"] == "stopped":
            print(f"[{label}] stopped; no further run starts")
            break
    for label, curve in results.items():
        rates = curve["success_rate"]
        print(f"{label}: success rate " + " ".join(f"{r:.2f}" for r in rates))
        if rates:
            tail = rates[-10:]
            print(f"{label}: mean of the first 5 updates {statistics.fmean(rates[:5]):.3f}, "
                  f"median of the last {len(tail)} {statistics.median(tail):.3f}, "
                  f"{sum(curve['update_seconds']):.0f} s of updates")
    if args.replay_comparison:
        for arm in ("no-replay", "replay"):
            finals = [statistics.median(c["success_rate"][-10:])
                      for label, c in results.items() if label.split(" seed")[0] == arm]
            print(f"{arm}: median success of the last 10 updates per seed "
                  + " ".join(f"{f:.2f}" for f in finals)
                  + f"; mean {statistics.fmean(finals):.3f}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
