"""Run the built one-folder bundle as a user would (`make package-check`): `--help` of every
sub-command (the list comes from the CLI's own parser), a sandbox started, its screen size
read from its guest server through the relay it prints, photographed and stopped, a bundled
task solved by its oracle on a sandbox (`tasks check`), the app opened offscreen until its
first window is painted, and `train` refusing with the message that training needs the full
Python install.

    .venv/bin/python packaging/check_bundle.py [dist/workbench/workbench]

Prints one line per check and exits non-zero when any failed. Needs the Debian packages
`make setup` installs (Xvfb, openbox, xdotool) for the sandbox.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from vm.controller import GuestClient  # noqa: E402
from workbench.cli import build_parser  # noqa: E402

CHECKED_TASK = "form-name"  # a bundled task: its small app, typing and a click


def subcommands(parser: argparse.ArgumentParser,
                path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every sub-command path of `parser`, e.g. ("env",), ("env", "snapshot", "save")."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*path, name)
                yield from subcommands(child, (*path, name))


class Checks:
    def __init__(self, bundle: Path) -> None:
        self.bundle = bundle
        self.failed: list[str] = []
        self.count = 0
        # the bundle must stand alone: nothing of this checkout's Python may leak in
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}

    def run(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bundle), *args], capture_output=True, text=True,
                              timeout=timeout, env={**self.env, **(env or {})},
                              stdin=subprocess.DEVNULL)

    def check(self, name: str, test: Callable[[], str | None]) -> None:
        """`test` returns None when it passed, else what went wrong."""
        self.count += 1
        started = time.perf_counter()
        try:
            problem = test()
        except subprocess.TimeoutExpired as exc:
            problem = f"timed out after {exc.timeout} s"
        seconds = time.perf_counter() - started
        print(f"{'ok  ' if problem is None else 'FAIL'} {seconds:6.1f} s  {name}"
              + ("" if problem is None else f"\n      {problem}"), flush=True)
        if problem is not None:
            self.failed.append(name)


def outcome(result: subprocess.CompletedProcess[str], code: int, text: str) -> str | None:
    output = result.stdout + result.stderr
    if result.returncode == code and text in output:
        return None
    tail = "\n      ".join(output.strip().splitlines()[-8:])
    return f"exit status {result.returncode} (expected {code}), {text!r} expected in:\n      {tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", nargs="?", type=Path,
                        default=REPO / "dist" / "workbench" / "workbench")
    args = parser.parse_args()
    bundle = args.bundle.resolve()
    if not bundle.is_file():
        print(f"check_bundle: {bundle} is not there: build it with `make package`",
              file=sys.stderr)
        return 2
    checks = Checks(bundle)
    started = time.perf_counter()

    checks.check("workbench --help", lambda: outcome(checks.run("--help"), 0, "usage: workbench"))
    def helps(path: tuple[str, ...]) -> Callable[[], str | None]:
        return lambda: outcome(checks.run(*path, "--help"), 0,
                               f"usage: workbench {' '.join(path)}")

    for path in subcommands(build_parser()):
        checks.check(f"workbench {' '.join(path)} --help", helps(path))

    with tempfile.TemporaryDirectory(prefix="bundle-check-") as folder:
        workspace = Path(folder) / "workspace"
        shot = Path(folder) / "shot.png"
        ws = ("--workspace", str(workspace))
        printed: dict[str, str] = {}  # what `env up` prints: "guest URL", "token", ...

        def env_up() -> str | None:
            result = checks.run(*ws, "env", "up", "--name", "check", "--size", "640x480",
                                timeout=180)
            for line in result.stdout.splitlines():
                key, _colon, value = line.partition(":")
                printed[key.strip()] = value.strip()
            return outcome(result, 0, "sandbox:")

        def guest_screen_size() -> str | None:
            """The guest server's /screen_size at the URL `env up` printed: through the
            relay's Unix socket when the sandbox has a network of its own."""
            if "guest URL" not in printed:
                return f"`env up` printed no guest URL: {sorted(printed)}"
            client = GuestClient(printed["guest URL"], printed.get("token"), timeout=30)
            try:
                size = client.screen_size()
            finally:
                client.close()
            return None if size == (640, 480) else f"{size}, expected (640, 480)"

        def screenshot() -> str | None:
            problem = outcome(checks.run(*ws, "env", "screenshot", "check", "-o", str(shot)),
                              0, "")
            if problem is None:
                from PIL import Image

                with Image.open(shot) as image:
                    if image.size != (640, 480):
                        return f"{shot}: {image.size}, expected (640, 480)"
            return problem

        checks.check("workbench env up --name check --size 640x480", env_up)
        try:
            checks.check("workbench env list", lambda: outcome(
                checks.run(*ws, "env", "list"), 0, "check"))
            checks.check("the guest's screen size through the relay (640x480)",
                         guest_screen_size)
            checks.check("workbench env screenshot check -o shot.png (640x480 PNG)",
                         screenshot)
        finally:
            checks.check("workbench env down check", lambda: outcome(
                checks.run(*ws, "env", "down", "check", timeout=120), 0, ""))

        checks.check(f"workbench tasks check {CHECKED_TASK} (its oracle solves it on a sandbox)",
                     lambda: outcome(checks.run("tasks", "check", CHECKED_TASK, timeout=300),
                                     0, "1/1 solved"))

        checks.check("workbench (the app, offscreen, quits once its window is painted)",
                     lambda: outcome(checks.run(*ws, timeout=180, env={
                         "QT_QPA_PLATFORM": "offscreen", "WORKBENCH_EXIT_AFTER_SHOW": "1"}),
                         0, "first window shown"))

        config = Path(folder) / "run.toml"

        def train() -> str | None:
            example = checks.run("train", "--example")
            if example.returncode != 0:
                return outcome(example, 0, "[training]")
            config.write_text(example.stdout)
            return outcome(checks.run(*ws, "train", str(config)), 1,
                           "training needs the full Python install")

        checks.check("workbench train run.toml (refused: needs the full Python install)",
                     train)

    seconds = time.perf_counter() - started
    passed = checks.count - len(checks.failed)
    print(f"{passed} passed, {len(checks.failed)} failed ({seconds:.0f} s; bundle {bundle})")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
