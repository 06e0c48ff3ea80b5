"""The `workbench` command line: one sub-command module per area.

`workbench` with no arguments opens the app; with a sub-command it runs here. Each module
listed in COMMAND_MODULES exposes `register(subparsers)`, adding its parsers with a
`func(args) -> int` default. No Qt is imported on this path.

The one-folder bundle (packaging/workbench.spec) takes its hidden imports from
COMMAND_MODULES and leaves the training stack out: commands that need it say so.
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
# Left out of the bundle (packaging/workbench.spec's excludes): training and model rollouts
# need a full Python installation.
TRAINING_STACK = ("torch", "torchvision", "transformers", "peft", "vllm", "ray",
                  "qwen_vl_utils")
FULL_INSTALL_HELP = (
    "{what} needs the full Python install (torch, transformers, peft), which this "
    "bundle leaves out. Install the workbench from its source (`make setup` in a checkout, "
    "or `pip install -e .`) and run it there: `.venv/bin/python -m workbench {command}`. "
    "This bundle's app and other commands work on the same workspace.")


def in_bundle() -> bool:
    """Whether this is the PyInstaller bundle (sys.frozen), not a Python installation."""
    return bool(getattr(sys, "frozen", False))


def refuse_in_bundle(what: str, command: str) -> None:
    """Stop with FULL_INSTALL_HELP when running from the bundle."""
    if in_bundle():
        raise RuntimeError(FULL_INSTALL_HELP.format(what=what, command=command))


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
    except ModuleNotFoundError as exc:  # the bundle without the training stack
        if not in_bundle() or (exc.name or "").split(".")[0] not in TRAINING_STACK:
            raise
        print("workbench: error: " + FULL_INSTALL_HELP.format(
            what=f"`workbench {args.command}` (here: {exc.name})",
            command=" ".join(sys.argv[1:]) or args.command), file=sys.stderr)
        return 1
    except (OSError, LookupError, ValueError, RuntimeError) as exc:
        print(f"workbench: error: {exc}", file=sys.stderr)
        return 1
    # the commands say 130 for "interrupted"; the shells' convention for SIGTERM is 143
    return 143 if terminated() and code == 130 else code


if __name__ == "__main__":
    sys.exit(main())
