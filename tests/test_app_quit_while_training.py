"""Quitting the app while it trains (issue 47, item 7): the Environments screen's question
about the sandboxes still running neither offers nor stops the trainer's own sandboxes
(`train-<run>-<n>`); the trainer, stopped as the app closes, still finds them running
when it is asked to stop, and they are stopped once it has.

The trainer here is a stand-in process in the trainer's place (the real one loads a model
for minutes before it runs an episode): it waits for SIGINT as `workbench train` does,
then writes down whether its sandbox was still running, and exits 130 as a stopped run
does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtWidgets import QMessageBox

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    open_window,
    settings_file_fixture,
)
from tests.run_configs import tiny_run_config
from vm.providers.sandbox import SandboxProvider
from workbench.services.training_runs import TrainerCommand

pytestmark = [pytest.mark.x11, pytest.mark.slow]
RUN = "quit-run"

STAND_IN_TRAINER = r"""
import json, os, signal, sys, time
state, report, ready = sys.argv[1:4]

def stop(signum, frame):
    # what the trainer's Ctrl-C handler meets: are its desktops still there?
    with open(report, "w") as out:
        json.dump({"sandbox_running": os.path.exists(state)}, out)
    sys.exit(130)

signal.signal(signal.SIGINT, stop)
with open(ready, "w") as out:
    out.write("ready")
while True:
    time.sleep(0.05)
"""


def test_quitting_while_training_leaves_the_trainers_sandboxes_to_the_trainer(
        qtbot: Any, demo: DemoWorkspace, settings_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    own, person = f"train-{RUN}-0", "by-hand"
    sandboxes = [SandboxProvider(name, demo.path, screen_size=(640, 400),
                                 guest_server=False) for name in (own, person)]
    try:
        for sandbox in sandboxes:
            sandbox.start()
        state = demo.path / "sandboxes" / own / "state.json"
        assert state.is_file()
        report, ready = tmp_path / "report.json", tmp_path / "ready"

        def stand_in(*args: Any, **kwargs: Any) -> TrainerCommand:
            return TrainerCommand(sys.executable, ("-c", STAND_IN_TRAINER, str(state),
                                                   str(report), str(ready)))

        monkeypatch.setattr("workbench.app.pages.training.trainer_command", stand_in)
        demo.store.runs.create(RUN, name="quitting run",
                               config=tiny_run_config(updates=3, model=tmp_path / "model"))
        demo.store.runs.set_status(RUN, "stopped")

        window = open_window(qtbot, settings_file, demo.path, (1280, 720))
        window.show_screen("environments")
        environments = window.environments
        assert environments is not None
        qtbot.waitUntil(lambda: sorted(i.name for i in environments.sandbox_model.records
                                       if i.status == "running") == [person, own],
                        timeout=20_000)
        window.show_screen("training")
        training = window.training
        assert training is not None and training.resume(RUN)
        qtbot.waitUntil(ready.exists, timeout=30_000)
        assert training.trainer.is_running()

        asked: list[str] = []
        offered: list[list[str]] = []

        def stop_training(*args: Any, **kwargs: Any) -> Any:
            asked.append(str(args[2]))
            return QMessageBox.StandardButton.Yes

        def stop_sandboxes(names: list[str], vms: list[str]) -> str:
            offered.append(names)
            return "stop"

        monkeypatch.setattr(QMessageBox, "question", stop_training)
        monkeypatch.setattr(environments, "ask_close", stop_sandboxes)
        assert window.close()

        assert asked and RUN in asked[0]  # the trainer was stopped with the person's yes
        assert offered == [[person]]  # the trainer's desktop was not the person's to stop
        assert json.loads(report.read_text()) == {"sandbox_running": True}
        assert not state.exists()  # stopped once the trainer had stopped
        assert not (demo.path / "sandboxes" / person / "state.json").exists()
        assert demo.store.runs.get(RUN).status == "stopped"
    finally:
        for sandbox in sandboxes:
            sandbox.stop()
