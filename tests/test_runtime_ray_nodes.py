"""A Ray run on a cluster of several nodes on this machine (`ray.cluster_utils.Cluster`:
each node its own raylet and resources): a head with the driver, the data manager and
the workspace, two environment nodes and rollout nodes. The run trains across them; an
environment node lost while its actor is inside an episode, and the node of the rollout
worker lost mid-run, leave the run going; a folder a node lacks is named at start. The
run's cluster picture (runs/<run>/cluster.json) shows the nodes, and a lost one dead with
its actors placed again on the node left."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from tests.conftest import wait_until
from tests.run_configs import episode_mid_run, ray_runtime, tiny_run_config, with_environments
from tests.test_sandbox_owner import sandbox_processes, still_running
from trainer.config import parse_run_config
from trainer.runtime import ClusterTrainingRun
from trainer.runtime.cluster_status import ClusterStatus, cluster_status_path, load_cluster_status
from trainer.store import Store
from trainer.store.queries import EpisodeFilter

pytestmark = [pytest.mark.x11, pytest.mark.slow, pytest.mark.timeout(900)]

RESOURCE = "env_node"  # what the environment nodes offer
ENVIRONMENTS = 2
PER_NODE = ENVIRONMENTS  # one environment node can hold every environment actor
OBJECT_STORE = 80 * 1024 * 1024
DEADLINE = 600  # seconds a condition that comes may take on a loaded 2-core machine


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """The head node alone (no CPU: nothing but the roles pinned to it runs there), the
    driver connected to it; tests add and remove the other nodes."""
    import ray
    from ray.cluster_utils import Cluster

    head = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": OBJECT_STORE})
    ray.init(address=head.address, log_to_driver=False)
    yield head
    ray.shutdown()
    head.shutdown()


@pytest.fixture
def add_node(cluster: Any) -> Iterator[Callable[..., Any]]:
    """Add a node to the cluster (its own raylet, object store and resources); the nodes
    a test added and did not remove are removed after it."""
    added: list[Any] = []

    def add(**resources: Any) -> Any:
        node = cluster.add_node(object_store_memory=OBJECT_STORE, **resources)
        added.append(node)
        return node

    yield add
    for node in added:
        if node in cluster.worker_nodes:
            cluster.remove_node(node, allow_graceful=False)
    cluster.wait_for_nodes()


def environment_nodes(add_node: Callable[..., Any]) -> tuple[Any, Any]:
    """Two environment nodes, each able to hold every environment actor (so that the
    actors of one lost are placed again on the other)."""
    return tuple(add_node(num_cpus=0, resources={RESOURCE: PER_NODE})
                 for _ in range(2))


def config_text(updates: int, *, max_steps: int = 2, env_workdir: str = "") -> str:
    """The Ray tests' tiny run: environment actors ask for no CPU (the environment nodes
    have none), the rollout worker for one (only rollout nodes have any)."""
    return with_environments(tiny_run_config(updates, seed=5, max_steps=max_steps, extra=(
        ray_runtime(RESOURCE, env_workdir=env_workdir, start_timeout=DEADLINE))),
        ENVIRONMENTS)


def actor_node(ray: Any, actor: Any) -> str:
    return str(ray.get(actor.__ray_call__.remote(
        lambda _self: ray.get_runtime_context().get_node_id()), timeout=DEADLINE))


def start(run: ClusterTrainingRun) -> tuple[threading.Thread, list[Any]]:
    summaries: list[Any] = []
    thread = threading.Thread(target=lambda: summaries.append(run.run()), daemon=True)
    thread.start()
    wait_until(lambda: hasattr(run, "data") and run.worker_actors, timeout=DEADLINE,
               message="the actors")
    return thread, summaries


def cluster_picture(workspace: Path, run_id: str) -> ClusterStatus:
    """The cluster file the run's driver left in the run's folder."""
    return load_cluster_status(cluster_status_path(workspace / "runs" / run_id))


def check_episodes(workspace: Path, run_id: str, trained: set[str]) -> list[Any]:
    """The run's episodes: none left running, no job (group, rollout) finished twice,
    every episode taken by an update kept and taken once (an update takes a group's
    error episodes with it; it trains on the finished ones)."""
    with Store.open(workspace) as store:
        episodes = [store.episodes.load(e.id, steps=False) for e in store.queries.page(
            EpisodeFilter(run_ids=[run_id]), limit=500)]
        consumed = store.runs.consumed(run_id)
    assert "running" not in Counter(e.status for e in episodes)
    jobs = Counter((e.info["group"], e.info["rollout"]) for e in episodes
                   if e.status == "done")
    assert all(n == 1 for n in jobs.values()), jobs
    assert len(consumed) == len(set(consumed)) and set(consumed) == trained
    assert trained <= {e.id for e in episodes}
    return episodes


def test_a_run_trains_across_environment_nodes_of_a_cluster(
        cluster: Any, add_node: Callable[..., Any], tmp_path: Path) -> None:
    first, second = environment_nodes(add_node)
    rollout = add_node(num_cpus=1)
    import ray

    text = config_text(updates=2)
    workspace = tmp_path / "ws"
    workers: list[str] = []
    run: ClusterTrainingRun

    def on_update(_: Any) -> None:  # the rollout worker's node, while the run goes on
        workers.extend(actor_node(ray, worker) for worker in run.worker_actors)

    run = ClusterTrainingRun(parse_run_config(text), text, workspace, progress=False,
                             on_update=on_update)
    summary = run.run()
    assert summary.status == "done" and summary.updates == 2
    assert set(workers) == {rollout.node_id}
    # the driver's cluster picture: every node alive, each role on its node
    picture = cluster_picture(workspace, summary.run_id)
    nodes = {node.node_id: node for node in picture.nodes}
    assert {first.node_id, second.node_id, rollout.node_id} <= set(nodes)
    assert all(nodes[n].alive for n in (first.node_id, second.node_id, rollout.node_id))
    assert nodes[first.node_id].resources[RESOURCE] == PER_NODE
    roles = {actor.name: actor for actor in picture.actors}
    assert roles["rollout-0"].node_id == rollout.node_id
    assert {roles[f"environment-{i}"].node_id for i in range(ENVIRONMENTS)} \
        <= {first.node_id, second.node_id}
    assert {roles[name].node_id for name in ("trainer", "data manager", "rollout service")} \
        == {cluster.head_node.node_id}
    assert all(actor.state == "alive" and actor.restarts == 0 for actor in picture.actors)
    episodes = check_episodes(workspace, summary.run_id,
                              {e for r in summary.history for e in r.episode_ids})
    # each environment node ran episodes; the data manager on the head wrote them all
    by_node = Counter(e.info["node"] for e in episodes)
    assert set(by_node) == {first.node_id, second.node_id}, by_node
    assert {e.info["host"] for e in episodes} == {os.uname().nodename}
    with Store.open(workspace) as store:
        rows = store.database.rows("SELECT DISTINCT writer FROM episodes WHERE run_id = ?",
                                   [summary.run_id])
    assert len(rows) == 1


def _hold_until(_actor: Any, marker: str, release: str) -> None:
    """Runs in an environment actor: its first episode to ask the model a second time
    writes `marker` and waits there until the file `release` exists."""
    import threading as threads
    import time as clock

    from agents.policies.vlm import VLMPolicy

    real_act = VLMPolicy.act
    calls: dict[int, int] = {}
    lock = threads.Lock()

    def act(self: VLMPolicy, observation: Any) -> Any:  # named as VLMPolicy.act
        with lock:
            calls[id(self)] = calls.get(id(self), 0) + 1
            hold = calls[id(self)] == 2 and not os.path.exists(marker)
            if hold:
                Path(marker).write_text(str(os.getpid()))
        while hold and not os.path.exists(release):
            clock.sleep(0.05)
        return real_act(self, observation)

    VLMPolicy.act = act  # type: ignore[method-assign]


def test_an_environment_node_lost_mid_episode_leaves_the_run_going(
        cluster: Any, add_node: Callable[..., Any], tmp_path: Path) -> None:
    """The actors of both environment nodes hold an episode in its middle; the first node
    is lost; the second node's actors go on only once the lost slots' new actors (placed
    on the second node) have finished an episode, so the run cannot end before."""
    import ray

    lost, kept = environment_nodes(add_node)
    add_node(num_cpus=1)
    text = config_text(updates=2, max_steps=3)
    workspace = tmp_path / "ws"
    run = ClusterTrainingRun(parse_run_config(text), text, workspace, progress=False)
    thread, summaries = start(run)
    environments = run.environments
    assert environments is not None
    release = tmp_path / "release"
    try:
        on_lost, markers = [], []
        for index in range(ENVIRONMENTS):
            actor, owner = environments.actor(index)
            marker = tmp_path / f"held-{index}"
            markers.append(marker)
            ray.get(actor.__ray_call__.remote(_hold_until, str(marker), str(release)),
                    timeout=DEADLINE)
            if actor_node(ray, actor) == lost.node_id:
                on_lost.append((index, owner, ray.get(actor.pid.remote(), timeout=DEADLINE)))
        assert on_lost and len(on_lost) < ENVIRONMENTS, "SPREAD left a node without actors"
        for marker in markers:
            wait_until(marker.exists, timeout=DEADLINE, message="an episode held mid-way")
        # every process of the lost node's sandboxes, and its actors' own
        processes: set[tuple[int, int | None]] = set()
        for index, _, pid in on_lost:
            state = workspace / "sandboxes" / f"train-{run.run_id}-{index}" / "state.json"
            processes |= sandbox_processes(json.loads(state.read_text()))
            processes.add((pid, None))
        lost_at = time.time()
        cluster.remove_node(lost, allow_graceful=False)  # its raylet and all it started

        def replacements_rolled_out() -> bool:
            episodes = run.store.queries.page(EpisodeFilter(statuses=["done"],
                                                            run_ids=[run.run_id or ""]))
            return any(e.created_at > lost_at for e in episodes)

        wait_until(replacements_rolled_out, timeout=DEADLINE,
                   message="an episode of a lost slot's new actor")

        def picture_marks_lost_dead() -> bool:  # Ray does once its health checks fail
            picture = cluster_picture(workspace, run.run_id or "")
            return any(n.node_id == lost.node_id and not n.alive for n in picture.nodes)

        # the driver writes the picture again when Ray marks the node dead, mid-run
        wait_until(picture_marks_lost_dead, timeout=DEADLINE,
                   message="the cluster picture to show the lost node dead")
    finally:
        release.write_text("")
        thread.join(DEADLINE)
    summary = summaries[0]
    assert summary.status == "done" and summary.updates == 2
    episodes = check_episodes(workspace, summary.run_id,
                              {e for r in summary.history for e in r.episode_ids})
    # each held episode of the lost node ended "error" once, with what happened
    victims = [e for e in episodes if e.status == "error"]
    assert len(victims) == len(on_lost), [(e.status, e.error) for e in episodes]
    assert all("died" in (v.error or "") and v.info["node"] == lost.node_id
               for v in victims), [v.error for v in victims]
    # the slots' new actors run on the node that is left, under new names
    for index, owner, _ in on_lost:
        actor, now = environments.actor(index)
        assert now != owner
    assert any(e.status == "done" and e.created_at > lost_at
               and e.info["node"] == kept.node_id for e in episodes)
    # the driver's cluster picture: the lost node dead, its slots' actors on the kept one
    picture = cluster_picture(workspace, summary.run_id)
    alive = {node.node_id: node.alive for node in picture.nodes}
    assert alive[lost.node_id] is False and alive[kept.node_id] is True
    replaced = {actor.name: actor for actor in picture.actors_on(kept.node_id)}
    for index, _, _ in on_lost:
        actor = replaced[environments.actor(index)[1]]
        assert actor.state == "alive" and actor.restarts >= 1, actor
    assert not picture.actors_on(lost.node_id)
    # nothing of the lost node is left on the machine: the sandboxes' processes (their
    # watchdogs stop them once their owner is gone) and the actors' own
    wait_until(lambda: not [pid for pid, started in processes
                            if started is None and os.path.exists(f"/proc/{pid}")]
               and not still_running({p for p in processes if p[1] is not None}),
               timeout=DEADLINE, message="the lost node's processes to end")


def test_the_node_of_a_rollout_worker_lost_mid_run_leaves_the_run_going(
        cluster: Any, add_node: Callable[..., Any], tmp_path: Path) -> None:
    import ray

    add_node(num_cpus=0, resources={RESOURCE: PER_NODE})
    rollout_nodes = {node.node_id: node for node in (add_node(num_cpus=1),
                                                       add_node(num_cpus=1))}
    text = config_text(updates=3, max_steps=3)
    workspace = tmp_path / "ws"
    run = ClusterTrainingRun(parse_run_config(text), text, workspace, progress=False)
    thread, summaries = start(run)
    try:
        (worker,) = run.worker_actors
        before = actor_node(ray, worker)
        pid = ray.get(worker.__ray_call__.remote(lambda _self: os.getpid()), timeout=DEADLINE)
        wait_until(lambda: episode_mid_run(run), timeout=DEADLINE,
                   message="an episode in the middle of its steps")
        lost_at = time.time()
        cluster.remove_node(rollout_nodes[before], allow_graceful=False)
        # Ray places the worker again, on the other rollout node
        wait_until(lambda: _node_or_none(ray, worker) not in (None, before),
                   timeout=DEADLINE, message="the worker on the other rollout node")
    finally:
        thread.join(DEADLINE)
    summary = summaries[0]
    assert summary.status == "done" and summary.updates == 3
    assert not os.path.exists(f"/proc/{pid}")
    episodes = check_episodes(workspace, summary.run_id,
                              {e for r in summary.history for e in r.episode_ids})
    # the worker, placed again, went on answering: episodes begun after the loss finished
    assert any(e.status == "done" and e.created_at > lost_at for e in episodes)


def _node_or_none(ray: Any, actor: Any) -> str | None:
    try:
        return str(ray.get(actor.__ray_call__.remote(
            lambda _self: ray.get_runtime_context().get_node_id()), timeout=30))
    except ray.exceptions.RayError:
        return None  # caught restarting


def test_a_folder_the_environment_nodes_cannot_make_is_named_with_each_node_at_start(
        cluster: Any, add_node: Callable[..., Any], tmp_path: Path) -> None:
    """Three environment nodes for two environment actors: the start-of-run sweep names
    every node that could hold one (the one no actor would be placed on included) before
    any actor starts; the rollout node, which has the model, is not named."""
    nodes = [add_node(num_cpus=0, resources={RESOURCE: PER_NODE}) for _ in range(3)]
    rollout = add_node(num_cpus=1)
    blocker = Path(tempfile.mkdtemp(dir=tmp_path)) / "a-file"
    blocker.write_text("not a folder")
    workdir = blocker / "desktops"
    text = config_text(updates=1, env_workdir=str(workdir))
    run = ClusterTrainingRun(parse_run_config(text), text, tmp_path / "ws", progress=False)
    with pytest.raises(RuntimeError) as caught:
        run.run()
    message = str(caught.value)
    assert message.startswith("runtime.ray: nodes lack what the run's actors need on them")
    for node in nodes:
        assert f"(node {node.node_id[:12]}), for the environment actors: " \
               f"runtime.ray.env_workdir ('' : the workspace) = {workdir}: cannot be made" \
            in message, message
    assert f"(node {rollout.node_id[:12]})" not in message
    assert "failed to start" not in message  # no actor was started


def test_an_actor_names_its_node_and_the_paths_it_lacks(tmp_path: Path) -> None:
    """The check each actor makes on its own node when it starts (a node that joined
    after the sweep): every missing path, and a folder that cannot be made."""
    from trainer.runtime.ray_nodes import NodePath, require_paths

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    made = tmp_path / "made" / "here"
    with pytest.raises(RuntimeError) as caught:
        require_paths("environment-3", [NodePath("model.path", str(tmp_path / "none")),
                                        NodePath("workdir", str(blocker / "sub"), True),
                                        NodePath("workdir", str(made), True)])
    message = str(caught.value)
    assert message.startswith("environment-3 on ")
    assert f"model.path = {tmp_path / 'none'}: missing" in message
    assert f"workdir = {blocker / 'sub'}: cannot be made here" in message
    assert made.is_dir() and str(made) not in message
