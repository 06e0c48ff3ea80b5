"""The QEMU provider on a real guest: a Debian kernel with a busybox initramfs, built here.

Each test boots real VMs (KVM when usable, else TCG) and checks what a user relies on:
input events reach the guest and show on the screendump, a revert brings old state back,
the base image is never written, parallel VMs are isolated, and a killed QEMU is noticed
and restarted by the pool.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from PIL import Image

from tests.conftest import wait_until
from tests.qemu_guest import BuiltGuest, build_test_guest
from vm.actions import Click, MoveTo, Press, Scroll, TypeText
from vm.errors import EnvironmentError_
from vm.providers.base import Provider
from vm.providers.qemu import QemuConfig, QemuProvider
from vm.providers.qemu.input import UntypableText, text_events

pytestmark = [
    pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                       reason="needs qemu-system-x86_64 (Debian package qemu-system-x86; "
                              "make setup installs it)"),
]
BOOT_TIMEOUT = 120.0  # generous: TCG on a loaded two-core CI runner
ACCEL: Literal["auto", "kvm", "tcg"] = os.environ.get(  # type: ignore[assignment]
    "WORKBENCH_QEMU_ACCEL", "auto")  # tcg / kvm to force one


@pytest.fixture(scope="session")
def test_guest(tmp_path_factory: pytest.TempPathFactory) -> BuiltGuest:
    return build_test_guest(tmp_path_factory.mktemp("qemu-guest"))


def guest_config(guest: BuiltGuest, **overrides: Any) -> QemuConfig:
    config = QemuConfig(image=guest.disk, kernel=guest.kernel, initrd=guest.initrd,
                        append=guest.append, memory_mb=256, cpus=1, guest_port=None,
                        forward_ports=(80,), serial_shell=True, accel=ACCEL,
                        ready_timeout=BOOT_TIMEOUT, shutdown_timeout=20.0)
    return replace(config, **overrides)


@pytest.fixture
def make_vm(test_guest: BuiltGuest, tmp_path: Path) -> Iterator[Callable[..., QemuProvider]]:
    """Start VMs from the test guest; every one is stopped afterwards."""
    made: list[QemuProvider] = []

    def make(name: str = "vm", start: bool = True, **overrides: Any) -> QemuProvider:
        provider = QemuProvider(name, tmp_path / name, guest_config(test_guest, **overrides))
        made.append(provider)
        if start:
            provider.start()
        return provider

    yield make
    for provider in made:
        provider.stop(graceful=False)


def lit_pixels(png: bytes) -> int:
    """How many pixels are bright: text on the black VGA console."""
    with Image.open(io.BytesIO(png)) as image:
        return int((np.asarray(image.convert("L")) > 100).sum())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def qemu_img(*arguments: str) -> str:
    return subprocess.run(["qemu-img", *arguments], capture_output=True, text=True,
                          check=True).stdout


def guest_file(vm: QemuProvider, path: str) -> str:
    result = vm.execute(f"cat {path} 2>/dev/null", shell=True)
    return result.output


# ---------------------------------------------------------------------------------------


def test_text_a_us_keyboard_cannot_type_is_refused_with_its_position() -> None:
    with pytest.raises(UntypableText, match=r"type.text\[3\]: 'é'"):
        text_events("café")


@pytest.mark.qemu
@pytest.mark.slow
def test_boot_gives_a_healthy_vm_on_an_overlay(make_vm: Callable[..., QemuProvider],
                                               test_guest: BuiltGuest) -> None:
    base_before = sha256(test_guest.disk)
    vm = make_vm()
    assert isinstance(vm, Provider)
    health = vm.health()
    assert health.alive, health.detail
    assert vm.accelerator in ("kvm", "tcg")
    assert vm.screen_size() == (720, 400)  # the VGA text console
    overlay = json.loads(qemu_img("info", "-U", "--output=json", str(vm.overlay)))
    assert Path(overlay["full-backing-filename"]).resolve() == test_guest.disk.resolve()
    # The forwarded port reaches the guest's web server, on a port the kernel picked.
    page = urllib.request.urlopen(f"http://127.0.0.1:{vm.host_ports[80]}/index.html",
                                  timeout=30).read()
    assert page == b"workbench test guest\n"
    # Commands and files go through the serial console when there is no guest server.
    assert vm.execute(["echo", "it's", "here"]).output == "it's here\n"
    assert vm.execute("exit 3", shell=True).returncode == 3
    # A command that overruns its timeout is killed in the guest; the console stays usable.
    assert vm.execute("sleep 60", shell=True, timeout=1).returncode == 137
    assert vm.execute("echo still here", shell=True).output == "still here\n"
    blob = bytes(range(256)) * 50
    vm.write_file("/tmp/blob", blob)
    assert vm.read_file("/tmp/blob") == blob
    # A graceful stop powers the guest off through ACPI; the base image is untouched.
    vm.stop()
    assert vm.last_stop == "powered off"
    assert not vm.health().alive
    assert sha256(test_guest.disk) == base_before


@pytest.mark.qemu
@pytest.mark.slow
def test_readiness_waits_for_the_guest_server_through_the_forwarded_port(
        make_vm: Callable[..., QemuProvider]) -> None:
    # The guest's web server stands in for OSWorld's on port 5000: it answers /platform.
    vm = make_vm(guest_port=80, forward_ports=(), serial_shell=False)
    assert vm.guest_url == f"http://127.0.0.1:{vm.host_ports[80]}"
    assert urllib.request.urlopen(f"{vm.guest_url}/platform", timeout=30).read() == b"Linux"
    assert vm.health().alive


@pytest.mark.qemu
@pytest.mark.slow
def test_typed_command_runs_and_shows_on_the_screendump(
        make_vm: Callable[..., QemuProvider]) -> None:
    vm = make_vm()
    before = vm.screenshot()
    vm.perform(TypeText("echo 'Say: Hi!' $((6*7)) > /tmp/typed"))
    vm.perform(Press("enter"))
    # The shell on the screen ran it: shifted symbols, quotes and arithmetic all arrived.
    wait_until(lambda: guest_file(vm, "/tmp/typed") == "Say: Hi! 42\n", timeout=30,
               message="the typed command to write /tmp/typed")
    typed = vm.screenshot()
    assert lit_pixels(typed) > lit_pixels(before) + 200  # the command line is on screen
    vm.perform(TypeText("clear\n"))
    # Only the prompt is left: far fewer lit pixels than with the boot text on screen.
    wait_until(lambda: lit_pixels(vm.screenshot()) < lit_pixels(typed) // 10, timeout=30,
               message="`clear` to empty the screen")


@pytest.mark.qemu
@pytest.mark.slow
def test_pointer_actions_reach_the_guest_through_the_usb_tablet(
        make_vm: Callable[..., QemuProvider]) -> None:
    vm = make_vm()
    find_tablet = ("for d in /sys/class/input/event*; do grep -q Tablet $d/device/name "
                   "&& basename $d; done")
    device = wait_until(lambda: vm.execute(find_tablet, shell=True).output.strip(),
                        timeout=30, message="the USB tablet's event device")
    vm.launch(f"cat /dev/input/{device} > /tmp/events", shell=True)
    wait_until(lambda: vm.execute("pidof cat", shell=True).returncode == 0,
               message="the event recorder")
    width, height = vm.screen_size()

    def events() -> list[tuple[int, int, int]]:
        """(type, code, value) of each input_event the guest kernel delivered."""
        data = vm.read_file("/tmp/events")
        records = [struct.unpack_from("qqHHi", data, at)
                   for at in range(0, len(data) - len(data) % 24, 24)]
        return [(kind, code, value) for _, _, kind, code, value in records]

    def pointer() -> tuple[int, int] | None:
        """Where the guest believes the pointer is, in screen pixels."""
        xs = [v for kind, code, v in events() if (kind, code) == (3, 0)]
        ys = [v for kind, code, v in events() if (kind, code) == (3, 1)]
        return (xs[-1] * width // 0x8000, ys[-1] * height // 0x8000) if xs and ys else None

    def moved_to(x: int, y: int) -> bool:
        # Repeated until seen: usbhid starts polling the tablet only once the recorder has
        # opened it, so the first move can race that open. A repeated move is harmless.
        vm.perform(MoveTo(x, y))
        return pointer() == (x, y)

    # The guest maps the tablet's 0..0x7fff range onto the screen: back to our pixels.
    wait_until(lambda: moved_to(100, 50), timeout=30, message="the pointer at (100, 50)")
    vm.perform(Click(500, 300, button="right"))
    vm.perform(Scroll(dy=2))
    assert vm.cursor_position() == (500, 300)
    # The USB tablet may merge the two wheel notches into one report of 2.
    wait_until(lambda: sum(v for kind, code, v in events() if (kind, code) == (2, 8)) == 2,
               timeout=30, message="two wheel notches up")
    assert pointer() == (500, 300)
    assert [v for kind, code, v in events() if (kind, code) == (1, 0x111)] == [1, 0]


@pytest.mark.qemu
@pytest.mark.slow
def test_revert_brings_back_the_saved_machine(make_vm: Callable[..., QemuProvider],
                                              test_guest: BuiltGuest) -> None:
    base_before = sha256(test_guest.disk)
    vm = make_vm()
    vm.execute("echo before > /tmp/state; echo disk-before | dd of=/dev/vda conv=fsync "
               "2>/dev/null", shell=True)
    clean = vm.save_snapshot("clean", description="fresh shell", task_id="task-7")
    assert clean.size_bytes > 0 and clean.parent is None
    assert clean.extra["vm_clock_seconds"] > 0

    vm.execute("echo after > /tmp/state; echo disk-after! | dd of=/dev/vda conv=fsync "
               "2>/dev/null", shell=True)
    vm.perform(TypeText("echo this line will be undone\n"))
    vm.revert_snapshot("clean")
    assert guest_file(vm, "/tmp/state") == "before\n"
    assert vm.execute("head -c 12 /dev/vda", shell=True).output == "disk-before\n"

    # A snapshot taken after the revert hangs below it in the tree.
    vm.execute("echo child > /tmp/state", shell=True)
    vm.save_snapshot("child", description="one step further")
    vm.rename_snapshot("child", "step 1")
    listed = {s.name: s for s in vm.list_snapshots()}
    assert set(listed) == {"clean", "step 1"}
    assert listed["step 1"].parent == "clean"
    assert listed["step 1"].extra["current"] and not listed["clean"].extra["current"]
    assert (listed["clean"].description, listed["clean"].task_id) == ("fresh shell", "task-7")
    assert listed["clean"].created <= listed["step 1"].created

    # Saving under an existing name replaces that snapshot.
    vm.execute("echo child-2 > /tmp/state", shell=True)
    vm.save_snapshot("step 1")
    vm.revert_snapshot("clean")
    vm.revert_snapshot("step 1")
    assert guest_file(vm, "/tmp/state") == "child-2\n"
    vm.delete_snapshot("step 1")
    assert [s.name for s in vm.list_snapshots()] == ["clean"]

    # Snapshots and their metadata outlive the VM; a restart can resume from one at once.
    vm.stop()
    offline = vm.list_snapshots()
    assert [(s.name, s.description) for s in offline] == [("clean", "fresh shell")]
    vm2 = QemuProvider("vm", vm.workdir, replace(vm.config, start_snapshot="clean"))
    try:
        vm2.start()
        assert guest_file(vm2, "/tmp/state") == "before\n"  # RAM state: it did not boot
    finally:
        vm2.stop(graceful=False)
    assert sha256(test_guest.disk) == base_before


@pytest.mark.qemu
@pytest.mark.slow
def test_uefi_guest_reverts_with_its_firmware_variables(
        make_vm: Callable[..., QemuProvider]) -> None:
    # OSWorld's Ubuntu image boots only through UEFI: OVMF, with a per-VM variable store.
    vm = make_vm(firmware="uefi")
    assert vm.uefi_vars.exists()
    vm.execute("echo before > /tmp/state", shell=True)
    vm.save_snapshot("clean")
    vm.execute("echo after > /tmp/state", shell=True)
    vm.revert_snapshot("clean")
    assert guest_file(vm, "/tmp/state") == "before\n"
    vm.stop(graceful=False)
    listed = qemu_img("snapshot", "-l", str(vm.uefi_vars))
    assert " clean " in listed  # the firmware's variables are part of the snapshot


@pytest.mark.qemu
@pytest.mark.slow
def test_two_vms_run_at_once_each_with_its_own_sockets_and_ports(
        make_vm: Callable[..., QemuProvider]) -> None:
    first, second = make_vm("a", start=False), make_vm("b", start=False)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(QemuProvider.start, [first, second]))
    assert first.health().alive and second.health().alive
    assert first.runtime_dir != second.runtime_dir
    assert first.host_ports[80] != second.host_ports[80]
    first.execute("echo first > /tmp/who", shell=True)
    second.execute("echo second > /tmp/who", shell=True)
    assert guest_file(first, "/tmp/who") == "first\n"
    assert guest_file(second, "/tmp/who") == "second\n"
    for vm in (first, second):
        page = urllib.request.urlopen(f"http://127.0.0.1:{vm.host_ports[80]}/index.html",
                                      timeout=30).read()
        assert page == b"workbench test guest\n"
    # Snapshots of one VM live in its own overlay only.
    first.save_snapshot("only-in-a")
    assert [s.name for s in second.list_snapshots()] == []
    # A second VM on a folder that is in use is refused before it touches the overlay.
    intruder = QemuProvider("a-again", first.workdir, first.config)
    with pytest.raises(EnvironmentError_, match="in use by another running VM"):
        intruder.start()
    assert first.health().alive


@pytest.mark.qemu
@pytest.mark.slow
def test_killed_qemu_is_reported_dead_and_the_pool_restarts_it(test_guest: BuiltGuest,
                                                               tmp_path: Path) -> None:
    from vm.env import DesktopEnv
    from vm.pool import EnvPool

    providers: list[QemuProvider] = []

    def factory(index: int) -> DesktopEnv:
        provider = QemuProvider(f"pool-{index}", tmp_path / f"pool-{index}",
                                guest_config(test_guest))
        providers.append(provider)
        return DesktopEnv(provider)  # takes the init_state snapshot on first start

    pool = EnvPool(factory, size=1, health_interval=None)
    pool.start()
    try:
        provider = providers[0]
        assert [s.name for s in provider.list_snapshots()] == ["init_state"]
        provider.execute("echo dirty > /tmp/state", shell=True)
        pid = provider.pid
        assert pid is not None

        # A hung QEMU (stopped, not dead) fails the health check by timeout.
        os.kill(pid, signal.SIGSTOP)
        try:
            health = provider.health()
            assert not health.alive and "QMP does not answer" in health.detail
        finally:
            os.kill(pid, signal.SIGCONT)
        assert provider.health().alive

        os.kill(pid, signal.SIGKILL)
        health = wait_until(lambda: (lambda h: h if not h.alive else None)(provider.health()),
                            message="the provider to notice the killed QEMU")
        assert "killed by signal 9" in health.detail

        assert pool.check_health() == [0]
        assert pool.usage()[0].restarts == 1
        assert provider.pid not in (None, pid) and provider.health().alive
        # Restarted from the overlay and reverted to init_state: the dirt is gone.
        assert guest_file(provider, "/tmp/state") == ""
        with pool.lease(timeout=10) as env:
            assert env.is_alive()
    finally:
        pool.close()
