"""The report of an evaluation: success per policy with intervals, success and flip rate
per task, paired comparisons of policies; as text, JSON and one self-contained HTML page.

An episode counts as a success when its score is at least 1 (OSWorld's success). Episodes
that ended in an error (the desktop or the model server failed, not the agent) are left
out of the rates and counted apart, so an outage does not read as a worse policy. Episodes
whose setup had a failed command no mark excuses (agents.trajectory.SETUP_FAILED_INFO)
are scored, and counted and marked apart: they did not start from the task's state.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from trainer.evaluation.plan import count_of, describe_seeds
from trainer.evaluation.stats import (
    bootstrap_mean_interval,
    flip_rate,
    mcnemar_exact,
    paired_bootstrap,
    wilson_interval,
)


@dataclass(frozen=True)
class EvalEpisode:
    """One finished episode of an evaluation."""

    policy: str  # the policy's label
    task_id: str
    seed: int
    status: str  # done, error (aborted episodes are not part of a report)
    score: float | None
    episode_id: str = ""
    setup_failed: int = 0  # its setup commands that failed unexcused

    @property
    def success(self) -> bool:
        return self.status == "done" and self.score is not None and self.score >= 1.0


@dataclass(frozen=True)
class PolicyResult:
    label: str
    episodes: int  # scored episodes (errors excluded)
    successes: int
    errors: int
    success_rate: float | None
    interval: tuple[float, float]  # Wilson, over episodes
    task_mean: float | None  # mean over tasks of each task's success rate
    task_mean_interval: tuple[float, float] | None  # bootstrap over tasks
    setup_failed: int = 0  # scored episodes whose setup had a failed command (unexcused)


@dataclass(frozen=True)
class TaskResult:
    task_id: str
    policy: str
    episodes: int
    successes: int
    success_rate: float | None
    flip_rate: float | None  # across seeds
    episode_ids: tuple[str, ...]
    setup_failed: tuple[str, ...] = ()  # its episodes whose setup had a failed command


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    pairs: int  # (task, seed) pairs both policies have a scored episode of
    both: int
    a_only: int
    b_only: int
    neither: int
    mcnemar_p: float
    difference: float | None  # mean over tasks of A's rate - B's rate (paired tasks)
    difference_interval: tuple[float, float] | None
    bootstrap_p: float | None


@dataclass
class EvalReport:
    name: str
    confidence: float
    seeds: list[int]  # the plan's, ascending
    tasks: list[str]
    policies: list[PolicyResult] = field(default_factory=list)
    per_task: list[TaskResult] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    # tasks that open or read external URLs (workbench.vetting.audit.web_urls) -> those
    # URLs, when the evaluation ran offline: they did not start from OSWorld's state
    offline_web: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def to_text(self) -> str:
        return report_text(self)

    def to_html(self) -> str:
        return report_html(self)


OFFLINE_WEB_NOTE = ("needs the web (opens or reads external URLs) and this evaluation ran "
                    "offline: the task did not start from OSWorld's state, so its scores "
                    "are not OSWorld's")
SETUP_FAILED_NOTE = ("episodes whose setup had a command that failed (not one that needs the "
                     "web or fails on OSWorld's image too): they did not start from the "
                     "task's state, so their scores may not be OSWorld's; the episode's note "
                     "names each command, and `workbench tasks smoke --tasks ID` reruns the "
                     "setup")


def build_report(name: str, episodes: Sequence[EvalEpisode], policies: Sequence[str],
                 tasks: Sequence[str], seeds: Sequence[int], confidence: float = 0.95,
                 resamples: int = 10_000, seed: int = 0,
                 info: dict[str, Any] | None = None) -> EvalReport:
    """The report of `episodes` (one per policy, task and seed at most; the newest wins)."""
    newest: dict[tuple[str, str, int], EvalEpisode] = {}
    for episode in episodes:
        newest[(episode.policy, episode.task_id, episode.seed)] = episode
    report = EvalReport(name, confidence, list(seeds), list(tasks), info=dict(info or {}))
    outcome: dict[tuple[str, str, int], bool] = {
        key: e.success for key, e in newest.items() if e.status != "error"}
    for label in policies:
        mine = [e for key, e in newest.items() if key[0] == label]
        scored = [e for e in mine if e.status != "error"]
        successes = sum(e.success for e in scored)
        task_rates: list[float] = []
        for task_id in tasks:
            runs = sorted((e for e in scored if e.task_id == task_id), key=lambda e: e.seed)
            wins = [e.success for e in runs]
            rate = sum(wins) / len(wins) if wins else None
            if rate is not None:
                task_rates.append(rate)
            report.per_task.append(TaskResult(
                task_id, label, len(wins), sum(wins), rate, flip_rate(wins),
                tuple(e.episode_id for e in runs),
                tuple(e.episode_id for e in runs if e.setup_failed)))
        report.policies.append(PolicyResult(
            label, len(scored), successes, len(mine) - len(scored),
            successes / len(scored) if scored else None,
            wilson_interval(successes, len(scored), confidence),
            sum(task_rates) / len(task_rates) if task_rates else None,
            bootstrap_mean_interval(task_rates, confidence, resamples, seed)
            if task_rates else None, sum(1 for e in scored if e.setup_failed)))
    for a, b in combinations(policies, 2):
        report.comparisons.append(_compare(a, b, tasks, outcome, confidence, resamples, seed))
    return report


def _compare(a: str, b: str, tasks: Sequence[str], outcome: dict[tuple[str, str, int], bool],
             confidence: float, resamples: int, seed: int) -> Comparison:
    counts = {"both": 0, "a_only": 0, "b_only": 0, "neither": 0}
    by_task: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for (label, task_id, run_seed), won in outcome.items():
        if label != a or (b, task_id, run_seed) not in outcome:
            continue
        other = outcome[(b, task_id, run_seed)]
        key = ("both" if other else "a_only") if won else ("b_only" if other else "neither")
        counts[key] += 1
        by_task[task_id].append((won, other))
    differences = [sum(x - y for x, y in pairs) / len(pairs)
                   for task_id in tasks if (pairs := by_task.get(task_id))]
    paired = (paired_bootstrap(differences, confidence, resamples, seed)
              if differences else None)
    return Comparison(
        a, b, sum(counts.values()), counts["both"], counts["a_only"], counts["b_only"],
        counts["neither"], mcnemar_exact(counts["a_only"], counts["b_only"]),
        paired.mean if paired else None, paired.interval if paired else None,
        paired.p_value if paired else None)


# ---------------------------------------------------------------------------------------
# Text


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _interval(interval: tuple[float, float] | None) -> str:
    return "-" if interval is None else f"[{interval[0]:.1%}, {interval[1]:.1%}]"


def _marks(report: EvalReport, task_id: str) -> str:
    """ [web] and [setup] after a task's id, when they apply."""
    setup = any(t.setup_failed for t in report.per_task if t.task_id == task_id)
    return (" [web]" if task_id in report.offline_web else "") + (" [setup]" if setup else "")


