"""A Ray run's cluster picture as the Training screen reads it: the file its driver keeps
in the run's folder (`runs/<run>/cluster.json`, trainer/runtime/cluster_status.py), read
in the screen's background poll, with the nodes and the actors on each. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainer.runtime.cluster_status import (
    ActorStatus,
    ClusterStatus,
    ClusterStatusError,
    NodeStatus,
    cluster_status_path,
    load_cluster_status,
)


@dataclass(frozen=True)
class ClusterReading:
    """One read of a run's cluster file."""

    path: Path
    status: ClusterStatus | None  # None: no file (not a Ray run, or not started yet)
    error: str | None = None  # a file there but unreadable: names the file and the field

    @property
    def found(self) -> bool:
        return self.status is not None or self.error is not None


def read_cluster(run_dir: Path) -> ClusterReading:
    """The cluster file of the run whose folder is `run_dir`; never raises."""
    path = cluster_status_path(run_dir)
    try:
        return ClusterReading(path, load_cluster_status(path))
    except FileNotFoundError:
        return ClusterReading(path, None)
    except ClusterStatusError as exc:
        return ClusterReading(path, None, str(exc))
    except OSError as exc:
        return ClusterReading(path, None, f"{path}: cannot be read ({exc})")


@dataclass(frozen=True)
class NodeGroup:
    """A node and the actors on it; `node` None: the actors on no known node."""

    node: NodeStatus | None
    actors: list[ActorStatus]


def node_groups(status: ClusterStatus) -> list[NodeGroup]:
    """The tree the screen shows: each node as Ray lists it with its actors, then the
    actors on no known node (starting, or placed again and not yet answering)."""
    groups = [NodeGroup(node, status.actors_on(node.node_id)) for node in status.nodes]
    unplaced = status.unplaced()
    if unplaced:
        groups.append(NodeGroup(None, unplaced))
    return groups


def age_text(seconds: float) -> str:
    """How long ago, in words a person reads at a glance: "3 s ago", "2 min ago"."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min ago"


def resources_text(resources: dict[str, float]) -> str:
    """A node's resources, "CPU 4, GPU 1, env_node 2"; those it has none of left out."""
    return ", ".join(f"{name} {amount:g}" for name, amount in sorted(resources.items())
                     if amount)
