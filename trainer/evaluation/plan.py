"""What an evaluation runs: its policies (parsed from `[LABEL=]KIND[:TARGET]`), tasks and
seeds (read from `--seeds`: a count N for 0..N-1, or the seeds themselves), kept in
`evaluations/<name>/plan.json` so that running it again resumes it; and how its episodes
are tagged in the store (eval:<name>, policy:<label>, seed:<k>).

Policy kinds:
    oracle                         the tasks' scripted oracles
    random                         random clicks, keys, typing and scrolls (a floor)
    model:PATH                     a local model folder, run with transformers
    checkpoint:RUN[@VERSION]       a training run's checkpoint (default: its newest)
    openai:MODEL@URL               a model behind an OpenAI-compatible server
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from vm.atomic_write import write_atomic

PolicyKind = Literal["oracle", "random", "model", "checkpoint", "openai"]
POLICY_KINDS: tuple[str, ...] = get_args(PolicyKind)
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,63}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class PlanError(ValueError):
    """An evaluation plan or policy spec that does not fit; the message says where."""


@dataclass(frozen=True)
class PolicySpec:
    label: str
    kind: PolicyKind
    target: str = ""  # model folder, run id, or model name
    version: int | None = None  # checkpoint: the policy version (None: newest)
    url: str = ""  # openai: the server's base URL

    @property
    def spec(self) -> str:
        """The spec as written on the command line (with its label)."""
        body = {"oracle": "oracle", "random": "random", "model": f"model:{self.target}",
                "checkpoint": f"checkpoint:{self.target}"
                              + ("" if self.version is None else f"@{self.version}"),
                "openai": f"openai:{self.target}@{self.url}"}[self.kind]
        return f"{self.label}={body}"


def parse_policy(text: str) -> PolicySpec:
    """A PolicySpec from `[LABEL=]KIND[:TARGET]`; PlanError says what is wrong."""
    label, sep, body = text.partition("=")
    if not sep:
        label, body = "", text
    kind, _, target = body.partition(":")
    if kind not in POLICY_KINDS:
        raise PlanError(f"--policy {text!r}: kind must be one of {', '.join(POLICY_KINDS)}, "
                        f"got {kind!r}")
    version: int | None = None
    url = ""
    if kind in ("oracle", "random"):
        if target:
            raise PlanError(f"--policy {text!r}: {kind} takes no target")
        default = kind
    elif not target:
        raise PlanError(f"--policy {text!r}: {kind} needs a target ({kind}:...)")
    elif kind == "model":
        default = Path(target).name or target
    elif kind == "checkpoint":
        target, at, number = target.partition("@")
        if at:
            if not number.isdigit():
                raise PlanError(f"--policy {text!r}: the checkpoint version must be a whole "
                                f"number, got {number!r}")
            version = int(number)
        default = f"{target}@{number}" if at else target
    else:  # openai
        target, at, url = target.partition("@")
        if not at or not target or not url.startswith(("http://", "https://")):
            raise PlanError(f"--policy {text!r}: expected openai:MODEL@http(s)://HOST/v1")
        default = target
    label = label or default
    if not _LABEL.fullmatch(label):
        raise PlanError(f"--policy {text!r}: the label {label!r} must be 1-64 letters, "
                        f"digits or _.@:+- (give one as LABEL=...)")
    return PolicySpec(label, kind, target, version, url)  # type: ignore[arg-type]


@dataclass
class EvalPlan:
    name: str
    policies: list[PolicySpec]
    tasks: list[str]  # task ids, in order
    task_sources: list[str] = field(default_factory=list)  # what --tasks named
    seeds: tuple[int, ...] = (0,)  # ascending, no repeats
    max_steps: int = 15
    settings: dict[str, Any] = field(default_factory=dict)  # sampling and prompt options

    def __post_init__(self) -> None:
        check_name(self.name)
        labels = [p.label for p in self.policies]
        if not labels:
            raise PlanError(f"evaluation {self.name}: no policies (give --policy)")
        duplicate = next((label for label in labels if labels.count(label) > 1), None)
        if duplicate:
            raise PlanError(f"evaluation {self.name}: two policies are labelled "
                            f"{duplicate!r}; label one LABEL=...")
        if not self.seeds:
            raise PlanError(f"evaluation {self.name}: no seeds")
        if any(seed < 0 for seed in self.seeds):
            raise PlanError(f"evaluation {self.name}: seeds must be 0 or more, got "
                            f"{seeds_argument(self.seeds)}")
        self.seeds = tuple(sorted(set(self.seeds)))

    def merged(self, other: EvalPlan) -> EvalPlan:
        """This plan extended by `other`'s new policies, tasks and seeds (the union: for
        counts, the larger); a label may not change what it names."""
        mine = {p.label: p for p in self.policies}
        for policy in other.policies:
            if policy.label in mine and mine[policy.label] != policy:
                raise PlanError(f"evaluation {self.name}: {policy.label!r} is already "
                                f"{mine[policy.label].spec}, not {policy.spec}")
        policies = self.policies + [p for p in other.policies if p.label not in mine]
        tasks = self.tasks + [t for t in other.tasks if t not in self.tasks]
        sources = self.task_sources + [s for s in other.task_sources
                                       if s not in self.task_sources]
        return EvalPlan(self.name, policies, tasks, sources, self.seeds + other.seeds,
                        other.max_steps, other.settings)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: str) -> EvalPlan:
        try:
            return cls(data["name"], [PolicySpec(**p) for p in data["policies"]],
                       list(data["tasks"]), list(data.get("task_sources", [])),
                       _stored_seeds(data["seeds"]), int(data.get("max_steps", 15)),
                       dict(data.get("settings", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"{where}: not an evaluation plan ({type(exc).__name__}: "
                            f"{exc})") from None


def _stored_seeds(value: Any) -> tuple[int, ...]:
    """plan.json's seeds: a list, or a count N (0..N-1) as plans before the list wrote."""
    if isinstance(value, bool) or not isinstance(value, int | list | tuple):
        raise TypeError(f"seeds: expected a list of seeds or a count, got {value!r}")
    if isinstance(value, int):
        return tuple(range(value))
    if not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in value):
        raise TypeError(f"seeds: expected whole numbers, got {value!r}")
    return tuple(value)


