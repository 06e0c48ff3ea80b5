"""A pool of desktop environments: lease and release, health checks, automatic restart of
a dead environment, and busy/idle time per environment for utilisation figures."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from vm.env import DesktopEnv

log = logging.getLogger(__name__)


@dataclass
class EnvUsage:
    index: int
    name: str
    status: str  # idle | busy | restarting | dead
    busy_seconds: float
    idle_seconds: float
    restarts: int
    leases: int
    last_error: str | None

    @property
    def utilisation(self) -> float:
        total = self.busy_seconds + self.idle_seconds
        return self.busy_seconds / total if total > 0 else 0.0


class _Slot:
    def __init__(self, index: int) -> None:
        self.index = index
        self.env: DesktopEnv | None = None
        self.status = "starting"
        self.since = time.monotonic()
        self.busy = 0.0
        self.idle = 0.0
        self.restarts = 0
        self.leases = 0
        self.last_error: str | None = None

    def switch(self, status: str) -> None:
        now = time.monotonic()
        if self.status == "busy":
            self.busy += now - self.since
        elif self.status == "idle":
            self.idle += now - self.since
        self.status, self.since = status, now


class PoolClosed(RuntimeError):
    pass


class EnvPool:
    """N environments made by `factory(index)`.

    `with pool.lease() as env:` gives an idle, healthy environment and returns it after.
    A background monitor checks idle environments every `health_interval` seconds and
    restarts dead ones; an environment found dead while leased is restarted on release.
    """

    def __init__(self, factory: Callable[[int], DesktopEnv], size: int,
                 health_interval: float | None = 5.0, max_restarts: int = 10) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        self.factory = factory
        self.size = size
        self.health_interval = health_interval
        self.max_restarts = max_restarts
        self._slots = [_Slot(i) for i in range(size)]
        self._cond = threading.Condition()
        self._closed = False
        self._monitor: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> EnvPool:
        """Create every environment (in parallel) and start the health monitor."""
        with ThreadPoolExecutor(self.size) as executor:
            list(executor.map(self._create, self._slots))
        if self.health_interval:
            self._monitor = threading.Thread(target=self._monitor_loop, name="env-pool-health",
                                             daemon=True)
            self._monitor.start()
        return self

    def start_some(self, what: str = "environment") -> EnvPool:
        """`start`, then fail (closing the pool) when not a single environment came up:
        RuntimeError "no {what} could start: <each distinct reason>"."""
        self.start()
        usage = self.usage()
        if all(u.status == "dead" for u in usage):
            reasons = "; ".join(sorted({u.last_error or "?" for u in usage}))
            self.close()
            raise RuntimeError(f"no {what} could start: {reasons}")
        return self

    def _create(self, slot: _Slot) -> None:
        self._bring_up(slot, first=True)

    def close(self) -> None:
        """Stop the monitor and close every environment; a second call does nothing."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        if self._monitor is not None:
            self._monitor.join(timeout=10)
        for slot in self._slots:
            if slot.env is not None:
                try:
                    slot.env.close()
                except Exception as exc:
                    log.warning("closing environment %d: %s", slot.index, exc)

    def __enter__(self) -> EnvPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ leasing

    def acquire(self, timeout: float | None = None) -> DesktopEnv:
        """An idle environment, marked busy; blocks up to `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise PoolClosed("the environment pool is closed")
                for slot in self._slots:
                    if slot.status == "idle" and slot.env is not None:
                        slot.switch("busy")
                        slot.leases += 1
                        return slot.env
                if all(s.status == "dead" and s.restarts >= self.max_restarts
                       for s in self._slots):
                    raise PoolClosed("every environment in the pool is dead and out of restarts")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"no idle environment within {timeout} s")
                self._cond.wait(left if left is not None else 1.0)

    def release(self, env: DesktopEnv, broken: bool = False) -> None:
        """Give `env` back; a broken or dead one is restarted in the background."""
        slot = self._slot_of(env)
        healthy = not broken and env.is_alive()
        with self._cond:
            slot.switch("idle" if healthy else "restarting")
            self._cond.notify_all()
        if not healthy:
            slot.last_error = env.dead_reason or "released as broken"
            threading.Thread(target=self._restart, args=(slot,), daemon=True).start()

    @contextmanager
    def lease(self, timeout: float | None = None) -> Iterator[DesktopEnv]:
        env = self.acquire(timeout)
        broken = False
        try:
            yield env
        except BaseException:
            broken = not env.is_alive()
            raise
        finally:
            self.release(env, broken=broken)

    def _slot_of(self, env: DesktopEnv) -> _Slot:
        for slot in self._slots:
            if slot.env is env:
                return slot
        raise ValueError("this environment does not belong to the pool")

    # ------------------------------------------------------------------ health

    def check_health(self) -> list[int]:
        """Check idle environments now; restart dead ones. Returns the restarted indices."""
        restarted = []
        for slot in self._slots:
            with self._cond:
                if slot.status not in ("idle", "dead") or self._closed:
                    continue
                if slot.status == "dead" and slot.restarts >= self.max_restarts:
                    continue
                env = slot.env
                slot.switch("checking")
            alive = env is not None and env.is_alive()
            if alive:
                with self._cond:
                    slot.switch("idle")
                    self._cond.notify_all()
                continue
            slot.last_error = env.dead_reason if env is not None else slot.last_error
            with self._cond:
                slot.switch("restarting")
            self._restart(slot)
            restarted.append(slot.index)
        return restarted

    def _restart(self, slot: _Slot) -> None:
        self._bring_up(slot, first=False)

    def _bring_up(self, slot: _Slot, first: bool) -> None:
        """Create (first time) or restart the slot's environment; idle on success."""
        if not first:
            slot.restarts += 1
            log.warning("restarting environment %d (%s)", slot.index, slot.last_error)
        try:
            if slot.env is None:
                slot.env = self.factory(slot.index)
            else:
                slot.env.restart()
            status = "idle"
        except Exception as exc:
            log.error("environment %d failed to %s: %s", slot.index,
                      "start" if first else "restart", exc)
            slot.last_error = str(exc)
            status = "dead"
        with self._cond:
            slot.switch(status)
            self._cond.notify_all()

    def _monitor_loop(self) -> None:
        assert self.health_interval
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed, timeout=self.health_interval)
                if self._closed:
                    return
            try:
                self.check_health()
            except Exception as exc:  # the monitor must outlive any one failure
                log.error("health check failed: %s", exc)

    # ------------------------------------------------------------------ figures

    def usage(self) -> list[EnvUsage]:
        now = time.monotonic()
        out = []
        with self._cond:
            for slot in self._slots:
                busy = slot.busy + (now - slot.since if slot.status == "busy" else 0.0)
                idle = slot.idle + (now - slot.since if slot.status == "idle" else 0.0)
                out.append(EnvUsage(slot.index, slot.env.name if slot.env else f"#{slot.index}",
                                    slot.status, busy, idle, slot.restarts, slot.leases,
                                    slot.last_error))
        return out

    def utilisation(self) -> float:
        """Busy time over busy plus idle time, across the pool."""
        figures = self.usage()
        busy = sum(u.busy_seconds for u in figures)
        total = busy + sum(u.idle_seconds for u in figures)
        return busy / total if total > 0 else 0.0

    @property
    def environments(self) -> list[DesktopEnv]:
        return [s.env for s in self._slots if s.env is not None]
