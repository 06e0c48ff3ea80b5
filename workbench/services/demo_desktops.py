"""The desktops a person's demonstrations are recorded on: one DesktopEnv per environment,
made for its first demonstration (it takes, or goes back to, the init_state snapshot) and
kept for the next, made again once its environment was restarted or died. Qt-free; the
app calls it from the one thread its demonstrations run on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vm.env import DesktopEnv
from vm.providers.base import Provider
from workbench.services.demo_recorder import DemoRecorder

if TYPE_CHECKING:
    from trainer.store import Store
    from vm.tasks import Task


class DemoDesktops:
    """DesktopEnvs by environment name. They are never closed here: closing a DesktopEnv
    stops its desktop, and the person's environments outlive their demonstrations."""

    def __init__(self) -> None:
        self._envs: dict[str, DesktopEnv] = {}

    def desktop(self, name: str, provider: Provider) -> DesktopEnv:
        """The DesktopEnv of environment `name` (of any kind: a remote one has no
        init_state snapshot to go back to), on `provider`, its provider now."""
        env = self._envs.get(name)
        if env is None or env.provider is not provider or env.dead_reason is not None:
            env = DesktopEnv(provider)  # takes (or reverts to) the init_state snapshot
            self._envs[name] = env
        return env

    def start(self, name: str, provider: Provider, store: Store, task: Task) -> DemoRecorder:
        """A recorder on environment `name`, its desktop set up for `task` (as a rollout's
        reset does); it takes seconds."""
        recorder = DemoRecorder(self.desktop(name, provider), store,
                                environment=getattr(provider, "kind", "sandbox"))
        recorder.start(task)
        return recorder
