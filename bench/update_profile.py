"""Where one update of a learning run goes: wall time (rollout, training), each episode's
parts (reset, model, action, evaluation) and the CPU time of every party (the trainer's
threads, the apps and shell commands the desktops ran, the X servers).

    python bench/update_profile.py                                   # learn-buttons
    python bench/update_profile.py --config assets/configs/learn-tabs.toml --updates 8

Runs the config's warm-up, then profiles `--updates` updates (the first is left out of the
medians: it pre-collects). On a busy machine wall times stretch; CPU seconds do not, and
CPU seconds / 2 is what an update needs at least on two cores. Not a test.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import threading
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.tiny_models import build_tiny_qwen25_vl  # noqa: E402
from trainer.config import load_run_config, run_config_toml  # noqa: E402
from trainer.loop import TrainingRun, UpdateResult  # noqa: E402
from trainer.store import Store  # noqa: E402

DEFAULT_CONFIG = ROOT / "assets" / "configs" / "learn-buttons.toml"


def thread_group(name: str) -> str:
    if name.startswith("rollout"):
        return "rollout threads (prompt, generate, parse)"
    if name.startswith("env-"):
        return "desktop calls (actions, screenshots, state files)"
    if name == "MainThread":
        return "main thread (curation, training, store)"
    return "other threads"


class CpuMeter:
    """CPU seconds per party since the last `take()`."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.last: dict[str, float] = self.read()

    def read(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        names = {t.native_id: t.name for t in threading.enumerate()}
        for thread in self.process.threads():
            name = names.get(thread.id, "other")
            out[thread_group(name)] += thread.user_time + thread.system_time
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        out["ended processes (apps, shell commands)"] += children.ru_utime + children.ru_stime
        for child in self.process.children(recursive=True):
            try:
                times = child.cpu_times()
                group = ("X servers and window managers"
                         if child.name() in ("Xvfb", "openbox") else
                         "running processes (apps, shell commands)")
                out[group] += times.user + times.system
            except psutil.Error:
                pass
        return out

    def take(self) -> dict[str, float]:
        now = self.read()
        delta = {k: now.get(k, 0.0) - self.last.get(k, 0.0) for k in set(now) | set(self.last)}
        self.last = now
        return delta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--environments", type=int, default=None)
    parser.add_argument("--warmup-steps", type=int, default=None,
                        help="supervised warm-up steps (default: the config's)")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="torch.set_num_threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    root = Path(tempfile.mkdtemp(prefix="update-profile-"))
    config, _ = load_run_config(args.config)
    model = build_tiny_qwen25_vl(root / "model")
    environments = config.environments
    if args.environments:
        environments = replace(environments, count=args.environments)
    training = replace(config.training, updates=args.updates)
    if args.warmup_steps is not None:
        training = replace(training, warmup=replace(training.warmup, steps=args.warmup_steps))
    config = replace(config, model=replace(config.model, path=str(model)),
                     environments=environments, training=training)
    cpu: list[dict[str, float]] = []
    meter: list[CpuMeter] = []

    def on_update(result: UpdateResult) -> None:
        if not meter:  # the warm-up and the first update (it pre-collects) are left out
            meter.append(CpuMeter())
            return
        cpu.append(meter[0].take())
        print(f"update {result.update}: {result.metrics['update_seconds']:.2f} s "
              f"(rollout {result.metrics['rollout_seconds']:.2f}, training "
              f"{result.metrics['train_seconds']:.2f}), CPU {sum(cpu[-1].values()):.2f} s",
              flush=True)

    workspace = root / "workspace"
    summary = TrainingRun(config, run_config_toml(config), workspace, progress=False,
                          on_update=on_update).run()
    updates = summary.history[1:]
    print(f"\n{args.config.name}: {config.environments.count} desktops, "
          f"{len(updates)} updates profiled (medians per update)")
    for key in ("update_seconds", "rollout_seconds", "train_seconds", "episodes",
                "steps_mean"):
        values = [r.metrics.get(key, 0.0) for r in updates]
        print(f"  {key:24s} {statistics.median(values):8.2f}")
    print("  CPU seconds per update, by party:")
    total = statistics.median(sum(c.values()) for c in cpu)
    for party in sorted({k for c in cpu for k in c}):
        print(f"    {party:52s} {statistics.median(c.get(party, 0.0) for c in cpu):6.2f}")
    print(f"    {'all':52s} {total:6.2f}   (>= {total / 2:.2f} s of wall time on 2 cores)")
    parts: dict[str, list[float]] = defaultdict(list)
    with Store.open(workspace) as store:
        for result in updates:
            for episode_id in result.episode_ids:
                episode = store.episodes.load(episode_id)
                per: dict[str, float] = defaultdict(float)
                for step in episode.steps:
                    for key, value in step.timings.items():
                        per[key] += value
                for key, value in per.items():
                    parts[key].append(value)
    print("  per episode (median seconds of wall time, summed over its steps):")
    for key, values in sorted(parts.items()):
        print(f"    {key:12s} {statistics.median(values):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
