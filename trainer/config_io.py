"""Dataclass trees to and from TOML: typed loading with errors that name the file, the
section and the field, and writing with every knob's one-line help as a comment.

Each field of a configuration dataclass carries `metadata={"help": "..."}`; `to_toml`
writes it above the field, so the file the app writes explains itself. TOML has no null:
an optional field that is unset is written (and read) as the string `"none"`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration file or value that does not fit; the message names where."""


def limits(*, ge: float | None = None, gt: float | None = None, le: float | None = None,
           lt: float | None = None) -> dict[str, float]:
    """Field metadata bounding a number (each element of a tuple of numbers): `ge` at
    least, `gt` more than, `le` at most, `lt` less than. `from_dict` enforces them."""
    given = {"ge": ge, "gt": gt, "le": le, "lt": lt}
    return {name: value for name, value in given.items() if value is not None}


def knob(default: Any, help: str, *, ge: float | None = None, gt: float | None = None,
         le: float | None = None, lt: float | None = None, **kwargs: Any) -> Any:
    """A configuration field: its default, the one-line help written into TOML files and
    optional bounds (see `limits`)."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple or a default_factory for a mutable default")
    metadata = {"help": help, **limits(ge=ge, gt=gt, le=le, lt=lt)}
    if dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=lambda: default, metadata=metadata,
                                 **kwargs)
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


_LIMIT_TESTS: dict[str, tuple[Any, str]] = {
    "ge": (lambda v, b: v >= b, "at least"),
    "gt": (lambda v, b: v > b, "more than"),
    "le": (lambda v, b: v <= b, "at most"),
    "lt": (lambda v, b: v < b, "less than"),
}


def _check_limits(value: Any, metadata: Any, where: str) -> None:
    """Each number in `value` (a number or a tuple of them) within the field's limits."""
    numbers = value if isinstance(value, tuple) else (value,)
    for number in numbers:
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            continue
        for name, (passes, words) in _LIMIT_TESTS.items():
            if name in metadata and not passes(number, metadata[name]):
                raise ConfigError(f"{where}: expected a value {words} {metadata[name]:g}, "
                                  f"got {number!r}")


def from_dict(cls: type[T], data: Any, where: str) -> T:
    """Build dataclass `cls` from parsed TOML `data`; missing fields keep their defaults."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a table, got {_kind(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = [k for k in data if k not in fields]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, list(fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{where}: unknown field {key!r}{hint}; known fields: "
                          f"{', '.join(fields)}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        values[name] = _convert(value, hints[name], f"{where}.{name}")
        _check_limits(values[name], fields[name].metadata, f"{where}.{name}")
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _convert(value: Any, annotation: Any, where: str) -> Any:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if type(None) in get_args(annotation) and (value is None or (
                isinstance(value, str) and value.lower() == "none")):
            return None
        errors = []
        for option in options:
            try:
                return _convert(value, option, where)
            except ConfigError as exc:
                errors.append(str(exc).split(": ", 1)[-1])
        raise ConfigError(f"{where}: {' or '.join(errors)}")
    if origin is Literal:
        choices = get_args(annotation)
        if value not in choices:
            raise ConfigError(f"{where}: expected one of {', '.join(map(repr, choices))}, "
                              f"got {value!r}")
        return value
    if origin is tuple:
        args = get_args(annotation)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {_kind(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(f"{where}: expected a list of {len(args)} values, got "
                              f"{len(value)}")
        return tuple(_convert(v, a, f"{where}[{i}]")
                     for i, (v, a) in enumerate(zip(value, args, strict=True)))
    if dataclasses.is_dataclass(annotation):
        return from_dict(annotation, value, where)  # type: ignore[arg-type]
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{where}: unsupported field type {annotation!r}")


def _kind(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__)


def load_toml(cls: type[T], path: Path) -> tuple[T, str]:
    """(the configuration, the file's text); ConfigError names the file and field."""

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return loads_toml(cls, text, str(path)), text


def loads_toml(cls: type[T], text: str, where: str = "<config>") -> T:
    """The configuration in TOML `text`; any text ends in the configuration or a
    ConfigError naming `where` and the field."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{where}: not valid TOML: nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    return from_dict(cls, data, where)


def to_toml(config: Any, header: str = "") -> str:
    """The TOML text of a configuration tree, each field with its help as a comment."""
    lines: list[str] = [f"# {line}".rstrip() for line in header.splitlines()]
    scalars, tables = _split(config)
    _write_fields(lines, config, scalars)
    for name in tables:
        _write_table(lines, getattr(config, name), name, _help(config, name))
    return "\n".join(lines).strip() + "\n"


def _split(config: Any) -> tuple[list[str], list[str]]:
    scalars: list[str] = []
    tables: list[str] = []
    for f in dataclasses.fields(config):
        (tables if dataclasses.is_dataclass(getattr(config, f.name)) else scalars).append(
            f.name)
    return scalars, tables


def _help(config: Any, name: str) -> str:
    for f in dataclasses.fields(config):
        if f.name == name:
            return str(f.metadata.get("help", ""))
    return ""


def _write_fields(lines: list[str], config: Any, names: list[str]) -> None:
    for name in names:
        help_text = _help(config, name)
        if help_text:
            lines.append(f"# {help_text}")
        value = getattr(config, name)
        if value is None:
            lines.append(f'{name} = "none"')
        else:
            lines.append(f"{name} = {_value(value)}")


def _write_table(lines: list[str], config: Any, path: str, help_text: str) -> None:
    scalars, tables = _split(config)
    lines.append("")
    if help_text:
        lines.append(f"# {help_text}")
    lines.append(f"[{path}]")
    _write_fields(lines, config, scalars)
    for name in tables:
        _write_table(lines, getattr(config, name), f"{path}.{name}", _help(config, name))


def _value(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")
