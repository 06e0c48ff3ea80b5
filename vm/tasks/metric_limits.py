"""Running a metric with a time and memory limit, so a task file's bomb scores 0.

A metric reads files an agent or a task file chose: a 131 KB xlsx can inflate to two
million rows, a small PNG to 13000x13000 pixels. Run in the evaluating process, either
holds a trainer for minutes or takes it down with the host's memory. Each metric call
that needs no live desktop therefore runs in a forked child process:

- memory: the child's address-space limit (RLIMIT_AS) is its size at the fork plus
  `memory_mb`, so what the metric allocates is bounded whatever the parent already maps
  (torch and Qt map gigabytes of address space before any metric runs);
- time: the parent waits for the child's answer until `timeout` seconds, then kills it;
  the child also gets a CPU-time limit a little above that as a second line.

A fork shares the parent's loaded modules and the metric's arguments without copying or
pickling them, so a call costs milliseconds. Metrics that talk to the desktop (they take
`desktop=`) run in-process: their work is bounded by the desktop's own timeouts.

Defaults come from the environment: WORKBENCH_METRIC_TIMEOUT (seconds, default 180) and
WORKBENCH_METRIC_MEMORY_MB (default 4096).
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import resource
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vm.environment_settings import positive_number

DEFAULT_TIMEOUT = 180.0
DEFAULT_MEMORY_MB = 4096
NEAR_LIMIT = 64 * 1024 * 1024  # bytes: a peak this close to the limit counts as reaching it


class MetricLimitExceeded(RuntimeError):
    """A metric ran past its time or memory limit (or its process died); it scores 0."""


class MetricRaised(RuntimeError):
    """The metric raised in its child process; the message is "Type: message"."""


@dataclass(frozen=True)
class MetricLimits:
    timeout: float = DEFAULT_TIMEOUT  # seconds of wall-clock time per metric call
    memory_mb: int = DEFAULT_MEMORY_MB  # MiB the call may allocate above its start

    @classmethod
    def from_environment(cls) -> MetricLimits:
        return cls(timeout=positive_number("WORKBENCH_METRIC_TIMEOUT", DEFAULT_TIMEOUT),
                   memory_mb=int(positive_number("WORKBENCH_METRIC_MEMORY_MB",
                                                 DEFAULT_MEMORY_MB)))


def _address_space_bytes(field: str = "VmSize") -> int:
    """This process's address space now (VmSize) or at its largest (VmPeak), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _child(function: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
           limits: MetricLimits, write_end: int) -> None:
    payload: tuple[str, Any]
    # ready before the limit: reporting a MemoryError must not need memory of its own
    memory_answer = pickle.dumps(("memory", ""))
    try:
        limit = _address_space_bytes() + limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        seconds = math.ceil(limits.timeout) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
        score = float(function(*args, **kwargs))
        # Many readers catch every error and score 0, a MemoryError too: an address space
        # that came within NEAR_LIMIT of the limit says that is what happened.
        near = _address_space_bytes("VmPeak") >= limit - NEAR_LIMIT
        payload = ("score", (score, near))
    except MemoryError:
        payload = ("memory", "")
    except BaseException as exc:  # reported to the parent, which scores it 0 with the reason
        try:
            payload = ("error", (type(exc).__name__, str(exc)[:300]))
        except MemoryError:  # describing the error took the last of the memory
            payload = ("memory", "")
    try:
        data = pickle.dumps(payload)
    except MemoryError:
        data = memory_answer
    except Exception:
        try:
            data = pickle.dumps(("error", ("PicklingError", "the metric's error could not "
                                                            "be reported")))
        except MemoryError:
            data = memory_answer
    view = memoryview(data)
    while view:
        written = os.write(write_end, view)
        view = view[written:]


def call_with_limits(function: Callable[..., Any], args: Sequence[Any] = (),
                     kwargs: Mapping[str, Any] | None = None,
                     limits: MetricLimits | None = None) -> float:
    """`float(function(*args, **kwargs))`, computed in a forked child under `limits`.

    Raises MetricLimitExceeded when the child runs past the time limit, exceeds the memory
    limit or dies; MetricRaised ("Type: message") when the metric itself raised."""
    limits = limits or MetricLimits.from_environment()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, report, leave without running the parent's exit code
        code = 0
        try:
            os.close(read_end)
            _child(function, args, kwargs or {}, limits, write_end)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + limits.timeout
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue  # the loop re-checks the deadline
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break  # the child closed its end: it has answered or died
            chunks.append(chunk)
    finally:
        os.close(read_end)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if timed_out:
        raise MetricLimitExceeded(f"ran past its time limit of {limits.timeout:g} s "
                                  "($WORKBENCH_METRIC_TIMEOUT)")
    try:
        kind, value = pickle.loads(b"".join(chunks))
    except Exception:
        if os.WIFSIGNALED(status):
            signal_number = os.WTERMSIG(status)
            why = ("its CPU-time limit" if signal_number == signal.SIGXCPU
                   else f"signal {signal.Signals(signal_number).name}")
            raise MetricLimitExceeded(f"its process was ended by {why} (time limit "
                                      f"{limits.timeout:g} s, memory limit "
                                      f"{limits.memory_mb} MiB)") from None
        raise MetricLimitExceeded(f"its process ended without an answer (exit status "
                                  f"{os.waitstatus_to_exitcode(status)})") from None
    if kind == "score":
        score, near_limit = value
        if near_limit and score == 0.0:
            raise MetricLimitExceeded(f"reached its memory limit of {limits.memory_mb} MiB "
                                      "($WORKBENCH_METRIC_MEMORY_MB) and scored 0")
        return float(score)
    if kind == "memory":
        raise MetricLimitExceeded(f"exceeded its memory limit of {limits.memory_mb} MiB "
                                  "($WORKBENCH_METRIC_MEMORY_MB)")
    name, message = value
    raise MetricRaised(f"{name}: {message}")
