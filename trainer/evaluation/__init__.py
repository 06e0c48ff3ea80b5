"""Evaluation of policies on a task suite over seeds: the statistics (intervals, flip
rates, paired tests) and the report built from stored episodes."""

from trainer.evaluation.report import (
    Comparison,
    EvalEpisode,
    EvalReport,
    PolicyResult,
    TaskResult,
    build_report,
)

__all__ = ["Comparison", "EvalEpisode", "EvalReport", "PolicyResult", "TaskResult",
           "build_report"]
