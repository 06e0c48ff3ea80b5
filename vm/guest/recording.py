"""Screen recording as OSWorld's /start_recording and /end_recording do (H.264 in MP4,
30 frames per second, the pointer drawn).

The frames are grabbed here (vm.x11.X11Display.frame, the screenshots' own path) and piped
to ffmpeg as raw video stamped with the wall clock, rather than grabbed by ffmpeg's
x11grab: the workbench's X servers run without MIT-SHM (vm.xserver.start_xvfb says why),
and Debian's ffmpeg 5.1 x11grab grabs no frame at all from such a server."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from vm.waiting import poll_until

FRAMES_PER_SECOND = 30
STOP_TIMEOUT_SECONDS = 15.0
START_CHECK_SECONDS = 0.3  # ffmpeg fails fast on a bad display; give it that long
FIRST_FRAME_TIMEOUT_SECONDS = 30.0  # a loaded machine may take this long to grab a frame
PROGRESS_POLL_SECONDS = 0.05


class RecordingError(RuntimeError):
    """Recording cannot start or stop; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Recorder:
    """At most one ffmpeg recording at a time for one display."""

    def __init__(self, display: str | None, folder: Path | None = None) -> None:
        self.display = display
        self.folder = folder
        self._proc: subprocess.Popen[bytes] | None = None
        self._path: Path | None = None
        self._pump: _FramePump | None = None
        self._lock = threading.Lock()

    @staticmethod
    def available() -> bool:
        return shutil.which("ffmpeg") is not None

    def start(self, size: tuple[int, int], env: Mapping[str, str]) -> Path:
        with self._lock:
            ffmpeg = shutil.which("ffmpeg")
            if ffmpeg is None:
                raise RecordingError("recording needs ffmpeg, which is not installed in the "
                                     "guest (Debian package ffmpeg)", 501)
            if self.display is None:
                raise RecordingError("recording needs an X display: DISPLAY is not set", 503)
            if self._proc is not None and self._proc.poll() is None:
                raise RecordingError("Recording is already in progress.", 400)
            folder = self.folder or Path(tempfile.gettempdir())
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"recording-{time.strftime('%Y%m%d-%H%M%S')}.mp4"
            from vm.x11 import X11Display

            try:
                screen = X11Display(self.display)
            except Exception as exc:  # the display cannot be reached
                raise RecordingError(f"cannot grab display {self.display}: {exc}",
                                     500) from exc
            try:
                first = screen.frame()
            except Exception as exc:
                screen.close()
                raise RecordingError(f"cannot grab display {self.display}: {exc}",
                                     500) from exc
            height, width = first.shape[:2]
            log = open(path.with_suffix(".log"), "wb")  # noqa: SIM115
            try:
                proc = subprocess.Popen(
                    [ffmpeg, "-nostdin", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
                     "-video_size", f"{width}x{height}", "-use_wallclock_as_timestamps",
                     "1", "-i", "pipe:0", "-c:v", "libx264", "-preset", "ultrafast",
                     "-pix_fmt", "yuv420p", "-vsync", "cfr", "-r", str(FRAMES_PER_SECOND),
                     "-progress", str(_progress_file(path)), "-stats_period", "0.1",
                     str(path)],
                    env=dict(env), stdin=subprocess.PIPE, stdout=log, stderr=log,
                    start_new_session=True)
            finally:
                log.close()
            try:
                proc.wait(timeout=START_CHECK_SECONDS)
            except subprocess.TimeoutExpired:
                self._proc, self._path = proc, path
                self._pump = _FramePump(screen, first, proc)
                return path
            screen.close()
            raise RecordingError(f"ffmpeg exited with status {proc.returncode} at start; see "
                                 f"{path.with_suffix('.log')}", 500)

    def stop(self) -> Path:
        """Stop ffmpeg (SIGINT, so it finishes the MP4) and return the file."""
        with self._lock:
            proc, path, pump = self._proc, self._path, self._pump
            self._proc = self._path = self._pump = None
            if proc is None or path is None:
                raise RecordingError("No recording in progress to stop.", 400)
            if proc.poll() is None:
                # Stopped before ffmpeg encoded anything, the MP4 would hold no frame.
                _wait_for_first_frame(proc, _progress_file(path))
                if pump is not None:
                    pump.stop()  # its end of the pipe closed: ffmpeg finishes the MP4
                try:
                    proc.wait(timeout=STOP_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=STOP_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            _progress_file(path).unlink(missing_ok=True)
            if not path.exists() or path.stat().st_size == 0:
                raise RecordingError(f"Recording failed: ffmpeg left no video; see "
                                     f"{path.with_suffix('.log')}", 500)
            return path

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            if self._pump is not None:
                self._pump.stop()
            self._proc = self._pump = None


def _progress_file(video: Path) -> Path:
    return video.with_suffix(".progress")


def _frames_written(progress: Path) -> int:
    """The last `frame=N` that ffmpeg's -progress output reported (0 before any)."""
    try:
        text = progress.read_text(errors="replace")
    except FileNotFoundError:
        return 0
    frames = 0
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "frame" and value.strip().isdigit():
            frames = int(value)
    return frames


def _wait_for_first_frame(proc: subprocess.Popen[bytes], progress: Path) -> None:
    """Until ffmpeg has encoded a frame, it exits, or the timeout passes."""
    poll_until(lambda: proc.poll() is not None or _frames_written(progress) > 0,
               FIRST_FRAME_TIMEOUT_SECONDS, PROGRESS_POLL_SECONDS)


class _FramePump:
    """Grabs the screen up to FRAMES_PER_SECOND times a second and writes each frame to
    ffmpeg's standard input (which stamps it with the wall clock) until stopped."""

    def __init__(self, screen: Any, first: Any, proc: subprocess.Popen[bytes]) -> None:
        self._screen = screen
        self._proc = proc
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(first,), daemon=True,
                                        name="recording-frames")
        self._thread.start()

    def _run(self, frame: Any) -> None:
        pipe = self._proc.stdin
        assert pipe is not None
        interval = 1.0 / FRAMES_PER_SECOND
        try:
            while True:
                started = time.monotonic()
                pipe.write(frame.tobytes())
                pipe.flush()
                if self._stopping.wait(max(0.0, interval - (time.monotonic() - started))):
                    break
                frame = self._screen.frame()
        except Exception:  # ffmpeg went away, or the display did: what was recorded stays
            pass
        finally:
            with suppress(OSError, ValueError):
                pipe.close()
            self._screen.close()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=STOP_TIMEOUT_SECONDS)
