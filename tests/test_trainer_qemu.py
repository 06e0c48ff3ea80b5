"""Training on QEMU VMs: `[environments] kind = "qemu"` with an `[environments.qemu]`
table, read, written back and booted as real VMs of the busybox test guest.

The guest runs an interactive shell on its VGA console, so typed text is an Action that
changes something a task's evaluator can check; its serial shell runs the task's setup
and the evaluator's commands.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.qemu_guest import BuiltGuest, build_test_guest, missing_parts
from trainer.config import (
    ConfigError,
    EnvironmentsConfig,
    QemuSection,
    RunConfig,
    example_toml,
    load_run_config,
    parse_run_config,
    run_config_toml,
)
from trainer.environments import make_environment, qemu_config
from vm.actions import TypeText
from vm.env import DesktopEnv
from vm.providers.qemu import QemuConfig, QemuProvider
from vm.tasks import Task

ACCEL = os.environ.get("WORKBENCH_QEMU_ACCEL", "auto")  # tcg / kvm to force one
needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or bool(missing_parts()),
    reason="needs qemu-system-x86_64, qemu-img, busybox and a kernel (Debian packages "
           "qemu-system-x86 qemu-utils busybox-static linux-image-amd64; make setup)")

# A task for the test guest: setup writes a file through the serial shell; the answer
# is typed into the shell on the screen; the evaluator reads both back.
ANSWER_TASK: dict[str, Any] = {
    "id": "qemu-answer",
    "instruction": "Type `echo 42 > /tmp/answer` and press Enter.",
    "config": [{"type": "execute", "parameters": {
        "command": "echo ready > /tmp/setup", "shell": True}}],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "shell": True,
                   "command": "cat /tmp/setup /tmp/answer 2>/dev/null"},
        "expected": {"type": "rule", "rules": {"expected": "ready\n42\n"}},
    },
}


def qemu_run_toml(guest: BuiltGuest, extra: str = "") -> str:
    return f"""
[environments]
kind = "qemu"
count = 1
[environments.qemu]
image = "{guest.disk}"
kernel = "{guest.kernel}"
initrd = "{guest.initrd}"
append = "{guest.append}"
memory_mb = 256
cpus = 1
accel = "{ACCEL}"
guest_port = "none"
serial_shell = true
ready_timeout = 120
{extra}"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------ the configuration


def test_a_qemu_table_is_read_with_paths_beside_the_file_and_round_trips(
        tmp_path: Path) -> None:
    path = tmp_path / "runs" / "run.toml"
    path.parent.mkdir()
    path.write_text("""
[environments]
kind = "qemu"
count = 3
[environments.qemu]
image = "../disks/ubuntu.qcow2"
memory_mb = 8192
accel = "kvm"
guest_port = "none"
serial_shell = true
forward_ports = [9222, 8080]
firmware = "uefi"
start_snapshot = "booted"
ready_timeout = 600
""")
    config, _ = load_run_config(path)
    qemu = config.environments.qemu
    assert config.environments.kind == "qemu" and config.environments.count == 3
    assert qemu.image == str(tmp_path / "disks" / "ubuntu.qcow2")  # relative to the file
    vm = qemu.qemu_config("run.toml: environments.qemu", tmp_path, check_files=False)
    assert vm == QemuConfig(image=tmp_path / "disks" / "ubuntu.qcow2", memory_mb=8192,
                            accel="kvm", guest_port=None, serial_shell=True,
                            forward_ports=(9222, 8080), firmware="uefi",
                            start_snapshot="booted", ready_timeout=600.0)
    # The file the app writes keeps the table, and it reads back the same from anywhere.
    text = run_config_toml(config)
    assert "[environments.qemu]" in text.splitlines() and 'guest_port = "none"' in text
    elsewhere = tmp_path / "copy.toml"
    elsewhere.write_text(text)
    assert load_run_config(elsewhere)[0] == config
    assert parse_run_config(text) == config


def test_the_example_documents_every_qemu_knob_and_they_match_the_vm_settings() -> None:
    lines = example_toml().splitlines()
    start = lines.index("[environments.qemu]")
    block = lines[start + 1:lines.index("", start)]
    keys = []
    for index, line in enumerate(block):
        if not line.startswith("#"):
            assert block[index - 1].startswith("# "), f"no comment above {line!r}"
            keys.append(line.split(" = ")[0])
    # One knob per QemuConfig field, each with QemuConfig's default.
    assert keys == [f.name for f in dataclasses.fields(QemuConfig)]
    defaults = QemuSection(image="/disk.qcow2").qemu_config("x", Path("/"),
                                                             check_files=False)
    assert defaults == QemuConfig(image=Path("/disk.qcow2"))
    assert parse_run_config(example_toml()) == RunConfig()  # kind = sandbox: no image needed


