"""Which Ray node an actor runs on, and the files it needs there: a Ray run assumes no disk
shared between machines, so every path an actor reads is checked on its own node when it
starts, and a missing one fails the start with the node and the path named."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NodePath:
    """A path an actor needs on its node: what it is (the configuration field that names
    it) and whether it is a folder the actor may create and must be able to write."""

    what: str
    path: str
    writable_folder: bool = False


def node_name() -> str:
    """This process's Ray node, for messages and episode records: "host (node id)"."""
    return f"{socket.gethostname()} (node {node_id()[:12]})"


def node_id() -> str:
    """The id of the Ray node this process runs on ('' outside Ray)."""
    import ray

    if not ray.is_initialized():
        return ""
    return str(ray.get_runtime_context().get_node_id())


def missing_paths(paths: Sequence[NodePath]) -> list[str]:
    """What of `paths` this machine lacks, one line each (empty: all there)."""
    out = []
    for needed in paths:
        path = Path(needed.path).expanduser()
        if needed.writable_folder:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                out.append(f"{needed.what} = {needed.path}: cannot be made here ({exc})")
                continue
            if not os.access(path, os.W_OK | os.X_OK):
                out.append(f"{needed.what} = {needed.path}: not writable here")
        elif not path.exists():
            out.append(f"{needed.what} = {needed.path}: missing")
    return out


def require_paths(who: str, paths: Sequence[NodePath]) -> None:
    """Raise RuntimeError naming `who`, this node and each path of `paths` it lacks. Ray
    copies nothing to a node but the objects it is handed: weights go through the object
    store, but the base model, task files and sandbox folders must be on every node that
    runs an actor needing them (see docs/guides/train-on-a-cluster.md)."""
    missing = missing_paths(paths)
    if missing:
        raise RuntimeError(f"{who} on {node_name()}: " + "; ".join(missing)
                           + " (a Ray run shares no disk between nodes: install or copy "
                             "it on this node)")