def report_text(report: EvalReport) -> str:
    level = f"{report.confidence:.0%}"
    lines = [f"Evaluation {report.name}: {count_of(len(report.tasks), 'task')} x "
             f"{describe_seeds(report.seeds)}",
             "", f"{'policy':24s} {'success':>8s} {level + ' (Wilson)':>18s} "
             f"{'task mean':>9s} {level + ' (bootstrap)':>20s} {'n':>5s} {'errors':>6s} "
             f"{'setup':>6s}"]
    for p in report.policies:
        lines.append(f"{p.label[:24]:24s} {_pct(p.success_rate):>8s} "
                     f"{_interval(p.interval):>18s} {_pct(p.task_mean):>9s} "
                     f"{_interval(p.task_mean_interval):>20s} {p.episodes:5d} {p.errors:6d} "
                     f"{p.setup_failed:6d}")
    lines += ["", "Per task: success rate (flip rate across seeds)"]
    labels = [p.label for p in report.policies]
    lines.append(f"{'task':36s} " + " ".join(f"{label[:16]:>16s}" for label in labels))
    cells = {(t.task_id, t.policy): t for t in report.per_task}
    for task_id in report.tasks:
        row = []
        for label in labels:
            t = cells[(task_id, label)]
            flips = "" if t.flip_rate is None else f" ({t.flip_rate:.2f})"
            row.append(f"{_pct(t.success_rate) + flips:>16s}")
        mark = _marks(report, task_id)
        lines.append(f"{task_id[:36 - len(mark)] + mark:36s} " + " ".join(row))
    if report.offline_web:
        lines.append(f"[web] {OFFLINE_WEB_NOTE}")
    if any(p.setup_failed for p in report.policies):
        lines.append(f"[setup] {SETUP_FAILED_NOTE}")
    if report.comparisons:
        lines += ["", "Paired comparisons (same tasks and seeds)"]
    for c in report.comparisons:
        difference = "-" if c.difference is None else f"{c.difference:+.1%}"
        lines.append(
            f"{c.a} vs {c.b}: {c.pairs} pairs; only {c.a} {c.a_only}, only {c.b} {c.b_only}, "
            f"both {c.both}, neither {c.neither}; McNemar p = {c.mcnemar_p:.4g}; "
            f"difference {difference} {_interval(c.difference_interval)}"
            + ("" if c.bootstrap_p is None else f", bootstrap p = {c.bootstrap_p:.4g}"))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# HTML


