"""A Ray run's check, at its start, of every node that could hold one of its actors: the
paths a role needs are looked for on each live node whose resources fit that role, before
any actor is placed, so that a node lacking the model or the task files is named when the
run starts, not hours later when a replacement actor lands there (an actor also checks
its own node when it starts: ray_nodes.require_paths)."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainer.runtime.cluster_status import NodeStatus
from trainer.runtime.ray_nodes import NodePath, missing_paths
from trainer.runtime.ray_status import ray_nodes


@dataclass(frozen=True)
class RoleNeeds:
    """What one kind of actor asks of a node (its resources) and needs on it (paths)."""

    role: str  # for messages, e.g. "environment actors"
    asks: Mapping[str, float]  # the resources one actor asks for
    paths: tuple[NodePath, ...]


def fits(offered: Mapping[str, float], asks: Mapping[str, float]) -> bool:
    """Whether a node offering `offered` (its total resources) can hold an actor asking
    for `asks`."""
    return all(offered.get(name, 0.0) >= amount for name, amount in asks.items()
               if amount > 0)


def node_checks(nodes: Sequence[NodeStatus], roles: Sequence[RoleNeeds]
                ) -> list[tuple[str, str, list[str], list[NodePath]]]:
    """For each live node of `nodes` that some role fits: (node id, its address, the
    roles that fit, the paths to look for there, each once)."""
    out = []
    for node in nodes:
        if not node.alive:
            continue
        fitting = [role for role in roles if fits(node.resources, role.asks)]
        paths: dict[tuple[str, str, bool], NodePath] = {}
        for role in fitting:
            for needed in role.paths:
                paths.setdefault((needed.what, needed.path, needed.writable_folder), needed)
        if paths:
            out.append((node.node_id, node.address, [role.role for role in fitting],
                        list(paths.values())))
    return out


def _look(paths: Sequence[NodePath]) -> tuple[str, list[str]]:
    """Runs on the node: (its host name, what of `paths` it lacks)."""
    return socket.gethostname(), missing_paths(paths)


def sweep_nodes(roles: Sequence[RoleNeeds], timeout: float) -> None:
    """Look for every role's paths on every live node it fits (one small task pinned to
    each node); RuntimeError naming each node, its roles and what it lacks, or a node
    that did not answer within `timeout` seconds."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    checks = node_checks(ray_nodes(), roles)
    if not checks:
        return
    look = ray.remote(_look)
    refs = [look.options(num_cpus=0, max_retries=0, scheduling_strategy=(
        NodeAffinitySchedulingStrategy(node, soft=False))).remote(paths)
        for node, _, _, paths in checks]
    answered, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    problems = []
    for (node, address, fitting, _), ref in zip(checks, refs, strict=True):
        where = f"{address} (node {node[:12]})"
        if ref not in answered:
            problems.append(f"{where}, for the {' and '.join(fitting)}: did not run the "
                            f"check within {timeout:g} s")
            continue
        try:
            host, missing = ray.get(ref)
        except ray.exceptions.RayError as exc:  # lost meanwhile: its actors say so later
            problems.append(f"{where}: the check failed ({type(exc).__name__})")
            continue
        if missing:
            problems.append(f"{host} (node {node[:12]}), for the {' and '.join(fitting)}: "
                            + "; ".join(missing))
    if problems:
        raise RuntimeError("runtime.ray: nodes lack what the run's actors need on them: "
                           + " | ".join(problems) + " (a Ray run shares no disk between "
                           "nodes: install or copy it on each node, see "
                           "docs/guides/train-on-a-cluster.md)")
