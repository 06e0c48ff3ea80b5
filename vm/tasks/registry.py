"""Getters and metrics by name, so users can add their own beside OSWorld's.

A getter turns an evaluator's `result`/`expected` config into a value:
``getter(context, config) -> Any`` (OSWorld's ``get_<type>(env, config)``).
A metric scores: ``metric(result, expected, **options) -> float`` in [0, 1], or
``metric(result, **options)`` when the evaluator has no `expected`.

    from vm.tasks import register_metric

    @register_metric("ends_with")
    def ends_with(result, rules, **options) -> float:
        return float(str(result).endswith(rules["expected"]))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from vm.providers.base import Provider


@dataclass
class EvalContext:
    """What a getter may use: the desktop, a scratch folder for fetched files, the task."""

    provider: Provider
    cache_dir: Path  # files fetched from the desktop land here (OSWorld's env.cache_dir)
    task_id: str = ""
    task_folder: Path | None = None  # relative local paths start here
    extra: dict[str, Any] = field(default_factory=dict)


Getter = Callable[[EvalContext, dict[str, Any]], Any]
Metric = Callable[..., float]
F = TypeVar("F", bound=Callable[..., Any])

GETTERS: dict[str, Getter] = {}
METRICS: dict[str, Metric] = {}
DESKTOP_METRICS: set[str] = set()


class UnknownFunction(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def _normal_getter_name(name: str) -> str:
    return name[4:] if name.startswith("get_") else name


def register_getter(name: str, *, replace: bool = False) -> Callable[[F], F]:
    """Decorator: make `fn` the getter for evaluator configs of {"type": name}."""
    key = _normal_getter_name(name)

    def add(fn: F) -> F:
        if key in GETTERS and not replace and GETTERS[key] is not fn:
            raise ValueError(f"getter {key!r} is already registered (pass replace=True)")
        GETTERS[key] = fn
        return fn
    return add


def register_metric(name: str, *, replace: bool = False, desktop: bool = False
                    ) -> Callable[[F], F]:
    """Decorator: make `fn` the metric named `name` in an evaluator's func. With
    desktop=True the metric is also given `desktop=` the EvalContext (a metric that must run
    something, such as a task's test suite, runs it on the desktop, never on the host)."""

    def add(fn: F) -> F:
        if name in METRICS and not replace and METRICS[name] is not fn:
            raise ValueError(f"metric {name!r} is already registered (pass replace=True)")
        METRICS[name] = fn
        if desktop:
            DESKTOP_METRICS.add(name)
        else:
            DESKTOP_METRICS.discard(name)
        return fn
    return add


def needs_desktop(name: str) -> bool:
    """Whether the metric wants the EvalContext as `desktop=`."""
    return name in DESKTOP_METRICS


def getter(name: str) -> Getter:
    _load_builtins()
    key = _normal_getter_name(name)
    if key not in GETTERS:
        raise UnknownFunction(f"unknown getter type {name!r} (known: {sorted(GETTERS)}; "
                              "add one with vm.tasks.register_getter)")
    return GETTERS[key]


def metric(name: str) -> Metric:
    _load_builtins()
    if name not in METRICS:
        from vm.tasks.metrics import MISSING
        missing = "".join(f"; module {module} not loaded: {why}"
                          for module, why in sorted(MISSING.items()))
        raise UnknownFunction(f"unknown metric {name!r} (known: {sorted(METRICS)}; "
                              f"add one with vm.tasks.register_metric{missing})")
    return METRICS[name]


def has_getter(name: str) -> bool:
    """Whether a getter of that type is registered (built-ins loaded first)."""
    _load_builtins()
    return _normal_getter_name(name) in GETTERS


def has_metric(name: str) -> bool:
    """Whether a metric of that name is registered (built-ins loaded first)."""
    _load_builtins()
    return name in METRICS


def _load_builtins() -> None:
    # The built-in modules register themselves on import.
    from vm.tasks import getters, metrics

    getters.load_all()
    metrics.load_all()
