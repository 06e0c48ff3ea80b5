"""The driver's node watch (trainer/runtime/ray_status.py): what it says changed between
two node lists, and that it calls back once per change, from its own thread, until
closed. The end-to-end case (a node removed from a Ray cluster, the run's picture marking
it dead mid-run) is in tests/test_runtime_ray_nodes.py."""

from __future__ import annotations

import queue
import threading

import pytest

pytest.importorskip("ray")

from trainer.runtime.ray_status import NodeWatch, describe_node_changes


def test_changes_name_lost_and_joined_nodes_by_short_id() -> None:
    a, b, c = "a" * 56, "b" * 56, "c" * 56
    assert describe_node_changes({a: True, b: True}, {a: True, b: True}) == ""
    assert describe_node_changes({a: True, b: True}, {a: True, b: False}) == \
        "node bbbbbbbb lost"
    assert describe_node_changes({a: True}, {a: True, c: True}) == "node cccccccc joined"
    assert describe_node_changes({a: True}, {a: False, c: True}) == \
        "node aaaaaaaa lost; node cccccccc joined"
    # a dead node stays listed dead: not lost again; one first seen dead was lost
    assert describe_node_changes({a: False}, {a: False}) == ""
    assert describe_node_changes({}, {b: False}) == "node bbbbbbbb lost"
    # a node that comes back under its id has joined again
    assert describe_node_changes({a: False}, {a: True}) == "node aaaaaaaa joined"


def test_the_watch_calls_back_on_each_change_and_stops_when_closed() -> None:
    lists = [{"n1": True, "n2": True}, {"n1": True, "n2": True}, {"n1": True, "n2": False},
             {"n1": True, "n2": False, "n3": True}]
    served: list[dict[str, bool]] = []

    def nodes() -> dict[str, bool]:
        answer = lists[min(len(served), len(lists) - 1)]
        served.append(answer)
        return answer

    news: queue.Queue[str] = queue.Queue()
    watch = NodeWatch(news.put, period=0.01, nodes=nodes)
    watch.start()
    assert news.get(timeout=60) == "node n2 lost"
    assert news.get(timeout=60) == "node n3 joined"
    watch.close()
    # close() waited for its thread: nothing is asked or said any more
    assert not [t for t in threading.enumerate() if t.name == "ray-node-watch"]
    assert news.empty()
