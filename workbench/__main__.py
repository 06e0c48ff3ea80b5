"""`workbench` / `python -m workbench`: with no arguments (or only --workspace), the
desktop app; with a sub-command, the command line (workbench.cli), e.g.
`workbench env up --foreground`."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

# A frozen build (packaging/workbench.spec) has no Python to run `python -m MODULE` with;
# a sandbox starts its guest server, its relay and its watchdog that way, so the executable
# runs these modules itself (tests/test_app_packaging.py finds every such start in the code).
FROZEN_MODULES = ("vm.guest", "vm.providers.forwarder", "vm.providers.sandbox.watchdog",
                  "vm.providers.sandbox.sudo", "vm.providers.sandbox.packages",
                  "vm.providers.sandbox.vscode")


def _app_workspace(args: list[str]) -> tuple[bool, Path | None]:
    """Whether these arguments ask for the app, and the workspace they name."""
    if not args:
        return True, None
    if len(args) == 1 and args[0].startswith("--workspace="):
        return True, Path(args[0].split("=", 1)[1]).expanduser()
    if len(args) == 2 and args[0] == "--workspace":
        return True, Path(args[1]).expanduser()
    return False, None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if getattr(sys, "frozen", False) and len(args) >= 2 and args[0] == "-m" \
            and args[1] in FROZEN_MODULES:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    wants_app, workspace = _app_workspace(args)
    if wants_app:
        from workbench.app import run_app

        return run_app(workspace)
    from workbench.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
