"""Who may call the guest server (the token) and which files its file routes may touch."""

from __future__ import annotations

import hmac
import os
from collections.abc import Sequence
from pathlib import Path

from vm.guest.validation import InvalidInput, check_path_text

TOKEN_HEADER = "X-Workbench-Token"


class OutsideRoots(PermissionError):
    """A path that resolves outside every configured root folder."""


def request_token(authorization: str | None, token_header: str | None) -> str | None:
    """The token a request carries: `Authorization: Bearer <token>`, else the value of the
    X-Workbench-Token header."""
    scheme, _, credentials = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return token_header or None


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so timing does not reveal how much of a guess was right.

    HTTP headers arrive as latin-1 text and configured tokens are ASCII (GuestConfig), so
    a header with any other character is simply wrong."""
    if given is None or not given.isascii():
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def resolve_in_roots(path: str, roots: Sequence[Path], field: str = "path") -> Path:
    """`path` with ~, $VARS, `..` and symlinks resolved; OutsideRoots unless it lies within
    one of `roots`. A relative path is taken relative to the first root. InvalidInput for
    a path no file can have (NUL, too long, a symlink loop)."""
    if not isinstance(path, str) or not path:
        raise InvalidInput(f"{field}: expected a non-empty path string")
    check_path_text(path, field)
    expanded = Path(os.path.expandvars(os.path.expanduser(path)))
    if not expanded.is_absolute():
        expanded = roots[0] / expanded
    check_path_text(str(expanded), field)
    try:
        resolved = expanded.resolve(strict=False)
    except RuntimeError as exc:  # pathlib's report of a symlink loop
        raise InvalidInput(f"{field}: {path!r} runs into a symlink loop") from exc
    for root in roots:
        if resolved.is_relative_to(root.resolve()):
            return resolved
    raise OutsideRoots(f"{field}: {path!r} is outside the folders this server may touch "
                       f"({', '.join(str(r) for r in roots)})")
