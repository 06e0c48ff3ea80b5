"""A new evaluation asked for in the app, as the `workbench eval` command that runs it: the
policies (oracle, random, a run's checkpoint, a model folder, an OpenAI-compatible URL),
the tasks (bundled ids or patterns, task files, an OSWorld evaluation_examples folder),
seeds and desktops. The app runs the command in the background and reads the results the
command stores, as they arrive."""

from __future__ import annotations

import re
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a folder name under evaluations/


@dataclass
class EvaluationRequest:
    name: str
    policies: list[str] = field(default_factory=list)  # `--policy` specs
    tasks: list[str] = field(default_factory=list)  # empty: the whole bundled suite
    seeds: int = 3
    desktops: int = 1

    def problems(self, taken: Collection[str] = ()) -> list[str]:
        """What keeps this request from running, for the dialog to say."""
        found = []
        if not NAME.fullmatch(self.name):
            found.append("a name of letters, digits, '.', '_' or '-' (it names a folder)")
        elif self.name in taken:
            found.append(f"an evaluation named {self.name} exists: choose another name")
        if not self.policies:
            found.append("at least one policy")
        if not 1 <= self.seeds <= 100:
            found.append("1 to 100 seeds")
        if not 1 <= self.desktops <= 16:
            found.append("1 to 16 desktops")
        return found


def eval_arguments(workspace: Path, request: EvaluationRequest) -> list[str]:
    """The arguments after the program: `-m workbench --workspace W eval NAME …` (a frozen
    build is the `workbench` command itself, without `-m workbench`)."""
    frozen = bool(getattr(sys, "frozen", False))
    arguments = ([] if frozen else ["-m", "workbench"]) + [
        "--workspace", str(workspace), "eval", request.name]
    for policy in request.policies:
        arguments += ["--policy", policy]
    arguments += ["--seeds", str(request.seeds), "--envs", str(request.desktops)]
    if request.tasks:
        arguments += ["--tasks", *request.tasks]
    return arguments


def next_evaluation_name(taken: Collection[str]) -> str:
    number = 1
    while f"eval-{number}" in taken:
        number += 1
    return f"eval-{number}"
