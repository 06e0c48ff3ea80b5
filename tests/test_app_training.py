"""The Training screen: the run form and its TOML (round trip, errors that name the field),
the runs and checkpoints tables over a real store, metrics read incrementally, and, with
the tiny model on real sandboxes, a trainer started, followed live, stopped, resumed,
finished, stopped by closing the app, and terminated when it does not stop in time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtWidgets import QMessageBox

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    wait_for_worker,
    window_fixture,
)
from tests.run_configs import UNENDING_UPDATES, tiny_run_config
from tests.tiny_models import tiny_qwen25_vl
from trainer.config import ConfigError, RunConfig, parse_run_config, run_config_toml
from trainer.store import Store
from trainer.store.runs import MetricPoint
from vm.processes import pid_alive
from workbench.app.main_window import MainWindow
from workbench.app.pages.training import TrainingPage
from workbench.app.widgets.run_form import ERROR_STYLE, FIELDS, RunForm
from workbench.services.training_runs import (
    MetricHistory,
    error_field,
    read_tail,
    run_config_path,
    save_run_config,
    terminal_lines,
    trainer_command,
    trainer_log_path,
)

TRAINER_TIMEOUT_MS = 120_000  # the slowest wait: a trainer's start and first update


@pytest.fixture
def page(qtbot: Any, window: MainWindow) -> Iterator[TrainingPage]:
    """The Training screen of the demo workspace; a trainer a failed test left running is
    stopped before the window closes."""
    window.show_screen("training")
    training = window.training
    assert training is not None
    yield training
    if window.training is training and training.trainer.is_running():
        training.stop_grace_s = 30
        training.stop()
        training.trainer.wait(60)


# -- the run form ----------------------------------------------------------------------------


def test_the_form_round_trips_through_the_toml_file(qtbot: Any) -> None:
    start = parse_run_config("[rollout]\ntemperature = 0.7\n[grpo]\nepsilon_high = 0.3\n")
    form = RunForm(start)
    qtbot.addWidget(form)
    edits: dict[str, Any] = {
        "run.name": "round trip", "run.seed": 5, "model.path": "/models/qwen25-vl-3b",
        "model.finetune": "full", "model.lora.r": 8, "model.lora.alpha": 16,
        "grpo.num_generations": 4, "grpo.loss_type": "grpo", "grpo.epsilon": 0.1,
        "grpo.beta": 0.04, "training.sample_level": "trajectory",
        "training.learning_rate": 3e-6, "training.updates": 7, "tasks.ids": ["calc-*", "b"],
        "tasks.buttons": 3, "environments.count": 3, "rollout.max_steps": 9,
        "runtime.asynchronous": True, "curation.replay": True, "curation.task_filter": True,
    }
    for path, value in edits.items():
        form.set_widget_value(path, value)
    assert not form.widgets["model.lora.r"].isEnabled()  # full fine-tuning has no adapter
    assert form.is_valid(), form.error

    text = form.toml_text()
    config = parse_run_config(text)  # what `workbench train` reads
    assert (config.run.name, config.model.path, config.model.finetune) == (
        "round trip", "/models/qwen25-vl-3b", "full")
    assert (config.grpo.num_generations, config.grpo.loss_type, config.grpo.beta) == (
        4, "grpo", 0.04)
    assert config.training.learning_rate == 3e-6 and config.training.updates == 7
    assert config.tasks.ids == ("calc-*", "b") and config.tasks.buttons == 3
    assert config.runtime.asynchronous and config.curation.replay
    assert config.rollout.temperature == 0.7 and config.grpo.epsilon_high == 0.3  # kept
    assert "# G: rollouts per task in a group" in text  # the file explains its knobs

    again = RunForm(config)
    qtbot.addWidget(again)
    for item in FIELDS:
        assert again.widget_value(item.path) == form.widget_value(item.path), item.path
    assert again.config() == config

    # the TOML view shows the same file; an edit there reaches the form
    again.tabs.setCurrentIndex(1)
    assert parse_run_config(again.editor.toPlainText()) == config
    again.editor.setPlainText(again.editor.toPlainText().replace(
        "num_generations = 4", "num_generations = 6") + "\n# my note\n")
    assert again.widget_value("grpo.num_generations") == 6
    assert again.toml_text().endswith("# my note\n")  # the file's own text is kept
    again.tabs.setCurrentIndex(0)
    assert again.tabs.currentIndex() == 0 and again.config().grpo.num_generations == 6


def test_a_bad_value_shows_the_error_naming_the_field(qtbot: Any, page: TrainingPage,
                                                      artifacts: Path) -> None:
    form = page.form
    form.set_config(RunConfig())
    assert form.is_valid() and page.buttons["Start"].isEnabled()

    form.set_widget_value("grpo.num_generations", 1)
    assert not form.is_valid() and not page.buttons["Start"].isEnabled()
    assert form.error_label.isVisible()
    assert "grpo.num_generations: expected >= 2, got 1" in form.error_label.text()
    assert form.error_path == "grpo.num_generations"
    assert form.widgets["grpo.num_generations"].styleSheet() == ERROR_STYLE
    page.grab().save(str(artifacts / "app-training-form-error.png"))
    form.set_widget_value("grpo.num_generations", 2)
    assert form.is_valid() and not form.error_label.isVisible()
    assert form.widgets["grpo.num_generations"].styleSheet() == ""

    form.widgets["training.learning_rate"].setText("fast")  # type: ignore[attr-defined]
    assert "training.learning_rate: expected a number, got 'fast'" in form.error
    assert form.error_path == "training.learning_rate"
    assert not page.buttons["Start"].isEnabled()
    assert page.start() is None  # nothing starts, nothing is written
    assert not page.trainer.is_running()
    form.set_widget_value("training.learning_rate", 1e-5)
    assert form.is_valid()

    # the TOML view: a misspelt field is named, with the likely one; the form waits
    form.tabs.setCurrentIndex(1)
    form.editor.setPlainText("[grpo]\nnum_generation = 4\n")
    assert "unknown field 'num_generation' (did you mean 'num_generations'?)" in form.error
    assert not page.buttons["Start"].isEnabled()
    form.tabs.setCurrentIndex(0)
    assert form.tabs.currentIndex() == 1  # a file that does not load keeps the focus
    form.editor.setPlainText("[model.lora]\nr = 0\n")
    assert "model.lora.r: expected a positive integer, got 0" in form.error
    assert form.error_path == "model.lora.r"

    # a configuration that trains elsewhere would never show up here
    form.editor.setPlainText('[run]\nworkspace = "/somewhere/else"\n')
    assert form.is_valid()
    assert page.start() is None
    assert "run.workspace" in form.error_label.text() and not page.trainer.is_running()


# -- runs, checkpoints and metrics over a real store ---------------------------------------


def _logged_run(store: Store, run_id: str, steps: range, status: str = "stopped") -> None:
    text = run_config_toml(RunConfig())
    store.runs.create(run_id, name=f"name of {run_id}", config=text)
    store.runs.set_status(run_id, "running")
    for step in steps:
        store.runs.log_metrics(run_id, step, {
            "reward_mean": 0.1 * step, "success_rate": 0.2 * step, "entropy": 2.0 - 0.1 * step,
            "kl": 0.01 * step, "is_ratio_min": 0.9, "is_ratio_mean": 1.0, "is_ratio_max": 1.2,
            "episodes": 4.0, "update_seconds": 2.0, "policy_version": float(step),
            "success_rate/task-a": 0.5, "success_rate/task-b": 0.0})
        store.runs.add_checkpoint(run_id, step, f"checkpoints/{run_id}/{step}",
                                  {"update": step})
    store.runs.set_status(run_id, status)


def test_past_runs_checkpoints_and_metrics_read_incrementally(
        qtbot: Any, page: TrainingPage, demo: DemoWorkspace, qtmodeltester: Any) -> None:
    _logged_run(demo.store, "older", range(1, 3), status="done")
    _logged_run(demo.store, "stopped-run", range(1, 3))
    qtbot.waitUntil(lambda: [r.id for r in page.run_model.records]
                    == ["stopped-run", "older"], timeout=10_000)
    assert page.select_run("stopped-run")
    qtbot.waitUntil(lambda: len(page.checkpoint_model.records) == 2, timeout=10_000)
    row = page.current_run()
    assert row is not None and (row.status, row.latest_version, row.checkpoints) == (
        "stopped", 2, 2)
    assert page.buttons["Resume"].isEnabled()
    qtmodeltester.check(page.run_model)
    qtmodeltester.check(page.checkpoint_model)
    qtbot.waitUntil(lambda: page.plots.history.last_step == 2, timeout=10_000)
    assert page.plots.history.series("reward_mean")[0] == [1, 2]
    # the lock-step loop writes no episodes/min: it is derived, 4 episodes in 2 s
    assert page.plots.history.series("episodes_per_minute")[1] == [120.0, 120.0]

    demo.store.runs.log_metrics("stopped-run", 3, {"reward_mean": 0.3})
    qtbot.waitUntil(lambda: page.plots.history.last_step == 3, timeout=10_000)
    steps, values = page.plots.history.series("reward_mean")
    assert steps == [1, 2, 3] and values[-1] == pytest.approx(0.3)  # nothing read twice
    assert page.plots.curves["reward_mean"].getData()[0].tolist() == [1, 2, 3]
    assert "update 3" in page.plots.summary.text()

    assert page.select_run("older")
    qtbot.waitUntil(lambda: page.plots.run_id == "older"
                    and page.plots.history.last_step == 2, timeout=10_000)
    assert not page.buttons["Resume"].isEnabled()  # a finished run does not resume


def test_metric_history_and_the_trainer_command(tmp_path: Path) -> None:
    history = MetricHistory("r")
    points = [MetricPoint("reward_mean", 1, 0.5, 0.0), MetricPoint("kl", 1, None, 0.0),
              MetricPoint("success_rate/t1", 1, 1.0, 0.0),
              MetricPoint("success_rate/t2", 2, 0.0, 0.0)]
    assert history.add(points) == 3 and history.last_step == 2
    assert history.add(points) == 0  # a step seen is not added again
    assert history.task_grid()[0] == ["t1", "t2"]
    assert history.task_grid()[1] == [1, 2]

    command = trainer_command(tmp_path, tmp_path / "c.toml", "run-1", resume=True,
                              python="/usr/bin/python3")
    assert command.arguments == ("-m", "workbench", "train", str(tmp_path / "c.toml"),
                                 "--run-id", "run-1", "--resume", "run-1")
    assert command.environment["WORKBENCH_WORKSPACE"] == str(tmp_path.resolve())

    bad = tmp_path / "runs" / "r" / "run_config.toml"
    with pytest.raises(ConfigError, match=r"run_config\.toml\.grpo: grpo\.beta"):
        save_run_config(bad, "[grpo]\nbeta = -1\n")
    assert not bad.exists()  # nothing half-written
    assert error_field("form.grpo: grpo.beta: expected >= 0", ["grpo.beta", "grpo"]) \
        == "grpo.beta"

    log = tmp_path / "trainer.log"
    log.write_text("".join(f"line {i}\n" for i in range(10_000)))
    tail = read_tail(log, max_bytes=1000)
    assert tail.endswith("line 9999\n") and tail.startswith("line ") and len(tail) <= 1000
    assert terminal_lines("a\rb\rc\nd") == ["c", "d"]


# -- the trainer as a process: tiny model, real sandboxes --------------------------------------


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    return tiny_qwen25_vl()


def _sandbox_states(workspace: Path, run_id: str) -> list[Path]:
    return sorted((workspace / "sandboxes").glob(f"train-{run_id}-*/state.json"))


def _steps(page: TrainingPage) -> list[int]:
    return page.plots.history.series("reward_mean")[0]


def _wait_ended(qtbot: Any, page: TrainingPage, timeout: int = 60_000) -> None:
    qtbot.waitUntil(lambda: not page.trainer.is_running() and page.last_exit is not None,
                    timeout=timeout)


@pytest.mark.x11
@pytest.mark.slow
def test_start_a_run_see_its_metrics_then_stop_it(
        qtbot: Any, window: MainWindow, page: TrainingPage, demo: DemoWorkspace,
        tiny_model: Path, artifacts: Path) -> None:
    # a short warm-up first: its progress reaches the Log panel before any update
    page.form.set_toml(tiny_run_config(updates=UNENDING_UPDATES, model=tiny_model,
                                       warmup_steps=2))
    assert page.form.is_valid(), page.form.error
    run_id = page.start()
    assert run_id is not None and page.trainer.is_running()
    assert run_config_path(demo.path, run_id).is_file()  # the file the trainer reads

    qtbot.waitUntil(lambda: bool(_steps(page)), timeout=TRAINER_TIMEOUT_MS)
    warm_up = [line for line in page.log.toPlainText().splitlines()
               if line.startswith("warm-up")]
    assert warm_up[0] == "warm-up: recording 2 oracle demonstrations", warm_up
    assert warm_up[-1].startswith("warm-up step 2/2 · nll "), warm_up
    assert page.plots.run_id == run_id
    qtbot.waitUntil(lambda: page.current_run() is not None, timeout=10_000)
    row = page.current_run()
    assert row is not None and (row.id, row.status) == (run_id, "running")
    assert page.buttons["Stop"].isEnabled() and not page.buttons["Start"].isEnabled()
    assert not page.buttons["Resume"].isEnabled()
    assert f"train {run_config_path(demo.path, run_id)} --run-id {run_id}" \
        in page.log.toPlainText()

    assert page.stop()
    _wait_ended(qtbot, page)
    assert page.last_exit is not None and page.last_exit.exit_code == 130
    assert not page.last_exit.forced and page.last_exit.status == "stopped"
    assert demo.store.runs.get(run_id).status == "stopped"
    saved = demo.store.runs.latest_version(run_id)
    assert saved is not None and saved >= 1
    qtbot.waitUntil(lambda: [c.policy_version for c in page.checkpoint_model.records][-1:]
                    == [saved], timeout=10_000)
    qtbot.waitUntil(lambda: page.buttons["Resume"].isEnabled(), timeout=10_000)
    log = page.log.toPlainText()
    assert f"run {run_id}: stopped after" in log and "the run stopped" in log
    assert f"run {run_id}: stopped after" in read_tail(trainer_log_path(demo.path, run_id))
    assert not _sandbox_states(demo.path, run_id)  # the trainer stopped its desktops
    window.grab().save(str(artifacts / "app-training-stopped.png"))


@pytest.mark.x11
@pytest.mark.slow
def test_resume_from_the_runs_table_and_quitting_stops_the_trainer(
        qtbot: Any, window: MainWindow, page: TrainingPage, demo: DemoWorkspace,
        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a run started from the command line and stopped in its set-up, before a checkpoint
    text = tiny_run_config(updates=UNENDING_UPDATES, model=tiny_model)
    demo.store.runs.create("from-the-cli", name="cli run", config=text)
    demo.store.runs.set_status("from-the-cli", "stopped")
    qtbot.waitUntil(lambda: page.select_run("from-the-cli"), timeout=10_000)
    assert page.buttons["Resume"].isEnabled()
    page.buttons["Resume"].click()
    assert page.trainer.is_running() and page.live_run_id == "from-the-cli"
    # the app wrote the stored configuration back for the trainer to read
    assert run_config_path(demo.path, "from-the-cli").read_text() == text
    assert "--resume from-the-cli" in page.log.toPlainText()
    qtbot.waitUntil(lambda: bool(_steps(page)), timeout=TRAINER_TIMEOUT_MS)
    assert page.plots.run_id == "from-the-cli"
    assert [r.id for r in page.run_model.records].count("from-the-cli") == 1  # same run

    # quitting the app while it trains: the person is asked, then it stops cleanly
    asked: list[str] = []

    def answer_yes(*args: Any, **kwargs: Any) -> Any:
        asked.append(str(args[2]))
        return QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QMessageBox, "question", answer_yes)
    window.close()
    assert asked and "from-the-cli" in asked[0]
    assert window.training is None
    with Store.open(demo.path) as store:
        assert store.runs.get("from-the-cli").status == "stopped"
        assert (store.runs.latest_version("from-the-cli") or 0) >= 1
    assert not _sandbox_states(demo.path, "from-the-cli")


@pytest.mark.x11
@pytest.mark.slow
def test_a_run_that_finishes_is_listed_done_with_its_checkpoints(
        qtbot: Any, window: MainWindow, page: TrainingPage, demo: DemoWorkspace,
        tiny_model: Path, tmp_path: Path, artifacts: Path) -> None:
    config = tmp_path / "finishing.toml"
    config.write_text(tiny_run_config(updates=3, model=tiny_model)
                      .replace("[run]\n", '[run]\nname = "three updates"\n'))
    assert page.load_config(config)
    assert page.form.config().run.name == "three updates"
    run_id = page.start()
    assert run_id is not None
    _wait_ended(qtbot, page, timeout=TRAINER_TIMEOUT_MS)
    assert page.last_exit is not None and page.last_exit.exit_code == 0
    assert page.last_exit.status == "done"

    # each update that made a gradient step is a version with a checkpoint (one that
    # trained nothing keeps the version: trainer.loop.untrained_reason)
    steps = demo.store.runs.metrics(run_id, ["gradient_step"])
    assert sorted(p.step for p in steps) == [1, 2, 3]
    versions = list(range(1, 1 + sum(int(p.value or 0) for p in steps)))
    qtbot.waitUntil(lambda: page.current_run() is not None
                    and page.current_run().status == "done"  # type: ignore[union-attr]
                    and len(page.checkpoint_model.records) == len(versions), timeout=10_000)
    row = page.current_run()
    assert row is not None and (row.id, row.title, row.latest_version) == (
        run_id, "three updates", versions[-1] if versions else None)
    assert [c.policy_version for c in page.checkpoint_model.records] == versions
    for checkpoint in page.checkpoint_model.records:
        assert (demo.path / checkpoint.path / "checkpoint.json").is_file()
    assert not page.buttons["Resume"].isEnabled()
    qtbot.waitUntil(lambda: _steps(page) == [1, 2, 3], timeout=10_000)
    for name in ("success_rate", "entropy", "kl", "is_ratio_mean", "grad_norm",
                 "rollout_tokens_per_second", "episodes_per_minute", "policy_version"):
        assert page.plots.has_data(name), name
    assert page.plots.history.task_ids()  # the per-task heatmap has rows
    assert page.plots.history.latest("policy_version") == float(len(versions))
    window.grab().save(str(artifacts / "app-training.png"))


@pytest.mark.x11
@pytest.mark.slow
def test_a_trainer_that_does_not_stop_in_time_is_terminated_and_cleaned_up(
        qtbot: Any, page: TrainingPage, demo: DemoWorkspace, tiny_model: Path) -> None:
    page.form.set_toml(tiny_run_config(updates=UNENDING_UPDATES, model=tiny_model))
    run_id = page.start()
    assert run_id is not None
    qtbot.waitUntil(lambda: bool(_steps(page)), timeout=TRAINER_TIMEOUT_MS)
    states = _sandbox_states(demo.path, run_id)
    assert states
    xvfb = [json.loads(s.read_text())["xvfb_pid"] for s in states]

    page.stop_grace_s = 0  # no time to save a checkpoint: the screen must terminate it
    page.stop()
    _wait_ended(qtbot, page)
    assert page.last_exit is not None and page.last_exit.forced
    assert "did not stop within 0 s and was terminated" in page.last_exit.message
    # The screen marks the run stopped unless the trainer's own Ctrl-C handler got there
    # before the SIGTERM (it can, under load): either way it must not stay "running".
    assert demo.store.runs.get(run_id).status == "stopped"  # resumable, not "running"
    assert not _sandbox_states(demo.path, run_id)
    assert not any(pid_alive(pid) for pid in xvfb)
    assert "terminating it" in page.log.toPlainText()
