"""A writer killed with SIGKILL in the middle of an episode: on the next open the episode
is "incomplete", the database is sound, and no frame file is half-written.

The writer is a real process on a real workspace. It stops itself at a chosen point of
storing a frame, says on a pipe where it stopped, and waits there to be killed: so every
kill lands mid-frame by construction, at a point the test names, never by chance.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import IO, Any, NoReturn

import pytest

import trainer.store.frames as frames_module
from agents.trajectory import Step
from trainer.store import Store
from trainer.store.frames import FrameStore, frame_sha
from vm.actions import Click

REPO = Path(__file__).resolve().parent.parent
KILLED_MESSAGE = "the writing process ended before the episode finished"

# Where the writer stops (and is killed) while storing a frame, one per round:
STOPS = (
    "mid-bytes",        # half of the PNG is in the temporary file, the rest never comes
    "before-rename",    # the temporary file is whole and flushed, not yet renamed
    "mid-transaction",  # the frame is in place; the transaction recording the step is open
)


def big_png(seed: int, width: int = 320, height: int = 200) -> bytes:
    """A noisy, barely compressed PNG: every call gives a frame not stored before."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    row = os.urandom(width * 3)
    raw = b"".join(b"\x00" + row[(y + seed) % 7:] + row[:(y + seed) % 7] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b""))


# -- the writer process ------------------------------------------------------------------

def endless_step(index: int) -> Step:
    return Step(index=index, response=f"step {index}", actions=[Click(index, index)])


def run_writer(workspace: str, steps_first: int, stop: str, report_fd: int) -> None:
    """The writer process: one finished episode, then `steps_first` steps of one that
    never ends. It reports those steps and waits for a line on stdin (the app looks at
    the workspace meanwhile), then halts at `stop` while storing the next step's frame."""
    store = Store.open(workspace)
    with store.episodes.begin("finished-task") as finished:
        finished.append_step(Step(index=0, response="ok"), screenshot=big_png(0))
        finished.finish(score=1.0)
    writer = store.episodes.begin("endless-task", policy_version=1)
    for index in range(steps_first):
        writer.append_step(endless_step(index), screenshot=big_png(index + 1))
    report(report_fd, {"steps": steps_first})
    sys.stdin.readline()
    install_stop(stop, store.layout.frames_temp_dir, report_fd)
    writer.append_step(endless_step(steps_first), screenshot=big_png(steps_first + 1))
    raise AssertionError(f"the writer went past its stop {stop!r}")


def report(report_fd: int, event: dict[str, Any]) -> None:
    os.write(report_fd, json.dumps(event).encode() + b"\n")


def halt(report_fd: int, event: dict[str, Any]) -> NoReturn:
    """Say where the writer stopped, then wait there until it is killed."""
    report(report_fd, event)
    while True:
        signal.pause()


class HalfWrittenFrame:
    """The temporary frame file at the "mid-bytes" stop: it takes half of the PNG,
    flushes it to the file, and halts."""

    def __init__(self, file: IO[bytes], path: Path, report_fd: int) -> None:
        self._file, self._path, self._report_fd = file, path, report_fd

    def __enter__(self) -> HalfWrittenFrame:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def write(self, data: bytes) -> int:
        half = len(data) // 2
        self._file.write(data[:half])
        self._file.flush()
        halt(self._report_fd, {"temp": str(self._path), "sha": frame_sha(data),
                               "written": half, "size": len(data)})


