"""The driver's side of a Ray run's cluster picture (trainer/runtime/cluster_status.py):
Ray's list of nodes and what the run knows of its actors, written to the run's folder at
start, whenever an environment actor is replaced or given up, when a node joins or is
marked dead (NodeWatch), at each update, and once more as the run ends.

Ray's state API needs the dashboard, which a cluster may not run, so each actor's node
comes from the actor itself: an environment actor's `ready()` answer, a rollout worker's
`where()`. Ray restarts a rollout worker on its own; a new process id is a restart.

Ray marks a lost node dead only once its health checks have failed for a while, often
after the actors it held were placed again; `NodeWatch` writes the picture again when a
node joins or Ray marks one dead, so the app shows it then, not at the next update."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.runtime.cluster_status import (
    ActorStatus,
    ClusterStatus,
    NodeStatus,
    write_cluster_status,
)

if TYPE_CHECKING:
    from trainer.runtime.ray_environments import EnvironmentActors

log = logging.getLogger(__name__)

PROBE_SECONDS = 3.0  # how long a write waits for the actors it asks where they are
# The last picture stays after the run: it waits longer for the (idle) actors to answer,
# so that a busy machine does not leave a live worker shown as "starting".
FINAL_PROBE_SECONDS = 30.0
WATCH_SECONDS = 2.0  # how often NodeWatch asks Ray for its nodes


def ray_nodes() -> list[NodeStatus]:
    """Every node Ray knows, the lost ones included (marked dead)."""
    import ray

    return [NodeStatus(str(node.get("NodeID", "")), str(node.get("NodeManagerAddress", "")),
                       str(node.get("NodeManagerHostname", "")), bool(node.get("Alive")),
                       {name: float(amount)
                        for name, amount in (node.get("Resources") or {}).items()
                        if not name.startswith("node:") and "memory" not in name})
            for node in ray.nodes()]


def node_liveness() -> dict[str, bool]:
    """Each node Ray knows: alive or not."""
    return {node.node_id: node.alive for node in ray_nodes()}


class NodeWatch:
    """A thread that asks Ray for its nodes every `period` seconds and calls `changed`
    with what changed ("node 1a2b3c4d lost", "node 1a2b3c4d joined") when a node joins
    or Ray marks one dead. Start with `start()`, end with `close()` (which waits for it).
    `nodes`: where the node list comes from (Ray's, unless told)."""

    def __init__(self, changed: Callable[[str], None], period: float = WATCH_SECONDS,
                 nodes: Callable[[], dict[str, bool]] = node_liveness) -> None:
        self.changed = changed
        self.period = period
        self.nodes = nodes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ray-node-watch",
                                        daemon=True)
        self._known: dict[str, bool] = {}

    def start(self) -> None:
        self._known = self.nodes()
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        import ray

        while not self._stop.wait(self.period):
            try:
                now = self.nodes()
            except ray.exceptions.RayError as exc:  # Ray is going away: so is the run
                log.warning("asking Ray for its nodes: %s", exc)
                continue
            news = describe_node_changes(self._known, now)
            self._known = now
            if news:
                self.changed(news)


def describe_node_changes(before: dict[str, bool], now: dict[str, bool]) -> str:
    """What changed between two node lists (node id -> alive): "" when nothing did."""
    lost = [n for n, alive in now.items() if not alive and before.get(n, True)]
    joined = [n for n, alive in now.items() if alive and not before.get(n, False)]
    return "; ".join([f"node {n[:8]} lost" for n in lost]
                     + [f"node {n[:8]} joined" for n in joined])


class ClusterStatusWriter:
    """Writes the run's cluster picture to `path` (one write at a time, from any thread).
    `driver_node`: the node of the driver, the data manager and the rollout service."""

    def __init__(self, path: Path, driver_node: str) -> None:
        self.path = path
        self.driver_node = driver_node
        self._lock = threading.Lock()
        self._worker_pids: dict[str, int] = {}  # rollout worker -> its last process id
        self._worker_restarts: dict[str, int] = {}
        self._worker_nodes: dict[str, str] = {}

    def write(self, reason: str, *, environments: EnvironmentActors | None,
              workers: Sequence[tuple[str, Any]], pinned: Sequence[tuple[str, str, Any]],
              probe_seconds: float = PROBE_SECONDS) -> ClusterStatus | None:
        """Gather and write the picture: `workers` (name, actor) are the rollout workers,
        `pinned` (role, name, a reference that answers while the actor lives) the actors
        on the driver's node; an actor that has not answered in `probe_seconds` is shown
        "starting". Never raises: a picture that cannot be made is logged (the run goes
        on without it); the written record, or None."""
        import ray

        with self._lock:
            try:
                status = self._gather(reason, environments, workers, pinned, probe_seconds)
                write_cluster_status(self.path, status)
                return status
            except (OSError, ray.exceptions.RayError) as exc:
                log.warning("the cluster picture %s: %s", self.path, exc)
                return None

    def _gather(self, reason: str, environments: EnvironmentActors | None,
                workers: Sequence[tuple[str, Any]], pinned: Sequence[tuple[str, str, Any]],
                probe_seconds: float) -> ClusterStatus:
        import ray

        probes = [actor.where.remote() for _, actor in workers]
        answered, _ = ray.wait(probes + [ref for _, _, ref in pinned],
                               num_returns=len(probes) + len(pinned), timeout=probe_seconds)
        done = set(answered)
        nodes = ray_nodes()
        dead_nodes = {node.node_id for node in nodes if not node.alive}
        actors = [ActorStatus("trainer", "trainer", self.driver_node, "alive", 0)]
        for role, name, ref in pinned:
            state, detail = _answer(ref, done)
            actors.append(ActorStatus(role, name, self.driver_node, state, 0, detail))
        for (name, _), probe in zip(workers, probes, strict=True):
            actors.append(self._worker(name, probe, done, dead_nodes))
        if environments is not None:
            actors += environments.statuses(dead_nodes)
        return ClusterStatus(time.time(), reason, nodes, actors)

    def _worker(self, name: str, probe: Any, done: set[Any], dead_nodes: set[str]
                ) -> ActorStatus:
        """A rollout worker: alive where it answered; starting (placed again, loading the
        model) while it does not answer; dead once Ray gave it up."""
        import ray

        restarts = self._worker_restarts.get(name, 0)
        if probe not in done:
            return ActorStatus("rollout worker", name, "", "starting", restarts)
        try:
            node, pid, reconstructed = ray.get(probe)
        except ray.exceptions.RayError as exc:
            return ActorStatus("rollout worker", name, self._worker_nodes.get(name, ""),
                               "dead", restarts, _first_line(exc))
        if name in self._worker_pids and self._worker_pids[name] != pid:
            restarts += 1
        restarts = max(restarts, int(reconstructed))  # restarted before it was first seen
        self._worker_pids[name], self._worker_restarts[name] = pid, restarts
        self._worker_nodes[name] = node
        return ActorStatus("rollout worker", name, node,
                           "dead" if node in dead_nodes else "alive", restarts)


def _answer(ref: Any, done: set[Any]) -> tuple[str, str]:
    """(state, why it is dead) of an actor from a call that answers while it lives."""
    import ray

    if ref not in done:
        return "starting", ""
    try:
        ray.get(ref)
    except ray.exceptions.RayError as exc:
        return "dead", _first_line(exc)
    return "alive", ""


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
