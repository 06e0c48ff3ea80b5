"""The Training screen's Cluster tab: a Ray run's nodes and the actors on each, with their
states and restarts, read from the file the run's driver keeps (runs/<run>/cluster.json)
and followed as it changes; hidden for a run without one; a malformed file named with
its field."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtWidgets import QTreeWidgetItem

from tests.conftest_app import open_window, settings_file_fixture  # noqa: F401
from trainer.config import RunConfig, run_config_toml
from trainer.runtime.cluster_status import (
    ActorStatus,
    ClusterStatus,
    NodeStatus,
    cluster_status_path,
    write_cluster_status,
)
from trainer.store import Store
from workbench.app.main_window import MainWindow
from workbench.app.pages.training import TrainingPage
from workbench.services.cluster_status import age_text, read_cluster

HEAD = "a" * 56  # Ray's node ids are 56 hex digits
ENV_A = "b" * 56
ENV_B = "c" * 56
CLUSTER_TAB = 3


def _node(node_id: str, host: str, alive: bool = True, **resources: float) -> NodeStatus:
    return NodeStatus(node_id, f"10.0.0.{ord(node_id[0]) - 96}", host, alive, resources)


def _started() -> ClusterStatus:
    """A head with the trainer, data manager, service and rollout worker; two environment
    nodes with one environment actor each."""
    return ClusterStatus(time.time() - 3, "started", [
        _node(HEAD, "head", CPU=1.0, GPU=1.0),
        _node(ENV_A, "env-a", env_node=2.0),
        _node(ENV_B, "env-b", env_node=2.0)], [
        ActorStatus("trainer", "trainer", HEAD, "alive", 0),
        ActorStatus("data manager", "data manager", HEAD, "alive", 0),
        ActorStatus("rollout service", "rollout service", HEAD, "alive", 0),
        ActorStatus("rollout worker", "rollout-0", HEAD, "alive", 0),
        ActorStatus("environment", "environment-0", ENV_A, "alive", 0),
        ActorStatus("environment", "environment-1", ENV_B, "alive", 0)])


def _env_a_lost() -> ClusterStatus:
    """Node env-a dead; slot 0's actor placed again on env-b; slot 1 given up."""
    started = _started()
    return ClusterStatus(time.time(), "environment-0.1 started", [
        started.nodes[0], _node(ENV_A, "env-a", alive=False), started.nodes[2]], [
        *started.actors[:4],
        ActorStatus("environment", "environment-0.1", ENV_B, "alive", 1),
        ActorStatus("environment", "environment-1", ENV_B, "lost", 3,
                    "replaced 3 times; last: environment actor died")])


def _runs(store: Store, *run_ids: str) -> None:
    for run_id in run_ids:
        store.runs.create(run_id, name=run_id, config=run_config_toml(RunConfig()))
        store.runs.set_status(run_id, "running")


@pytest.fixture
def screen(qtbot: Any, settings_file: Path, tmp_path: Path
           ) -> Iterator[tuple[MainWindow, TrainingPage, Store]]:
    """The Training screen at 1280x720 over a workspace with a Ray run and another run."""
    path = tmp_path / "ws"
    store = Store.open(path, fsync_frames=False)
    _runs(store, "local-run", "ray-run")
    window = open_window(qtbot, settings_file, path, (1280, 720))
    qtbot.waitExposed(window)
    window.show_screen("training")
    page = window.training
    assert page is not None
    qtbot.waitUntil(lambda: {r.id for r in page.run_model.records} == {"local-run",
                                                                        "ray-run"},
                    timeout=10_000)
    yield window, page, store
    window.close()
    store.close()


def _tree(page: TrainingPage) -> dict[str, list[tuple[str, str, str]]]:
    """Each node row (its name and state) with its actors' (name, state, restarts)."""
    tree = page.cluster_panel.tree
    out = {}
    for i in range(tree.topLevelItemCount()):
        top = tree.topLevelItem(i)
        assert top is not None
        children = [top.child(j) for j in range(top.childCount())]
        out[f"{top.text(0)} {top.text(1)}".strip()] = [
            (c.text(0), c.text(1), c.text(2)) for c in children if isinstance(c, QTreeWidgetItem)]
    return out


