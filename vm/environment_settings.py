"""Settings read from environment variables, with errors that name the variable."""

from __future__ import annotations

import os


def positive_number(name: str, default: float) -> float:
    """$name as a positive number, or `default` when it is unset or empty; ValueError
    naming the variable when it is anything else."""
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"${name}: expected a number, got {text!r}") from None
    if not value > 0:
        raise ValueError(f"${name}: expected a positive number, got {text!r}")
    return value
