"""OSWorld's released evaluator functions, loaded for the parity tests.

Our metrics must give the scores OSWorld's own give. The reference is the `desktop-env`
package on PyPI at a fixed version: its wheel is downloaded with `--no-deps` the first time
(into `$WORKBENCH_OSWORLD_REFERENCE`, else ~/.cache/workbench/osworld-reference) and its
metric modules are imported from there, never installed (its pins clash with ours).

A metric module imports libraries at its top that the functions under test may not use
(easyocr, borb, acoustid, ...). While a reference module loads, an import of a library that
is not installed gets a stand-in whose every use raises ReferenceLibraryMissing, so a
test of a function that does use it fails loudly instead of comparing nothing.

    from tests.osworld_reference import reference, reference_getter
    theirs = reference("compare_table")     # desktop_env.evaluators.metrics.table
    theirs = reference_getter("vm_file")    # desktop_env.evaluators.getters.file
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import threading
import types
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

VERSION = "1.0.2"
REQUIREMENT = f"desktop-env=={VERSION}"
_PACKAGE = "desktop_env"
# where each metric the OSWorld tasks name is defined in the released wheel
_MODULES = ("basic_os", "chrome", "docs", "general", "gimp", "libreoffice", "others", "pdf",
            "slides", "table", "thunderbird", "utils", "vlc", "vscode")
_lock = threading.Lock()


class ReferenceLibraryMissing(RuntimeError):
    """A reference function used a library that is not installed here."""


def reference_dir() -> Path:
    env = os.environ.get("WORKBENCH_OSWORLD_REFERENCE")
    base = Path(env) if env else Path.home() / ".cache" / "workbench" / "osworld-reference"
    return base / f"desktop-env-{VERSION}"


def _download(target: Path) -> None:
    """Download the wheel (no dependencies) and unpack its evaluators into `target`."""
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(_wheel(target)) as wheel:
        members = [m for m in wheel.namelist() if m.startswith(f"{_PACKAGE}/evaluators/")]
        wheel.extractall(partial, members)
    partial.rename(target)


def _wheel(target: Path) -> Path:
    """The released wheel, downloaded (no dependencies) beside `target` once."""
    wheels = target.parent / f".wheel-{VERSION}"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob("desktop_env-*.whl"))
    if not found:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--quiet", "--dest", str(wheels), REQUIREMENT]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        found = sorted(wheels.glob("desktop_env-*.whl"))
        if done.returncode != 0 or not found:
            raise RuntimeError(f"could not download {REQUIREMENT} (the parity tests need it "
                               f"from PyPI): {done.stderr.strip()[-500:]}")
    return found[0]


def reference_controller() -> type:
    """OSWorld's released PythonController (desktop_env/controllers/python.py, with the
    desktop_env/actions.py it imports), loaded as the wheel has it."""
    with _lock:
        root = reference_dir()
        if not (root / _PACKAGE).is_dir():
            _download(root)
        folder = root.with_name(root.name + "-controllers")
        if not (folder / _PACKAGE / "controllers" / "python.py").is_file():
            partial = folder.with_name(folder.name + f".partial-{os.getpid()}")
            with zipfile.ZipFile(_wheel(root)) as wheel:
                wanted = (f"{_PACKAGE}/actions.py", f"{_PACKAGE}/controllers/python.py")
                wheel.extractall(partial, [m for m in wheel.namelist() if m in wanted])
            partial.rename(folder)
        _package(_PACKAGE, root / _PACKAGE)
        package = sys.modules[_PACKAGE]
        if str(folder / _PACKAGE) not in package.__path__:
            package.__path__.append(str(folder / _PACKAGE))
        _package(f"{_PACKAGE}.controllers", folder / _PACKAGE / "controllers")
        module = importlib.import_module(f"{_PACKAGE}.controllers.python")
        controller: type = module.PythonController
        return controller


class _StandIn(types.ModuleType):
    """A library that is not installed: importable, unusable."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _MissingThing(f"{self.__name__}.{name}")


class _MissingThing:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        return _MissingThing(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ReferenceLibraryMissing(f"{self._name}: not installed here (the reference "
                                      "function needs it; add it to the dev extra)")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)


