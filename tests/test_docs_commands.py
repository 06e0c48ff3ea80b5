"""The commands the README and docs/ show are the command line's own: every `workbench …`
(or `python -m workbench …`) in a code block or code span names sub-commands that exist
and options they accept, checked against the argparse parser without running anything.

Synopsis notation is understood: `[--name NAME]` (optional), `list|revert` (one of),
`…` (more of the same). A command line of a code block without it (and without
placeholders such as NAME) is parsed in full, as the shell would pass it, so a missing
argument or a wrong value is caught too; a code span in prose may name a command without
its arguments (`workbench tasks fetch` fills the cache), so only its words are checked."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# how the docs start the command line: the installed script, the module, the bundle
PROGRAMS = (("workbench",), ("workbench-cli",), ("python", "-m", "workbench"),
            ("python3", "-m", "workbench"), (".venv/bin/python", "-m", "workbench"),
            ("dist/workbench/workbench",))
SHELL_OPERATORS = {"|", "||", "&&", ";", "&"}
SYNOPSIS = re.compile(r"[\[\]|…]|\.\.\.")
PLACEHOLDER = re.compile(r"[A-Z][A-Z_0-9]*(\.[a-z]+)?")  # NAME, DIR, N, RUN.toml


@dataclass(frozen=True)
class DocCommand:
    path: Path
    line: int
    tokens: tuple[str, ...]  # after the program
    fenced: bool  # a line of a code block, not a code span in prose

    def __str__(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}: workbench {' '.join(self.tokens)}"


def code_snippets(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, fenced) of each command line of a fenced code block (a trailing `\\`
    joins the next line) and of each inline code span."""
    lines = path.read_text(encoding="utf-8").splitlines()
    prose: list[str] = []
    fenced, pending, start = False, "", 0
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            prose.append("")
            continue
        if not fenced:
            prose.append(line)
            continue
        prose.append("")
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line, True
        pending = ""
    text = "\n".join(prose)
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
        yield (text.count("\n", 0, match.start()) + 1, " ".join(match.group(1).split()),
               False)


def commands_in(path: Path, line: int, snippet: str, fenced: bool = True
                ) -> Iterator[DocCommand]:
    try:
        tokens = shlex.split(snippet.removeprefix("$ "), comments=True)
    except ValueError:  # not shell (unbalanced quotes): prose in a code span
        return
    segment: list[str] = []
    for token in [*tokens, ";"]:
        if token not in SHELL_OPERATORS:
            segment.append(token)
            continue
        while segment and re.fullmatch(r"[A-Z_][A-Z_0-9]*=.*", segment[0]):
            segment.pop(0)  # VAR=value before the command
        for program in PROGRAMS:
            rest = segment[len(program):]
            if tuple(segment[:len(program)]) == program and rest \
                    and re.match(r"-{0,2}[a-z]", rest[0]):
                # a redirection ends the command's own arguments
                end = next((i for i, t in enumerate(rest) if re.match(r"\d?>", t)), len(rest))
                yield DocCommand(path, line, tuple(rest[:end]), fenced)
                break
        segment = []


def doc_commands() -> list[DocCommand]:
    return [command for path in DOCS for line, snippet, fenced in code_snippets(path)
            for command in commands_in(path, line, snippet, fenced)]


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return parser._option_string_actions


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)),
                None)


def structural_problems(parser: argparse.ArgumentParser, tokens: list[str]) -> list[str]:
    """What in `tokens` the parser does not have: a sub-command (each alternative of
    `a|b` is followed), or an option of the sub-command it is given to."""
    position = 0
    while position < len(tokens):
        token = tokens[position].strip("[]")
        subparsers = _subparsers(parser)
        if token.startswith("-"):
            problems = [f"{option!r} is not an option of `{parser.prog}`"
                        for option in token.split("|") if option.startswith("-")
                        and option.split("=", 1)[0] not in _options(parser)]
            if problems:
                return problems
            action = _options(parser)[token.split("|")[0].split("=", 1)[0]]
            takes_value = action.nargs != 0 and "=" not in token and "|" not in token
            position += 2 if takes_value and subparsers is not None else 1
            continue
        if subparsers is None:  # positional arguments and more options follow
            return [problem for rest in tokens[position + 1:]
                    for problem in structural_problems(parser, [rest])
                    if rest.strip("[]").startswith("-")]
        if token in ("…", "..."):
            return []
        problems = []
        for name in token.split("|"):
            if name not in subparsers.choices:
                problems.append(f"`{parser.prog}` has no sub-command {name!r} "
                                f"(it has: {', '.join(subparsers.choices)})")
            else:
                problems += structural_problems(subparsers.choices[name],
                                                tokens[position + 1:])
        return problems
    return []


