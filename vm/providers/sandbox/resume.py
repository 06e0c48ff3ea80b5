"""How a revert tells the task apps it relaunches that they are being resumed: our bundled
task apps (assets/apps/appstate.py) then take up the state they saved in their home's
files, instead of starting blank and overwriting it. Only they are told: a terminal or
browser relaunched so would hand the variable on to every program started from it."""

from __future__ import annotations

import os
from pathlib import Path

from vm.assets import APPS

# The environment variable a revert's relaunch sets to "1". assets/apps/appstate.py names
# it too (the apps cannot import this package); tests/test_apps_resume.py checks they agree.
RESUME_VARIABLE = "WORKBENCH_RESUME"


def runs_a_task_app(argv: list[str], apps: Path = APPS) -> bool:
    """True when `argv` runs one of our task apps (a script in `apps`)."""
    return any(word.endswith(".py") and Path(word).parent == apps for word in argv)


def resumed_argv(argv: list[str], apps: Path = APPS) -> list[str]:
    """`argv` of a task app run with RESUME_VARIABLE=1 in its environment: among the
    assignments of an `env` it starts with (the sandbox's own rewrites make those), else
    behind a new `env` (one whose options, such as -i, must come before any assignment, is
    left as it is). Any other program's argv is returned as it is."""
    if not runs_a_task_app(argv, apps):
        return list(argv)
    assignment = f"{RESUME_VARIABLE}=1"
    if len(argv) > 1 and os.path.basename(argv[0]) == "env" and "=" in argv[1] \
            and not argv[1].startswith("-"):
        return [argv[0], assignment, *argv[1:]]
    return ["env", assignment, *argv]
