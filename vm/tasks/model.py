"""The Task record and the loaders of OSWorld task files and evaluation_examples trees.

A task file is validated at the boundary: a malformed one raises TaskFileError naming the
file, the field and what was expected. Fields we do not know are kept in `extra` so that
a task written back out (`Task.to_json`) loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vm.tasks.files import plain_name

KNOWN_TASK_FIELDS = frozenset({
    "id", "snapshot", "instruction", "source", "config", "trajectory", "related_apps",
    "evaluator", "proxy", "fixed_ip", "possibility_of_env_change",
})
KNOWN_EVALUATOR_FIELDS = frozenset({
    "func", "result", "expected", "options", "conj", "postconfig",
})


class TaskFileError(ValueError):
    """A task file, or an index file, that does not match OSWorld's format."""

    def __init__(self, file: str | Path, field: str, message: str) -> None:
        super().__init__(f"{file}: {field}: {message}")
        self.file = str(file)
        self.field = field


@dataclass(frozen=True)
class SetupStep:
    """One entry of a task's `config` (or an evaluator's `postconfig`)."""

    type: str
    parameters: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "parameters": dict(self.parameters)}


@dataclass(frozen=True)
class Evaluator:
    """How a task is scored. `func`, `result`, `expected` and `options` are parallel lists
    (a single metric in the file becomes lists of one); `result`/`expected` entries are
    getter configs ({"type": ..., ...}) or None where the metric takes no such argument."""

    func: tuple[str, ...]
    result: tuple[dict[str, Any] | None, ...]
    expected: tuple[dict[str, Any] | None, ...]
    options: tuple[dict[str, Any], ...]
    conj: str = "and"  # "and" | "or"
    postconfig: tuple[SetupStep, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)  # the evaluator exactly as in the file

    @property
    def infeasible(self) -> bool:
        return self.func == ("infeasible",)


@dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    config: tuple[SetupStep, ...]
    evaluator: Evaluator
    snapshot: str = "init_state"
    source: str = ""
    related_apps: tuple[str, ...] = ()
    trajectory: str = ""
    proxy: bool = False
    fixed_ip: bool = False
    possibility_of_env_change: str = ""
    domain: str = ""  # the folder under examples/, or what the caller says
    path: str = ""  # the file it was loaded from ("" when built in code)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown fields, kept verbatim

    @classmethod
    def from_dict(cls, raw: Any, source: str = "<dict>", domain: str = "") -> Task:
        """A Task from an OSWorld task dict; `source` names it in error messages."""
        return parse_task(raw, source, domain)

    @property
    def infeasible(self) -> bool:
        return self.evaluator.infeasible

    @property
    def folder(self) -> Path | None:
        """The folder of the task file: relative local paths in setup steps start here."""
        return Path(self.path).parent if self.path else None

    def to_json(self) -> dict[str, Any]:
        """The task as an OSWorld task dict (unknown fields included)."""
        out: dict[str, Any] = {
            "id": self.id,
            "snapshot": self.snapshot,
            "instruction": self.instruction,
            "source": self.source,
            "config": [step.to_json() for step in self.config],
            "trajectory": self.trajectory,
            "related_apps": list(self.related_apps),
            "evaluator": self.evaluator.raw,
            "proxy": self.proxy,
            "fixed_ip": self.fixed_ip,
            "possibility_of_env_change": self.possibility_of_env_change,
        }
        out.update(self.extra)
        return out


@dataclass
class TaskSuite:
    """Tasks of an evaluation_examples tree (or our bundled suite) and its index files."""

    root: Path
    tasks: dict[str, Task]  # id -> task
    indexes: dict[str, dict[str, list[str]]]  # "test_all" -> domain -> [ids]
    problems: list[str] = field(default_factory=list)  # filled when loaded with strict=False

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks.values())

    def domains(self) -> list[str]:
        return sorted({task.domain for task in self.tasks.values()})

    def select(self, index: str | None = None, domain: str | None = None) -> list[Task]:
        """Tasks named by an index file (e.g. "test_all"), optionally of one domain."""
        if index is None:
            chosen = list(self.tasks.values())
        else:
            if index not in self.indexes:
                raise KeyError(f"{self.root}: no index file {index}.json "
                               f"(have: {sorted(self.indexes)})")
            chosen = [self.tasks[i] for ids in self.indexes[index].values() for i in ids
                      if i in self.tasks]
        return [t for t in chosen if domain is None or t.domain == domain]


# ---------------------------------------------------------------------------------------
# Parsing with errors that name file and field


def _expect(value: Any, kind: type | tuple[type, ...], file: str | Path, where: str,
            expected: str) -> Any:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise TaskFileError(file, where, f"expected {expected}, got {value!r}")
    if not isinstance(value, kind):
        raise TaskFileError(file, where,
                            f"expected {expected}, got {type(value).__name__} {value!r:.60}")
    return value


