"""`workbench train CONFIG.toml`: a GRPO run from one run configuration file, with a
progress bar; Ctrl-C saves a checkpoint and exits; `--resume RUN_ID` continues a run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainer.store import default_workspace
from workbench.cli import refuse_in_bundle


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help="train a policy with GRPO from a run configuration (TOML)",
        description="Roll out, curate and train with GRPO as CONFIG says; metrics and "
                    "checkpoints go to the workspace. `workbench train --example` prints "
                    "a configuration with every knob at its default.")
    parser.add_argument("config", nargs="?", type=Path, help="run configuration (TOML)")
    parser.add_argument("--example", action="store_true",
                        help="print an example configuration (every knob, commented) and exit")
    parser.add_argument("--run-id", default=None, help="id of a new run (default: generated)")
    parser.add_argument("--resume", metavar="RUN_ID", default=None,
                        help="continue this run from its newest checkpoint")
    parser.add_argument("--updates", type=int, default=None,
                        help="override training.updates (the total, counting earlier ones)")
    parser.set_defaults(func=cmd_train)


def update_line(result: Any, total: int) -> str:
    """`update 3/100 · policy v3 · reward 0.125 · success 25% · …` for one update."""
    metrics = result.metrics
    parts = [f"update {result.update}/{total}", f"policy v{result.policy_version}"]
    for name, label, percent in (("reward_mean", "reward", False),
                                 ("success_rate", "success", True),
                                 ("format_error_rate", "format errors", True),
                                 ("heldout/success_rate", "held-out success", True),
                                 ("episodes", "episodes", False),
                                 ("update_seconds", "s", False)):
        value = metrics.get(name)
        if value is None:
            continue
        if name == "update_seconds":
            parts.append(f"{value:.1f} s")
        elif name == "episodes":
            parts.append(f"{int(value)} episodes")
        else:
            parts.append(f"{label} {value:.0%}" if percent else f"{label} {value:.3f}")
    if metrics.get("setup_failed_rate"):  # only when some setup failed: a warning
        parts.append(f"setup failed {metrics['setup_failed_rate']:.0%}")
    if metrics.get("gradient_step", 0.0) < 1.0:
        reasons = [k.split("/", 1)[1] for k in metrics if k.startswith("no_gradient_step/")]
        parts.append("no gradient step" + (f" ({', '.join(reasons)})" if reasons else ""))
    return " · ".join(parts)


def warmup_line(progress: Any) -> str:
    """`warm-up: recording 64 oracle demonstrations`, `warm-up: 60 of 64 demonstrations
    kept`, `warm-up step 20/200 · nll 1.234` for one trainer.loop.WarmupProgress."""
    where = ("from the success pool" if progress.source == "pool"
             else "oracle demonstrations")
    if progress.stage == "collecting":
        verb = "reading" if progress.source == "pool" else "recording"
        return f"warm-up: {verb} {progress.total} {where}"
    if progress.stage == "collected":
        return (f"warm-up: {progress.done} of {progress.total} demonstrations kept "
                f"(successes); supervised steps next")
    nll = "" if progress.nll is None else f" · nll {progress.nll:.3f}"
    return f"warm-up step {progress.done}/{progress.total}{nll}"


def cmd_train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from trainer.config import example_toml, load_run_config

    if args.example:
        print(example_toml(), end="")
        return 0
    if args.config is None:
        raise ValueError("train: give a run configuration file (see --example)")
    refuse_in_bundle("training", f"train {args.config}")
    config, text = load_run_config(args.config)
    if args.updates is not None:
        config = replace(config, training=replace(config.training, updates=args.updates))
    workspace = Path(config.run.workspace or default_workspace(args.workspace)).expanduser()
    total = config.training.updates

    def log_update(result: Any) -> None:
        """A line per update where no progress bar is drawn (a pipe: the app's Log
        panel, a CI log), so a run is never silent until its end."""
        if sys.stderr.isatty():
            return  # the bar shows the same
        print(update_line(result, total), flush=True)

    def log_warmup(progress: Any) -> None:
        """The warm-up's lines (no bar is drawn for it), so the minute or more before
        the first update is not silent in the app's Log panel or a terminal."""
        print(warmup_line(progress), flush=True)

    runtime = config.runtime
    run: Any
    if runtime.mode == "ray":  # always decoupled: the roles are Ray actors
        from trainer.runtime import ClusterTrainingRun

        run = ClusterTrainingRun(config, text, workspace.resolve(),
                                 run_id=args.resume or args.run_id,
                                 resume=args.resume is not None, on_update=log_update)
    elif runtime.asynchronous:
        from trainer.runtime import AsyncTrainingRun, EmbeddedSettings

        run = AsyncTrainingRun(config, text, workspace.resolve(),
                               run_id=args.resume or args.run_id, resume=args.resume is not None,
                               settings=EmbeddedSettings(runtime.rollout_workers,
                                                         runtime.request_timeout,
                                                         runtime.unhealthy_seconds),
                               on_update=log_update)
    else:
        from trainer.loop import TrainingRun

        run = TrainingRun(config, text, workspace.resolve(), run_id=args.resume or args.run_id,
                          resume=args.resume is not None, on_update=log_update)
    run.on_warmup = log_warmup
    summary = run.run()
    print(f"run {summary.run_id}: {summary.status} after {summary.updates} updates; "
          f"policy version {summary.policy_version}"
          + (f"; checkpoint {summary.checkpoint}" if summary.checkpoint else ""),
          file=sys.stderr if summary.status != "done" else sys.stdout)
    return {"done": 0, "stopped": 130}.get(summary.status, 1)
