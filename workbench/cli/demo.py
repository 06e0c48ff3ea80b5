"""`workbench demo`: build the demo workspace `make run` opens (bundled tasks, sandboxes
with snapshots, oracle and tiny-model episodes, curated successes, a short training run)
unless it is there already.

    workbench demo --workspace demo-workspace && workbench --workspace demo-workspace
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from trainer.store.layout import default_workspace
from workbench.cli import refuse_in_bundle


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="build a demo workspace (real rollouts and a short training run)",
        description="Build a demo workspace: the bundled tasks, two sandbox desktops with "
                    "snapshots, episodes from the tasks' scripted oracles and from a tiny "
                    "random model, curated successes, a run configuration and a short "
                    "training run. Quick and changes nothing when the demo exists.")
    # Its own dest: a sub-parser default would overwrite `workbench --workspace W demo`.
    parser.add_argument("--workspace", dest="demo_workspace", default=None, metavar="DIR",
                        help="where (default: --workspace before the command, "
                             "$WORKBENCH_WORKSPACE or ./workspace)")
    parser.add_argument("--force", action="store_true",
                        help="rebuild the demo from scratch (only a demo workspace is ever "
                             "removed)")
    parser.add_argument("--no-train", action="store_true",
                        help="skip the short training run")
    parser.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from workbench.services.demo_workspace import (
        DemoError,
        DemoPlan,
        build_demo_workspace,
        demo_complete,
    )

    workspace = Path(default_workspace(args.demo_workspace or args.workspace)).expanduser()
    if demo_complete(workspace) and not args.force:
        summary = build_demo_workspace(workspace)
        print(f"demo workspace {summary.workspace} is ready (--force rebuilds it)")
        return 0
    refuse_in_bundle("building the demo (a tiny model, its episodes and a training run)",
                     f"demo --workspace {workspace}")
    os.environ.setdefault("TQDM_DISABLE", "1")  # our own progress lines instead of bars
    try:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    except ImportError:  # transformers is a dependency; only its bars are silenced here
        pass
    plan = DemoPlan()
    if args.no_train:
        plan = replace(plan, train_updates=0)
    started = time.perf_counter()

    def say(text: str) -> None:
        print(f"demo {time.perf_counter() - started:5.1f} s  {text}", file=sys.stderr,
              flush=True)

    try:
        summary = build_demo_workspace(workspace, force=args.force, plan=plan, progress=say)
    except DemoError as exc:
        print(f"workbench demo: {exc}", file=sys.stderr)
        return 1
    print(f"demo workspace built in {summary.seconds:.0f} s:")
    for line in summary.lines():
        print(f"  {line}")
    print(f"open it with: workbench --workspace {workspace}")
    return 0
