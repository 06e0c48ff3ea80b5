"""What a task's setup (or an evaluator's postconfig) left undone: commands that failed.

OSWorld's controller posts each `execute`/`command` step to its VM and goes on whatever
the command's exit status; a command that failed there only shows in a log. Here every
such command is recorded (FailedCommand: the command as the task file writes it, its exit
status and the end of its stderr), kept on the episode and counted by `tasks smoke`, and
with `strict` it is a setup error. A failure that is not this desktop's fault is marked
(`expected`): a command that reaches for the web (offline it cannot), one OSWorld's own
image fails too (KNOWN_ON_OSWORLD), or a postconfig probe whose output the evaluator
scores (grep finding nothing is the answer, not a failure).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

NEEDS_WEB = "needs the web"
FAILS_ON_OSWORLD = "fails on OSWorld's image too"
# a postconfig command whose output the evaluator reads (its "stdout"/"stderr" file): its
# exit status is part of what is checked (grep finding nothing), not a setup left undone
A_CHECK = "a check: the evaluator reads its output"
STDERR_KEPT = 600  # characters of a failed command's stderr kept (its end: the error)

# Commands that fail on OSWorld's own image as well, by task id and a piece of the
# command: (task id, command piece) -> why.
KNOWN_ON_OSWORLD: dict[tuple[str, str], str] = {
    ("a462a795-fdc7-4b23-b689-e8b6df786b78", "su - charles"):
        "its image has no user charles either: su says 'user charles does not exist'",
    ("48c46dc7-fe04-4505-ade7-723cba1aa6f6", "update-desktop-database"):
        "run as its user, it cannot write /usr/share/applications either (exit status 1)",
}

# What a command says when it could not reach the network (curl, wget, pip, apt, git, ...)
_OFFLINE = re.compile(
    r"could not resolve host|temporary failure in name resolution|name or service not known"
    r"|network is unreachable|failed to establish a new connection|no route to host"
    r"|unable to resolve host|could not connect to|connection refused.*https?://"
    r"|failed to fetch https?://|no matching distribution found"
    # Node's resolver (code-server fetching an extension from its gallery)
    r"|getaddrinfo (?:enotfound|eai_again)", re.IGNORECASE)
_WEB_URL = re.compile(r"https?://(?!(?:localhost|127\.\d+\.\d+\.\d+|\[::1\])[:/])",
                      re.IGNORECASE)
# programs that fetch what a URL in their command names (a URL elsewhere, in a setting a
# command writes, is only text)
_FETCHERS = re.compile(r"(?:^|[\s;&|(/])(?:curl|wget|git|pip3?|apt|apt-get|npm|snap|"
                       r"python3? -m pip)\s")


@dataclass(frozen=True)
class FailedCommand:
    """One setup or postconfig command that exited non-zero (or whose program is missing)."""

    part: str  # "config" or "evaluator.postconfig"
    index: int  # the step's index in that list
    command: str  # as the task file writes it (placeholders unreplaced: no password)
    returncode: int  # 127: the program is not there; -1: timed out
    stderr: str  # the end of what it printed on stderr
    expected: str = ""  # "" or why it is not this desktop's fault (NEEDS_WEB, ...)

    @property
    def where(self) -> str:
        return f"{self.part}[{self.index}]"

    def describe(self) -> str:
        """One line: where, the command, its exit status, the last line of its stderr."""
        last = self.stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        mark = f" [{self.expected}]" if self.expected else ""
        return (f"{self.where} {self.command!r} exited with {self.returncode}: "
                f"{last[0][:200]}{mark}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FailedCommand:
        return cls(str(data["part"]), int(data["index"]), str(data["command"]),
                   int(data["returncode"]), str(data.get("stderr", "")),
                   str(data.get("expected", "")))


def unexcused_setup(failed: Any) -> list[Any]:
    """The setup commands (config, not postconfig) among `failed` that no mark excuses:
    the desktop did not start from the task's state."""
    return [f for f in failed if f.part == "config" and not f.expected]


def described(records: Any) -> list[str]:
    """One line per record of FailedCommand.to_json (as an episode's info keeps them); a
    record that does not read as one is shown as it is."""
    lines = []
    for record in records if isinstance(records, list) else [records]:
        try:
            lines.append(FailedCommand.from_json(record).describe())
        except (KeyError, TypeError, ValueError, AttributeError):
            lines.append(repr(record)[:300])
    return lines


@dataclass
class StepsReport:
    """What running a list of steps left to say: warnings (a window a step names was not
    there, where OSWorld goes on) and the commands that failed."""

    warnings: list[str] = field(default_factory=list)
    failed_commands: list[FailedCommand] = field(default_factory=list)

    @property
    def unexpected_failures(self) -> list[FailedCommand]:
        """Failed commands not marked as needing the web or failing on OSWorld too."""
        return [f for f in self.failed_commands if not f.expected]


def expected_failure(task_id: str, command: str, stderr: str, check: bool = False) -> str:
    """Why a failed command is not this desktop's fault, or "" when it is; `check`: the
    evaluator reads its output."""
    for (known_task, piece), why in KNOWN_ON_OSWORLD.items():
        if task_id == known_task and piece in command:
            return f"{FAILS_ON_OSWORLD}: {why}"
    if (_WEB_URL.search(command) and _FETCHERS.search(command)) or _OFFLINE.search(stderr):
        return NEEDS_WEB
    return A_CHECK if check else ""


def shown_command(command: list[str] | str) -> str:
    """A command as one line, as the task file wrote it."""
    return command if isinstance(command, str) else " ".join(command)


def failed_command(part: str, index: int, task_id: str, command: list[str] | str,
                   returncode: int, stderr: str, check: bool = False) -> FailedCommand:
    text = shown_command(command)
    return FailedCommand(part, index, text, returncode, stderr[-STDERR_KEPT:],
                         expected_failure(task_id, text, stderr, check))
