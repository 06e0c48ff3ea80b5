"""The workbench's own connection to a sandbox's X server (vm.x11.X11Display): opened on
first use with the sandbox's X cookie; screenshots, input and window calls go through it,
and a call that fails because the sandbox died says so (EnvironmentDead)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vm.errors import EnvironmentDead
from vm.providers.base import Health
from vm.providers.sandbox.apps import window_find_timeout, window_matches
from vm.waiting import poll_until
from vm.xserver import xauthority_env

# how long activate_window/close_window wait for a window to appear: OSWorld's tasks
# activate an application's window right after launching it (its wmctrl call never fails)
WINDOW_FIND_TIMEOUT = 10.0


class SandboxScreen:
    """The connection to sandbox `name`'s display. `lock` is the sandbox's own (a
    connection waits for a start under way); `health` says whether the sandbox lives."""

    def __init__(self, name: str, xauthority: Path, lock: threading.RLock,
                 health: Callable[[], Health]) -> None:
        self.name = name
        self.xauthority = xauthority
        self._lock = lock
        self._health = health
        self._connection: Any = None  # vm.x11.X11Display, opened on first use

    def connection(self, display: Callable[[], str]) -> Any:
        """The open connection, else one opened to `display()` (its name, ":12")."""
        with self._lock:
            if self._connection is None:
                from vm.x11 import X11Display

                name = display()
                try:
                    with xauthority_env(self.xauthority):
                        self._connection = X11Display(name)
                except Exception as exc:
                    raise EnvironmentDead(f"cannot open display {name} of sandbox "
                                          f"{self.name}: {exc}") from exc
            return self._connection

    def close(self) -> None:
        """Drop the connection. A call stuck on a wedged server holds the display's lock:
        it is closed off-thread, and finishes once the server is killed."""
        if self._connection is not None:
            threading.Thread(target=_close_quietly, args=(self._connection,),
                             daemon=True).start()
            self._connection = None

    def call(self, what: str, fn: Any, *args: Any) -> Any:
        """`fn(*args)` on the connection; EnvironmentDead when it failed because the
        sandbox is gone, else RuntimeError naming `what`."""
        try:
            return fn(*args)
        except EnvironmentDead:
            raise
        except Exception as exc:
            health = self._health()
            if not health.alive:
                self._connection = None
                raise EnvironmentDead(f"sandbox {self.name}: {health.detail}") from exc
            raise RuntimeError(f"sandbox {self.name}: {what} failed: {exc}") from exc

    def on_window(self, what: str, call: Any, window_name: str, strict: bool,
                  by_class: bool) -> None:
        """`call` on the first window OSWorld's name finds, as this machine's applications
        name their windows (apps.window_matches), waiting a while for an application
        launched just before to map it; LookupError naming what was tried when none
        comes."""
        tried = window_matches(window_name, strict, by_class)
        if poll_until(lambda: any(self.call(what, call, m.name, m.strict, m.by_class)
                                  for m in tried),
                      window_find_timeout(window_name, WINDOW_FIND_TIMEOUT), 0.05,
                      backoff=1.5, longest=0.5):
            return
        ways = ", ".join(f"{'class' if m.by_class else 'title'} {m.name!r}"
                         f"{' (exact)' if m.strict else ''}" for m in tried)
        raise LookupError(f"sandbox {self.name}: no window matching {window_name!r} "
                          f"(tried {ways})")


def _close_quietly(display: Any) -> None:
    try:
        display.close()
    except Exception:  # the X server may be gone already
        pass
