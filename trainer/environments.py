"""The desktops of a training run, made the same way by the embedded loop and by the
Ray environment actors: a sandbox, one of the configured remote guest servers, or a QEMU
VM on its own overlay of the configured base image."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.config import EnvironmentsConfig
    from vm.env import DesktopEnv
    from vm.providers.qemu import QemuConfig

QEMU_FOLDER = "vms"  # <workdir>/vms/<name>/: a VM's overlay (with its snapshots) and logs


def run_desktop_name(run_id: str, index: int) -> str:
    """The name of run `run_id`'s desktop number `index` (its sandbox or VM folder)."""
    return f"train-{run_id}-{index}"


def is_run_desktop(name: str, run_id: str) -> bool:
    """Whether desktop `name` is one of run `run_id`'s own (`run_desktop_name`): run "a"
    does not own run "a-1"'s."""
    prefix = run_desktop_name(run_id, 0)[:-1]
    return name.startswith(prefix) and name[len(prefix):].isdigit()


def make_environment(environments: EnvironmentsConfig, index: int, name: str,
                     workdir: Path) -> DesktopEnv:
    """Environment `index` of a run: a sandbox or a QEMU VM called `name` under
    `workdir`, or the index-th remote guest server (on whichever machine runs this).

    Sandboxes and VMs start with DesktopEnv's base snapshot ("init_state": for a VM a
    savevm in its overlay, taken after the first boot); a reset after use reverts to it."""
    from vm.env import DesktopEnv

    provider: Any
    if environments.kind == "remote":
        from vm.providers.remote import RemoteProvider

        token = environments.token or os.environ.get("WORKBENCH_GUEST_TOKEN")
        provider = RemoteProvider(f"remote-{index}", environments.urls[index], token)
    elif environments.kind == "qemu":
        return qemu_environment(qemu_config(environments), name, workdir,
                                environments.call_timeout, environments.strict_setup)
    else:
        from vm.providers.sandbox import SandboxProvider

        provider = SandboxProvider(name, workdir, guest_server=False,
                                   screen_size=(environments.screen_width,
                                                environments.screen_height))
    return DesktopEnv(provider, call_timeout=environments.call_timeout,
                      strict_setup=environments.strict_setup)


def remove_environment_folders(workdir: Path, names: list[str], *, qemu: bool = True
                               ) -> None:
    """Delete the folders of throwaway desktops `names` (already stopped): a sandbox's
    home and snapshots and, with `qemu`, a QEMU environment's overlay and logs."""
    for name in names:
        shutil.rmtree(Path(workdir) / "sandboxes" / name, ignore_errors=True)
        shutil.rmtree(Path(workdir) / "snapshots" / name, ignore_errors=True)
        if qemu:
            shutil.rmtree(qemu_workdir(workdir, name), ignore_errors=True)


def qemu_workdir(workdir: Path, name: str) -> Path:
    """The folder of the QEMU environment `name`: its overlay, snapshots and logs."""
    return Path(workdir) / QEMU_FOLDER / name


def qemu_environment(config: QemuConfig, name: str, workdir: Path,
                     call_timeout: float = 60.0, strict_setup: bool = False) -> DesktopEnv:
    """A booted QEMU VM called `name` in `<workdir>/vms/<name>`, with its base snapshot."""
    from vm.env import DesktopEnv
    from vm.providers.qemu import QemuProvider

    provider = QemuProvider(name, qemu_workdir(workdir, name), config)
    # Booted here rather than by DesktopEnv, whose start deadline (120 s) is shorter
    # than a real guest may take (the VM's own ready_timeout bounds this call).
    provider.start()
    try:
        return DesktopEnv(provider, call_timeout=call_timeout, strict_setup=strict_setup)
    except BaseException:
        provider.stop(graceful=False)  # a VM must not outlive a failed start
        raise


def qemu_config(environments: EnvironmentsConfig) -> QemuConfig:
    """The VM of a kind = "qemu" run, checked on the machine that boots it (the image,
    kernel and initrd must exist here); an empty guest_token falls back to
    $WORKBENCH_GUEST_TOKEN. Relative paths were made absolute when the run configuration
    was loaded from its file; any left are taken from the working folder."""
    return with_guest_token(environments.qemu.qemu_config(
        "run configuration: environments.qemu", Path.cwd()))


def with_guest_token(config: QemuConfig) -> QemuConfig:
    """`config`, its guest_token taken from $WORKBENCH_GUEST_TOKEN when it has none."""
    token = os.environ.get("WORKBENCH_GUEST_TOKEN")
    if config.guest_token or not token:
        return config
    return dataclasses.replace(config, guest_token=token)
