"""The values the episode filter offers: tasks, sources, runs, versions, tags and
reviewers in use.

The store answers filtered pages but not "which values exist"; these are DISTINCT
queries over indexed columns, cheap at 100k episodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainer.store import Store


@dataclass(frozen=True)
class FilterChoices:
    tasks: list[str]
    sources: list[str]
    statuses: list[str]
    runs: list[str]
    versions: list[int]
    tags: list[str]
    reviewers: list[str] = field(default_factory=list)  # names on annotations


def filter_choices(store: Store) -> FilterChoices:
    database = store.database

    def distinct(sql: str) -> list[object]:
        return [row["v"] for row in database.rows(sql)]

    with database.read():
        return FilterChoices(
            tasks=[str(v) for v in distinct(
                "SELECT DISTINCT task_id AS v FROM episodes ORDER BY task_id")],
            sources=[str(v) for v in distinct(
                "SELECT DISTINCT source AS v FROM episodes ORDER BY source")],
            statuses=[str(v) for v in distinct(
                "SELECT DISTINCT status AS v FROM episodes ORDER BY status")],
            runs=[str(v) for v in distinct(
                "SELECT DISTINCT run_id AS v FROM episodes WHERE run_id IS NOT NULL "
                "ORDER BY run_id")],
            versions=[int(str(v)) for v in distinct(
                "SELECT DISTINCT policy_version AS v FROM episodes "
                "WHERE policy_version IS NOT NULL ORDER BY policy_version")],
            tags=[str(v) for v in distinct(
                "SELECT DISTINCT tag AS v FROM episode_tags ORDER BY tag")],
            reviewers=[str(v) for v in distinct(
                "SELECT DISTINCT author AS v FROM annotations WHERE author != '' "
                "ORDER BY author")],
        )
