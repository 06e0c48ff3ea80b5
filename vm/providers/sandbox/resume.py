"""How a revert tells the applications it relaunches that they are being resumed: our
bundled task apps (assets/apps/appstate.py) then take up the state they saved in their
home's files, instead of starting blank and overwriting it."""

from __future__ import annotations

import os

# The environment variable a revert's relaunch sets to "1". assets/apps/appstate.py names
# it too (the apps cannot import this package); tests/test_apps_resume.py checks they agree.
RESUME_VARIABLE = "WORKBENCH_RESUME"


def resumed_argv(argv: list[str]) -> list[str]:
    """`argv` run with RESUME_VARIABLE=1 in its environment: among the assignments of an
    `env` it starts with (the sandbox's own rewrites make those), else behind a new `env`
    (one whose options, such as -i, must come before any assignment, is left as it is)."""
    assignment = f"{RESUME_VARIABLE}=1"
    if len(argv) > 1 and os.path.basename(argv[0]) == "env" and "=" in argv[1] \
            and not argv[1].startswith("-"):
        return [argv[0], assignment, *argv[1:]]
    return ["env", assignment, *argv]
