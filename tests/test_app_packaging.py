"""What installers are built from: the desktop entry, the AppStream metainfo (validated
by appstreamcli where it is installed), the icon and the PyInstaller spec."""

from __future__ import annotations

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


# `[sys.executable, "-m", "MODULE"` or `[sys.executable, "-m", NAME` (NAME = "MODULE" in the
# same file)
_MODULE_START = re.compile(r'sys\.executable,\s*"-m",\s*(?:"(?P<literal>[\w.]+)"|(?P<name>\w+))')


def modules_started_with_m() -> dict[str, str]:
    """{module: where} for every module the code starts as `sys.executable -m MODULE`."""
    found: dict[str, str] = {}
    for package in ("vm", "agents", "trainer", "workbench"):
        for path in sorted((REPO / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for match in _MODULE_START.finditer(text):
                module = match["literal"]
                if module is None:
                    constant = re.search(rf'^{match["name"]}\s*=\s*"([\w.]+)"', text, re.M)
                    assert constant, f"{path}: {match['name']} is no module-level string"
                    module = constant.group(1)
                found[module] = str(path.relative_to(REPO))
    return found


def test_every_module_a_sandbox_starts_with_m_runs_from_the_frozen_executable() -> None:
    """The bundle has no Python: each `sys.executable -m MODULE` the code starts must be one
    the executable runs itself (FROZEN_MODULES). The relay was missing, and a bundle's
    sandbox with a network of its own was dead at once."""
    from workbench.__main__ import FROZEN_MODULES

    started = modules_started_with_m()
    assert {"vm.guest", "vm.providers.forwarder", "vm.providers.sandbox.watchdog"} <= \
        set(started), started  # the scan finds what is there
    missing = {m: where for m, where in started.items() if m not in FROZEN_MODULES}
    assert not missing, missing


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
