"""Oracles by task id (and by family), so each module of vm.suite.oracles registers its own
the way OSWorld's metric modules register theirs (vm.tasks.registry).

An oracle is a generator ``oracle(task, provider) -> Iterator[Action]``:

    from vm.suite.oracles.registry import oracle

    @oracle("todo-add")
    def _todo_add(task, provider):
        ...
        yield Done()
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from vm.actions import Action, Fail
from vm.providers.base import Provider
from vm.tasks.model import Task

Oracle = Callable[[Provider], Iterator[Action]]  # one task's oracle, ready to run
TaskOracle = Callable[[Task, Provider], Iterator[Action]]

ORACLES: dict[str, TaskOracle] = {}
# generated families: (domain, id prefix, oracle), in the order they were registered
FAMILIES: list[tuple[str, str, TaskOracle]] = []


class OracleError(RuntimeError):
    """An oracle could not find its target on the desktop in time."""


def oracle(*task_ids: str) -> Callable[[TaskOracle], TaskOracle]:
    """Decorator: make `fn` the oracle of each of `task_ids`."""
    def add(fn: TaskOracle) -> TaskOracle:
        for task_id in task_ids:
            ORACLES[task_id] = fn
        return fn
    return add


def family_oracle(domain: str, id_prefix: str) -> Callable[[TaskOracle], TaskOracle]:
    """Decorator: make `fn` the oracle of every task of a generated family, one whose domain
    is `domain` or whose id starts with `id_prefix` (vm.suite.families)."""
    def add(fn: TaskOracle) -> TaskOracle:
        FAMILIES.append((domain, id_prefix, fn))
        return fn
    return add


def oracle_for(task: Task) -> Oracle:
    """The scripted solution of a bundled (or family) task; KeyError if it has none.
    An infeasible task's oracle answers FAIL."""
    _load_builtins()
    fn = ORACLES.get(task.id)
    if fn is None:
        fn = next((family for domain, prefix, family in FAMILIES
                   if task.domain == domain or task.id.startswith(prefix)), None)
    if fn is None and task.infeasible:
        fn = _infeasible
    if fn is None:
        raise KeyError(f"task {task.id!r} has no oracle")
    chosen = fn
    return lambda provider: chosen(task, provider)


def has_oracle(task: Task) -> bool:
    try:
        oracle_for(task)
    except KeyError:
        return False
    return True


def _infeasible(task: Task, provider: Provider) -> Iterator[Action]:
    yield Fail()


def _load_builtins() -> None:
    # The modules of vm.suite.oracles register themselves on import.
    from vm.suite import oracles

    oracles.load_all()
