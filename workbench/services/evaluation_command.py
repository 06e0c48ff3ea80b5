"""A new evaluation asked for in the app, as the `workbench eval` command that runs it: the
policies (oracle, random, a run's checkpoint, a model folder, an OpenAI-compatible URL),
the tasks (bundled ids or patterns, task files, an OSWorld evaluation_examples folder),
seeds and desktops. The app runs the command in the background and reads the results the
command stores, as they arrive. The tasks and seeds are checked here, as they are typed,
against what `workbench eval --tasks` and `--seeds` accept; the dialog's last values are
kept in the workspace (evaluations/.last-request.json) for the next time it opens."""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from trainer.evaluation.plan import read_seeds, seeds_argument

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a folder name under evaluations/
MOST_SEEDS = 100  # per evaluation asked for in the app


@dataclass
class EvaluationRequest:
    name: str
    policies: list[str] = field(default_factory=list)  # `--policy` specs
    tasks: list[str] = field(default_factory=list)  # empty: the whole bundled suite
    seeds: str = "3"  # as typed: a count N (seeds 0..N-1) or the seeds ("0, 4 7")
    desktops: int = 1

    def seed_list(self) -> tuple[int, ...]:
        """The seeds to run (empty while `seeds` has a bad entry)."""
        return read_seeds(self.seeds, MOST_SEEDS)[0]

    def seed_problems(self) -> list[str]:
        """What is wrong with the seeds as typed, naming each bad entry."""
        return read_seeds(self.seeds, MOST_SEEDS)[1]

    def problems(self, taken: Collection[str] = (),
                 suite_ids: Collection[str] | None = None) -> list[str]:
        """What keeps this request from running, for the dialog to say; with `suite_ids`
        (the bundled suite's task ids) each task entry is checked too."""
        found = []
        if not NAME.fullmatch(self.name):
            found.append("a name of letters, digits, '.', '_' or '-' (it names a folder)")
        elif self.name in taken:
            found.append(f"an evaluation named {self.name} exists: choose another name")
        if not self.policies:
            found.append("at least one policy")
        found += self.seed_problems()
        if not 1 <= self.desktops <= 16:
            found.append("1 to 16 desktops")
        if suite_ids is not None:
            found += [problem for entry in self.tasks
                      if (problem := task_entry_problem(entry, suite_ids))]
        return found


def eval_arguments(workspace: Path, request: EvaluationRequest) -> list[str]:
    """The arguments after the program: `-m workbench --workspace W eval NAME …` (a frozen
    build is the `workbench` command itself, without `-m workbench`)."""
    frozen = bool(getattr(sys, "frozen", False))
    arguments = ([] if frozen else ["-m", "workbench"]) + [
        "--workspace", str(workspace), "eval", request.name]
    for policy in request.policies:
        arguments += ["--policy", policy]
    seeds = request.seed_list()  # as typed when wrong: the command names the entry
    arguments += ["--seeds", seeds_argument(seeds) if seeds else request.seeds,
                  "--envs", str(request.desktops)]
    if request.tasks:
        arguments += ["--tasks", *request.tasks]
    return arguments


def next_evaluation_name(taken: Collection[str]) -> str:
    number = 1
    while f"eval-{number}" in taken:
        number += 1
    return f"eval-{number}"


# -- tasks as typed ------------------------------------------------------------------------


def split_entries(text: str) -> list[str]:
    """Task entries as a person types them: separated by commas, spaces or both
    ("buttons-0, todo-add"), a path with spaces in quotes."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace += ","
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return [entry for entry in lexer if entry]
    except ValueError:  # an unclosed quote, still being typed
        return [entry.strip("'\"") for entry in re.split(r"[\s,]+", text)
                if entry.strip("'\"")]


def join_entries(entries: list[str]) -> str:
    """The entries as `split_entries` reads them back (quoted where needed)."""
    return " ".join(shlex.quote(entry) for entry in entries)


def task_entry_problem(entry: str, suite_ids: Collection[str]) -> str | None:
    """Why `workbench eval --tasks` would refuse this entry (None: it takes it): a task
    file, a folder holding task files, or a task id or pattern of the bundled suite."""
    path = Path(entry).expanduser()
    if path.is_file():
        return None if path.suffix == ".json" else \
            f"task {entry!r}: a task file is a .json file"
    if path.is_dir():
        return None if _holds_task_files(path) else \
            f"task {entry!r}: the folder holds no task files (.json)"
    if entry in suite_ids or any(fnmatch.fnmatchcase(i, entry) for i in suite_ids):
        return None
    close = difflib.get_close_matches(entry, list(suite_ids), n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    what = "no bundled task matches the pattern" if any(c in entry for c in "*?[") \
        else "not a bundled task id, a task file or a folder"
    return f"task {entry!r}: {what}{hint}"


def _holds_task_files(folder: Path, budget: int = 5000) -> bool:
    """Whether a .json file is under `folder`; True too when `budget` entries were looked
    at without an answer (checked as it is typed: "/" must not walk the whole disk)."""
    seen = 0
    for _root, _folders, files in os.walk(folder):
        if any(name.endswith(".json") for name in files):
            return True
        seen += len(files) + len(_folders)
        if seen > budget:
            return True
    return False


def bundled_task_ids() -> list[str]:
    """The ids `--tasks` resolves names against (vm.suite.selection: the bundled suite)."""
    from vm.suite.bundled import bundled_suite

    return sorted(bundled_suite().tasks)


# -- the dialog's last values --------------------------------------------------------------

# under <workspace>/evaluations/; a leading dot: never an evaluation's name (NAME)
LAST_REQUEST_FILE = ".last-request.json"


@dataclass
class DialogValues:
    """What the New evaluation dialog held when it last closed (its name aside: the next
    one gets a free name)."""

    policies: list[str] = field(default_factory=lambda: ["oracle", "random"])
    tasks: str = ""  # as typed
    seeds: str = "3"  # as typed (kept as a count N before seeds could be listed)
    desktops: int = 1


def last_values_path(workspace: Path) -> Path:
    return Path(workspace) / "evaluations" / LAST_REQUEST_FILE


def load_last_values(workspace: Path) -> DialogValues:
    """The dialog's last values in this workspace; the defaults when there are none or the
    file is not what this app writes."""
    try:
        data = json.loads(last_values_path(workspace).read_text(encoding="utf-8"))
        values = DialogValues(policies=[str(p) for p in data["policies"]],
                              tasks=str(data["tasks"]), seeds=_typed_seeds(data["seeds"]),
                              desktops=int(data["desktops"]))
    except (OSError, ValueError, KeyError, TypeError):
        return DialogValues()
    return values


def _typed_seeds(value: object) -> str:
    """The kept Seeds field: its text, or a count (an int) as the spin box kept it."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"seeds: expected text or a count, got {value!r}")
    return str(value)


def save_last_values(workspace: Path, values: DialogValues) -> None:
    """Keep the dialog's values for its next opening (temp file + rename)."""
    path = last_values_path(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(dataclasses.asdict(values), out, indent=1)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
