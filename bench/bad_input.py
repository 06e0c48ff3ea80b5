"""How long the parsers and loaders take on 1 MB of hostile input (issue 19). Not a test.

    .venv/bin/python bench/bad_input.py            # 5 repeats per input
    .venv/bin/python bench/bad_input.py --repeats 1

Each row is one input shape of about 1 MB given to one public entry point (the three
response parsers, the run configuration loader, the task file loader); the time is the
median of the repeats until the call returns or raises its documented error, which the
row names. Baseline, in the same run: `json.loads` of 1 MB of valid JSON (the cheapest
honest look at 1 MB). The UI-TARS row with newlines is also timed with the section pattern
as it was before the fix (`^\\s*` across lines), on 20,000 newlines only, since 1 MB of
them would take hours.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.parsing import CoordinateMapping, parse_response  # noqa: E402
from trainer.config import parse_run_config  # noqa: E402
from vm.tasks.model import load_task  # noqa: E402

MB = 1_000_000
MAPPING = CoordinateMapping((1920, 1080), (1932, 1092))


def outcome(call: Callable[[], object]) -> str:
    try:
        call()
    except Exception as exc:  # the row says which error type ended the call
        return type(exc).__name__
    return "result"


def timed(call: Callable[[], object], repeats: int) -> tuple[float, str]:
    times = []
    result = ""
    for _ in range(repeats):
        start = time.perf_counter()
        result = outcome(call)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def response_inputs() -> list[tuple[str, str, str]]:
    """(label, format, text) of about 1 MB each."""
    click = "Action: click(start_box='(10,20)')"
    return [
        ("uitars: action + newlines", "uitars", click + "\n" * MB),
        ("uitars: unclosed quote", "uitars", "Action: type(content='" + "a" * MB),
        ("uitars: open parentheses", "uitars", "Action: click(" + "(" * MB),
        ("uitars: quotes and commas", "uitars", "Action: type(content='" + "', " * (MB // 3)),
        ("uitars: 1 MB of digits", "uitars", "Action: click(start_box='(" + "9" * MB + ",1)')"),
        ("pyautogui: 50k clicks", "pyautogui", "pyautogui.click(1, 2)\n" * (MB // 22)),
        ("pyautogui: deep nesting", "pyautogui", "pyautogui.click(" + "-" * MB + "1, 2)"),
        ("pyautogui: long string", "pyautogui", "pyautogui.write('" + "a" * MB + "')"),
        ("computer_13: open brackets", "computer_13", "[" * MB),
        ("computer_13: long text", "computer_13",
         '{"action_type":"TYPING","parameters":{"text":"' + "a" * MB + '"}}'),
        ("computer_13: 1 MB number", "computer_13",
         '{"action_type":"CLICK","parameters":{"x":' + "9" * MB + ',"y":1}}'),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows: list[tuple[str, float, str]] = []
    valid = json.dumps([{"action_type": "CLICK", "x": i, "y": i} for i in range(MB // 38)])
    baseline, _ = timed(lambda: json.loads(valid), args.repeats)
    rows.append((f"baseline: json.loads of {len(valid) / MB:.1f} MB", baseline, "result"))
    for label, response_format, text in response_inputs():
        seconds, result = timed(lambda t=text, f=response_format:  # type: ignore[misc]
                                parse_response(t, f, MAPPING), args.repeats)
        rows.append((label, seconds, result))
    toml_inputs = [
        ("config: open arrays", "a = " + "[" * MB),
        ("config: 1 MB integer", "[run]\nseed = " + "9" * MB + "\n"),
        ("config: 1 MB string", '[run]\nname = "' + "a" * MB + '"\n'),
    ]
    for label, text in toml_inputs:
        seconds, result = timed(lambda t=text: parse_run_config(t), args.repeats)  # type: ignore[misc]
        rows.append((label, seconds, result))
    with tempfile.TemporaryDirectory() as folder:
        for label, content in [("task file: open brackets", b"[" * MB),
                               ("task file: 1 MB integer", b'{"id": ' + b"9" * MB + b"}"),
                               ("task file: invalid UTF-8", b"\xff" * MB)]:
            path = Path(folder) / "task.json"
            path.write_bytes(content)
            seconds, result = timed(lambda p=path: load_task(p), args.repeats)  # type: ignore[misc]
            rows.append((label, seconds, result))
    old = re.compile(r"^\s*(Thought|Reflection|Action_Summary|Action)\s*:", re.MULTILINE)
    new_text = "Action: click(start_box='(10,20)')" + "\n" * 20_000
    old_seconds, _ = timed(lambda: list(old.finditer(new_text)), 1)
    new_seconds, _ = timed(lambda: parse_response(new_text, "uitars", MAPPING), args.repeats)
    print(f"{'input (about 1 MB)':34s} {'median s':>9s} {'x baseline':>10s}  ends in")
    for label, seconds, result in rows:
        print(f"{label:34s} {seconds:9.4f} {seconds / baseline:10.2f}  {result}")
    print(f"\nUI-TARS, 20,000 newlines: section pattern before the fix {old_seconds:.3f} s, "
          f"whole parse now {new_seconds:.5f} s ({old_seconds / new_seconds:,.0f}x)")


if __name__ == "__main__":
    main()
