"""`workbench train CONFIG.toml`: a GRPO run from one run configuration file, with a
progress bar; Ctrl-C saves a checkpoint and exits; `--resume RUN_ID` continues a run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainer.store import default_workspace


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


def cmd_train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from trainer.config import example_toml, load_run_config

    if args.example:
        print(example_toml(), end="")
        return 0
    if args.config is None:
        raise ValueError("train: give a run configuration file (see --example)")
    config, text = load_run_config(args.config)
    if args.updates is not None:
        config = replace(config, training=replace(config.training, updates=args.updates))
    workspace = Path(config.run.workspace or default_workspace(args.workspace)).expanduser()
    runtime = config.runtime
    run: Any
    if runtime.mode == "ray":  # always decoupled: the roles are Ray actors
        from trainer.runtime import ClusterTrainingRun

        run = ClusterTrainingRun(config, text, workspace.resolve(),
                                 run_id=args.resume or args.run_id,
                                 resume=args.resume is not None)
    elif runtime.asynchronous:
        from trainer.runtime import AsyncTrainingRun, EmbeddedSettings

        run = AsyncTrainingRun(config, text, workspace.resolve(),
                               run_id=args.resume or args.run_id, resume=args.resume is not None,
                               settings=EmbeddedSettings(runtime.rollout_workers,
                                                         runtime.request_timeout,
                                                         runtime.unhealthy_seconds))
    else:
        from trainer.loop import TrainingRun

        run = TrainingRun(config, text, workspace.resolve(), run_id=args.resume or args.run_id,
                          resume=args.resume is not None)
    summary = run.run()
    print(f"run {summary.run_id}: {summary.status} after {summary.updates} updates; "
          f"policy version {summary.policy_version}"
          + (f"; checkpoint {summary.checkpoint}" if summary.checkpoint else ""),
          file=sys.stderr if summary.status != "done" else sys.stdout)
    return {"done": 0, "stopped": 130}.get(summary.status, 1)
