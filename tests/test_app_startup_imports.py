"""The first window imports only what it shows: importing the main window, and opening it
on a workspace on the Trajectories screen, pulls in none of the heavy modules that other
screens need (the tasks and their checks, the plots, the guest server, dataframes).
Checked in a fresh process: the test session itself has imported most of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest_app import build_demo

ROOT = Path(__file__).resolve().parent.parent
# what bench/ui.py's first window paid for before (python -X importtime): sqlite-utils
# (the store's migrations: it imports pandas and numpy), the Environments screen's tasks
# and oracles, the Training screen's pyqtgraph, the sandboxes' guest server (flask), the
# policies behind the Prompt tab
HEAVY = ("sqlite_utils", "pandas", "numpy", "pyqtgraph", "vm.tasks", "vm.suite.oracles",
         "vm.guest", "flask", "agents.policies", "trainer.config")

SCRIPT = r"""
import json, sys
from pathlib import Path
heavy = json.loads(sys.argv[2])
import workbench.app.main_window
seen = {"import": [m for m in heavy if m in sys.modules]}
from PyQt6.QtWidgets import QApplication
app = QApplication([])
from workbench.app.settings import AppSettings
window = workbench.app.main_window.MainWindow(AppSettings.at(Path(sys.argv[3])),
                                              Path(sys.argv[1]))
window.show()
for _ in range(3):
    app.processEvents()
seen["screen"] = window.current_screen()
seen["episode"] = window.trajectories.current_episode_id()
seen["window"] = [m for m in heavy if m in sys.modules]
window.show_screen("training")
for _ in range(3):
    app.processEvents()
seen["training"] = [m for m in heavy if m in sys.modules]
window.close()
print(json.dumps(seen))
"""


def test_the_first_window_imports_no_heavy_module(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    build_demo(workspace).store.close()
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(workspace), json.dumps(HEAVY),
         str(tmp_path / "s.ini")], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120)
    problems = [line for line in result.stderr.splitlines()
                if "propagateSizeHints" not in line]  # the offscreen platform's notice
    assert result.returncode == 0, (result.returncode, problems[-40:])
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["import"] == []
    assert seen["screen"] == "trajectories" and seen["episode"] is not None
    assert seen["window"] == []
    # the Training screen, once shown, has what it needs: its plots
    assert "pyqtgraph" in seen["training"]
