"""The Environments screen beyond sandboxes: the workspace's environments.toml (QEMU and
remote VMs; round trip, errors that name the file and field, unique names), a real QEMU
guest started, watched, snapshotted, reverted and stopped from the screen, and a remote
OSWorld guest server (a sandbox's own guest server) listed, watched and not startable."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    wait_for_worker,
    window_fixture,
)
from tests.qemu_guest import BuiltGuest, build_test_guest, missing_parts
from vm.providers.sandbox import SandboxProvider
from vm.providers.sandbox.apps import free_port
from workbench.app.main_window import MainWindow
from workbench.app.pages.environments import EnvironmentsPage
from workbench.app.widgets.add_vm_dialog import AddVmDialog
from workbench.services.environments import EnvironmentManager
from workbench.services.vm_registry import (
    REGISTRY_NAME,
    RegistryError,
    add_entry,
    read_registry,
    registry_path,
    remove_entry,
    write_registry,
)

ACCEL: Literal["auto", "kvm", "tcg"] = os.environ.get(  # type: ignore[assignment]
    "WORKBENCH_QEMU_ACCEL", "auto")  # tcg / kvm to force one
BOOT_TIMEOUT = 120.0  # generous: TCG on a loaded two-core CI runner
needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or bool(missing_parts()),
    reason="needs qemu-system-x86_64 and a kernel (make setup installs them)")


def environments_page(window: MainWindow) -> EnvironmentsPage:
    window.show_screen("environments")
    page = window.environments
    assert page is not None
    return page


def info_of(page: EnvironmentsPage, name: str) -> Any:
    return next((i for i in page.sandbox_model.records if i.name == name), None)


# -- environments.toml ------------------------------------------------------------------


def test_environments_toml_round_trip_keeps_other_entries(tmp_path: Path,
                                                          monkeypatch: Any) -> None:
    (tmp_path / "images").mkdir()
    image = tmp_path / "images" / "base.qcow2"
    image.write_bytes(b"not booted here")
    add_entry(tmp_path, "qemu", {"name": "vm1", "image": "images/base.qcow2",
                                 "memory_mb": 512, "cpus": 1, "guest_port": "",
                                 "forward_ports": [80, 8080], "append": 'console=tty1 "q"'})
    add_entry(tmp_path, "remote", {"name": "far", "url": "http://10.0.0.5:5000/",
                                   "token": ""})
    registry = read_registry(tmp_path)
    assert registry.names() == ["vm1", "far"]
    vm = registry.qemu[0]
    assert vm.config.image == image.resolve()  # relative to the workspace
    assert (vm.config.memory_mb, vm.config.cpus, vm.config.guest_port) == (512, 1, None)
    assert vm.config.forward_ports == (80, 8080)
    assert vm.config.append == 'console=tty1 "q"'
    far = registry.remote[0]
    assert far.url == "http://10.0.0.5:5000"
    monkeypatch.setenv("WORKBENCH_GUEST_TOKEN", "from-the-environment")
    assert far.resolved_token() == "from-the-environment"  # '' : the variable
    text = registry_path(tmp_path).read_text()
    assert 'image = "images/base.qcow2"' in text  # written as given, not made absolute

    write_registry(tmp_path, read_registry(tmp_path))
    assert registry_path(tmp_path).read_text() == text  # a stable round trip
    remove_entry(tmp_path, "vm1")
    assert read_registry(tmp_path).names() == ["far"]  # the other entry stays
    assert image.read_bytes() == b"not booted here"  # the image is never touched
    assert not list(tmp_path.glob(f".{REGISTRY_NAME}.*"))  # no temporary file left


@pytest.mark.parametrize("text, expected", [
    ('[[qemu]]\nname = "vm1"\nimage = "base.qcow2"\nmemory_mb = "4G"\n',
     r"environments\.toml: qemu\[0\] \(vm1\)\.memory_mb: expected an integer, got '4G'"),
    ('[[qemu]]\nname = "vm1"\nimage = "base.qcow2"\nmemroy_mb = 512\n',
     r"environments\.toml: qemu\[0\] \(vm1\): unknown key\(s\) memroy_mb"),
    ('[[remote]]\nname = "far"\nurl = "10.0.0.5:5000"\n',
     r"environments\.toml: remote\[0\] \(far\)\.url: expected the guest server's"),
    ('[[remote]]\nurl = "http://10.0.0.5:5000"\n',
     r"environments\.toml: remote\[0\]\.name: missing"),
    ('[[qemu]]\nname = "twin"\nimage = "base.qcow2"\n[[remote]]\nname = "twin"\n'
     'url = "http://h:5000"\n',
     r"environments\.toml: remote\[0\]\.name: 'twin' is also the name of qemu\[0\]"),
    ("[[qemu]\n", r"environments\.toml: not valid TOML"),
])
def test_a_bad_environments_toml_names_the_file_and_field(tmp_path: Path, text: str,
                                                          expected: str) -> None:
    registry_path(tmp_path).write_text(text)
    with pytest.raises(RegistryError, match=expected):
        read_registry(tmp_path)


def test_names_are_unique_across_vms_and_sandboxes(tmp_path: Path) -> None:
    image = tmp_path / "base.qcow2"
    image.write_bytes(b"")
    (tmp_path / "sandboxes" / "desk").mkdir(parents=True)  # a (stopped) sandbox's folder
    manager = EnvironmentManager(tmp_path)
    manager.add_vm("qemu", {"name": "vm1", "image": str(image)})
    with pytest.raises(RegistryError, match="a VM named 'vm1' is already listed"):
        manager.add_vm("remote", {"name": "vm1", "url": "http://h:5000"})
    with pytest.raises(RegistryError, match="'desk' is already a sandbox's name"):
        manager.add_vm("remote", {"name": "desk", "url": "http://h:5000"})
    with pytest.raises(ValueError, match="already the name of a VM"):
        manager.create("vm1")
    with pytest.raises(RegistryError, match=r"new qemu entry \(vm2\)\.image: no such file"):
        manager.add_vm("qemu", {"name": "vm2", "image": str(tmp_path / "missing.qcow2")})
    listing = manager.listing()
    assert [(i.name, i.provider, i.status) for i in listing.environments] == [
        ("desk", "sandbox", "stopped"), ("vm1", "qemu", "stopped")]
    assert listing.problem == ""


def test_a_bad_file_is_shown_on_the_screen_and_the_list_stays(
        qtbot: Any, window: MainWindow, demo: DemoWorkspace) -> None:
    page = environments_page(window)
    image = demo.path / "base.qcow2"
    image.write_bytes(b"")
    wait_for_worker(qtbot, page.add_vm("qemu", {"name": "vm1", "image": "base.qcow2"}))
    qtbot.waitUntil(lambda: info_of(page, "vm1") is not None)
    assert info_of(page, "vm1").status == "stopped"
    assert not page.problem_label.isVisibleTo(page)

    registry_path(demo.path).write_text(
        '[[qemu]]\nname = "vm1"\nimage = "base.qcow2"\ncpus = "two"\n')
    wait_for_worker(qtbot, page.refresh())
    assert page.problem_label.isVisibleTo(page)
    assert "environments.toml: qemu[0] (vm1).cpus: expected an integer" in (
        page.problem_label.text())
    assert info_of(page, "vm1") is not None  # the last good list stays

    wait_for_worker(qtbot, page.add_vm("remote", {"name": "vm1", "url": "http://h:1"}))
    assert registry_path(demo.path).read_text().count("[[") == 1  # refused, not written


# -- a real QEMU VM -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> BuiltGuest:
    return build_test_guest(tmp_path_factory.mktemp("qemu-guest"))


@pytest.mark.qemu
@pytest.mark.slow
@needs_qemu
def test_qemu_vm_started_watched_snapshotted_and_stopped_from_the_screen(
        qtbot: Any, window: MainWindow, demo: DemoWorkspace, guest: BuiltGuest,
        artifacts: Path) -> None:
    base_image = guest.disk.read_bytes()
    add_entry(demo.path, "qemu", {
        "name": "vm-app", "image": str(guest.disk), "kernel": str(guest.kernel),
        "initrd": str(guest.initrd), "append": guest.append, "guest_port": "",
        "serial_shell": True, "memory_mb": 256, "cpus": 1, "accel": ACCEL,
        "ready_timeout": BOOT_TIMEOUT, "shutdown_timeout": 20.0})
    page = environments_page(window)
    try:
        wait_for_worker(qtbot, page.refresh())
        info = info_of(page, "vm-app")
        assert (info.provider, info.status) == ("qemu", "stopped")
        assert page.select("vm-app")
        assert page.sandbox_buttons["Start"].isEnabled()
        assert not page.snapshot_buttons["Take…"].isEnabled()

        page.sandbox_buttons["Start"].click()  # boots in a worker: the window answers
        qtbot.waitUntil(lambda: info_of(page, "vm-app").status == "running",
                        timeout=int(BOOT_TIMEOUT * 1000) + 30_000)
        info = info_of(page, "vm-app")
        assert info.width > 0 and info.height > 0
        assert info.display.startswith("QEMU pid")
        provider = page.manager.provider("vm-app")
        assert provider.kind == "qemu"
        assert (page.manager.workspace / "vms" / "vm-app" / "disk.qcow2").exists()
        assert page.manager.running_vms() == ["vm-app"]
        qtbot.waitUntil(lambda: page.feed is not None and page.feed.frames >= 3,
                        timeout=30_000)
        assert page.live.image is not None
        assert page.live.screen_size() == (info.width, info.height)

        provider.execute("echo before > /tmp/state", shell=True)
        wait_for_worker(qtbot, page.take_snapshot("clean"), timeout=120_000)
        qtbot.waitUntil(lambda: [s.name for s in page.snapshot_model.records] == ["clean"])
        provider.execute("echo after > /tmp/state", shell=True)
        reverted: list[Any] = []
        page.reverted.connect(reverted.append)
        assert page.select_snapshot("clean")
        page.snapshot_buttons["Revert"].click()
        qtbot.waitUntil(lambda: bool(reverted), timeout=120_000)
        assert reverted[0].seconds > 0
        assert page.revert_label.text() == (f"reverted vm-app to clean in "
                                            f"{reverted[0].seconds:.2f} s")
        assert provider.execute("cat /tmp/state", shell=True).output == "before\n"
        qtbot.waitUntil(lambda: info_of(page, "vm-app").snapshot == "clean")
        frames = page.feed.frames if page.feed is not None else 0
        qtbot.waitUntil(lambda: page.feed is not None and page.feed.frames > frames + 1,
                        timeout=30_000)
        window.grab().save(str(artifacts / "app-environments-qemu.png"))

        page.sandbox_buttons["Stop"].click()
        qtbot.waitUntil(lambda: info_of(page, "vm-app").status == "stopped", timeout=60_000)
        assert page.feed is None and "stopped" in page.live.message
        assert page.manager.running_vms() == []
        assert [s.name for s in page.manager.snapshots("vm-app")] == ["clean"]  # kept
        assert page.sandbox_buttons["Remove"].isEnabled()
        wait_for_worker(qtbot, page.remove_vm("vm-app"))
        qtbot.waitUntil(lambda: info_of(page, "vm-app") is None)
        assert guest.disk.read_bytes() == base_image  # the base image is never written
    finally:
        page.manager.stop_vms()  # before the window closes (it would ask about them)


# -- a remote OSWorld VM ------------------------------------------------------------------


@pytest.fixture
def guest_server(tmp_path: Path) -> Iterator[SandboxProvider]:
    """A sandbox with its OSWorld guest server, in a workspace of its own: what a remote
    VM looks like from the app."""
    # on a TCP port, as a remote VM's server is (a sandbox's own is a Unix socket unless
    # a port is asked for)
    provider = SandboxProvider("far-desk", tmp_path / "elsewhere", guest_server=True,
                               guest_port=free_port())
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.mark.x11
@pytest.mark.slow
def test_remote_vm_listed_watched_and_not_startable(
        qtbot: Any, window: MainWindow, guest_server: SandboxProvider) -> None:
    page = environments_page(window)
    dialog = AddVmDialog(page)
    dialog.set_kind("remote")
    dialog.remote_name.setText("far")
    dialog.url.setText(guest_server.guest_url or "")
    dialog.token.setText(guest_server.token)
    wait_for_worker(qtbot, page.add_vm(dialog.kind(), dialog.table()))
    qtbot.waitUntil(lambda: page.current_name() == "far", timeout=20_000)
    info = page.current_info()
    assert info is not None
    assert (info.provider, info.status) == ("remote", "running")
    assert info.display == guest_server.guest_url
    assert (info.width, info.height) == (1280, 800)
    for text in ("Start", "Stop", "Restart"):
        button = page.sandbox_buttons[text]
        assert not button.isEnabled()
        assert "own tools" in button.toolTip()
    assert not page.snapshot_buttons["Take…"].isEnabled()
    assert "no snapshots" in page.snapshot_buttons["Take…"].toolTip()
    assert page.snapshot_model.records == []
    qtbot.waitUntil(lambda: page.feed is not None and page.feed.frames >= 2, timeout=20_000)
    assert page.live.image is not None and page.live.screen_size() == (1280, 800)
    assert page.control_switch.isEnabled()  # manual control goes to the guest server

    wait_for_worker(qtbot, page.remove_vm("far"))
    qtbot.waitUntil(lambda: info_of(page, "far") is None)
