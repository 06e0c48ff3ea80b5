"""What installers are built from: the desktop entry, the AppStream metainfo (validated
by appstreamcli where it is installed), the icon and the PyInstaller spec."""

from __future__ import annotations

import ast
import configparser
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from workbench.app import APP_ID, ICON_DIR

REPO = Path(__file__).resolve().parent.parent
PACKAGING = REPO / "packaging"


def test_desktop_entry_launches_the_gui_script_with_our_icon() -> None:
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # type: ignore[assignment,method-assign]
    entry.read(PACKAGING / f"{APP_ID}.desktop", encoding="utf-8")
    desktop = entry["Desktop Entry"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["gui-scripts"]
    assert desktop["Type"] == "Application" and desktop["Exec"].split()[0] in scripts
    assert desktop["Icon"] == APP_ID and (ICON_DIR / f"{APP_ID}.svg").exists()
    assert desktop["Terminal"] == "false" and desktop["Categories"].endswith(";")


@pytest.mark.skipif(shutil.which("appstreamcli") is None, reason="needs appstreamcli")
def test_metainfo_validates() -> None:
    metainfo = PACKAGING / f"{APP_ID}.metainfo.xml"
    result = subprocess.run(["appstreamcli", "validate", "--no-net", str(metainfo)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"<launchable type=\"desktop-id\">{APP_ID}.desktop</launchable>" in \
        metainfo.read_text()


def test_pyinstaller_spec_builds_the_entry_point_with_the_assets() -> None:
    spec = (PACKAGING / "workbench.spec").read_text()
    compile(spec, "workbench.spec", "exec")  # valid Python
    assert '"workbench" / "__main__.py"' in spec and 'name="workbench"' in spec
    for folder in ("tasks", "apps", "icons"):
        assert f'"assets" / "{folder}"' in spec and (REPO / "assets" / folder).is_dir()


class _Recorded:
    """Stands in for PyInstaller's Analysis, PYZ, EXE and COLLECT: keeps its arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
        self.pure = self.scripts = self.binaries = self.datas = ()


def spec_namespace() -> dict[str, object]:
    """The spec run as PyInstaller runs it, with its build steps recorded, not done."""
    namespace: dict[str, object] = {"SPECPATH": str(PACKAGING), "__file__": "workbench.spec"}
    namespace.update(Analysis=_Recorded, PYZ=_Recorded, EXE=_Recorded, COLLECT=_Recorded)
    exec(compile((PACKAGING / "workbench.spec").read_text(), "workbench.spec", "exec"),
         namespace)
    return namespace


def test_the_bundle_holds_every_module_the_code_imports_by_name() -> None:
    """PyInstaller follows import statements; what is imported by name must be listed as a
    hidden import. The spec derives the list from the tables the code reads, so a new
    sub-command is in the bundle without editing the spec (a hand list once left out
    workbench.cli.tasks: the bundle's `--help` died with ModuleNotFoundError)."""
    import importlib
    import pkgutil

    import workbench.cli
    from workbench.__main__ import FROZEN_MODULES
    from workbench.cli import COMMAND_MODULES

    namespace = spec_namespace()
    analysis = namespace["a"]
    assert isinstance(analysis, _Recorded)
    hidden = set(analysis.kwargs["hiddenimports"])
    assert set(COMMAND_MODULES) <= hidden, set(COMMAND_MODULES) - hidden
    packages = {m for m in FROZEN_MODULES
                if (REPO / m.replace(".", "/") / "__main__.py").exists()}
    assert set(FROZEN_MODULES) <= hidden and {f"{m}.__main__" for m in packages} <= hidden
    # the table is complete: every module of workbench/cli that adds a sub-command is in it
    registering = {f"workbench.cli.{m.name}" for m in pkgutil.iter_modules(workbench.cli.__path__)
                   if hasattr(importlib.import_module(f"workbench.cli.{m.name}"), "register")}
    assert registering == set(COMMAND_MODULES), registering ^ set(COMMAND_MODULES)
    # OSWorld's metric, getter and setup-step modules, imported by vm.tasks.optional_modules
    for package in ("metrics", "getters", "steps"):
        for module in (REPO / "vm" / "tasks" / package).glob("*.py"):
            if module.stem != "__init__":
                assert f"vm.tasks.{package}.{module.stem}" in hidden, module
    # our suite's oracle modules, imported by vm.suite.oracles.load_all
    from vm.suite.oracles import MODULES as ORACLE_MODULES

    assert {f"vm.suite.oracles.{name}" for name in ORACLE_MODULES} <= hidden


# A start of a module is a list `[PROGRAM, "-m", MODULE, ...]` whose PROGRAM is no string
# (sys.executable, a variable), or one that begins with `"-m", MODULE` (the arguments of a
# program chosen elsewhere); or an f-string `f"{PROGRAM} -m MODULE ..."`. MODULE is a string
# or a name bound to one at the top of the same file. Other programs' `-m` (QEMU's memory,
# mkfs's reserve) follow a string and are not starts.
_F_STRING_START = re.compile(r"\s+-m\s+(?P<module>[\w.]+)")


def _module_name(node: ast.expr, tree: ast.Module, where: str) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        for statement in tree.body:
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant) \
                    and isinstance(statement.value.value, str) \
                    and any(isinstance(t, ast.Name) and t.id == node.id
                            for t in statement.targets):
                return statement.value.value
    raise AssertionError(f"{where}: `-m {ast.unparse(node)}`: the scan cannot tell which "
                         "module this starts (name it with a string or a module-level one)")


def modules_started_with_m(packages: tuple[str, ...] = ("vm", "agents", "trainer", "workbench")
                           ) -> dict[str, str]:
    """{module: where} for every module the code starts as `PYTHON -m MODULE`."""
    found: dict[str, str] = {}
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, ast.List | ast.Tuple):
                    items = node.elts
                    for index, item in enumerate(items[:2]):
                        if isinstance(item, ast.Constant) and item.value == "-m" \
                                and len(items) > index + 1 and (index == 0 or not (
                                    isinstance(items[0], ast.Constant)
                                    and isinstance(items[0].value, str))):
                            found[_module_name(items[index + 1], tree, where)] = where
                elif isinstance(node, ast.JoinedStr):
                    for before, part in zip(node.values, node.values[1:], strict=False):
                        if isinstance(before, ast.FormattedValue) \
                                and isinstance(part, ast.Constant) \
                                and (match := _F_STRING_START.match(str(part.value))):
                            found[match["module"]] = where
    return found


def test_every_module_the_code_starts_with_m_runs_from_the_frozen_executable() -> None:
    """The bundle has no Python: each `PYTHON -m MODULE` the code starts (a sandbox's guest
    server, relay, watchdog and commands; the app's own evaluation and training runs) must be
    one the executable runs itself (FROZEN_MODULES), importable and in the bundle. The relay
    was missing once, and a bundle's sandbox with a network of its own was dead at once."""
    import importlib

    from workbench.__main__ import FROZEN_MODULES

    started = modules_started_with_m()
    # the scan finds each kind of start there is: a literal, a module-level name, the
    # arguments of a program chosen elsewhere, an f-string command line
    assert {"vm.guest", "vm.providers.forwarder", "vm.providers.sandbox.watchdog",
            "vm.providers.sandbox.sudo", "workbench"} <= set(started), started
    missing = {m: where for m, where in started.items() if m not in FROZEN_MODULES}
    assert not missing, f"started with -m but not in workbench.__main__.FROZEN_MODULES: " \
        f"{missing}"
    hidden = set(spec_namespace()["a"].kwargs["hiddenimports"])  # type: ignore[attr-defined]
    for module in FROZEN_MODULES:
        assert module in hidden, f"{module}: not among the spec's hidden imports"
        if hasattr(importlib.import_module(module), "__path__"):  # a package runs __main__
            importlib.import_module(f"{module}.__main__")


def test_the_command_line_parses_without_the_training_stack_the_bundle_leaves_out() -> None:
    """The bundle excludes torch & co.: building the parser (every `--help`) must not
    import them, and the spec's excludes are the CLI's own list of them."""
    import sys

    from workbench.cli import TRAINING_STACK

    excludes = spec_namespace()["excludes"]
    assert isinstance(excludes, list) and set(TRAINING_STACK) <= set(excludes)
    code = ("import sys; from workbench.cli import build_parser, TRAINING_STACK; "
            "build_parser(); print([m for m in TRAINING_STACK if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + \
        result.stderr


def test_the_bundle_says_that_training_needs_the_full_install(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    import sys

    from workbench.cli import main

    monkeypatch.setattr(sys, "frozen", True, raising=False)  # as in the PyInstaller bundle
    config = tmp_path / "run.toml"
    config.write_text("[training]\nupdates = 1\n")
    assert main(["--workspace", str(tmp_path / "ws"), "train", str(config)]) == 1
    error = capsys.readouterr().err
    assert "training needs the full Python install" in error
    assert f"python -m workbench train {config}" in error and "make setup" in error
    assert not (tmp_path / "ws").exists()  # refused before anything was made
    # `train --example` needs no training stack and still works
    assert main(["train", "--example"]) == 0
    assert "[training]" in capsys.readouterr().out


def test_the_frozen_executable_stands_in_for_python(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """In a bundle, sys.executable is the workbench: it must take the app's `-m workbench`
    commands as its own command line, run a task's small app (`$WORKBENCH_PYTHON
    SCRIPT.py ARGS`, the script importing its neighbours) and the guest's `python -c`."""
    import sys

    from workbench.__main__ import main

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["-m", "workbench", "train", "--example"]) == 0
    assert "[training]" in capsys.readouterr().out
    (tmp_path / "neighbour.py").write_text("WORD = 'from the neighbour'\n")
    script = tmp_path / "app.py"
    script.write_text("import sys\nfrom neighbour import WORD\n"
                      "if __name__ == '__main__':\n    print(WORD, sys.argv[1:])\n")
    assert main([str(script), "--layout", "x"]) == 0
    assert capsys.readouterr().out == "from the neighbour ['--layout', 'x']\n"
    assert main(["-c", "import sys; print(__name__, sys.argv)", "one"]) == 0
    assert capsys.readouterr().out == "__main__ ['-c', 'one']\n"
    sys.modules.pop("neighbour", None)
