"""Evaluations kept in a workspace: their episodes in the store (tagged eval:<name>), the
report built from them, and the report files under evaluations/<name>/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainer.evaluation.plan import EvalPlan, evaluation_folder, load_plan, read_tags
from trainer.evaluation.report import EvalEpisode, EvalReport, build_report
from vm.atomic_write import write_atomic

REPORT_FILES = ("report.json", "report.txt", "report.html")


def stored_episodes(store: Any, name: str) -> list[EvalEpisode]:
    """The finished episodes (done or error) of evaluation `name`, oldest first."""
    from trainer.store.queries import EpisodeFilter

    selection = EpisodeFilter(tags=[f"eval:{name}"])
    out = []
    for summary in store.queries.summaries(store.queries.ids(selection, descending=False)):
        read = read_tags(summary.tags)
        if read is None or summary.status not in ("done", "error"):
            continue  # running or aborted: not a result
        out.append(EvalEpisode(read[0], summary.task_id, read[1], summary.status,
                               summary.score, summary.id, summary.setup_failed))
    return out


def report_of(store: Any, plan: EvalPlan, confidence: float = 0.95,
              resamples: int = 10_000) -> EvalReport:
    """The report of `plan` from what the store holds now."""
    return build_report(plan.name, stored_episodes(store, plan.name),
                        [p.label for p in plan.policies], plan.tasks, list(plan.seeds),
                        confidence, resamples,
                        info={"policies": {p.label: p.spec for p in plan.policies},
                              "max_steps": plan.max_steps, "settings": plan.settings})


def write_report(workspace: Path, report: EvalReport) -> Path:
    """report.json, report.txt and report.html under evaluations/<name>/; the folder."""
    folder = evaluation_folder(workspace, report.name)
    write_atomic(folder / "report.json", json.dumps(report.to_json(), indent=2) + "\n")
    write_atomic(folder / "report.txt", report.to_text())
    write_atomic(folder / "report.html", report.to_html())
    return folder


def evaluation_names(workspace: Path) -> list[str]:
    """The evaluations of the workspace (folders with a plan), newest first."""
    root = workspace / "evaluations"
    if not root.is_dir():
        return []
    plans = [p for p in root.glob("*/plan.json") if p.is_file()]
    return [p.parent.name for p in sorted(plans, key=lambda p: p.stat().st_mtime,
                                          reverse=True)]


def current_report(workspace: Path, store: Any, name: str) -> EvalReport | None:
    """The report of evaluation `name` rebuilt from the store; None without a plan."""
    plan = load_plan(workspace, name)
    return None if plan is None else report_of(store, plan)
