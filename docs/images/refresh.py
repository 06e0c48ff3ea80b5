"""Refresh the README's screenshots (`make docs-images`): the app's screens as the test
suite saves them under test-artifacts/, scaled down and palette-reduced into small PNGs
here. A screenshot the suite has not saved yet is made by running the one test that
takes it (offscreen, a minute or a few: the demo workspace is built first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ARTIFACTS = REPO / "test-artifacts"
WIDTH = 960  # the README shows them at most this wide

# docs/images/<name>: (the suite's screenshot, the test that saves it)
SHOTS = {
    "trajectories.png": ("demo-trajectories-oracle-1280x720.png",
                         "tests/test_demo_workspace.py::test_app_screens_on_the_demo"),
    "environments.png": ("demo-environments-1280x720.png",
                         "tests/test_demo_workspace.py::test_app_screens_on_the_demo"),
    "training.png": ("demo-training-1280x720.png",
                     "tests/test_demo_workspace.py::test_app_screens_on_the_demo"),
    "evaluations.png": ("demo-evaluations-1280x720.png",
                        "tests/test_demo_workspace.py::test_app_screens_on_the_demo"),
}


def take_missing() -> None:
    tests = sorted({test for source, test in SHOTS.values()
                    if not (ARTIFACTS / source).exists()})
    if not tests:
        return
    print("taking the screenshots with:", *tests, flush=True)
    # the demo workspace is built first: minutes, more on a busy machine
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "--timeout=1800", *tests],
                   cwd=REPO, check=True, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})


def small_png(source: Path, target: Path) -> None:
    with Image.open(source) as image:
        image = image.convert("RGB")
        height = round(image.height * WIDTH / image.width)
        small = image.resize((WIDTH, height), Image.Resampling.LANCZOS)
        # 256 colours: a screenshot of flat widgets loses nothing a reader sees
        small.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
            target, optimize=True)


def main() -> int:
    take_missing()
    for name, (source, _test) in SHOTS.items():
        small_png(ARTIFACTS / source, HERE / name)
        print(f"docs/images/{name}: {(HERE / name).stat().st_size // 1024} KiB "
              f"from test-artifacts/{source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
