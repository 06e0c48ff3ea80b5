"""Runs by name: a run's display name changed in the store (the name its legends, tables
and Compare headers show; its id never changes), the filter that finds runs by name, id
or status, and long names shortened in the middle where only a few characters fit (both
ends of "demo: tiny model learns … #3" tell runs apart). Qt-free."""

from __future__ import annotations

from trainer.store import Store, StoreError
from workbench.services.training_runs import RunRow

MAX_NAME = 200  # characters of a display name


def clean_name(name: str) -> str:
    """A display name as stored: one line, spaces collapsed, at most MAX_NAME."""
    return " ".join(name.split())[:MAX_NAME]


def rename_run(store: Store, run_id: str, name: str) -> str:
    """Give run `run_id` the display name `name` ("": none, its id shows); the name
    stored. StoreError when the workspace has no such run."""
    name = clean_name(name)
    with store.database.write() as db:
        cursor = db.execute("UPDATE runs SET name = ? WHERE id = ?", (name, run_id))
    if cursor.rowcount == 0:
        raise StoreError(f"no run {run_id!r}")
    return name


def run_matches(run: RunRow, title: str, text: str) -> bool:
    """Whether the run answers a filter: every word of `text` (any case) in its title,
    name, id or status."""
    haystack = " ".join((title, run.name, run.id, run.status)).lower()
    return all(word in haystack for word in text.lower().split())


def elide_middle(text: str, limit: int) -> str:
    """`text` cut to `limit` characters in the middle ("demo: tiny…rns #3")."""
    if len(text) <= limit or limit < 3:
        return text
    head = limit // 2
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")
