"""OSWorld's layer (vm.tasks) imports light: loading a task file's model pulls in neither
our suite's oracles nor the DevTools client's WebSocket library, nor any getter or metric
module; and each oracle module of our suite imports on its own (no import circle).
Checked in fresh processes: the test session itself has imported most of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vm.suite.oracles import MODULES

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(*imports: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, *imports], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout))


def under(modules: set[str], *packages: str) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_the_task_model_loads_no_oracle_websocket_getter_or_metric() -> None:
    loaded = modules_after("vm.tasks.model")
    assert under(loaded, "vm.suite", "websocket", "agents", "workbench") == []
    assert under(loaded, "vm.tasks.getters", "vm.tasks.metrics", "vm.tasks.steps",
                 "vm.tasks.devtools") == []


def test_the_devtools_client_imports_without_its_websocket_library() -> None:
    loaded = modules_after("vm.tasks.devtools", "vm.tasks.readiness")
    assert under(loaded, "websocket") == []


def test_our_suite_loads_its_oracle_modules_only_when_an_oracle_is_asked_for() -> None:
    loaded = modules_after("vm.suite")
    assert under(loaded, *(f"vm.suite.oracles.{name}" for name in MODULES)) == []
    assert under(loaded, "websocket") == []


@pytest.mark.parametrize("name", MODULES)
def test_each_oracle_module_imports_on_its_own(name: str) -> None:
    """A module imported first, before the registry loads the others, needs none of them
    (before, each imported vm.tasks.oracles, which imported them all back: a circle)."""
    loaded = modules_after(f"vm.suite.oracles.{name}")
    others = [f"vm.suite.oracles.{other}" for other in MODULES if other != name]
    assert f"vm.suite.oracles.{name}" in loaded
    assert under(loaded, *others) == []
