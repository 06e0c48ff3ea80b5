"""What the app remembers between launches (QSettings): the workspace, recent ones, the
window's geometry and splitters, the screen shown, the play speed, the reviewer's name and
the episode open in each workspace.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from PyQt6.QtCore import QByteArray, QSettings

ORGANIZATION = "GUI Agent Workbench"
APPLICATION = "workbench"
MAX_RECENT = 8


class AppSettings:
    """Typed access to the app's QSettings. Give a QSettings (e.g. an INI file) in tests."""

    def __init__(self, settings: QSettings | None = None) -> None:
        self.qsettings = settings if settings is not None else QSettings(ORGANIZATION,
                                                                         APPLICATION)

    @classmethod
    def at(cls, path: Path) -> AppSettings:
        """Settings kept in an INI file at `path` (tests, portable installs)."""
        return cls(QSettings(str(path), QSettings.Format.IniFormat))

    def _str(self, key: str, default: str = "") -> str:
        value = self.qsettings.value(key, default)
        return value if isinstance(value, str) else default

    # -- workspaces ---------------------------------------------------------------------

    @property
    def workspace(self) -> Path | None:
        text = self._str("workspace/last")
        return Path(text) if text else None

    @workspace.setter
    def workspace(self, path: Path | None) -> None:
        self.qsettings.setValue("workspace/last", str(path) if path else "")
        if path is not None:
            recent = [str(path)] + [p for p in self.recent_workspaces if p != str(path)]
            self.qsettings.setValue("workspace/recent", recent[:MAX_RECENT])

    @property
    def recent_workspaces(self) -> list[str]:
        value = self.qsettings.value("workspace/recent", [])
        if isinstance(value, str):  # QSettings returns a one-element list as a string
            return [value] if value else []
        return [str(v) for v in value] if isinstance(value, list) else []

    # -- the window -----------------------------------------------------------------------

    def bytes(self, key: str) -> QByteArray | None:
        value = self.qsettings.value(f"window/{key}")
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    def set_bytes(self, key: str, value: QByteArray) -> None:
        self.qsettings.setValue(f"window/{key}", value)

    def layout(self, size: str) -> dict[str, QByteArray | bool]:
        """The Trajectories layout remembered for a screen of `size` ("1280x720")."""
        self.qsettings.beginGroup(f"layout/{size}")
        try:
            state: dict[str, QByteArray | bool] = {}
            for key in self.qsettings.childKeys():
                value = self.qsettings.value(key)
                if isinstance(value, QByteArray) and not value.isEmpty():
                    state[key] = value
                elif value in ("true", "false", True, False):
                    state[key] = value in ("true", True)
            return state
        finally:
            self.qsettings.endGroup()

    def set_layout(self, size: str, state: dict[str, QByteArray | bool]) -> None:
        """Remember `state` for screens of `size` (empty: forget it)."""
        self.qsettings.remove(f"layout/{size}")
        for key, value in state.items():
            self.qsettings.setValue(f"layout/{size}/{key}",
                                    value if isinstance(value, QByteArray)
                                    else ("true" if value else "false"))

    @property
    def screen(self) -> str:
        return self._str("window/screen", "trajectories")

    @screen.setter
    def screen(self, name: str) -> None:
        self.qsettings.setValue("window/screen", name)

    # -- review and playback --------------------------------------------------------------

    @property
    def play_speed(self) -> float:
        try:
            return float(self._str("playback/speed", "1.0"))
        except ValueError:
            return 1.0

    @play_speed.setter
    def play_speed(self, speed: float) -> None:
        self.qsettings.setValue("playback/speed", str(speed))

    @property
    def show_after(self) -> bool:
        return self._str("playback/show_after", "false") == "true"

    @show_after.setter
    def show_after(self, value: bool) -> None:
        self.qsettings.setValue("playback/show_after", "true" if value else "false")

    @property
    def author(self) -> str:
        default = ""
        try:
            default = getpass.getuser()
        except (KeyError, OSError):
            pass
        return self._str("review/author", default) or default

    @author.setter
    def author(self, name: str) -> None:
        self.qsettings.setValue("review/author", name)

    def last_episode(self, workspace: Path) -> str | None:
        """The episode open when `workspace` was last closed (the app opens on it)."""
        return self._last_episodes().get(str(workspace))

    def set_last_episode(self, workspace: Path, episode_id: str) -> None:
        kept = {str(workspace): episode_id}
        for path, episode in self._last_episodes().items():
            if len(kept) < MAX_RECENT and path not in kept:
                kept[path] = episode
        self.qsettings.setValue("review/last_episodes", json.dumps(kept))

    def _last_episodes(self) -> dict[str, str]:
        """workspace path -> episode id, the most recent first."""
        try:
            found = json.loads(self._str("review/last_episodes", "{}"))
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def review_key(self, command: str) -> str:
        """The single key chosen for a verdict command ("accept_episode"…); "" for the
        default."""
        return self._str(f"review/keys/{command}")

    def set_review_key(self, command: str, key: str) -> None:
        self.qsettings.setValue(f"review/keys/{command}", key)

    @property
    def advance_after_verdict(self) -> bool:
        """Whether a verdict opens the next unreviewed episode (on unless turned off)."""
        return self._str("review/advance_after_verdict", "true") == "true"

    @advance_after_verdict.setter
    def advance_after_verdict(self, value: bool) -> None:
        self.qsettings.setValue("review/advance_after_verdict", "true" if value else "false")

    def sync(self) -> None:
        self.qsettings.sync()
