"""The statistics and report of `workbench eval`, against values worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.evaluation import EvalEpisode, build_report
from trainer.evaluation.plan import (
    EvalPlan,
    PlanError,
    PolicySpec,
    describe_seeds,
    load_plan,
    parse_policy,
    parse_seeds,
    read_seeds,
    read_tags,
    save_plan,
    seeds_argument,
)
from trainer.evaluation.stats import (
    bootstrap_mean_interval,
    flip_rate,
    mcnemar_exact,
    paired_bootstrap,
    wilson_interval,
)


def test_wilson_interval_by_hand() -> None:
    # p = 0.8, z = 1.95996, z^2 = 3.84146: centre (0.8 + 0.19207) / 1.38415 = 0.71677,
    # half-width 1.95996 / 1.38415 * sqrt(0.016 + 0.0096037) = 0.22657
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.49016, abs=1e-4) and high == pytest.approx(0.94334, abs=1e-4)
    # 0/10: centre = half-width = 0.19207 / 1.38415 = 0.13876 -> [0, 0.27753]
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    # a 90% interval is narrower than the 95% one
    assert wilson_interval(8, 10, 0.90)[0] > low
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 2, 1.5)


def test_flip_rate_counts_disagreeing_pairs_of_seeds() -> None:
    assert flip_rate([True, False, True]) == pytest.approx(2 / 3)  # 2 of 3 pairs differ
    assert flip_rate([True, False]) == 1.0
    assert flip_rate([True] * 4) == 0.0 and flip_rate([False] * 4) == 0.0
    assert flip_rate([True, True, False, False]) == pytest.approx(4 / 6)
    assert flip_rate([True]) is None and flip_rate([]) is None


def test_mcnemar_exact_by_hand() -> None:
    assert mcnemar_exact(1, 6) == pytest.approx(2 * (1 + 7) / 128)  # 0.125
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    assert mcnemar_exact(3, 3) == 1.0  # 2 * 42/64 is capped at 1
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)


def test_bootstrap_intervals() -> None:
    # two tasks at 0 and 1: resampled means are 0, 0.5, 1 with chances 1/4, 1/2, 1/4, so
    # the 2.5% and 97.5% quantiles are 0 and 1
    assert bootstrap_mean_interval([0.0, 1.0]) == (0.0, 1.0)
    assert bootstrap_mean_interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    low, high = bootstrap_mean_interval([0.0] * 10 + [1.0] * 10)
    assert low < 0.5 < high and low > 0.25 and high < 0.75
    assert bootstrap_mean_interval([0.2, 0.9, 0.4], seed=3) == \
        bootstrap_mean_interval([0.2, 0.9, 0.4], seed=3)  # seeded: the same interval
    with pytest.raises(ValueError, match="no values"):
        bootstrap_mean_interval([])


def test_paired_bootstrap() -> None:
    always = paired_bootstrap([1.0, 1.0, 1.0])
    assert (always.mean, always.interval, always.p_value) == (1.0, (1.0, 1.0), 0.0)
    even = paired_bootstrap([1.0, -1.0])
    assert even.mean == 0.0 and even.p_value == 1.0
    # one task of two better: resamples miss it with chance 1/4, so p is about 2 * 1/4
    one = paired_bootstrap([1.0, 0.0])
    assert one.mean == 0.5 and one.p_value == pytest.approx(0.5, abs=0.03)


def _episodes() -> list[EvalEpisode]:
    def e(policy: str, task: str, seed: int, won: bool | None) -> EvalEpisode:
        status = "error" if won is None else "done"
        return EvalEpisode(policy, task, seed, status, None if won is None else float(won),
                           f"{policy}-{task}-{seed}")

    return [
        e("A", "t2", 0, False),  # older: replaced by the newer episode of the same seed
        e("A", "t1", 0, True), e("A", "t1", 1, True), e("A", "t1", 2, False),
        e("A", "t2", 0, True), e("A", "t2", 1, True), e("A", "t2", 2, True),
        e("B", "t1", 0, False), e("B", "t1", 1, False), e("B", "t1", 2, None),
        e("B", "t2", 0, True), e("B", "t2", 1, False), e("B", "t2", 2, True),
    ]


def test_report_by_hand() -> None:
    report = build_report("hand", _episodes(), ["A", "B"], ["t1", "t2"], seeds=[0, 1, 2])
    a, b = report.policies
    assert (a.episodes, a.successes, a.errors) == (6, 5, 0)
    assert a.success_rate == pytest.approx(5 / 6) and a.interval == wilson_interval(5, 6)
    assert a.task_mean == pytest.approx((2 / 3 + 1) / 2)
    assert (b.episodes, b.successes, b.errors) == (5, 2, 1)  # the error is not a failure
    assert b.task_mean == pytest.approx((0 + 2 / 3) / 2)
    flips = {(t.policy, t.task_id): t.flip_rate for t in report.per_task}
    assert flips == pytest.approx({("A", "t1"): 2 / 3, ("A", "t2"): 0.0,
                                   ("B", "t1"): 0.0, ("B", "t2"): 2 / 3})
    [c] = report.comparisons
    # pairs where both have a score: t1 seeds 0, 1 (only A), t2 seeds 0, 2 (both), 1 (A)
    assert (c.pairs, c.a_only, c.b_only, c.both, c.neither) == (5, 3, 0, 2, 0)
    assert c.mcnemar_p == pytest.approx(2 / 8)
    assert c.difference == pytest.approx((1.0 + 1 / 3) / 2)
    text = report.to_text()
    assert "A vs B: 5 pairs" in text and "McNemar p = 0.25" in text
    page = report.to_html()
    assert page.startswith("<!doctype html>") and "A-t1-0" in page
    assert json.loads(json.dumps(report.to_json()))["policies"][1]["errors"] == 1


def test_policy_specs() -> None:
    assert parse_policy("oracle") == PolicySpec("oracle", "oracle")
    assert parse_policy("floor=random") == PolicySpec("floor", "random")
    assert parse_policy("model:/models/tiny-vl") == PolicySpec("tiny-vl", "model",
                                                               "/models/tiny-vl")
    assert parse_policy("checkpoint:run-1@20") == PolicySpec("run-1@20", "checkpoint",
                                                             "run-1", 20)
    assert parse_policy("checkpoint:run-1").version is None
    served = parse_policy("tars=openai:ui-tars@http://127.0.0.1:8000/v1")
    assert (served.label, served.target, served.url) == ("tars", "ui-tars",
                                                         "http://127.0.0.1:8000/v1")
    assert parse_policy(served.spec) == served
    for bad, says in [("magic", "kind must be one of"), ("oracle:x", "takes no target"),
                      ("model:", "needs a target"), ("checkpoint:r@x", "whole number"),
                      ("openai:m@ftp://x", "MODEL@http"), ("a b=oracle", "label")]:
        with pytest.raises(PlanError, match=says):
            parse_policy(bad)


def test_plans_grow_and_keep_their_labels() -> None:
    plan = EvalPlan("e1", [parse_policy("oracle")], ["t1"], ["t1"], seeds=(0, 1))
    grown = plan.merged(EvalPlan("e1", [parse_policy("random")], ["t2"], ["t2"],
                                 seeds=(0, 1, 2)))
    assert [p.label for p in grown.policies] == ["oracle", "random"]
    assert grown.tasks == ["t1", "t2"] and grown.seeds == (0, 1, 2)
    # listed seeds: the union, in order
    assert grown.merged(EvalPlan("e1", [parse_policy("oracle")], [], [],
                                     seeds=(7, 4, 0))).seeds == (0, 1, 2, 4, 7)
    with pytest.raises(PlanError, match="already"):
        plan.merged(EvalPlan("e1", [parse_policy("oracle=random")], [], [], seeds=(0,)))
    with pytest.raises(PlanError, match="labelled"):
        EvalPlan("e1", [parse_policy("oracle"), parse_policy("oracle")], [], [])
    with pytest.raises(PlanError, match="names a folder"):
        EvalPlan("../up", [parse_policy("oracle")], [], [])
    assert EvalPlan.from_json(json.loads(json.dumps(grown.to_json())), "x") == grown
    assert read_tags(["eval:e1", "policy:oracle", "seed:2"]) == ("oracle", 2)
    assert read_tags(["eval:e1", "seed:x"]) is None


def test_seeds_are_a_count_or_a_list_and_a_bad_entry_is_named() -> None:
    assert parse_seeds("3") == (0, 1, 2) and parse_seeds(" 1 ") == (0,)  # a count
    assert parse_seeds("0, 4 7") == parse_seeds("0,4,7") == parse_seeds("7 0,,4") == (0, 4, 7)
    assert parse_seeds("5,") == (5,)  # one seed, not a count
    for bad, says in [("x", "seed 'x': not a whole number"), ("0, -1", "seed '-1': a seed "
                      "is 0 or more"), ("4, 2 4", "seed '4': given twice"), ("1,2.5",
                      "seed '2.5': not a whole number"), ("0", "count of seeds is at least"),
                      ("", "no seeds: give a count"), (" , ", "no seeds")]:
        with pytest.raises(PlanError, match=says):
            parse_seeds(bad)
    # every bad entry is named, the good ones are not
    seeds, problems = read_seeds("1, a, 3, b", most=100)
    assert seeds == () and problems == ["seed 'a': not a whole number",
                                        "seed 'b': not a whole number"]
    assert read_seeds("101", most=100)[1] == ["seeds '101': a count of seeds is 1 to 100"]
    many = ",".join(str(k) for k in range(101))
    assert read_seeds(many, most=100)[1] == ["101 seeds: at most 100"]
    assert len(parse_seeds(many)) == 101  # no cap unless asked (the command line)
    # written back as --seeds reads them; said in a few words
    for seeds in [(0, 1, 2), (0, 4, 7), (5,), (0,)]:
        assert parse_seeds(seeds_argument(seeds)) == seeds
    assert seeds_argument((0, 1, 2)) == "3" and seeds_argument((5,)) == "5,"
    assert describe_seeds((0, 1, 2)) == "3 seeds"
    assert describe_seeds((0, 4, 7)) == "3 seeds (0, 4, 7)"
    assert describe_seeds(tuple(range(1, 11)), shown=3) == "10 seeds (1, 2, 3, …)"
    assert describe_seeds((0,)) == "1 seed" and describe_seeds((5,)) == "1 seed (5)"


def test_a_plan_keeps_its_seed_list_and_an_old_count_still_loads(tmp_path: Path) -> None:
    plan = EvalPlan("listed", [parse_policy("oracle")], ["t1"], ["t1"], seeds=(7, 0, 4))
    assert plan.seeds == (0, 4, 7)
    path = save_plan(tmp_path, plan)
    assert json.loads(path.read_text())["seeds"] == [0, 4, 7]
    assert load_plan(tmp_path, "listed") == plan
    # plan.json as written before seeds were listed: a count
    old = {**json.loads(path.read_text()), "seeds": 2}
    path.write_text(json.dumps(old))
    loaded = load_plan(tmp_path, "listed")
    assert loaded is not None and loaded.seeds == (0, 1)
    for bad in [0, "3", [1, "x"], [-1], True]:
        path.write_text(json.dumps({**old, "seeds": bad}))
        with pytest.raises(PlanError, match="not an evaluation plan"):
            load_plan(tmp_path, "listed")
    # a report says which seeds
    report = build_report("listed", [], ["oracle"], ["t1"], seeds=[0, 4, 7])
    assert "1 task x 3 seeds (0, 4, 7)" in report.to_text()
    assert report.to_json()["seeds"] == [0, 4, 7]
