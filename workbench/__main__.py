"""`workbench` / `python -m workbench`: with no arguments (or only --workspace), the
desktop app; with a sub-command, the command line (workbench.cli), e.g.
`workbench env up --foreground`. A frozen build also stands in for `python` (see below)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

# A frozen build (packaging/workbench.spec) has no Python to run `python -m MODULE` with;
# a sandbox starts its guest server, its relay, its watchdog and its commands (sudo, apt,
# code) that way, and the app names `-m workbench` in the commands it shows, so the
# executable runs these modules itself (tests/test_app_packaging.py finds every such start
# in the code and fails on one missing here). Tasks start our small apps as
# `$WORKBENCH_PYTHON SCRIPT.py` and the guest server runs `python -c CODE` and `python
# FILE.py` with it (vm/tasks/setup.py, vm/guest): the executable runs those too.
FROZEN_MODULES = ("workbench", "vm.guest", "vm.providers.forwarder",
                  "vm.providers.sandbox.watchdog", "vm.providers.sandbox.sudo",
                  "vm.providers.sandbox.packages", "vm.providers.sandbox.vscode")


def _app_workspace(args: list[str]) -> tuple[bool, Path | None]:
    """Whether these arguments ask for the app, and the workspace they name."""
    if not args:
        return True, None
    if len(args) == 1 and args[0].startswith("--workspace="):
        return True, Path(args[0].split("=", 1)[1]).expanduser()
    if len(args) == 2 and args[0] == "--workspace":
        return True, Path(args[1]).expanduser()
    return False, None


def _run_as_python(args: list[str]) -> bool:
    """Run `-m MODULE ARGS` (a FROZEN_MODULES one), `-c CODE ARGS` or `SCRIPT.py ARGS` as
    `python` would; False when `args` are none of these (the workbench's own)."""
    if len(args) >= 2 and args[0] == "-m" and args[1] in FROZEN_MODULES:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif len(args) >= 2 and args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
    elif args and args[0].endswith(".py") and Path(args[0]).is_file():
        sys.argv = list(args)
        sys.path.insert(0, str(Path(args[0]).resolve().parent))  # its neighbours import
        runpy.run_path(args[0], run_name="__main__")
    else:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if getattr(sys, "frozen", False):
        if args[:2] == ["-m", "workbench"]:  # this executable is `python -m workbench`
            return main(args[2:])
        if _run_as_python(args):
            return 0
    wants_app, workspace = _app_workspace(args)
    if wants_app:
        from workbench.app import run_app

        return run_app(workspace)
    from workbench.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
