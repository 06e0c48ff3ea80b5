"""The Live screen: every running environment of the workspace as a tile of the live grid,
with the episode running on it as far as the workspace can tell.

What is known across processes: the sandboxes (their folders and state files) and the
store's running episodes (task, step count, policy version, run, writing process). The
desktop an episode runs on is in its info ("sandbox"), written by demonstrations and by
every rollout (trainer.rollouts); for episodes from older versions without it, a training
run's sandboxes are named train-<run id>-<n> and `workbench rollout`'s rollout-<pid>-<n>,
so their tiles show the episodes of their run or process, and say which one when the run
or process has a single sandbox. The list is read every few
seconds in a worker while the screen is shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PyQt6.QtCore import QTimer, pyqtSignal
from PyQt6.QtGui import QHideEvent, QShowEvent
from PyQt6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from trainer.store import Store
from workbench.app.widgets.live_grid import LiveGrid
from workbench.app.workers import Workers
from workbench.services.progress import TaskState
from workbench.services.sandboxes import SandboxInfo, SandboxManager

REFRESH_MS = 2000  # how often the list of environments and episodes is read again
TRAIN_NAME = re.compile(r"^train-(?P<run>.+)-\d+$")
ROLLOUT_NAME = re.compile(r"^rollout-(?P<pid>\d+)-\d+$")


@dataclass(frozen=True)
class RunningEpisode:
    """An episode with status "running" in the store."""

    episode_id: str
    task_id: str
    source: str
    run_id: str | None
    policy_version: int | None
    steps: int  # steps stored so far
    sandbox: str | None  # where it runs, when the episode says so (info "sandbox")
    writer_pid: int | None  # the process writing it (from the store's writer id)

    def describe(self) -> str:
        version = f" · v{self.policy_version}" if self.policy_version is not None else ""
        return f"{self.task_id} · step {self.steps}{version}"


@dataclass(frozen=True)
class TileEpisodes:
    """What a tile can say about the episodes on its environment."""

    exact: RunningEpisode | None  # the episode known to run on it
    group: tuple[RunningEpisode, ...]  # episodes of its run or process (exact unknown)
    group_name: str  # e.g. "run r1", "rollout process 1234"

    def text(self) -> tuple[str, str]:
        """The tile's line and its tooltip."""
        if self.exact is not None:
            source = "" if self.exact.source == "rollout" else f" ({self.exact.source})"
            run = f"{self.group_name} · " if self.group_name else ""
            return (f"{run}{self.exact.describe()}{source}",
                    f"episode {self.exact.episode_id}")
        if not self.group:
            if self.group_name:
                return f"{self.group_name}: no episode running", ""
            return "no episode running", ""
        listed = "\n".join(e.describe() for e in self.group)
        return (f"{self.group_name}: {len(self.group)} episode(s) running",
                f"{listed}\n(which of the run's environments runs which episode is not "
                f"recorded)")


def running_episodes(store: Store) -> list[RunningEpisode]:
    """The store's running episodes, oldest first."""
    rows = store.database.rows(
        "SELECT id, task_id, source, run_id, policy_version, step_count, info, writer "
        "FROM episodes WHERE status = 'running' ORDER BY created_at, id")
    out = []
    for row in rows:
        try:
            info = json.loads(row["info"] or "{}")
        except ValueError:
            info = {}
        sandbox = info.get("sandbox") if isinstance(info, dict) else None
        out.append(RunningEpisode(
            row["id"], row["task_id"], row["source"], row["run_id"], row["policy_version"],
            int(row["step_count"] or 0), sandbox if isinstance(sandbox, str) else None,
            _writer_pid(row["writer"])))
    return out