_STYLE = """
body { font: 14px system-ui, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin: 12px 0 24px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.cell { color: #000; min-width: 72px; }
small { color: #555; }
"""


def success_rgb(rate: float | None) -> tuple[int, int, int]:
    """A heatmap cell's colour: red at 0 to green at 1, light grey with no rate (the
    HTML report and the app's Evaluations screen share it)."""
    if rate is None:
        return 238, 238, 238
    return int(230 - 140 * rate), int(120 + 110 * rate), 120


def _colour(rate: float | None) -> str:
    return "rgb({},{},{})".format(*success_rgb(rate))


def report_html(report: EvalReport) -> str:
    """One self-contained page: the policy table, the policy x task heatmap (flip rates
    in small type, episode ids in each cell's tooltip) and the comparisons."""
    e = html.escape
    level = f"{report.confidence:.0%}"
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>Evaluation "
           f"{e(report.name)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>Evaluation {e(report.name)}</h1>",
           f"<p>{count_of(len(report.tasks), 'task')} &times; "
           f"{e(describe_seeds(report.seeds))}</p>",
           f"<table><tr><th>policy</th><th>success</th><th>{level} Wilson</th>"
           f"<th>task mean</th><th>{level} bootstrap</th><th>episodes</th><th>errors</th>"
           "<th>setup failed</th></tr>"]
    for p in report.policies:
        out.append(f"<tr><td>{e(p.label)}</td><td>{_pct(p.success_rate)}</td>"
                   f"<td>{_interval(p.interval)}</td><td>{_pct(p.task_mean)}</td>"
                   f"<td>{_interval(p.task_mean_interval)}</td><td>{p.episodes}</td>"
                   f"<td>{p.errors}</td><td>{p.setup_failed}</td></tr>")
    out.append("</table><h2>Success per task</h2><table><tr><th>task</th>"
               + "".join(f"<th>{e(p.label)}</th>" for p in report.policies) + "</tr>")
    cells = {(t.task_id, t.policy): t for t in report.per_task}
    for task_id in report.tasks:
        urls = report.offline_web.get(task_id)
        mark = "" if urls is None else (f" <small title='{e(' '.join(urls))}'>[web]</small>")
        failed = [i for t in report.per_task if t.task_id == task_id for i in t.setup_failed]
        if failed:
            mark += f" <small title='{e(' '.join(failed))}'>[setup]</small>"
        out.append(f"<tr><td>{e(task_id)}{mark}</td>")
        for p in report.policies:
            t = cells[(task_id, p.label)]
            flips = "" if t.flip_rate is None else f"<br><small>flip {t.flip_rate:.2f}</small>"
            title = e(" ".join(t.episode_ids))
            out.append(f"<td class='cell' style='background:{_colour(t.success_rate)}' "
                       f"title='{title}'>{_pct(t.success_rate)}{flips}</td>")
        out.append("</tr>")
    out.append("</table>")
    if report.offline_web:
        out.append(f"<p><small>[web] {e(OFFLINE_WEB_NOTE)}</small></p>")
    if any(p.setup_failed for p in report.policies):
        out.append(f"<p><small>[setup] {e(SETUP_FAILED_NOTE)}</small></p>")
    if report.comparisons:
        out.append("<h2>Paired comparisons</h2><table><tr><th>A vs B</th><th>pairs</th>"
                   "<th>only A</th><th>only B</th><th>McNemar p</th><th>difference</th>"
                   f"<th>{level} bootstrap</th><th>bootstrap p</th></tr>")
        for c in report.comparisons:
            difference = "-" if c.difference is None else f"{c.difference:+.1%}"
            bootstrap_p = "-" if c.bootstrap_p is None else f"{c.bootstrap_p:.4g}"
            out.append(f"<tr><td>{e(c.a)} vs {e(c.b)}</td><td>{c.pairs}</td>"
                       f"<td>{c.a_only}</td><td>{c.b_only}</td><td>{c.mcnemar_p:.4g}</td>"
                       f"<td>{difference}</td><td>{_interval(c.difference_interval)}</td>"
                       f"<td>{bootstrap_p}</td></tr>")
        out.append("</table>")
    out.append(f"<pre>{e(json.dumps(report.info, indent=2))}</pre></body></html>")
    return "\n".join(out)
