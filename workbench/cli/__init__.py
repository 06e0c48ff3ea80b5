"""The `workbench` command line: one sub-command module per area.

`workbench` with no arguments opens the app; with a sub-command it runs here. Each module
listed in COMMAND_MODULES exposes `register(subparsers)`, adding its parsers with a
`func(args) -> int` default. No Qt is imported on this path.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from workbench.signals import sigterm_as_interrupt

COMMAND_MODULES = ("workbench.cli.env", "workbench.cli.data", "workbench.cli.tasks",
                   "workbench.cli.rollout", "workbench.cli.evaluate", "workbench.cli.train",
                   "workbench.cli.demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench",
                                     description="GUI Agent Workbench command line")
    parser.add_argument("--workspace", default=None,
                        help="workspace folder (default: $WORKBENCH_WORKSPACE or ./workspace)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    # Ctrl-C, and the app's Stop (SIGINT), must reach the commands' own stop handling
    # (save, mark the run stopped, exit 130) even when this process started with SIGINT
    # ignored, as everything started in the background by a shell script (`cmd &`) or
    # under nohup does: Python then installs no handler of its own.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # SIGTERM takes the same path once: the command closes its desktops and saves.
    terminated = sigterm_as_interrupt()
    try:
        code = int(args.func(args) or 0)
    except KeyboardInterrupt:
        code = 130
    except (OSError, LookupError, ValueError, RuntimeError) as exc:
        print(f"workbench: error: {exc}", file=sys.stderr)
        return 1
    # the commands say 130 for "interrupted"; the shells' convention for SIGTERM is 143
    return 143 if terminated() and code == 130 else code


if __name__ == "__main__":
    sys.exit(main())
