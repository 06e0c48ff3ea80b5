"""Sandbox environment benchmark: revert, step (action + screenshot) and screenshot alone at
1280x800, with baselines measured in the same run the way OSWorld does the same job.

Baselines:
- screenshot: a Pillow grab of the screen saved as PNG, what OSWorld's guest server does
  through `pyautogui.screenshot()` (minus its gnome-screenshot subprocess);
- step: OSWorld's host stepping: POST pyautogui code to /execute (a new `python -c` per
  action) then GET /screenshot, through our guest server (same protocol);
- revert: a cold restart of the sandbox with its applications, the analogue of OSWorld's
  Docker provider, whose "revert" boots a new VM (readiness polled up to 300 s, then the
  runner sleeps 60 s).

`--apps` adds reverts of a sandbox with LibreOffice Calc (a document open) and with Calc
and Chromium, timed until their windows are back, and the sandbox's memory (PSS).

`--density 1,2,4,8` runs that many sandboxes at once (an xterm in each), all driven at the
same time, each by its own thread, with namespaces (`isolation = "namespaces"`, the
default) and without (`"none"`, as `WORKBENCH_SANDBOX_ISOLATION=none` gives: the baseline),
the two one after the other for each count: step (a click, then a screenshot) and
screenshot p50 over all sandboxes' samples, and the ratio without / with.

`--side-by-side 1,2,4,8` starts that many app sandboxes at once (LibreOffice Calc on a
document in each) and steps each from its own thread: step p50/p90 and memory per N.

`--networks host,user` compares network settings (docs/sandbox.md, Network): per round,
each setting in turn (the order alternating between rounds) starts a sandbox with its
guest server, steps it in-process and over HTTP (a Unix socket with a network of its own,
a loopback port with "host") and stops it; start, step and stop p50/p90 per setting.

Run: `make bench` or `.venv/bin/python bench/env.py [--rounds N] [--apps]
[--side-by-side 1,2,4,8] [--networks host,user]`. Prints medians (p50) and
p90 in milliseconds and the ratio baseline / ours. Not a test: nothing here gates CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vm.actions import Click, MoveTo
from vm.controller import GuestClient
from vm.env import DesktopEnv
from vm.providers.sandbox import SandboxProvider

REPO = Path(__file__).resolve().parent.parent
OSWORLD_DOCKER_RESET = "cold VM boot: readiness polled up to 300 s, then a 60 s sleep"
TARGETS = {"revert": 500.0, "step": 60.0, "screenshot": 15.0}  # p50 targets, ms


def page_path(provider: SandboxProvider) -> str:
    """The bench page as the sandbox's browser sees it (/home/user inside namespaces)."""
    page = provider.home / "page.html"
    return provider.inside_path(page) if provider.isolated else str(page)


def xlsx_bytes(book: Any) -> bytes:
    """An openpyxl workbook as its file's bytes (written into a sandbox with write_file:
    a file the workbench put there itself would not be the inside user's)."""
    import io

    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def timings(fn: Callable[[int], object], rounds: int, warmup: int = 2) -> list[float]:
    for i in range(warmup):
        fn(i)
    out = []
    for i in range(rounds):
        started = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - started) * 1000)
    return out


