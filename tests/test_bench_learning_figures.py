"""The stability figures `bench/learning.py --stability` reports, on hand-made curves, and
its --summarize table over per-run result files."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "learning.py"


@pytest.fixture(scope="module")
def learning() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_learning", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_learning"] = module
    spec.loader.exec_module(module)
    return module


# a lucky early update at 0.94, a fall to 0.31 while still learning, the 10-update median
# at 0.80 first at update 12 (1-based), then one dip to 0.78
RATES = [0.2, 0.3, 0.4, 0.5, 0.6, 0.94, 0.31, 0.8, 0.85, 0.9,
         0.9, 0.95, 0.9, 0.85, 0.9, 0.9, 0.78, 1.0, 0.97]


def test_the_two_readings_of_the_lowest_after_080(learning: ModuleType) -> None:
    assert learning.updates_to_target(RATES) == 12
    assert learning.lowest_after_target(RATES) == 0.31  # after update 6's 0.94
    assert learning.lowest_after_median(RATES) == 0.78  # after update 12
    never = [0.1] * 12
    assert learning.updates_to_target(never) is None
    assert learning.lowest_after_median(never) is None
    assert learning.lowest_after_median(RATES[:12]) is None  # reached at the last update


def test_summarize_gathers_the_runs_of_several_calls(learning: ModuleType, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    for arm, seed, rates in (("after", 2, RATES), ("before", 1, [0.1] * 12),
                             ("after", 1, [0.9] * 12)):
        curve = {"success_rate": rates, "update_seconds": [2.0] * len(rates)}
        result = {"proof": "multi-turn-step", "arm": arm, "seed": seed, "status": "done",
                  **curve, **learning.stability_figures(curve)}
        (tmp_path / f"multi-turn-step-{arm}-seed-{seed}.json").write_text(json.dumps(result))
    (tmp_path / "unrelated.json").write_text("{}")
    runs = learning.summarize(tmp_path)
    assert [(r["arm"], r["seed"]) for r in runs] == [("before", 1), ("after", 1), ("after", 2)]
    table = capsys.readouterr().out.splitlines()
    assert table[2] == ("| multi-turn-step | before | 1 | 0 of 1 | - | - | - | 2.0 |")
    assert table[3] == ("| multi-turn-step | after | 2 | 2 of 2 | median 11; 10, 12 | "
                        "min 0.31; 0.90, 0.31 | min 0.78; 0.90, 0.78 | 2.0 |")
    with pytest.raises(SystemExit, match="no stability run results"):
        learning.summarize(tmp_path / "nothing")
