"""Totals per domain of a task tree, shared by `workbench tasks audit` (one record per task
audited) and `workbench tasks smoke` (one record per task run)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar


class Totals(Protocol):
    """Counts that one task's record at a time adds to."""

    def add(self, record: Any) -> None: ...


T = TypeVar("T", bound=Totals)


def per_domain(records: Iterable[Any], new: Callable[[str], T]) -> dict[str, T]:
    """`new(domain)` for each record's `domain`, plus `new("all")`, each with the records
    added that belong to it; the domains in name order, "all" last."""
    out: dict[str, T] = {}
    for record in records:
        for key in (record.domain, "all"):
            if key not in out:
                out[key] = new(key)
            out[key].add(record)
    return dict(sorted(out.items(), key=lambda kv: (kv[0] == "all", kv[0])))


__all__ = ["Totals", "per_domain"]