# Seeds as typed (`--seeds`, the app's New evaluation)

_SEPARATORS = re.compile(r"[\s,]+")
_COUNT = re.compile(r"\s*[0-9]+\s*")


def read_seeds(text: str, most: int | None = None) -> tuple[tuple[int, ...], list[str]]:
    """(the seeds, what is wrong with the entries) of `text`: a count N alone ("3") means
    seeds 0..N-1; otherwise the seeds themselves, separated by commas, spaces or both
    ("0, 4 7"; one seed k is "k,"). Each problem names its entry; `most` caps the number
    of seeds (None: no cap)."""
    if _COUNT.fullmatch(text):
        count = int(text)
        if count < 1 or (most is not None and count > most):
            bound = "at least 1" if most is None else f"1 to {most}"
            return (), [f"seeds {text.strip()!r}: a count of seeds is {bound}"]
        return tuple(range(count)), []
    entries = [entry for entry in _SEPARATORS.split(text) if entry]
    if not entries:
        return (), ["no seeds: give a count (3) or the seeds (0, 4 7)"]
    seeds: list[int] = []
    problems = []
    for entry in entries:
        if not re.fullmatch(r"-?[0-9]+", entry):
            problems.append(f"seed {entry!r}: not a whole number")
        elif int(entry) < 0:
            problems.append(f"seed {entry!r}: a seed is 0 or more")
        elif int(entry) in seeds:
            problems.append(f"seed {entry!r}: given twice")
        else:
            seeds.append(int(entry))
    if most is not None and len(entries) > most:
        problems.append(f"{len(entries)} seeds: at most {most}")
    return (() if problems else tuple(sorted(seeds))), problems


def parse_seeds(text: str, most: int | None = None) -> tuple[int, ...]:
    """The seeds `text` names (see `read_seeds`); PlanError naming each bad entry."""
    seeds, problems = read_seeds(text, most)
    if problems:
        raise PlanError("; ".join(problems))
    return seeds


def seeds_argument(seeds: tuple[int, ...]) -> str:
    """What `--seeds` reads back as `seeds`: the count when they are 0..N-1."""
    if seeds == tuple(range(len(seeds))):
        return str(len(seeds))
    return ",".join(str(seed) for seed in seeds) + ("," if len(seeds) == 1 else "")


def count_of(count: int, noun: str, plural: str = "") -> str:
    """"1 task", "3 tasks", "2 policies" (`plural` when not `noun` + "s")."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def describe_seeds(seeds: tuple[int, ...] | list[int], shown: int = 8) -> str:
    """The seeds in a few words: "3 seeds" for 0, 1, 2, "3 seeds (0, 4, 7)" for others
    (listing the first `shown`); "1 seed" for 0, "1 seed (4)" for 4."""
    counted = count_of(len(seeds), "seed")
    if tuple(seeds) == tuple(range(len(seeds))):
        return counted
    listed = ", ".join(str(seed) for seed in seeds[:shown])
    return f"{counted} ({listed}{', …' if len(seeds) > shown else ''})"


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise PlanError(f"evaluation name {name!r}: expected 1-64 letters, digits or _.- "
                        f"(it names a folder)")
    return name


def evaluation_folder(workspace: Path, name: str) -> Path:
    return workspace / "evaluations" / check_name(name)


def load_plan(workspace: Path, name: str) -> EvalPlan | None:
    path = evaluation_folder(workspace, name) / "plan.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PlanError(f"{path}: cannot read the evaluation plan: {exc}") from None
    return EvalPlan.from_json(data, str(path))


def save_plan(workspace: Path, plan: EvalPlan) -> Path:
    path = evaluation_folder(workspace, plan.name) / "plan.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(plan.to_json(), indent=2) + "\n")
    return path


# Tags on the episodes of an evaluation


def episode_tags(name: str, label: str, seed: int) -> tuple[str, ...]:
    return (f"eval:{name}", f"policy:{label}", f"seed:{seed}")


def read_tags(tags: list[str]) -> tuple[str, int] | None:
    """(policy label, seed) from an evaluation episode's tags; None if they are missing."""
    label = next((t[len("policy:"):] for t in tags if t.startswith("policy:")), None)
    seed = next((t[len("seed:"):] for t in tags if t.startswith("seed:")), None)
    if label is None or seed is None or not seed.isdigit():
        return None
    return label, int(seed)