def parse_problem(tokens: list[str]) -> str | None:
    """argparse's own error for a concrete command line, or None when it parses."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(tokens)
    except SystemExit as exit_:
        if exit_.code not in (0, None):  # 0: --help, --version
            return errors.getvalue().strip().splitlines()[-1]
    return None


def test_the_docs_show_commands_of_every_kind() -> None:
    """The extraction finds what the docs hold (guards against a test that checks nothing)."""
    commands = doc_commands()
    first_words = {c.tokens[0] for c in commands if not c.tokens[0].startswith("-")}
    assert {"env", "tasks", "rollout", "eval", "train", "demo"} <= first_words, first_words
    guides = sorted((REPO / "docs" / "guides").glob("*.md"))
    assert len(guides) >= 3
    for guide in guides:
        assert any(c.path == guide for c in commands), f"{guide}: no workbench command found"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_documented_command_parses(path: Path) -> None:
    parser = build_parser()
    problems = []
    for command in doc_commands():
        if command.path != path:
            continue
        tokens = list(command.tokens)
        found = structural_problems(parser, tokens)
        if not found and command.fenced and not any(
                SYNOPSIS.search(t) or PLACEHOLDER.fullmatch(t) for t in tokens):
            problem = parse_problem(tokens)
            found = [problem] if problem else []
        problems += [f"{command}\n    {problem}" for problem in found]
    assert not problems, "\n".join(problems)


def test_a_wrong_command_is_caught() -> None:
    """The check is not vacuous: a misspelt sub-command, an unknown option, a missing
    argument are each reported."""
    parser = build_parser()
    assert structural_problems(parser, ["env", "upp"])
    assert structural_problems(parser, ["env", "up", "--nmae", "x"])
    assert structural_problems(parser, ["tasks", "list|shw"])
    assert not structural_problems(parser, ["env", "snapshot", "list|revert", "NAME", "…"])
    assert not structural_problems(parser, ["--workspace", "W", "env", "up", "[--name", "N]"])
    assert parse_problem(["env", "screenshot"]) is not None  # NAME is required
    assert parse_problem(["env", "screenshot", "default", "-o", "a.png"]) is None
    commands = list(commands_in(REPO / "README.md", 1, "WORKBENCH_X=1 python -m workbench "
                                "tasks audit DIR --json | jq . > out.json"))
    assert [c.tokens for c in commands] == [("tasks", "audit", "DIR", "--json")]


def test_the_docs_link_and_show_files_that_exist() -> None:
    """Every relative link and image of the README and docs/ points at a file here (the
    README's screenshots included), and nothing points outside the repository."""
    problems = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", text):
            target = match.group(1).split("#", 1)[0]
            if not target or re.match(r"[a-z]+:", target):
                continue  # a link within the page, or a URL
            resolved = (path.parent / target).resolve()
            line = text.count("\n", 0, match.start()) + 1
            if not resolved.is_relative_to(REPO):
                problems.append(f"{path.relative_to(REPO)}:{line}: {target} is outside the "
                                f"repository")
            elif not resolved.exists():
                problems.append(f"{path.relative_to(REPO)}:{line}: {target} does not exist")
    assert not problems, "\n".join(problems)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\((docs/images/[^)]+\.png)\)", readme)
    assert len(set(images)) >= 3, images
    for image in set(images):
        assert (REPO / image).stat().st_size < 400_000, f"{image}: keep the README's PNGs small"
