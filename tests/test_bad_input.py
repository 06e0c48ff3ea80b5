"""Bad input never freezes, escapes or crashes (issue 19): every probe of the parsers and
loaders ends in the result or the documented error type (ParseError, ConfigError,
TaskFileError), and property-based tests say so for any input."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.parsing import CoordinateMapping, ParsedResponse, parse_response
from agents.parsing.uitars import _SECTION, split_sections
from trainer.config import RunConfig, load_run_config, parse_run_config
from trainer.config_io import ConfigError
from vm.actions import (
    ACTION_TYPES,
    MAX_ACTIONS_PER_RESPONSE,
    ActionError,
    ParseError,
    TypeText,
    from_computer13,
    from_dict,
    parse_pyautogui,
)
from vm.tasks.model import Task, TaskFileError, load_task, parse_task

MAPPING = CoordinateMapping((1920, 1080), (1932, 1092))
FORMATS = ("uitars", "pyautogui", "computer_13")
QUICK = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow])


def parse_or_error(text: str, response_format: str) -> ParsedResponse | ParseError:
    try:
        return parse_response(text, response_format, MAPPING)  # type: ignore[arg-type]
    except ParseError as exc:
        return exc


# ---------------------------------------------------------------------------------------
# Probes of the issue, one by one


def test_a_section_header_never_runs_over_a_line_break() -> None:
    # `^\s*Action:` matched from every blank line's start across all the following ones:
    # quadratic (50,000 newlines took 12 s). A header now stays within its line.
    text = "Thought: look\n\n\n   \n\nAction: click(start_box='(1,2)')" + "\n" * 1000
    for match in _SECTION.finditer(text):
        assert "\n" not in match.group(0)
    assert split_sections(text) == ("look", "click(start_box='(1,2)')")
    assert split_sections("\n" * 50_000 + "Action: wait()") == ("", "wait()")


@pytest.mark.parametrize("code, says", [
    ("pyautogui.write('\ud800')", "not valid Python"),  # a lone surrogate in the source
    ("pyautogui.write('\\ud800')", "not a character"),  # ... or as an escape
    ("pyautogui.click(" + "1+" * 10_000 + "1, 2)", "nested too deeply"),
    ("pyautogui.click(" + "-" * 100_000 + "1, 2)", "nested too deeply"),
    ("pyautogui" + ".b" * 50_000 + "(1)", "nested too deeply"),
    ("pyautogui.click(" + "(" * 5000 + "1" + ")" * 5000 + ", 2)", "not valid Python"),
    (f"pyautogui.click({'9' * 5000}, 5)", "not valid Python"),
    ("pyautogui.scroll(1e999)", "finite"),
    ("pyautogui.scroll(1000000000)", "within -1000..1000"),
    ("pyautogui.click(1, 2)\n" * (MAX_ACTIONS_PER_RESPONSE + 1), "more than the 100"),
    ("pyautogui.click(1, 2)\n" * 50_000, "characters long, more than"),
])
def test_pyautogui_code_that_is_not_allowed_is_a_parse_error(code: str, says: str) -> None:
    with pytest.raises(ParseError, match=says):
        parse_pyautogui(code)


def test_the_action_cap_is_inclusive() -> None:
    assert len(parse_pyautogui("pyautogui.click(1, 2)\n" * MAX_ACTIONS_PER_RESPONSE)) == 100


@pytest.mark.parametrize("text, says", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
    ("[" * 1_000_000, "nested too deeply"),
    ('{"action_type":"CLICK","parameters":{"x":' + "9" * 5000 + ',"y":1}}', "4300 digits"),
    ('{"action_type":["CLICK"],"parameters":{"x":1,"y":1}}', "action_type: expected a string"),
    ('{"action_type":{"CLICK":1}}', "action_type: expected a string, got dict"),
    ('{"parameters":{}}', "action_type: expected a string, got nothing"),
    ('{"action_type":"CLICK","parameters":{"x":NaN,"y":1}}', "must be finite"),
    ('{"action_type":"TYPING","parameters":{"text":"\\ud800"}}', "not a character"),
    ('{"action_type":"SCROLL","parameters":{"dy":1e308}}', "within -1000..1000"),
    (json.dumps(["WAIT"] * (MAX_ACTIONS_PER_RESPONSE + 1)), "more than the 100"),
])
def test_computer13_json_that_is_not_an_action_is_a_parse_error(text: str, says: str) -> None:
    with pytest.raises(ParseError, match=says):
        parse_response(text, "computer_13", MAPPING)


@pytest.mark.parametrize("text, says", [
    ("Action: type(content='\ud800')", "not a character"),
    ("Action: " + "wait()\n" * (MAX_ACTIONS_PER_RESPONSE + 1), "more than the 100"),
])
def test_uitars_text_that_is_not_allowed_is_a_parse_error(text: str, says: str) -> None:
    with pytest.raises(ParseError, match=says):
        parse_response(text, "uitars", MAPPING)


def test_far_off_model_coordinates_land_on_the_screen_edge() -> None:
    parsed = parse_response(f"Action: click(start_box='({'9' * 5000},5)')", "uitars", MAPPING)
    assert parsed.actions[0].x == 1919  # type: ignore[union-attr]


def test_a_lone_surrogate_cannot_be_typed_from_any_entry() -> None:
    with pytest.raises(ActionError, match="not a character"):
        TypeText("ok \udfff")
    with pytest.raises(ActionError, match="not a character"):
        from_dict({"kind": "type", "text": "\ud800"})  # /workbench/action's shape
    with pytest.raises(ActionError, match="not a character"):
        from_computer13({"action_type": "TYPING", "parameters": {"text": "\ud800"}})
    assert TypeText("héllo ✓").text == "héllo ✓"


# ---------------------------------------------------------------------------------------
# Configuration and task files


def _write(tmp_path: Path, name: str, content: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize("content, says", [
    (b"\xff[run]\n", "not UTF-8 text"),
    ("a = " + "[" * 100_000, "nested too deeply"),
    ("[run]\nseed = " + "9" * 5000 + "\n", "4300 digits"),
    ("[rollout]\ntemperature = nan\n", "rollout.temperature: expected a finite number"),
    ("[training]\nlearning_rate = inf\n", "training.learning_rate: expected a finite"),
    ("[training]\nlearning_rate = nan\n", "training.learning_rate: expected a finite"),
    ("[rollout]\ntemperature = -1.0\n", "rollout.temperature: expected a value at least 0"),
    ("[rollout]\nmax_new_tokens = -5\n", "rollout.max_new_tokens: expected a value at least 1"),
    ("[rollout]\nmax_steps = 0\n", "rollout.max_steps: expected a value at least 1"),
    ("[rollout]\ntop_p = 1.5\n", "rollout.top_p: expected a value at most 1"),
    ("[environments]\ncall_timeout = -1.0\n", "call_timeout: expected a value more than 0"),
    ("[environments]\ncall_timeout = 1e300\n", "call_timeout: expected a value at most"),
    ("[environments.qemu]\nguest_port = 70000\n", "guest_port: expected a value at most 65535"),
    ("[environments.qemu]\nforward_ports = [9222, 0]\n", "forward_ports: expected a value at "
                                                        "least 1"),
    ("[training]\nweight_decay = -0.1\n", "weight_decay: expected a value at least 0"),
])
def test_a_bad_configuration_file_is_a_config_error_naming_file_and_field(
        tmp_path: Path, content: bytes | str, says: str) -> None:
    path = _write(tmp_path, "run.toml", content)
    with pytest.raises(ConfigError, match=says) as caught:
        load_run_config(path)
    assert str(caught.value).startswith(str(path))


def test_limits_accept_their_edges() -> None:
    config = parse_run_config("[rollout]\ntemperature = 0.0\ntop_p = 1.0\nmax_steps = 1\n"
                              "[environments.qemu]\nguest_port = 65535\n")
    assert (config.rollout.temperature, config.rollout.top_p) == (0.0, 1.0)
    assert config.environments.qemu.guest_port == 65535


@pytest.mark.parametrize("content, says", [
    (b"\xff\xfe{}", "not UTF-8 text"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"id": ' + "9" * 5000 + "}", "4300 digits"),
])
def test_a_bad_task_file_is_a_task_file_error_naming_the_file(
        tmp_path: Path, content: bytes | str, says: str) -> None:
    path = _write(tmp_path, "task.json", content)
    with pytest.raises(TaskFileError, match=says) as caught:
        load_task(path)
    assert str(path) in str(caught.value)


def test_the_command_line_names_the_bad_file(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli import main

    path = _write(tmp_path, "run.toml", b"[run]\nname = '\xff'\n")
    assert main(["--workspace", str(tmp_path / "ws"), "train", str(path)]) != 0
    assert f"{path}: not UTF-8 text" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# Any input: the result or the documented error


# Text built from the pieces the parsers look for, so the search reaches deep paths.
_PIECES = st.sampled_from([
    "Thought:", "Action:", "Reflection:", "click(", "type(", "scroll(", "hotkey(", "drag(",
    "finished(", "start_box=", "content=", "direction=", "key=", "'", '"', "(", ")", "[",
    "]", "{", "}", ",", "=", " ", "\n", "\\", "<point>", "</point>", "<|box_start|>",
    "1", "-3", "9" * 40, "1e999", "nan", "inf", "0.5", "\ud800", "\x00", "é", "```",
    "```python\n", "pyautogui.", "write", "press", "moveTo", "import pyautogui",
    "time.sleep(", '"action_type"', '"CLICK"', '"TYPING"', '"parameters"', ":", "WAIT",
    "DONE", "FAIL", "true", "null",
])
_RESPONSES = st.one_of(st.text(max_size=300),
                       st.lists(_PIECES, max_size=60).map("".join))


@QUICK
@given(_RESPONSES, st.sampled_from(FORMATS))
def test_any_response_parses_or_is_a_parse_error(text: str, response_format: str) -> None:
    result = parse_or_error(text, response_format)
    if isinstance(result, ParsedResponse):
        assert len(result.actions) <= MAX_ACTIONS_PER_RESPONSE


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["action_type", "parameters", "x", "y", "text", "keys",
                                       "button", "dx", "dy", "num_clicks", "key", "id",
                                       "instruction", "config", "evaluator", "func",
                                       "result", "expected", "type", "rules", "options",
                                       "snapshot", "related_apps", "source", "conj"])
                      | st.text(max_size=8), inner, max_size=5),
    max_leaves=25)


@pytest.mark.parametrize("read", [from_computer13, from_dict],
                         ids=["computer_13", "workbench-action"])
@QUICK
@given(value=_JSON)
def test_any_action_value_is_an_action_or_an_action_error(read: Any, value: object) -> None:
    try:
        assert isinstance(read(value), ACTION_TYPES)
    except ActionError:
        pass


@QUICK
@given(st.fixed_dictionaries({"id": st.text(alphabet=string.ascii_letters, min_size=1),
                              "instruction": st.text(max_size=10)},
                             optional={"config": _JSON, "evaluator": _JSON,
                                       "snapshot": _JSON, "related_apps": _JSON,
                                       "source": _JSON, "proxy": _JSON}) | _JSON)
def test_any_task_value_is_a_task_or_a_task_file_error(value: object) -> None:
    try:
        task = parse_task(value)
    except TaskFileError:
        return
    assert isinstance(task, Task)


_TOML_PIECES = st.sampled_from([
    "[run]\n", "[rollout]\n", "[training]\n", "[environments.qemu]\n", "[grpo]\n",
    "[curation]\n", "seed = ", "temperature = ", "max_steps = ", "learning_rate = ",
    "guest_port = ", "forward_ports = ", "epsilon = ", "name = ", "nan", "inf", "-inf",
    "-1", "0", "1e300", "70000", "0.5", '"x"', "[1, 2]", "true", "\n", "[", "]", "{", "}",
    "=", "'", "\ud800", "9" * 30, "none", '"none"',
])


@QUICK
@given(st.one_of(st.text(max_size=200), st.lists(_TOML_PIECES, max_size=40).map("".join)))
def test_any_configuration_text_is_a_config_or_a_config_error(text: str) -> None:
    try:
        config = parse_run_config(text, "fuzz.toml")
    except ConfigError:
        return
    assert isinstance(config, RunConfig)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_any_task_file_bytes_are_a_task_or_a_task_file_error(tmp_path: Path,
                                                             content: bytes) -> None:
    path = _write(tmp_path, "fuzz.json", content)
    try:
        load_task(path)
    except TaskFileError:
        pass
