"""Screen recording with ffmpeg's x11grab, as OSWorld's /start_recording and
/end_recording do (H.264 in MP4, 30 frames per second, the pointer drawn)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

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
            width, height = size
            log = open(path.with_suffix(".log"), "wb")  # noqa: SIM115
            try:
                proc = subprocess.Popen(
                    [ffmpeg, "-nostdin", "-y", "-f", "x11grab", "-draw_mouse", "1",
                     "-video_size", f"{width}x{height}", "-framerate", "30",
                     "-i", self.display, "-c:v", "libx264", "-preset", "ultrafast",
                     "-pix_fmt", "yuv420p", "-progress", str(_progress_file(path)),
                     "-stats_period", "0.1", str(path)],
                    env=dict(env), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True)
            finally:
                log.close()
            try:
                proc.wait(timeout=START_CHECK_SECONDS)
            except subprocess.TimeoutExpired:
                self._proc, self._path = proc, path
                return path
            raise RecordingError(f"ffmpeg exited with status {proc.returncode} at start; see "
                                 f"{path.with_suffix('.log')}", 500)

    def stop(self) -> Path:
        """Stop ffmpeg (SIGINT, so it finishes the MP4) and return the file."""
        with self._lock:
            proc, path = self._proc, self._path
            self._proc = self._path = None
            if proc is None or path is None:
                raise RecordingError("No recording in progress to stop.", 400)
            if proc.poll() is None:
                # Stopped before ffmpeg grabbed anything, the MP4 would hold no frame.
                _wait_for_first_frame(proc, _progress_file(path))
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
            self._proc = None


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
    deadline = time.monotonic() + FIRST_FRAME_TIMEOUT_SECONDS
    while proc.poll() is None and time.monotonic() < deadline:
        if _frames_written(progress) > 0:
            return
        time.sleep(PROGRESS_POLL_SECONDS)