def _writer_pid(writer: Any) -> int | None:
    """The process id inside a writer id "<host>-<pid>-<hex>" (trainer.store.writers)."""
    if not isinstance(writer, str):
        return None
    parts = writer.rsplit("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def tile_episodes(name: str, environments: Sequence[str],
                  episodes: Sequence[RunningEpisode]) -> TileEpisodes:
    """The episodes on environment `name`, given every running environment's name."""
    for episode in episodes:
        if episode.sandbox == name:
            return TileEpisodes(episode, (), "")
    unplaced = [e for e in episodes if e.sandbox is None or e.sandbox not in environments]
    train = TRAIN_NAME.match(name)
    rollout = ROLLOUT_NAME.match(name)
    if train is not None:
        run = train["run"]
        group = [e for e in unplaced if e.run_id == run]
        siblings = [n for n in environments if (m := TRAIN_NAME.match(n)) and m["run"] == run]
        label = f"run {run}"
    elif rollout is not None:
        pid = int(rollout["pid"])
        group = [e for e in unplaced if e.writer_pid == pid]
        siblings = [n for n in environments
                    if (m := ROLLOUT_NAME.match(n)) and int(m["pid"]) == pid]
        label = f"rollout process {pid}"
    else:
        return TileEpisodes(None, (), "")
    if len(siblings) == 1 and len(group) == 1:
        return TileEpisodes(group[0], (), label)  # a single environment: it runs there
    return TileEpisodes(None, tuple(group), label)


@dataclass(frozen=True)
class LiveState:
    environments: list[SandboxInfo]  # the running ones
    episodes: list[RunningEpisode]


class LivePage(QWidget):
    """The live grid of every running environment, kept up to date while shown."""

    listed = pyqtSignal()  # a refresh reached the grid
    message = pyqtSignal(str)
    activated = pyqtSignal(str)  # a tile was double-clicked: its environment's name

    def __init__(self, workspace: Path, store: Store | None,
                 manager: SandboxManager | None = None, parent: QWidget | None = None
                 ) -> None:
        super().__init__(parent)
        self.manager = manager if manager is not None else SandboxManager(workspace)
        self.store = store
        # Quiet (not shown in the status bar), and without a Qt parent so that a read
        # still in flight when the page goes never reports to a deleted object.
        self.workers = Workers()
        self.state: LiveState | None = None
        self._reading = False
        self._shut_down = False
        self.grid = LiveGrid(self.manager.provider)
        self.grid.activated.connect(self.activated)
        self.summary = QLabel("")
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.grid)
        bar = QHBoxLayout()
        bar.addWidget(self.summary, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addWidget(scroll, 1)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)

    def refresh(self) -> None:
        """Read the running environments and episodes again (in a worker); a read still
        under way makes this one a no-op."""
        if self._reading:
            return
        self._reading = True
        self.workers.submit("Reading live environments", self._read, on_done=self._apply,
                            on_failed=self._failed)

    def _read(self, state: TaskState) -> LiveState:
        running = [i for i in self.manager.all() if i.status == "running"]
        episodes = running_episodes(self.store) if self.store is not None else []
        return LiveState(running, episodes)

    def _failed(self, error: str) -> None:
        self._reading = False
        self.message.emit(error)

    def _apply(self, result: Any) -> None:
        self._reading = False
        assert isinstance(result, LiveState)
        self.state = result
        names = [i.name for i in result.environments]
        self.grid.set_environments(names)
        for name in names:
            tile = self.grid.tile(name)
            if tile is not None:
                tile.set_episode(*tile_episodes(name, names, result.episodes).text())
        self.summary.setText(f"{len(names)} environment(s) running · "
                             f"{len(result.episodes)} episode(s) running in the workspace")
        self.listed.emit()

    def showEvent(self, event: QShowEvent | None) -> None:
        super().showEvent(event)
        self.grid.set_active(True)
        self.timer.start()
        self.refresh()

    def hideEvent(self, event: QHideEvent | None) -> None:
        self.timer.stop()
        self.grid.set_active(False)  # no screenshots nobody looks at
        super().hideEvent(event)

    def shutdown(self) -> None:
        if self._shut_down:
            return  # once is enough (the page may be gone by a second call)
        self._shut_down = True
        self.timer.stop()
        self.grid.stop()
