"""The picture of a Ray run's cluster that its driver keeps in the run's folder
(`runs/<run>/cluster.json`): the nodes, the actors on each, their states and restarts.
Ray-free, so that the app reads it without Ray (workbench/services/cluster_status.py)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vm.atomic_write import write_atomic

CLUSTER_STATUS_FILE = "cluster.json"  # in the run's folder, beside run_config.toml
SCHEMA_VERSION = 1  # raised when a field changes meaning; readers refuse newer files
ACTOR_STATES = ("starting", "alive", "dead", "lost")  # lost: given up, not replaced
ROLES = ("environment", "rollout worker", "rollout service", "data manager", "trainer")


@dataclass(frozen=True)
class NodeStatus:
    """One Ray node as `ray.nodes()` saw it."""

    node_id: str  # Ray's node id, in full
    address: str  # the node's IP address
    hostname: str
    alive: bool
    resources: dict[str, float] = field(default_factory=dict)  # CPU, GPU, env resource...

    @property
    def short_id(self) -> str:
        """The id as Ray's messages and the episode records' "node (…)" show it."""
        return self.node_id[:12]


@dataclass(frozen=True)
class ActorStatus:
    """One role of the run: an actor, or the trainer in the driver's process."""

    role: str  # one of ROLES
    name: str  # e.g. "environment-0.1" (slot 0's second actor), "rollout-0"
    node_id: str  # the node it runs on ('' while not placed or not known yet)
    state: str  # one of ACTOR_STATES
    restarts: int  # times the actor was replaced (environments) or restarted by Ray
    detail: str = ""  # why it is dead or lost


@dataclass(frozen=True)
class ClusterStatus:
    """What the driver knew of its cluster at `written_at` (Unix time)."""

    written_at: float
    reason: str  # what made the driver write it: "start", "update", "environment-0 ..."
    nodes: list[NodeStatus]
    actors: list[ActorStatus]
    schema: int = SCHEMA_VERSION

    def actors_on(self, node_id: str) -> list[ActorStatus]:
        return [actor for actor in self.actors if actor.node_id == node_id]

    def unplaced(self) -> list[ActorStatus]:
        """Actors on no known node: starting, or whose node Ray no longer lists."""
        known = {node.node_id for node in self.nodes}
        return [actor for actor in self.actors if actor.node_id not in known]


def cluster_status_path(run_dir: Path) -> Path:
    return Path(run_dir) / CLUSTER_STATUS_FILE


def write_cluster_status(path: Path, status: ClusterStatus) -> None:
    """Write `status` to `path` atomically: a reader sees the old file or the new one."""
    write_atomic(path, json.dumps(asdict(status), indent=1))


class ClusterStatusError(ValueError):
    """A cluster file that cannot be read; the message names the file and the field."""


def load_cluster_status(path: Path) -> ClusterStatus:
    """The record in `path`; ClusterStatusError when it is not one (FileNotFoundError
    when there is no file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ClusterStatusError(f"{path}: not JSON ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ClusterStatusError(f"{path}: not UTF-8 text ({exc})") from exc
    return parse_cluster_status(data, str(path))


def parse_cluster_status(data: Any, where: str) -> ClusterStatus:
    """`data` (the file's JSON) as a ClusterStatus; ClusterStatusError naming `where` and
    the field otherwise."""
    fields = _Fields(data, where, "")
    schema = fields.number("schema", whole=True)
    if schema > SCHEMA_VERSION:
        raise ClusterStatusError(f"{where}: schema {schema:g} is newer than this version "
                                 f"reads ({SCHEMA_VERSION}); update the workbench")
    nodes = [NodeStatus(node.text("node_id"), node.text("address"), node.text("hostname"),
                        node.flag("alive"), node.resources("resources"))
             for node in fields.items("nodes")]
    actors = []
    for actor in fields.items("actors"):
        role, name, node_id, state = (actor.text(key)
                                      for key in ("role", "name", "node_id", "state"))
        if state not in ACTOR_STATES:
            raise actor.error("state", f"one of {', '.join(ACTOR_STATES)}", state)
        actors.append(ActorStatus(role, name, node_id, state,
                                  int(actor.number("restarts", whole=True)),
                                  actor.text("detail", required=False)))
    return ClusterStatus(fields.number("written_at"), fields.text("reason", required=False),
                         nodes, actors, int(schema))


class _Fields:
    """The fields of one JSON object, each checked as it is read."""

    def __init__(self, data: Any, where: str, prefix: str) -> None:
        if not isinstance(data, dict):
            raise ClusterStatusError(f"{where}: {prefix.rstrip('.') or 'the file'}: expected "
                                     f"an object, got {type(data).__name__}")
        self.data, self.where, self.prefix = data, where, prefix

    def error(self, name: str, expected: str, got: Any) -> ClusterStatusError:
        return ClusterStatusError(f"{self.where}: {self.prefix}{name}: expected {expected}, "
                                  f"got {got!r}")

    def _get(self, name: str) -> Any:
        if name not in self.data:
            raise ClusterStatusError(f"{self.where}: {self.prefix}{name}: missing")
        return self.data[name]

    def text(self, name: str, *, required: bool = True) -> str:
        value = self._get(name) if required or name in self.data else ""
        if not isinstance(value, str):
            raise self.error(name, "a string", value)
        return value

    def flag(self, name: str) -> bool:
        value = self._get(name)
        if not isinstance(value, bool):
            raise self.error(name, "true or false", value)
        return value

    def number(self, name: str, *, whole: bool = False) -> float:
        value = self._get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                whole and (not float(value).is_integer() or value < 0)):
            raise self.error(name, "a whole number >= 0" if whole else "a number", value)
        return float(value)

    def resources(self, name: str) -> dict[str, float]:
        value = self._get(name)
        if not isinstance(value, dict) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()):
            raise self.error(name, "an object of numbers", value)
        return {str(k): float(v) for k, v in value.items()}

    def items(self, name: str) -> list[_Fields]:
        value = self._get(name)
        if not isinstance(value, list):
            raise self.error(name, "a list", value)
        return [_Fields(item, self.where, f"{self.prefix}{name}[{i}].")
                for i, item in enumerate(value)]