@pytest.mark.parametrize(("table", "message"), [
    ("", 'environments.qemu.image: kind = "qemu" needs the VM\'s base disk image'),
    ('image = "d.qcow2"\nmemory_mb = "4G"\n',
     "environments.qemu.memory_mb: expected a whole number, got '4G'"),
    ('image = "d.qcow2"\nmemory_mb = 32\n',
     ": environments.qemu.memory_mb: expected at least 64, got 32"),
    ('image = "d.qcow2"\nmemory = 4096\n', "unknown field 'memory' (did you mean 'memory_mb'?)"),
    ('image = "d.qcow2"\naccel = "hvf"\n', "environments.qemu.accel: expected one of"),
    ('image = "d.qcow2"\nforward_ports = ["80"]\n',
     "environments.qemu.forward_ports[0]: expected a whole number"),
])
def test_a_bad_qemu_table_names_the_file_and_the_field(tmp_path: Path, table: str,
                                                      message: str) -> None:
    path = tmp_path / "run.toml"
    path.write_text(f'[environments]\nkind = "qemu"\n[environments.qemu]\n{table}')
    with pytest.raises(ConfigError) as caught:
        load_run_config(path)
    assert message in str(caught.value)
    assert str(caught.value).startswith(str(path))


def test_the_vm_settings_are_checked_where_the_vm_starts(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    environments = EnvironmentsConfig(kind="qemu", count=1, qemu=QemuSection(
        image=str(tmp_path / "missing.qcow2")))
    with pytest.raises(ConfigError, match=r"environments\.qemu\.image: no such file"):
        make_environment(environments, 0, "vm", tmp_path)  # before any QEMU starts
    assert not (tmp_path / "vms").exists()

    (tmp_path / "disk.qcow2").write_bytes(b"")
    present = EnvironmentsConfig(kind="qemu", qemu=QemuSection(
        image=str(tmp_path / "disk.qcow2")))
    monkeypatch.setenv("WORKBENCH_GUEST_TOKEN", "from-the-environment")
    assert qemu_config(present).guest_token == "from-the-environment"
    explicit = EnvironmentsConfig(kind="qemu", qemu=QemuSection(
        image=str(tmp_path / "disk.qcow2"), guest_token="written"))
    assert qemu_config(explicit).guest_token == "written"
    monkeypatch.delenv("WORKBENCH_GUEST_TOKEN")
    assert qemu_config(present).guest_token is None


# ------------------------------------------------------------------ real VMs


@pytest.fixture(scope="module")
def test_guest(tmp_path_factory: pytest.TempPathFactory) -> BuiltGuest:
    if shutil.which("qemu-system-x86_64") is None or missing_parts():
        pytest.skip(f"needs {', '.join(missing_parts()) or 'qemu-system-x86_64'}")
    return build_test_guest(tmp_path_factory.mktemp("qemu-guest"))


@pytest.fixture(scope="module")
def qemu_env(test_guest: BuiltGuest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[DesktopEnv, Path]]:
    workdir = tmp_path_factory.mktemp("run")
    config = parse_run_config(qemu_run_toml(test_guest))
    env = make_environment(config.environments, 0, "train-test-0", workdir)
    try:
        yield env, workdir
    finally:
        env.close()


def guest_file(env: DesktopEnv, path: str) -> str:
    return env.provider.execute(f"cat {path} 2>/dev/null", shell=True).output


@needs_qemu
@pytest.mark.qemu
@pytest.mark.slow
def test_a_qemu_environment_boots_on_its_own_overlay_with_a_base_snapshot(
        qemu_env: tuple[DesktopEnv, Path], test_guest: BuiltGuest) -> None:
    env, workdir = qemu_env
    provider = env.provider
    assert isinstance(provider, QemuProvider)
    assert provider.workdir == workdir / "vms" / "train-test-0"
    assert provider.overlay.is_file()  # the base image is only its backing file
    assert [s.name for s in env.list_snapshots()] == ["init_state"]  # savevm after boot
    observation = env.observe()
    assert observation.screen_size == (720, 400)  # the guest's VGA console, not 1280x800
    assert env.is_alive()


@needs_qemu
@pytest.mark.qemu
@pytest.mark.slow
def test_typing_the_answer_scores_and_the_next_reset_brings_back_the_clean_vm(
        qemu_env: tuple[DesktopEnv, Path], test_guest: BuiltGuest) -> None:
    env, _ = qemu_env
    base_before = sha256(test_guest.disk)
    task = Task.from_dict(ANSWER_TASK, source="test")

    env.reset(task)
    assert guest_file(env, "/tmp/setup") == "ready\n"  # the execute step ran
    assert env.evaluate() == 0.0  # nothing done yet

    env.step(TypeText("echo 42 > /tmp/answer\n"))  # into the shell on the screen
    wait_until(lambda: guest_file(env, "/tmp/answer") == "42\n", timeout=30,
               message="the typed command to write /tmp/answer")
    assert env.evaluate() == 1.0
    env.provider.execute("echo dirt > /tmp/dirt; rm /tmp/setup", shell=True)

    # The next episode starts from the snapshot taken after boot: no answer, no dirt.
    env.reset(task)
    assert env.last_revert_seconds is not None
    assert guest_file(env, "/tmp/answer") == "" and guest_file(env, "/tmp/dirt") == ""
    assert guest_file(env, "/tmp/setup") == "ready\n"
    assert env.evaluate() == 0.0
    assert sha256(test_guest.disk) == base_before  # the base image is never written


@needs_qemu
@pytest.mark.qemu
@pytest.mark.slow
def test_the_training_loop_runs_an_update_on_a_qemu_environment(
        test_guest: BuiltGuest, tmp_path: Path) -> None:
    from tests.tiny_models import tiny_qwen25_vl
    from trainer.loop import TrainingRun
    from trainer.store import Store

    suite = tmp_path / "tasks"
    suite.mkdir()
    (suite / "qemu-answer.json").write_text(json.dumps(ANSWER_TASK))
    text = qemu_run_toml(test_guest, extra=f"""
[model]
path = "{tiny_qwen25_vl()}"
finetune = "lora"
[model.lora]
r = 4
alpha = 8
[tasks]
suite = "{suite}"
[rollout]
max_steps = 1
max_new_tokens = 8
history_images = 1
max_pixels = 31360
stop_on_parse_error = false
[grpo]
num_generations = 2
[training]
updates = 1
tasks_per_update = 1
micro_batch_size = 2
""")
    workspace = tmp_path / "ws"
    summary = TrainingRun(parse_run_config(text), text, workspace, progress=False).run()
    assert summary.status == "done" and summary.updates == 1
    # Random tokens score 0 in both episodes: equal rewards, nothing to learn, so the update
    # makes no gradient step and no new version (a gradient step: tests/test_trainer_loop.py)
    (update,) = summary.history
    assert update.metrics["no_gradient_step/equal_rewards_in_every_group"] == 1.0
    assert summary.policy_version == 0
    episode_ids = [e for result in summary.history for e in result.episode_ids]
    assert len(episode_ids) == 2  # one group of two on the one VM
    with Store.open(workspace) as store:
        for episode_id in episode_ids:
            episode = store.episodes.load(episode_id)
            assert episode.environment == "qemu" and episode.task_id == "qemu-answer"
            assert episode.status == "done" and episode.score == 0.0  # random tokens
            assert episode.steps  # a step with the VM's screenshot
    # The VM lived in the workspace, on its own overlay with the base snapshot.
    (vm_folder,) = (workspace / "vms").iterdir()
    assert vm_folder.name == f"train-{summary.run_id}-0"
    assert (vm_folder / "disk.qcow2").is_file()


# ------------------------------------------------------------------ workbench rollout --qemu


def test_rollout_reads_a_qemu_file_and_names_its_bad_fields(tmp_path: Path) -> None:
    from workbench.cli.rollout import qemu_settings

    (tmp_path / "disk.qcow2").write_bytes(b"")
    vm = tmp_path / "vm.toml"
    vm.write_text('[qemu]\nimage = "disk.qcow2"\nmemory_mb = 1024\n')
    assert qemu_settings(str(vm)) == QemuConfig(image=tmp_path / "disk.qcow2", memory_mb=1024)
    run = tmp_path / "run.toml"  # a run configuration's table serves as well
    run.write_text('[environments]\nkind = "qemu"\n[environments.qemu]\n'
                   'image = "disk.qcow2"\nguest_port = "none"\n')
    assert qemu_settings(str(run)).guest_port is None
    vm.write_text('[qemu]\nimage = "disk.qcow2"\ncpus = 0\n')
    with pytest.raises(ValueError, match=rf"{vm}: qemu\.cpus: expected at least 1"):
        qemu_settings(str(vm))
    vm.write_text('[vm]\nimage = "disk.qcow2"\n')
    with pytest.raises(ValueError, match=r"no \[qemu\] table"):
        qemu_settings(str(vm))


@needs_qemu
@pytest.mark.qemu
@pytest.mark.slow
def test_rollout_runs_episodes_in_qemu_vms(test_guest: BuiltGuest, tmp_path: Path) -> None:
    import subprocess
    import sys

    from trainer.store import EpisodeFilter, Store

    task = {"id": "qemu-infeasible", "instruction": "Print the moon.",
            "config": ANSWER_TASK["config"], "evaluator": {"func": "infeasible"}}
    (tmp_path / "task.json").write_text(json.dumps(task))
    vm = tmp_path / "vm.toml"
    vm.write_text("[qemu]" + qemu_run_toml(test_guest).split("[environments.qemu]")[1])
    workspace = tmp_path / "ws"
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_WORKSPACE"}
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "--workspace", str(workspace), "rollout",
         "--oracle", "--tasks", str(tmp_path / "task.json"), "--qemu", str(vm)],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "1 episodes: 1 done, 0 error; mean score 1.000" in result.stdout
    with Store.open(workspace, create=False) as store:
        [summary] = store.queries.page(EpisodeFilter(), limit=10)
        episode = store.episodes.load(summary.id)
    assert episode.environment == "qemu" and episode.task_id == "qemu-infeasible"
    assert episode.steps  # the oracle's FAIL, with the VM's screenshot
    assert not any((workspace / "vms").iterdir())  # the command's own VMs are gone
