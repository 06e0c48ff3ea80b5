"""Request bodies for the guest server: chunked bodies held to the same size limit as
Content-Length ones, and JSON objects parsed without ever raising anything but a 400."""

from __future__ import annotations

import json
import sys
import tempfile
from typing import IO, Any

from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from vm.guest.validation import InvalidInput

MAX_JSON_DEPTH = 64  # arrays and objects inside each other; OSWorld's payloads use < 6
SPOOL_BYTES = 1024 * 1024  # a chunked body larger than this waits in a temp file
READ_CHUNK = 64 * 1024


def spool_chunked_body(environ: dict[str, Any], limit: int) -> None:
    """Read a chunked body (no Content-Length) to its end now, and put it back as
    environ["wsgi.input"]: RequestEntityTooLarge if it holds more than `limit` bytes.

    Werkzeug would instead cut such a body at the limit without a word (a request with a
    truncated JSON or form would then be answered 400, or worse, acted on); read here, it
    gets the same 413 as an oversized Content-Length body."""
    raw: IO[bytes] = environ["wsgi.input"]
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 (environ owns it)
    size = 0
    try:
        while True:
            chunk = raw.read(min(READ_CHUNK, limit + 1 - size))
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise RequestEntityTooLarge()
            spool.write(chunk)
    except (OSError, ValueError) as exc:  # a bad chunk header, a client gone or too slow
        spool.close()
        raise ClientDisconnected(f"request body: the chunked body could not be read "
                                 f"({exc})") from exc
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    environ["wsgi.input"] = spool


def parse_json_object(data: bytes, field: str = "request body") -> dict[str, Any]:
    """The JSON object in `data`; InvalidInput (naming `field`) for anything else: not
    JSON, not an object, nested deeper than MAX_JSON_DEPTH, or an integer longer than
    Python converts (sys.get_int_max_str_digits())."""
    try:
        value = json.loads(data)
    except RecursionError as exc:
        raise InvalidInput(f"{field}: JSON nested too deeply (at most {MAX_JSON_DEPTH} "
                           "levels)") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{field}: not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{field}: expected a JSON object (Content-Type: "
                           f"application/json): {exc}") from exc
    except ValueError as exc:  # json raises a plain ValueError for an over-long integer
        raise InvalidInput(f"{field}: a JSON number has more than "
                           f"{sys.get_int_max_str_digits()} digits") from exc
    if not isinstance(value, dict):
        raise InvalidInput(f"{field}: expected a JSON object, got {type(value).__name__}")
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise InvalidInput(f"{field}: JSON nested too deeply (at most {MAX_JSON_DEPTH} "
                           "levels)")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels in `value` (no recursion:
    the check must not fail the way it guards against)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list)))
    return False
