"""Which nodes a Ray run's start-of-run sweep looks at, and for what (trainer/runtime/
node_sweep.py): every live node a role's resources fit, each path once; dead nodes and
nodes no role fits are left alone. The sweep itself runs on a real cluster in
tests/test_runtime_ray_nodes.py."""

from __future__ import annotations

from trainer.runtime.cluster_status import NodeStatus
from trainer.runtime.node_sweep import RoleNeeds, fits, node_checks
from trainer.runtime.ray_nodes import NodePath

MODEL = NodePath("model.path", "/models/base")
WORKDIR = NodePath("runtime.ray.env_workdir", "/srv/desktops", True)
SUITE = NodePath("tasks.suite", "/data/osworld")
ROLES = [RoleNeeds("environment actors", {"CPU": 0, "env_node": 1}, (WORKDIR, SUITE)),
         RoleNeeds("rollout workers", {"CPU": 1, "GPU": 1}, (MODEL,))]


def node(name: str, alive: bool = True, **resources: float) -> NodeStatus:
    return NodeStatus(name * 8, f"10.0.0.{len(name)}", f"host-{name}", alive, resources)


def test_a_role_fits_a_node_that_offers_all_it_asks() -> None:
    assert fits({"CPU": 4, "GPU": 1}, {"CPU": 1, "GPU": 1})
    assert not fits({"CPU": 4}, {"CPU": 1, "GPU": 1})
    assert fits({}, {"CPU": 0})  # asking for nothing fits any node, the head's included
    assert not fits({"env_node": 0.5}, {"env_node": 1})


def test_each_live_node_is_checked_for_the_roles_it_could_hold() -> None:
    nodes = [node("h", CPU=0), node("e", CPU=0, env_node=2), node("g", CPU=8, GPU=1),
             node("b", CPU=8, GPU=1, env_node=4), node("d", alive=False, CPU=8, GPU=1)]
    by_id = {node_id[:1]: (roles, paths)
             for node_id, _, roles, paths in node_checks(nodes, ROLES)}
    assert set(by_id) == {"e", "g", "b"}  # the head fits neither; the dead node is skipped
    assert by_id["e"] == (["environment actors"], [WORKDIR, SUITE])
    assert by_id["g"] == (["rollout workers"], [MODEL])
    assert by_id["b"] == (["environment actors", "rollout workers"], [WORKDIR, SUITE, MODEL])


def test_a_path_two_roles_need_is_looked_for_once() -> None:
    shared = [RoleNeeds("environment actors", {}, (SUITE,)),
              RoleNeeds("rollout workers", {}, (SUITE, MODEL))]
    ((_, _, roles, paths),) = node_checks([node("a", CPU=1)], shared)
    assert roles == ["environment actors", "rollout workers"] and paths == [SUITE, MODEL]
