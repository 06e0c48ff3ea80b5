"""The trainer as the Training screen runs it: one `workbench train` process at a time
under QProcess in a session of its own (start; stop with SIGINT, then SIGTERM and SIGKILL
after grace periods; its output as terminal lines, copied to the run's log), how it
ended."""

from __future__ import annotations

import codecs
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from PyQt6.QtCore import (
    QEventLoop,
    QObject,
    QProcess,
    QProcessEnvironment,
    QTimer,
    pyqtSignal,
)

from workbench.services.training_runs import TrainerCommand, exit_summary, terminal_lines

STOP_GRACE_S = 120.0  # Ctrl-C saves a checkpoint first: a large model takes a while
KILL_AFTER_S = 10.0  # after SIGTERM, before SIGKILL


@dataclass(frozen=True)
class TrainerExit:
    """How a trainer process ended, as the screen reports it."""

    run_id: str
    exit_code: int
    crashed: bool  # ended by a signal
    forced: bool  # the screen had to terminate it after the grace period
    status: str  # the run's status in the store afterwards
    message: str


class TrainerProcess(QObject):
    """One `workbench train` process at a time: start, stop (SIGINT, then terminate after
    a grace period), its output as text lines, and how it ended."""

    output = pyqtSignal(str)  # complete lines, as a terminal would show them
    finished = pyqtSignal(str, int, bool, bool)  # run id, exit code, crashed, forced

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.process: QProcess | None = None
        self.run_id: str | None = None
        self.forced = False
        self.stopping = False
        self._terminated = False
        self._log: IO[bytes] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._escalation = QTimer(self)
        self._escalation.setSingleShot(True)
        self._escalation.timeout.connect(self._escalate)

    def is_running(self) -> bool:
        return self.process is not None

    def start(self, command: TrainerCommand, run_id: str, log_path: Path) -> None:
        if self.process is not None:
            raise RuntimeError(f"a trainer is running already (run {self.run_id})")
        process = QProcess(self)
        process.setProgram(command.program)
        process.setArguments(list(command.arguments))
        environment = QProcessEnvironment.systemEnvironment()
        for name, value in command.environment.items():
            environment.insert(name, value)
        process.setProcessEnvironment(environment)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        parameters = QProcess.UnixProcessParameters()
        # Its own session: a Ctrl-C in the app's terminal is not the trainer's, and the
        # trainer's own children can be terminated with it. Signal handlers reset: a
        # trainer that inherited an ignored SIGINT could not be stopped cleanly.
        flag = QProcess.UnixProcessFlag  # an Enum in PyQt6: combined through its values
        values = [cast(int, f.value) for f in (flag.CreateNewSession, flag.ResetSignalHandlers)]
        parameters.flags = flag(values[0] | values[1])
        process.setUnixProcessParameters(parameters)
        process.readyReadStandardOutput.connect(self._read)
        process.finished.connect(self._finished)
        process.errorOccurred.connect(self._error)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("ab")
        self._decoder.reset()
        self._partial = ""
        self.process, self.run_id = process, run_id
        self.forced = self.stopping = self._terminated = False
        self._write_log(f"$ {command.display()}\n".encode())
        self.output.emit(f"$ {command.display()}")
        process.start()

    def stop(self, grace_s: float = STOP_GRACE_S) -> bool:
        """Ask the trainer to stop (SIGINT: it saves a checkpoint); terminate it when it
        has not exited after `grace_s`. False when nothing runs."""
        process = self.process
        if process is None:
            return False
        pid = int(process.processId())
        if self.stopping:
            return True
        self.stopping = True
        if pid > 0:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        self._line(f"[app] stop asked (SIGINT); waiting up to {grace_s:.0f} s for the "
                   f"checkpoint")
        self._escalation.start(max(0, int(grace_s * 1000)))
        return True

    def wait(self, timeout_s: float) -> bool:
        """Let events run until the process has ended (or `timeout_s`); True if it ended."""
        if self.process is None:
            return True
        loop = QEventLoop()
        self.finished.connect(loop.quit)
        QTimer.singleShot(max(1, int(timeout_s * 1000)), loop.quit)
        if self.process is not None:
            loop.exec()
        self.finished.disconnect(loop.quit)
        return self.process is None

    def _escalate(self) -> None:
        process = self.process
        if process is None:
            return
        pid = int(process.processId())
        self.forced = True
        if process.state() == QProcess.ProcessState.NotRunning:
            return
        if pid <= 0:  # still starting: it has no process group to signal yet
            process.kill()
            return
        if self._terminated:
            self._line("[app] the trainer is still running after SIGTERM; killing it")
            self._signal_group(pid, signal.SIGKILL)
            return
        self._line("[app] the trainer did not stop within the grace period; terminating it")
        self._signal_group(pid, signal.SIGTERM)
        self._terminated = True
        self._escalation.start(int(KILL_AFTER_S * 1000))

    @staticmethod
    def _signal_group(pid: int, signum: int) -> None:
        try:
            os.killpg(pid, signum)  # its own session: the group is the trainer and its kids
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _read(self) -> None:
        process = self.process
        if process is None:
            return
        data = bytes(process.readAllStandardOutput().data())
        self._write_log(data)
        self._emit_text(self._decoder.decode(data))

    def _emit_text(self, text: str, final: bool = False) -> None:
        text = self._partial + text
        lines = text.split("\n")
        self._partial = "" if final else lines.pop()
        for line in terminal_lines("\n".join(lines)) if lines else []:
            self.output.emit(line)

    def _line(self, text: str) -> None:
        self._write_log((text + "\n").encode())
        self.output.emit(text)

    def _write_log(self, data: bytes) -> None:
        if self._log is not None and data:
            self._log.write(data)
            self._log.flush()

    def _error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self.process is not None:
            self._line(f"[app] the trainer could not start: {self.process.errorString()}")
            self._done(-1, True)

    def _finished(self, exit_code: int, exit_status: QProcess.ExitStatus) -> None:
        process = self.process
        if process is not None:
            self._read()
        rest = self._decoder.decode(b"", final=True)
        if rest or self._partial:
            self._emit_text(rest + "\n", final=True)
        self._done(exit_code, exit_status == QProcess.ExitStatus.CrashExit)

    def _done(self, exit_code: int, crashed: bool) -> None:
        self._escalation.stop()
        run_id = self.run_id or ""
        self._line(f"[app] {exit_summary(exit_code, crashed)}")
        if self._log is not None:
            self._log.close()
            self._log = None
        process, self.process, self.run_id = self.process, None, None
        if process is not None:
            process.deleteLater()
        self.finished.emit(run_id, exit_code, crashed, self.forced)

