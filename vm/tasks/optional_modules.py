"""Importing the modules that register metrics, getters and setup steps: a module whose
third-party libraries are missing (the `osworld` extra is not installed) is left out and
the reason kept, so that asking for one of its functions says what to install."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

INSTALL_HINT = "install the osworld extra: pip install -e '.[osworld]'"


def import_all(package: str, names: Iterable[str], missing: dict[str, str]) -> None:
    """Import package.<name> for each name not already known to be missing."""
    for name in names:
        if name in missing:
            continue
        try:
            importlib.import_module(f"{package}.{name}")
        except ImportError as exc:
            missing[name] = f"{exc} ({INSTALL_HINT})"
