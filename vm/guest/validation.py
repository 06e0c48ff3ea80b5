"""Checks on request text that the guest server hands to the operating system (paths,
argv items, scripts), so that bad input is a 400 naming the field, never a crash."""

from __future__ import annotations

import os

NAME_MAX_BYTES = 255  # Linux: the longest file name (one path component)
PATH_MAX_BYTES = 4096  # Linux: the longest path


class InvalidInput(ValueError):
    """A request field that is missing or wrong; the message names the field."""


def os_text(value: str, field: str) -> bytes:
    """`value` as the bytes the operating system gets; InvalidInput when it holds a NUL
    (C strings end there) or a lone surrogate (JSON's "\\ud800" has no encoding)."""
    if "\0" in value:
        raise InvalidInput(f"{field}: must not contain NUL (\\x00) characters")
    try:
        return os.fsencode(value)
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{field}: not encodable as a file-system string "
                           f"({exc.reason} at position {exc.start})") from exc


def check_path_text(path: str, field: str) -> None:
    """InvalidInput unless `path` could name a file: no NUL, encodable, and within the
    kernel's limits on the length of a path and of each of its names."""
    encoded = os_text(path, field)
    if len(encoded) >= PATH_MAX_BYTES:
        raise InvalidInput(f"{field}: path longer than {PATH_MAX_BYTES - 1} bytes")
    if any(len(name) > NAME_MAX_BYTES for name in encoded.split(b"/")):
        raise InvalidInput(f"{field}: a file name in the path is longer than "
                           f"{NAME_MAX_BYTES} bytes")


def source_text(value: str, field: str) -> str:
    """`value` unchanged if it can be saved as a UTF-8 script; InvalidInput if it holds a
    NUL (neither bash nor Python runs such a file) or a lone surrogate."""
    if "\0" in value:
        raise InvalidInput(f"{field}: must not contain NUL (\\x00) characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{field}: not valid Unicode text ({exc.reason} at position "
                           f"{exc.start})") from exc
    return value