@functools.cache
def _imported_by_reference(folder: Path) -> frozenset[str]:
    """Top-level names of the libraries the reference's metric modules import themselves
    and that are not installed here (not those their libraries import: scipy's optional
    imports must fail as usual; an installed library is always the real one)."""
    names: set[str] = set()
    for source in folder.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return frozenset(name for name in names - {_PACKAGE}
                     if importlib.util.find_spec(name) is None)


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path while a reference module loads: a library the reference
    imports that is not found elsewhere becomes a stand-in, when the reference's own code
    asks for it (pandas, loaded by a getter module, must find pytz missing as usual)."""

    def __init__(self, names: frozenset[str], folder: Path) -> None:
        self.names = names
        self.folder = folder

    def find_spec(self, fullname: str, path: Any, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] not in self.names or not self._asked_by_reference():
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def _asked_by_reference(self) -> bool:
        """Whether the import statement being run is in a file of the reference folder."""
        frame = sys._getframe(1)
        while frame is not None and (frame.f_code.co_filename == __file__
                                     or frame.f_code.co_filename.startswith("<frozen ")):
            frame = frame.f_back  # type: ignore[assignment]
        return frame is not None and Path(frame.f_code.co_filename).is_relative_to(
            self.folder)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandIn(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _package(name: str, folder: Path) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        sys.modules[name] = module


def reference_module(name: str, kind: str = "metrics") -> types.ModuleType:
    """desktop_env.evaluators.<kind>.<name> from the released wheel (`kind`: "metrics" or
    "getters"), without running the package's __init__ files (which import every
    application's libraries)."""
    with _lock:
        root = reference_dir()
        if not (root / _PACKAGE).is_dir():
            _download(root)
        folder = root / _PACKAGE / "evaluators" / kind
        _package(_PACKAGE, root / _PACKAGE)
        _package(f"{_PACKAGE}.evaluators", root / _PACKAGE / "evaluators")
        _package(f"{_PACKAGE}.evaluators.{kind}", folder)
        finder = _StandInFinder(_imported_by_reference(folder), folder)
        sys.meta_path.append(finder)
        try:
            return importlib.import_module(f"{_PACKAGE}.evaluators.{kind}.{name}")
        finally:
            sys.meta_path.remove(finder)


@functools.cache
def reference_getter(name: str) -> Callable[..., Any]:
    """OSWorld's released getter for evaluator configs of {"type": name} (its function
    get_<name> in desktop_env/evaluators/getters), looked up once. It is called as OSWorld
    calls it, with an env object: the tests give it a stand-in for OSWorld's VM side."""
    folder = reference_dir() / _PACKAGE / "evaluators" / "getters"
    if not folder.is_dir():
        reference_module("file", "getters")  # downloads the wheel
    for source in sorted(folder.glob("*.py")):
        if f"def get_{name}(" in source.read_text(encoding="utf-8"):
            found: Callable[..., Any] = getattr(reference_module(source.stem, "getters"),
                                                f"get_{name}")
            return found
    raise LookupError(f"no getter {name!r} in {REQUIREMENT}")


@functools.cache
def reference(function: str) -> Callable[..., Any]:
    """OSWorld's released metric function of that name (looked up once)."""
    for module_name in _MODULES:
        source = reference_dir() / _PACKAGE / "evaluators" / "metrics" / f"{module_name}.py"
        if source.is_file() and f"def {function}(" not in source.read_text(encoding="utf-8"):
            continue
        module = reference_module(module_name)
        if hasattr(module, function):
            found: Callable[..., Any] = getattr(module, function)
            return found
    raise LookupError(f"no metric {function!r} in {REQUIREMENT}")


def assert_same_score(name: str, arguments: tuple[Any, ...], options: dict[str, Any] | None = None,
                      intended: float | None = None) -> float:
    """Our metric `name` and OSWorld's released one give the same score on `arguments`
    and `options`, and (with `intended`) the score the case means to test; returns it."""
    import pytest

    from vm.tasks.registry import metric

    options = options or {}
    ours = metric(name)(*arguments, **options)
    theirs = reference(name)(*arguments, **options)
    assert ours == pytest.approx(float(theirs)), f"{name}: ours {ours}, OSWorld's {theirs}"
    if intended is not None:  # the case tests what it says it tests
        assert ours == pytest.approx(intended), f"{name}: {ours}, the case means {intended}"
    return float(ours)
