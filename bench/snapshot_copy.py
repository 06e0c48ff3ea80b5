"""Benchmark of a sandbox snapshot's home copy (issue 44): the link-safe Beneath.copy_tree
against `cp -a --reflink=auto` (what saved snapshots before). Prints medians; not a test.

    .venv/bin/python bench/snapshot_copy.py                  # ~5000 files, ~300 folders, ~50 MB
    .venv/bin/python bench/snapshot_copy.py --runs 9 --keep /tmp/home   # reuse a generated home

The two copies alternate, from the same home into the same folder on the same filesystem,
each from a warm page cache and after a sync (so neither pays the other's writeback).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vm.providers.beneath import Beneath


def make_home(home: Path, files: int, folders: int, total_mb: int, seed: int = 44) -> None:
    """A home of mixed sizes: mostly small files (configs, caches), a few large ones, a
    sprinkling of links; sizes scaled so that they add up to about `total_mb`."""
    rng = random.Random(seed)
    made = [home]
    for index in range(folders - 1):
        parent = rng.choice(made[: max(1, len(made))])
        made.append(parent / f"folder-{index}")
        made[-1].mkdir(parents=True)
    weights = [rng.lognormvariate(8, 2) for _ in range(files)]  # median ~3 KB, long tail
    scale = total_mb * 2**20 / sum(weights)
    for index, weight in enumerate(weights):
        path = rng.choice(made) / f"file-{index}.dat"
        path.write_bytes(rng.randbytes(int(weight * scale)))
        if index % 50 == 0:
            (path.parent / f"link-{index}").symlink_to(path.name)


def timed(copy: Callable[[], None], destination: Path) -> float:
    shutil.rmtree(destination, ignore_errors=True)
    os.sync()
    start = time.perf_counter()
    copy()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--folders", type=int, default=300)
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="generate the home here (or reuse it)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="snapshot-copy-"))
    home = args.keep or scratch / "home"
    if not home.exists():
        make_home(home, args.files, args.folders, args.mb)
    destination = scratch / "copy"
    size = sum(p.stat().st_size for p in home.rglob("*") if p.is_file() and not p.is_symlink())
    count = sum(1 for _ in home.rglob("*"))
    print(f"home {home}: {count} entries, {size / 2**20:.1f} MiB")

    def cp() -> None:
        subprocess.run(["cp", "-a", "--reflink=auto", "--", str(home), str(destination)],
                       check=True)

    def beneath() -> None:
        with Beneath(home) as tree:
            tree.copy_tree(destination)

    timings: dict[str, list[float]] = {"cp -a": [], "copy_tree": []}
    try:
        beneath()  # warm the page cache and the imports
        for _ in range(args.runs):
            timings["cp -a"].append(timed(cp, destination))
            timings["copy_tree"].append(timed(beneath, destination))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    for name, values in timings.items():
        print(f"{name:10s} median {medians[name] * 1000:7.1f} ms   runs "
              + " ".join(f"{v * 1000:.0f}" for v in values))
    print(f"ratio copy_tree / cp -a: {medians['copy_tree'] / medians['cp -a']:.2f}")


if __name__ == "__main__":
    main()