def _steps(value: Any, file: str | Path, where: str) -> tuple[SetupStep, ...]:
    if value is None:
        return ()
    _expect(value, list, file, where, "a list of setup steps")
    steps = []
    for i, raw in enumerate(value):
        here = f"{where}[{i}]"
        _expect(raw, dict, file, here, 'an object {"type": ..., "parameters": {...}}')
        step_type = raw.get("type")
        if not isinstance(step_type, str) or not step_type:
            raise TaskFileError(file, f"{here}.type", f"expected a step type name, got "
                                f"{step_type!r}")
        params = raw.get("parameters", {})
        if params is None:
            params = {}
        _expect(params, dict, file, f"{here}.parameters", "an object")
        steps.append(SetupStep(step_type, dict(params)))
    return tuple(steps)


def _getter_list(value: Any, count: int, file: str | Path, where: str
                 ) -> tuple[dict[str, Any] | None, ...]:
    """`result`/`expected`: one getter config per metric (a single one when count is 1)."""
    if value is None:
        return (None,) * count
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and count == 1 and len(value) != 1:
        raise TaskFileError(file, where, "expected one getter config for one metric, got a "
                            f"list of {len(value)}")
    if len(items) != count:
        raise TaskFileError(file, where, f"expected {count} getter configs (one per metric "
                            f"in evaluator.func), got {len(items)}")
    out: list[dict[str, Any] | None] = []
    for i, item in enumerate(items):
        here = f"{where}[{i}]" if isinstance(value, list) else where
        if item is None or item == {}:
            out.append(None)
            continue
        _expect(item, dict, file, here, 'a getter config {"type": ...}')
        if not isinstance(item.get("type"), str):
            raise TaskFileError(file, f"{here}.type", f"expected a getter type name, got "
                                f"{item.get('type')!r}")
        out.append(dict(item))
    return tuple(out)


def parse_evaluator(raw: Any, file: str | Path, where: str = "evaluator") -> Evaluator:
    _expect(raw, dict, file, where, "an object with func, result, expected")
    func = raw.get("func")
    if isinstance(func, str):
        funcs: tuple[str, ...] = (func,)
    elif isinstance(func, list) and func and all(isinstance(f, str) and f for f in func):
        funcs = tuple(func)
    else:
        raise TaskFileError(file, f"{where}.func",
                            f"expected a metric name or a non-empty list of names, got {func!r}")
    count = len(funcs)
    result = _getter_list(raw.get("result"), count, file, f"{where}.result")
    expected = _getter_list(raw.get("expected"), count, file, f"{where}.expected")
    options_raw = raw.get("options")
    if options_raw is None:
        options: tuple[dict[str, Any], ...] = ({},) * count
    elif isinstance(options_raw, dict) and count == 1:
        options = (dict(options_raw),)
    elif isinstance(options_raw, dict) and not options_raw:
        options = ({},) * count
    elif isinstance(options_raw, list) and len(options_raw) == count:
        for i, item in enumerate(options_raw):
            _expect(item if item is not None else {}, dict, file, f"{where}.options[{i}]",
                    "an object of metric options")
        options = tuple(dict(item or {}) for item in options_raw)
    else:
        raise TaskFileError(file, f"{where}.options",
                            f"expected an object (one metric) or a list of {count} objects")
    conj = raw.get("conj", "and")
    if conj not in ("and", "or"):
        raise TaskFileError(file, f"{where}.conj", f'expected "and" or "or", got {conj!r}')
    postconfig = _steps(raw.get("postconfig"), file, f"{where}.postconfig")
    return Evaluator(funcs, result, expected, options, conj, postconfig, dict(raw))


