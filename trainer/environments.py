"""The desktops of a training run, made the same way by the embedded loop and by the
Ray environment actors: a sandbox, or one of the configured remote guest servers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.config import EnvironmentsConfig
    from vm.env import DesktopEnv


def make_environment(environments: EnvironmentsConfig, index: int, name: str,
                     workdir: Path) -> DesktopEnv:
    """Environment `index` of a run: a sandbox called `name` under `workdir`, or the
    index-th remote guest server (on whichever machine runs this)."""
    from vm.env import DesktopEnv

    provider: Any
    if environments.kind == "remote":
        from vm.providers.remote import RemoteProvider

        token = environments.token or os.environ.get("WORKBENCH_GUEST_TOKEN")
        provider = RemoteProvider(f"remote-{index}", environments.urls[index], token)
    else:
        from vm.providers.sandbox import SandboxProvider

        provider = SandboxProvider(name, workdir, guest_server=False,
                                   screen_size=(environments.screen_width,
                                                environments.screen_height))
    return DesktopEnv(provider, call_timeout=environments.call_timeout)
