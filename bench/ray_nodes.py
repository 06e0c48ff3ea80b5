"""Scaling benchmark: the same tiny training run on a Ray cluster of 1, 2 and 3
environment nodes on this machine, beside the lock-step (embedded) baseline.

Each Ray configuration is a fresh set of nodes of one `ray.cluster_utils.Cluster` (each
node its own raylet, object store and resources): a head with no CPU (the driver, the
data manager and the workspace), N environment nodes offering the environment resource,
and one rollout node with a CPU for the rollout worker. The run is the tests' tiny one
(tests/run_configs.py: a tiny random Qwen2.5-VL with LoRA, buttons tasks on 448x280
sandbox desktops, groups of two), trained for `--updates` updates.

Two series: the same total of environments spread over the nodes (`--total`), and one
that grows with the nodes (`--per-node` each). The baseline trains lock-step in one
process (runtime.mode = "embedded", asynchronous = false) on the same number of desktops.

Figures, from the store after each run (the same reading for every mode):
- episodes per minute: finished episodes over the window from the first episode's start
  to the last one's end (start-up and shut-down left out);
- environment utilisation: the episodes' summed durations over environments x window.

Run: `.venv/bin/python bench/ray_nodes.py [--quick] [--json PATH]`. Not a test. Needs the
cluster extra (ray) and Xvfb.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.run_configs import ray_runtime, tiny_run_config, with_environments
from trainer.config import parse_run_config
from trainer.loop import TrainingRun
from trainer.store import Store
from trainer.store.queries import EpisodeFilter

RESOURCE = "env_node"
OBJECT_STORE = 80 * 1024 * 1024
START_TIMEOUT = 600


@dataclass(frozen=True)
class Figures:
    label: str
    mode: str  # "lock-step" or "ray"
    nodes: int  # environment nodes (0: the embedded baseline)
    environments: int
    wall_s: float  # the whole run, start-up included
    window_s: float  # first episode start to last episode end
    episodes: int  # finished ("done") episodes
    errors: int
    episodes_per_minute: float
    utilisation: float


def run_config(environments: int, updates: int, max_steps: int, ray: bool) -> str:
    extra = ray_runtime(RESOURCE, start_timeout=START_TIMEOUT) if ray else ""
    return with_environments(tiny_run_config(updates, seed=5, max_steps=max_steps,
                                             extra=extra), environments)


def measure(workspace: Path, run_id: str, environments: int) -> tuple[float, int, int, float]:
    """(window seconds, done episodes, error episodes, utilisation) of the run's
    episodes in the store."""
    with Store.open(workspace) as store:
        episodes = store.queries.page(EpisodeFilter(run_ids=[run_id]), limit=100_000)
    ended = [e for e in episodes if e.finished_at is not None]
    if not ended:
        return 0.0, 0, 0, 0.0
    start = min(e.created_at for e in ended)
    end = max(e.finished_at or e.created_at for e in ended)
    window = max(end - start, 1e-9)
    busy = sum((e.finished_at or e.created_at) - e.created_at for e in ended)
    done = sum(1 for e in ended if e.status == "done")
    errors = sum(1 for e in ended if e.status == "error")
    return window, done, errors, busy / (environments * window)


def train(label: str, mode: str, nodes: int, environments: int, text: str,
          scratch: Path) -> Figures:
    from trainer.runtime import ClusterTrainingRun

    workspace = scratch / label
    config = parse_run_config(text)
    started = time.perf_counter()
    run = (ClusterTrainingRun(config, text, workspace, progress=False) if mode == "ray"
           else TrainingRun(config, text, workspace, progress=False))
    summary = run.run()
    wall = time.perf_counter() - started
    if summary.status != "done":
        raise RuntimeError(f"{label}: the run ended {summary.status}")
    window, done, errors, utilisation = measure(workspace, summary.run_id, environments)
    figures = Figures(label, mode, nodes, environments, wall, window, done, errors,
                      done * 60.0 / window if window > 0 else 0.0, utilisation)
    print(f"{label:24} {wall:6.1f} s, {done} episodes ({errors} error) in {window:.1f} s: "
          f"{figures.episodes_per_minute:.1f}/min, utilisation {utilisation:.0%}", flush=True)
    shutil.rmtree(workspace, ignore_errors=True)
    return figures


@contextmanager
def head_node() -> Iterator[Any]:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": OBJECT_STORE})
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def ray_run(cluster: Any, label: str, nodes: int, per_node: list[int], updates: int,
            max_steps: int, scratch: Path) -> Figures:
    """A run on `nodes` environment nodes, node i offering per_node[i] environments, and
    one rollout node; the nodes are removed afterwards."""
    added = [cluster.add_node(num_cpus=0, object_store_memory=OBJECT_STORE,
                              resources={RESOURCE: count}) for count in per_node]
    added.append(cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE))
    cluster.wait_for_nodes()
    try:
        total = sum(per_node)
        return train(label, "ray", nodes, total, run_config(total, updates, max_steps, True),
                     scratch)
    finally:
        for node in added:  # graceful: its raylet's exit is not reported as a crash
            cluster.remove_node(node, allow_graceful=True)
        cluster.wait_for_nodes()


def spread(total: int, nodes: int) -> list[int]:
    """`total` environments over `nodes` nodes, as even as can be."""
    return [total // nodes + (1 if i < total % nodes else 0) for i in range(nodes)]


def print_table(rows: list[Figures]) -> None:
    print("\nseries      env nodes  environments  episodes/min  utilisation  vs lock-step")
    base = {r.environments: r for r in rows if r.mode == "lock-step"}
    for r in rows:
        series = "lock-step" if r.mode == "lock-step" else r.label.split("-")[0]
        ratio = ""
        if r.mode == "ray" and r.environments in base:
            b = base[r.environments].episodes_per_minute
            ratio = f"{r.episodes_per_minute / b:.2f}x" if b > 0 else ""
        print(f"{series:11} {r.nodes or '-':>9}  {r.environments:12}  "
              f"{r.episodes_per_minute:12.1f}  {r.utilisation:11.0%}  {ratio:>11}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3],
                        help="environment node counts to measure")
    parser.add_argument("--total", type=int, default=3,
                        help="environments in the fixed-total series")
    parser.add_argument("--per-node", type=int, default=2,
                        help="environments per node in the growing series")
    parser.add_argument("--updates", type=int, default=None, help="updates per run")
    parser.add_argument("--max-steps", type=int, default=3, help="model calls per episode")
    parser.add_argument("--quick", action="store_true",
                        help="2 updates, the fixed-total series only")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    updates = args.updates or (2 if args.quick else 8)
    if min([args.total, args.per_node, updates, args.max_steps, *args.nodes]) < 1:
        parser.error("--nodes, --total, --per-node, --updates and --max-steps must be >= 1")
    print(f"{os.cpu_count()} CPUs; tiny Qwen2.5-VL (LoRA), buttons tasks 448x280, "
          f"{updates} updates of 2 groups of 2, at most {args.max_steps} steps an episode")
    scratch = Path(tempfile.mkdtemp(prefix="bench-ray-nodes-"))
    rows: list[Figures] = []
    series = [("total", [spread(args.total, n) for n in args.nodes])]
    if not args.quick:
        series.append(("growing", [[args.per_node] * n for n in args.nodes]))
    try:
        sizes = sorted({sum(p) for _, layouts in series for p in layouts})
        for size in sizes:
            rows.append(train(f"lock-step-{size}", "lock-step", 0, size,
                              run_config(size, updates, args.max_steps, False), scratch))
        with head_node() as cluster:
            for name, layouts in series:
                for per_node in layouts:
                    rows.append(ray_run(cluster, f"{name}-{len(per_node)}x"
                                        f"{'+'.join(map(str, per_node))}", len(per_node),
                                        per_node, updates, args.max_steps, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