def parse_task(raw: Any, file: str | Path = "<task>", domain: str = "") -> Task:
    """A Task from a decoded task JSON object; TaskFileError names what is wrong."""
    _expect(raw, dict, file, "(top level)", "a JSON object")
    task_id = raw.get("id")
    if not isinstance(task_id, str) or not task_id.strip():
        raise TaskFileError(file, "id", f"expected a non-empty string, got {task_id!r}")
    try:
        plain_name(task_id, "id")  # it names the task's folders (cache, episodes)
    except ValueError as exc:
        raise TaskFileError(file, "id", str(exc)) from None
    instruction = raw.get("instruction")
    if not isinstance(instruction, str):
        raise TaskFileError(file, "instruction", f"expected a string, got {instruction!r}")
    if "evaluator" not in raw:
        raise TaskFileError(file, "evaluator", "missing (every task needs one)")
    related = raw.get("related_apps", [])
    _expect(related, list, file, "related_apps", "a list of application names")
    source = raw.get("source")
    if isinstance(source, list):  # a few OSWorld files list several sources
        for i, item in enumerate(source):
            _expect(item, str, file, f"source[{i}]", "a string")
    for name, kind, expected in (("snapshot", str, "a string"),
                                 ("source", (str, list), "a string or a list of strings"),
                                 ("trajectory", str, "a string"),
                                 ("possibility_of_env_change", str, "a string"),
                                 ("proxy", bool, "true or false"),
                                 ("fixed_ip", bool, "true or false")):
        if name in raw and raw[name] is not None:
            _expect(raw[name], kind, file, name, expected)
    return Task(
        id=task_id,
        instruction=instruction,
        config=_steps(raw.get("config", []), file, "config"),
        evaluator=parse_evaluator(raw["evaluator"], file),
        snapshot=raw.get("snapshot") or "init_state",
        source=" ".join(source) if isinstance(source, list) else (source or ""),
        related_apps=tuple(str(a) for a in related),
        trajectory=raw.get("trajectory") or "",
        proxy=bool(raw.get("proxy", False)),
        fixed_ip=bool(raw.get("fixed_ip", False)),
        possibility_of_env_change=raw.get("possibility_of_env_change") or "",
        domain=domain,
        path=str(file) if isinstance(file, Path) else "",
        extra={k: v for k, v in raw.items()
               if k not in KNOWN_TASK_FIELDS or (k == "source" and isinstance(v, list))},
    )


def _read_json(path: Path) -> Any:
    """The JSON value in `path`; any content ends in the value or a TaskFileError."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFileError(path, "(file)", f"not UTF-8 text (byte {exc.start}: "
                            f"{exc.reason})") from None
    except OSError as exc:
        raise TaskFileError(path, "(file)", f"cannot read: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(path, "(file)", f"invalid JSON at line {exc.lineno} column "
                            f"{exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise TaskFileError(path, "(file)", "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise TaskFileError(path, "(file)", f"invalid JSON: {exc}") from None


def load_task(path: str | Path, domain: str | None = None) -> Task:
    """One OSWorld task JSON file. The domain defaults to the name of its folder."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such task file")
    return parse_task(_read_json(file), file, domain if domain is not None
                      else file.parent.name)


def _examples_folder(root: Path) -> Path:
    for candidate in (root / "examples", root):
        if candidate.is_dir() and any(p.is_dir() for p in candidate.iterdir()):
            return candidate
    raise FileNotFoundError(f"{root}: no examples/<domain>/<id>.json tree here")


def _load_index(path: Path) -> dict[str, list[str]]:
    raw = _read_json(path)
    _expect(raw, dict, path, "(top level)", "an object mapping domain -> [task ids]")
    out: dict[str, list[str]] = {}
    for domain, ids in raw.items():
        _expect(ids, list, path, domain, "a list of task ids")
        for i, task_id in enumerate(ids):
            _expect(task_id, str, path, f"{domain}[{i}]", "a task id string")
        out[domain] = list(ids)
    return out


def load_suite(root: str | Path, strict: bool = True) -> TaskSuite:
    """A whole evaluation_examples tree: examples/<domain>/<id>.json plus index files
    (`test_all.json`, `test_small.json`, ... beside `examples/`).

    With strict (the default) the first malformed task file or dangling index entry
    raises; otherwise those are listed in `problems` and skipped.
    """
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"{base}: no such folder")
    examples = _examples_folder(base)
    tasks: dict[str, Task] = {}
    problems: list[str] = []
    for domain_dir in sorted(p for p in examples.iterdir() if p.is_dir()):
        for file in sorted(domain_dir.glob("*.json")):
            try:
                task = load_task(file, domain_dir.name)
            except TaskFileError as exc:
                if strict:
                    raise
                problems.append(str(exc))
                continue
            if task.id in tasks:
                message = f"{file}: id: {task.id!r} already used by {tasks[task.id].path}"
                if strict:
                    raise TaskFileError(file, "id", f"{task.id!r} already used by "
                                        f"{tasks[task.id].path}")
                problems.append(message)
                continue
            tasks[task.id] = task
    index_folder = base
    indexes: dict[str, dict[str, list[str]]] = {}
    for file in sorted(index_folder.glob("*.json")):
        try:
            index = _load_index(file)
        except TaskFileError as exc:
            if strict:
                raise
            problems.append(str(exc))
            continue
        for domain, ids in index.items():
            for i, task_id in enumerate(ids):
                if task_id not in tasks:
                    if strict:
                        raise TaskFileError(file, f"{domain}[{i}]",
                                            f"task {task_id!r} is not under {examples}")
                    problems.append(f"{file}: {domain}[{i}]: task {task_id!r} not found")
        indexes[file.stem] = index
    return TaskSuite(root=base, tasks=tasks, indexes=indexes, problems=problems)