def test_the_cluster_tab_shows_nodes_actors_and_restarts_as_they_change(
        qtbot: Any, screen: tuple[MainWindow, TrainingPage, Store], artifacts: Path) -> None:
    window, page, store = screen
    tabs = page.lower_tabs
    path = cluster_status_path(store.layout.run_dir("ray-run"))
    write_cluster_status(path, _started())

    assert page.select_run("ray-run")
    qtbot.waitUntil(lambda: tabs.isTabVisible(CLUSTER_TAB)
                    and page.cluster_panel.tree.topLevelItemCount() == 3, timeout=10_000)
    tabs.setCurrentIndex(CLUSTER_TAB)
    assert _tree(page) == {
        f"node {HEAD[:12]} alive": [("trainer", "alive", "0"),
                                    ("data manager", "alive", "0"),
                                    ("rollout service", "alive", "0"),
                                    ("rollout-0", "alive", "0")],
        f"node {ENV_A[:12]} alive": [("environment-0", "alive", "0")],
        f"node {ENV_B[:12]} alive": [("environment-1", "alive", "0")]}
    tree = page.cluster_panel.tree
    env_a = tree.topLevelItem(1)
    assert env_a is not None and env_a.text(3) == "env-a (10.0.0.2): env_node 2"
    summary = page.cluster_panel.summary.text()
    assert "3 of 3 nodes alive" in summary and "s ago (started)" in summary
    window.grab().save(str(artifacts / "app-training-cluster-1280x720.png"))

    # the driver writes again: a node lost, its actor placed again on the other node
    write_cluster_status(path, _env_a_lost())
    qtbot.waitUntil(lambda: f"node {ENV_A[:12]} dead" in _tree(page), timeout=10_000)
    assert _tree(page)[f"node {ENV_A[:12]} dead"] == []
    assert _tree(page)[f"node {ENV_B[:12]} alive"] == [
        ("environment-0.1", "alive", "1"),
        ("environment-1", "lost", "3")]
    assert "2 of 3 nodes alive" in page.cluster_panel.summary.text()
    window.grab().save(str(artifacts / "app-training-cluster-node-lost-1280x720.png"))

    # another run has no cluster file: the tab goes; the Ray run's brings it back
    assert page.select_run("local-run")
    qtbot.waitUntil(lambda: not tabs.isTabVisible(CLUSTER_TAB), timeout=10_000)
    assert "Not a Ray run" in page.cluster_panel.summary.text()
    assert page.select_run("ray-run")
    qtbot.waitUntil(lambda: tabs.isTabVisible(CLUSTER_TAB), timeout=10_000)

    # a file the driver did not write whole names the field on the screen
    path.write_text(json.dumps({"schema": 1, "written_at": 1.0, "nodes": [],
                                "actors": [{"role": "environment"}]}))
    qtbot.waitUntil(lambda: "actors[0].name: missing" in page.cluster_panel.summary.text(),
                    timeout=10_000)
    assert tabs.isTabVisible(CLUSTER_TAB) and page.cluster_panel.tree.topLevelItemCount() == 0


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"),
    ("[]", "the file: expected an object, got list"),
    ('{"schema": 1, "written_at": 1, "nodes": [{"node_id": "x", "address": "", '
     '"hostname": "h", "alive": "yes", "resources": {}}], "actors": []}',
     "nodes[0].alive: expected true or false, got 'yes'"),
    ('{"schema": 1, "written_at": 1, "nodes": [], "actors": [{"role": "environment", '
     '"name": "environment-0", "node_id": "", "state": "sleeping", "restarts": 0}]}',
     "actors[0].state: expected one of starting, alive, dead, lost, got 'sleeping'"),
    ('{"schema": 1, "written_at": 1, "nodes": [], "actors": [{"role": "environment", '
     '"name": "environment-0", "node_id": "", "state": "alive", "restarts": -1}]}',
     "actors[0].restarts: expected a whole number >= 0, got -1"),
    ('{"schema": 9, "written_at": 1, "nodes": [], "actors": []}',
     "schema 9 is newer than this version reads"),
])
def test_a_malformed_cluster_file_is_named_with_its_field(
        tmp_path: Path, content: str, message: str) -> None:
    path = cluster_status_path(tmp_path)
    path.write_text(content)
    reading = read_cluster(tmp_path)
    assert reading.status is None and reading.found
    assert reading.error is not None and reading.error.startswith(f"{path}: ")
    assert message in reading.error


def test_a_run_without_a_cluster_file_reads_as_none_and_a_written_one_round_trips(
        tmp_path: Path) -> None:
    missing = read_cluster(tmp_path / "no-run")
    assert (missing.status, missing.error, missing.found) == (None, None, False)
    status = _env_a_lost()
    write_cluster_status(cluster_status_path(tmp_path), status)
    assert read_cluster(tmp_path).status == status
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]  # no temporary left
    assert (age_text(3.2), age_text(125), age_text(7300)) == ("3 s ago", "2 min ago",
                                                             "2 h 1 min ago")
