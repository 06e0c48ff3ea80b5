"""The packages' import layers hold (pyproject.toml's [tool.importlinter]): workbench above
trainer above agents above vm, Qt only under workbench.app, OSWorld's layer (vm.tasks) apart
from our suite (vm.suite). Checked by import-linter, here so that CI enforces what `make
lint` reports."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_import_layers_hold() -> None:
    program = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert program is not None, "lint-imports not found: pip install -e '.[dev]'"
    done = subprocess.run([program, "--no-cache"], cwd=REPO, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 kept, 0 broken" in done.stdout
