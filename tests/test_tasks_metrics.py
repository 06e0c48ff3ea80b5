"""Each built-in metric on hand-made cases, and the registry users extend."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from vm.tasks import register_getter, register_metric
from vm.tasks.metrics.general import (
    check_direct_json_object,
    check_include_exclude,
    compare_text_file,
    exact_match,
    fuzzy_match,
    infeasible,
    is_in_list,
    literal_match,
    match_in_list,
)
from vm.tasks.registry import GETTERS, METRICS, EvalContext, UnknownFunction, getter, metric


def test_exact_match() -> None:
    assert exact_match("yes\n", {"expected": "yes\n"}) == 1.0
    assert exact_match("yes", {"expected": "yes\n"}) == 0.0
    assert exact_match(None, {"expected": "yes"}) == 0.0
    assert exact_match(["a"], {"expected": ["a"]}) == 1.0
    with pytest.raises(ValueError, match='"expected"'):
        exact_match("x", {"include": ["x"]})


def test_check_include_exclude() -> None:
    rules = {"include": ["spotify", "bin"], "exclude": ["not found"]}
    assert check_include_exclude("/usr/bin/spotify", rules) == 1.0
    assert check_include_exclude("/usr/bin/other", rules) == 0.0
    assert check_include_exclude("spotify bin not found", rules) == 0.0
    assert check_include_exclude(None, rules) == 0.0
    assert check_include_exclude(["a", "b"], {"include": ["a"], "exclude": ["c"]}) == 1.0
    assert check_include_exclude("anything", {}) == 1.0


def test_match_in_list_and_is_in_list() -> None:
    assert match_in_list("b", {"expected": ["a", "b"]}) == 1.0
    assert match_in_list("c", {"expected": ["a", "b"]}) == 0.0
    assert match_in_list(None, {"expected": ["a"]}) == 0.0
    assert is_in_list(["a", "b"], {"expected": "b"}) == 1.0
    assert is_in_list(["a", "b"], {"expected": "c"}) == 0.0
    assert is_in_list([{"text": "x", "done": True}], {"expected": {"done": True, "text": "x"}}
                      ) == 1.0
    assert is_in_list(None, {"expected": "a"}) == 0.0


def test_literal_match() -> None:
    assert literal_match("Paris", "Paris") == 1.0
    assert literal_match("paris", "Paris") == 0.0
    assert literal_match("paris", "Paris", ignore_case=True) == 1.0
    assert literal_match(3, "3") == 1.0  # compared as text
    assert literal_match(["a", "B"], ["a", "b"], type="list", ignore_case=True) == 1.0
    assert literal_match(["a", "b"], ["b", "a"], type="list") == 0.0
    assert literal_match(["a"], ["a", "b"], type="list") == 0.0
    assert literal_match("a", ["a"], type="list") == 0.0
    assert literal_match(None, "x") == 0.0
    with pytest.raises(ValueError, match="option type"):
        literal_match("a", "a", type="set")


def test_compare_text_file(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_text("Hello world\n")
    b.write_text("Hello world\n")
    c.write_text("hello  World")
    assert compare_text_file(str(a), str(b)) == 1.0
    assert compare_text_file(str(a), str(c)) == 0.0
    assert compare_text_file(str(a), str(c), ignore_blanks=True) == 0.0
    assert compare_text_file(str(a), str(c), ignore_blanks=True, ignore_case=True) == 1.0
    assert compare_text_file(None, str(b)) == 0.0
    assert compare_text_file(str(tmp_path / "missing.txt"), str(b)) == 0.0


def test_check_direct_json_object() -> None:
    rules = {"expected": {"name": "Ada", "age": 36}}
    assert check_direct_json_object({"name": "Ada", "age": 36, "x": 1}, rules) == 1.0
    assert check_direct_json_object('{"name": "Ada", "age": 36}', rules) == 1.0
    assert check_direct_json_object({"name": "Ada", "age": 37}, rules) == 0.0
    assert check_direct_json_object({"name": "Ada"}, rules) == 0.0
    assert check_direct_json_object("not json", rules) == 0.0
    assert check_direct_json_object(None, rules) == 0.0
    loose = {"expected": {"title": "Report"}, "expect_in_result": True}
    assert check_direct_json_object({"title": "Q3 Report final"}, loose) == 1.0
    assert check_direct_json_object({"title": "summary"}, loose) == 0.0


def test_fuzzy_match() -> None:
    assert fuzzy_match("kitten", {"expected": "kitten"}) == 1.0
    # Indel ratio: 2 * LCS / total length; LCS("kitten", "sitting") = 4 ("ittn")
    assert fuzzy_match("sitting", {"expected": "kitten"}) == pytest.approx(8 / 13)
    assert fuzzy_match("xyz", {"expected": "abc"}) == 0.0
    assert fuzzy_match(None, {"expected": "abc"}) == 0.0


def test_infeasible_metric_never_scores_by_itself() -> None:
    assert infeasible() == 0.0


def test_registry_finds_builtins_and_user_functions() -> None:
    assert metric("exact_match") is exact_match
    assert getter("vm_file") is getter("get_vm_file")  # OSWorld's get_<type> spelling

    @register_metric("ends_with_test_metric")
    def ends_with(result: Any, rules: Any, **options: Any) -> float:
        return float(str(result).endswith(rules["expected"]))

    @register_getter("constant_test_getter")
    def constant(context: Any, config: dict[str, Any]) -> Any:
        return config["value"]

    try:
        assert metric("ends_with_test_metric")("report.pdf", {"expected": ".pdf"}) == 1.0
        no_context = cast(EvalContext, None)  # this getter never looks at its context
        assert getter("constant_test_getter")(no_context, {"value": 3}) == 3
        with pytest.raises(ValueError, match="already registered"):
            register_metric("ends_with_test_metric")(lambda *a: 0.0)
        register_metric("ends_with_test_metric", replace=True)(lambda *a, **k: 0.5)
        assert metric("ends_with_test_metric")("x", {}) == 0.5
    finally:
        METRICS.pop("ends_with_test_metric", None)
        GETTERS.pop("constant_test_getter", None)
    with pytest.raises(UnknownFunction, match=r"unknown metric 'no_such_metric_here'.*register"):
        metric("no_such_metric_here")
    with pytest.raises(UnknownFunction, match="unknown getter type 'no_such_getter_here'"):
        getter("no_such_getter_here")