def install_stop(stop: str, temp_dir: Path, report_fd: int) -> None:
    """Make the writer halt at `stop` (see STOPS); everything up to there runs as usual."""
    patch = pytest.MonkeyPatch()
    if stop == "mid-bytes":
        real_open = open

        def opening(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            handle = real_open(file, mode, *args, **kwargs)
            if "w" in mode and Path(file).parent == temp_dir:
                return HalfWrittenFrame(handle, Path(file), report_fd)
            return handle

        # the frames module finds `open` in its own globals before the builtins
        patch.setattr(frames_module, "open", opening, raising=False)
    elif stop == "before-rename":
        real_replace = os.replace

        def replacing(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
            if Path(source).parent == temp_dir:
                halt(report_fd, {"temp": str(source), "sha": Path(target).stem})
            real_replace(source, target, *args, **kwargs)

        patch.setattr(os, "replace", replacing)
    elif stop == "mid-transaction":
        real_register = FrameStore.register

        def registering(self: FrameStore, sha: str, png: bytes) -> None:
            real_register(self, sha, png)
            halt(report_fd, {"sha": sha})

        patch.setattr(FrameStore, "register", registering)
    else:
        raise ValueError(f"unknown stop {stop!r}; expected one of {STOPS}")


# -- the test ------------------------------------------------------------------------------

def next_report(report_fd: int, writer: subprocess.Popen[bytes],
                timeout: float = 120.0) -> dict[str, Any]:
    """The writer's next report: one JSON line on its pipe."""
    line = b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([report_fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"the writer sent no report within {timeout} s "
                                 f"(so far: {line!r})")
        byte = os.read(report_fd, 1)  # a byte at a time: never read past the line
        if not byte:
            raise AssertionError(f"the writer ended (status {writer.wait(timeout=30)}) "
                                 f"before it reported; so far: {line!r}")
        line += byte
    event: dict[str, Any] = json.loads(line)
    return event


def running_step_count(store: Store) -> int | None:
    rows = store.database.rows("SELECT step_count FROM episodes WHERE status = 'running'")
    return int(rows[0]["step_count"]) if rows else None


def writer_holds_the_write_lock(database: Path) -> bool:
    """Whether another connection holds SQLite's write lock (a transaction is open)."""
    conn = sqlite3.connect(database, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        return True
    finally:
        conn.close()


def check_the_stop(stop: str, stopped: dict[str, Any], workspace: Path) -> None:
    """What is on disk where the writer halted, before the kill."""
    final = workspace / "frames" / stopped["sha"][:2] / f"{stopped['sha']}.png"
    if stop == "mid-bytes":
        temp = Path(stopped["temp"])
        assert temp.parent == workspace / "frames" / "tmp"
        assert 0 < temp.stat().st_size == stopped["written"] < stopped["size"]
        assert not final.exists()
    elif stop == "before-rename":
        temp = Path(stopped["temp"])
        assert temp.parent == workspace / "frames" / "tmp"
        assert hashlib.sha256(temp.read_bytes()).hexdigest() == stopped["sha"]
        assert not final.exists()
    else:
        assert hashlib.sha256(final.read_bytes()).hexdigest() == stopped["sha"]
        assert writer_holds_the_write_lock(workspace / "workbench.db")


def test_kill_9_mid_frame_leaves_a_consistent_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    for round_number, stop in enumerate(STOPS):
        steps_first = 3 + round_number * 2  # a different episode length each round
        report_read, report_write = os.pipe()
        writer = subprocess.Popen(
            [sys.executable, "-c",
             "from tests.test_store_crash import run_writer; "
             f"run_writer({str(workspace)!r}, {steps_first}, {stop!r}, {report_write})"],
            cwd=REPO, stdin=subprocess.PIPE, pass_fds=[report_write])
        os.close(report_write)
        try:
            assert next_report(report_read, writer) == {"steps": steps_first}
            # The app opening the workspace while the writer lives must not take the live
            # episode for a crashed one.
            with Store.open(workspace) as app:
                assert app.recovered == []
                assert app.queries.count() >= 2
                assert running_step_count(app) == steps_first
            assert writer.stdin is not None
            writer.stdin.write(b"go\n")
            writer.stdin.flush()
            stopped = next_report(report_read, writer)
            check_the_stop(stop, stopped, workspace)
            os.kill(writer.pid, signal.SIGKILL)
            assert writer.wait(timeout=30) == -signal.SIGKILL
        finally:
            os.close(report_read)
            if writer.poll() is None:
                writer.kill()
                writer.wait()
            if writer.stdin is not None:
                writer.stdin.close()

        with Store.open(workspace) as store:
            assert len(store.recovered) == 1
            killed = store.episodes.load(store.recovered[0], tokens=False)
            assert killed.status == "incomplete"
            assert killed.error == KILLED_MESSAGE
            # exactly the steps committed before the stop; the interrupted one is not there
            assert [s.index for s in killed.steps] == list(range(steps_first))
            assert store.database.value("SELECT step_count FROM episodes WHERE id = ?",
                                        (killed.id,)) == steps_first
            statuses = store.database.rows("SELECT status, COUNT(*) AS n FROM episodes "
                                           "GROUP BY status ORDER BY status")
            assert statuses == [{"status": "done", "n": round_number + 1},
                                {"status": "incomplete", "n": round_number + 1}]
            # The interrupted frame is neither registered nor pointed at (a transaction
            # killed half-way leaves nothing of itself), and every frame a step points at
            # is there, whole.
            shas = [r["frame"] for r in store.database.rows("SELECT frame FROM steps")]
            assert stopped["sha"] not in shas
            assert store.frames.info(stopped["sha"]) is None
            assert store.frames.check(shas) == []
            # And the store keeps working for the next writer.
            with store.episodes.begin("after-crash") as w:
                w.append_step(Step(index=0), screenshot=big_png(999))
                w.finish(score=0.0)
            store.episodes.delete(w.episode_id)

        # No file under a frame's name holds anything but that frame's bytes (a
        # half-written frame stays in frames/tmp).
        for path in (workspace / "frames").glob("??/*.png"):
            assert hashlib.sha256(path.read_bytes()).hexdigest() == path.stem, path
        conn = sqlite3.connect(workspace / "workbench.db")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conn.close()