def p(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


# OSWorld's server takes pyautogui.screenshot() (a Pillow grab of the X screen; on Linux
# pyscreeze shells out to gnome-screenshot when present) and saves it as PNG. The grab and
# save are timed here without the extra program, so the baseline is, if anything, low.
PYAUTOGUI_SHOT = """
import json, os, sys, time, io
from PIL import ImageGrab
out = []
for _ in range(int(sys.argv[1]) + 2):
    t = time.perf_counter()
    image = ImageGrab.grab(xdisplay=os.environ["DISPLAY"])
    buf = io.BytesIO(); image.save(buf, format="PNG")
    out.append((time.perf_counter() - t) * 1000)
print(json.dumps(out[2:]))
"""


def sandbox_memory_mb(provider: SandboxProvider) -> float:
    """Resident memory (PSS where readable, else RSS) of the sandbox's processes: its
    applications, X server, window manager and buses."""
    from vm.processes import session_pids, tagged_pids

    state = provider.state
    assert state is not None
    pids = set(tagged_pids(state.tag)) | set(session_pids(state.sessions))
    pids |= {pid for pid in (state.xvfb_pid, state.wm_pid) if pid}
    total_kb = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
            key = "Pss:"
        except OSError:
            try:
                text = Path(f"/proc/{pid}/status").read_text()
                key = "VmRSS:"
            except OSError:
                continue
        for line in text.splitlines():
            if line.startswith(key):
                total_kb += int(line.split()[1])
                break
    return total_kb / 1024


def start_vlc(provider: SandboxProvider) -> None:
    # no first-run privacy question; written as the sandbox's user, whose file it is
    provider.write_file("~/.config/vlc/vlcrc", b"[qt]\nqt-privacy-ask=0\n")
    provider.launch("VLC_VERBOSE=-1 vlc --no-audio", shell=True)


def start_thunderbird(provider: SandboxProvider) -> None:
    """Thunderbird on the bundled tasks' profile (Local Folders only: no network)."""
    files = REPO / "assets" / "tasks" / "files" / "thunderbird"
    for name in ("profiles.ini", "installs.ini"):
        provider.write_file(f"~/.thunderbird/{name}", (files / name).read_bytes())
    provider.write_file("~/.thunderbird/workbench.default-release/user.js",
                        (files / "user.js").read_bytes())
    provider.launch(["/usr/bin/thunderbird"])


def app_reverts(rounds: int) -> None:
    """Revert p50 of a sandbox with LibreOffice Calc (a document open), then with Calc and
    Chromium, then VLC and Thunderbird added (where installed); each revert is timed until
    the applications' windows are back."""
    import shutil

    if shutil.which("soffice") is None or shutil.which("chromium") is None:
        print("--apps: needs LibreOffice Calc and chromium (make setup installs them)")
        return
    import openpyxl

    workspace = Path(tempfile.mkdtemp(prefix="bench-apps-"))
    provider = SandboxProvider("bench-apps", workspace, screen_size=(1280, 800),
                               guest_server=False)
    provider.start()
    print("\nsandbox with OSWorld's applications, revert until their windows are back (ms)")
    print(f"{'open':28} {'p50':>8} {'p90':>8} {'memory MB':>10}")
    try:
        book = openpyxl.Workbook()
        book.active.append(["item", 1])
        provider.write_file("~/sheet.xlsx", xlsx_bytes(book))  # the inside user's files
        provider.write_file("~/page.html", b"<title>Bench page</title><h1>bench</h1>")

        def wait_for(title: str) -> None:
            deadline = time.monotonic() + 120
            while not any(title in (w.title or "") for w in provider.windows()):
                if time.monotonic() > deadline:
                    raise SystemExit(f"no window titled {title!r}")
                time.sleep(0.02)

        steps = [("Calc (sheet.xlsx)", "sheet.xlsx - LibreOffice Calc",
                  lambda: provider.open_file("/home/user/sheet.xlsx")),
                 ("Calc + Chromium", "Bench page",
                  lambda: provider.launch(["google-chrome", "--remote-debugging-port=1337",
                                           f"file://{page_path(provider)}"]))]
        if shutil.which("vlc"):
            steps.append(("+ VLC", "VLC media player", lambda: start_vlc(provider)))
        if shutil.which("thunderbird"):
            steps.append(("+ Thunderbird", "Mozilla Thunderbird",
                          lambda: start_thunderbird(provider)))
        for label, title, start in steps:
            start()
            wait_for(title)
            name = f"apps-{len(provider.list_snapshots())}"
            provider.save_snapshot(name)

            def dirty_then_revert(i: int, name: str = name, title: str = title) -> None:
                provider.write_file(f"~/scratch-{i}.txt", b"x")
                provider.revert_snapshot(name)
                wait_for(title)

            times = timings(dirty_then_revert, rounds, warmup=1)
            print(f"{label:28} {statistics.median(times):8.1f} {p(times, 90):8.1f} "
                  f"{sandbox_memory_mb(provider):10.0f}")
    finally:
        provider.stop()
        shutil.rmtree(workspace, ignore_errors=True)
    print(f"OSWorld's Docker reset: {OSWORLD_DOCKER_RESET}")


def _step_many(sandbox: SandboxProvider, rounds: int, samples: list[float],
               lock: Any) -> None:
    """Step `sandbox` `rounds` times (a click, then a screenshot); times into `samples`."""
    def step(n: int) -> None:
        sandbox.perform(Click(300 + n % 50, 300))
        sandbox.screenshot()

    times = timings(step, rounds)
    with lock:
        samples.extend(times)


def side_by_side(counts: list[int], rounds: int) -> None:
    """N app sandboxes (each with LibreOffice Calc on a document) at once, each stepped by
    its own thread (a click and a screenshot, as a rollout does): step p50/p90 over all
    steps, and the sandboxes' memory."""
    import shutil
    import threading

    import openpyxl

    if shutil.which("soffice") is None:
        print("--side-by-side: needs LibreOffice Calc (make setup installs it)")
        return
    print("\napp sandboxes side by side (Calc open in each), one stepping thread each")
    print(f"{'N':>3} {'step p50':>9} {'step p90':>9} {'memory MB':>10} {'MB each':>8}")
    for count in counts:
        workspace = Path(tempfile.mkdtemp(prefix="bench-side-"))
        sandboxes = [SandboxProvider(f"side-{i}", workspace, screen_size=(1280, 800),
                                     guest_server=False) for i in range(count)]
        try:
            for sandbox in sandboxes:
                sandbox.start()
                book = openpyxl.Workbook()
                book.active.append(["item", 1])
                sandbox.write_file("~/sheet.xlsx", xlsx_bytes(book))
                sandbox.open_file("/home/user/sheet.xlsx")
            for sandbox in sandboxes:
                deadline = time.monotonic() + 180
                while not any((w.title or "") == "sheet.xlsx - LibreOffice Calc"
                              for w in sandbox.windows()):
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{sandbox.name}: Calc did not open")
                    time.sleep(0.05)
            samples: list[float] = []
            lock = threading.Lock()
            threads = [threading.Thread(target=_step_many, args=(s, rounds, samples, lock))
                       for s in sandboxes]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            memory = sum(sandbox_memory_mb(s) for s in sandboxes)
            print(f"{count:3} {statistics.median(samples):9.1f} {p(samples, 90):9.1f} "
                  f"{memory:10.0f} {memory / count:8.0f}")
        finally:
            for sandbox in sandboxes:
                sandbox.stop()
            shutil.rmtree(workspace, ignore_errors=True)


def network_costs(networks: list[str], rounds: int) -> None:
    """Start, step and stop costs of each network setting, alternating (see --networks)."""
    workspace = Path(tempfile.mkdtemp(prefix="bench-net-"))
    steps = 10
    samples: dict[str, dict[str, list[float]]] = {
        n: {"start": [], "step": [], "step over HTTP": [], "stop": []} for n in networks}
    for i in range(rounds):
        order = networks if i % 2 == 0 else networks[::-1]
        for network in order:
            got = samples[network]
            provider = SandboxProvider(f"net-{network}", workspace, screen_size=(1280, 800),
                                       network=network)
            started = time.perf_counter()
            provider.start()
            got["start"].append((time.perf_counter() - started) * 1000)
            env = DesktopEnv(provider)
            try:
                with GuestClient(provider.guest_url or "", token=provider.token,
                                 timeout=30) as client:
                    def step(j: int, env: DesktopEnv = env) -> None:
                        env.step(Click(300 + j, 300))

                    def step_over_http(j: int, client: GuestClient = client) -> None:
                        client.perform(MoveTo(10 + j, 10))
                        client.screenshot()

                    got["step"] += timings(step, steps, warmup=1)
                    got["step over HTTP"] += timings(step_over_http, steps, warmup=1)
            finally:
                started = time.perf_counter()
                env.close()  # stops the sandbox
                got["stop"].append((time.perf_counter() - started) * 1000)
    print(f"\nnetwork settings, {rounds} rounds alternating, {steps} steps each (ms)")
    print(f"{'network':8} " + " ".join(f"{name + ' p50':>19} {'p90':>7}"
                                         for name in samples[networks[0]]))
    for network, got in samples.items():
        print(f"{network:8} " + " ".join(f"{statistics.median(v):19.1f} {p(v, 90):7.1f}"
                                         for v in got.values()))


def _drive(sandbox: SandboxProvider, rounds: int, start: Any,
           out: dict[str, list[float]], lock: Any) -> None:
    """Once every sandbox's thread is ready (`start`, a barrier): `rounds` steps (a click,
    then a screenshot), then `rounds` screenshots, each timed into `out`."""
    def step(n: int) -> None:
        sandbox.perform(Click(300 + n % 50, 300))
        sandbox.screenshot()

    start.wait()
    steps = timings(step, rounds)
    start.wait()  # every sandbox takes screenshots at the same time too
    shots = timings(lambda n: sandbox.screenshot(), rounds)
    with lock:
        out["step"] += steps
        out["screenshot"] += shots


def density_round(count: int, isolation: str, rounds: int) -> dict[str, list[float]]:
    """`count` sandboxes of `isolation` at once (an xterm open in each), each stepped by its
    own thread at the same time; every step and screenshot time of them all."""
    import shutil
    import threading

    workspace = Path(tempfile.mkdtemp(prefix="bench-density-"))
    sandboxes = [SandboxProvider(f"dense-{i}", workspace, screen_size=(1280, 800),
                                 guest_server=False, isolation=isolation)
                 for i in range(count)]
    out: dict[str, list[float]] = {"step": [], "screenshot": []}
    try:
        for sandbox in sandboxes:
            sandbox.start()
            sandbox.launch(["xterm", "-T", "dense", "-geometry", "80x24+40+40"])
        for sandbox in sandboxes:
            deadline = time.monotonic() + 60
            while not any(w.title == "dense" for w in sandbox.windows()):
                if time.monotonic() > deadline:
                    raise SystemExit(f"{sandbox.name} ({isolation}): xterm did not start")
                time.sleep(0.02)
        start = threading.Barrier(count)
        lock = threading.Lock()
        threads = [threading.Thread(target=_drive, args=(s, rounds, start, out, lock))
                   for s in sandboxes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for sandbox in sandboxes:
            sandbox.stop()
        shutil.rmtree(workspace, ignore_errors=True)
    if len(out["step"]) != count * rounds:
        raise SystemExit(f"density {count} ({isolation}): a driving thread failed")
    return out


def density(counts: list[int], rounds: int) -> None:
    """Step and screenshot p50 with `counts` sandboxes at once, with namespaces and
    without (the baseline), side by side (see --density)."""
    modes = ("none", "namespaces")
    print(f"\nsandboxes at once, all stepped together (one thread each), {rounds} steps and "
          f"{rounds} screenshots per sandbox (ms)")
    print(f"{'N':>3} {'metric':11} {'none p50':>9} {'p90':>7} {'namespaces p50':>15} "
          f"{'p90':>7} {'ratio':>7}")
    for i, count in enumerate(counts):
        got = {mode: density_round(count, mode, rounds)
               for mode in (modes if i % 2 == 0 else modes[::-1])}
        for metric in ("step", "screenshot"):
            base, ours = got["none"][metric], got["namespaces"][metric]
            print(f"{count:3} {metric:11} {statistics.median(base):9.1f} {p(base, 90):7.1f} "
                  f"{statistics.median(ours):15.1f} {p(ours, 90):7.1f} "
                  f"{statistics.median(base) / statistics.median(ours):6.2f}x")
    print("ratio: p50 without namespaces / p50 with (above 1: namespaces faster)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--density", type=str, default="",
                        help="comma-separated sandbox counts (e.g. 1,2,4,8): that many "
                             "sandboxes stepped at once, with namespaces and without")
    parser.add_argument("--apps", action="store_true",
                        help="also: revert with LibreOffice Calc / Chromium open, and the "
                             "memory of a sandbox with them")
    parser.add_argument("--side-by-side", type=str, default="",
                        help="comma-separated sandbox counts (e.g. 1,2,4,8): app sandboxes "
                             "(Calc with a document open) stepped at once, one thread each")
    parser.add_argument("--networks", type=str, default="",
                        help="comma-separated network settings (e.g. host,user): sandbox "
                             "start, step and stop p50 for each, alternating")
    args = parser.parse_args()
    rounds = args.rounds
    if args.networks:
        network_costs([n.strip() for n in args.networks.split(",") if n.strip()], rounds)
        return 0
    if args.apps:
        app_reverts(max(3, rounds // 3))
    if args.side_by_side:
        side_by_side([int(n) for n in args.side_by_side.split(",") if n.strip()], rounds)
        return 0
    if args.density:
        try:
            counts = [int(n) for n in args.density.split(",") if n.strip()]
        except ValueError:
            parser.error(f"--density: expected counts like 1,2,4,8, got {args.density!r}")
        if not counts or min(counts) < 1:
            parser.error(f"--density: expected counts of at least 1, got {args.density!r}")
        density(counts, rounds)
        return 0
    workspace = Path(tempfile.mkdtemp(prefix="bench-env-"))
    provider = SandboxProvider("bench", workspace, screen_size=(1280, 800))
    rows: list[tuple[str, list[float], list[float] | None, str]] = []
    with DesktopEnv(provider) as env:
        provider.launch(["xterm", "-T", "bench", "-geometry", "80x24+40+40"])
        deadline = time.monotonic() + 10
        while not any(w.title == "bench" for w in provider.windows()):
            if time.monotonic() > deadline:
                raise SystemExit("xterm did not start")
            time.sleep(0.02)
        provider.save_snapshot("bench-base", description="one terminal open")
        client = GuestClient(provider.guest_url or "", token=provider.token, timeout=30)

        ours_shot = timings(lambda i: provider.screenshot(), rounds)
        result = subprocess.run([sys.executable, "-c", PYAUTOGUI_SHOT, str(rounds)],
                                env=provider.app_env(), capture_output=True, text=True)
        if result.returncode != 0:
            print(f"screenshot baseline failed: {result.stderr.strip()[-300:]}")
        base_shot = json.loads(result.stdout) if result.returncode == 0 else None
        rows.append(("screenshot", ours_shot, base_shot,
                     "Pillow X grab + PNG save (OSWorld server's pyautogui path)"))

        ours_step = timings(lambda i: env.step(Click(300 + i % 50, 300)), rounds)
        base_step = timings(lambda i: (client.execute(
            ["python", "-c", "import pyautogui; import time; pyautogui.FAILSAFE = False; "
             f"pyautogui.click({300 + i % 50}, 300)"]), client.screenshot()),
            max(5, rounds // 3))
        rows.append(("step", ours_step, base_step,
                     "/execute python -c pyautogui + /screenshot (OSWorld host)"))

        ours_http_shot = timings(lambda i: client.screenshot(), rounds)
        def http_step(i: int) -> None:
            client.perform(MoveTo(10 + i, 10))
            client.screenshot()

        ours_http_step = timings(http_step, rounds)
        rows.append(("screenshot over HTTP", ours_http_shot, None, "our guest /screenshot"))
        rows.append(("step over HTTP", ours_http_step, None, "our guest /workbench/action"))

        def dirty_then_revert(i: int) -> None:
            provider.write_file(f"~/scratch-{i}.txt", b"x")
            provider.launch(["xterm", "-T", f"extra-{i}", "-geometry", "20x5+600+400"])
            env.revert_snapshot("bench-base")

        ours_revert = timings(dirty_then_revert, rounds)

        def cold_restart(i: int) -> None:
            provider.stop()
            provider.start()
            provider.revert_snapshot("bench-base")

        base_revert = timings(cold_restart, max(3, rounds // 6), warmup=0)
        rows.append(("revert", ours_revert, base_revert,
                     f"cold restart of the sandbox; OSWorld Docker: {OSWORLD_DOCKER_RESET}"))

    print(f"\nsandbox 1280x800, {rounds} rounds (ms)")
    print(f"{'metric':22} {'p50':>8} {'p90':>8} {'target':>8} {'base p50':>9} "
          f"{'ratio':>7}  baseline")
    for name, ours, base, label in rows:
        target = TARGETS.get(name)
        base_p50 = statistics.median(base) if base else None
        ratio = f"{base_p50 / statistics.median(ours):6.1f}x" if base_p50 else "      -"
        print(f"{name:22} {statistics.median(ours):8.1f} {p(ours, 90):8.1f} "
              f"{(f'{target:.0f}' if target else '-'):>8} "
              f"{(f'{base_p50:.1f}' if base_p50 else '-'):>9} {ratio}  {label}")
    print(f"\nOSWorld reference: Docker reset = {OSWORLD_DOCKER_RESET} (>= 60 000 ms per reset)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
