"""Built-in getters: turn an evaluator's result/expected config into a value.

Same names and configs as OSWorld's ``desktop_env/evaluators/getters`` (vm_file,
vm_command_line, vm_command_error, rule, cloud_file, list_directory), plus `vm_json`, which
reads a JSON file on the desktop (our bundled apps write their state that way).
A file that is not there gives None, which every metric scores 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vm.errors import GuestError
from vm.tasks.files import fetch, save_local
from vm.tasks.registry import EvalContext, register_getter
from vm.tasks.setup import desktop_command


class GetterError(ValueError):
    """A getter config with a missing or wrong field."""


def _field(config: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in config:
        raise GetterError(f"getter {config.get('type')!r}: missing field {name!r}")
    value = config[name]
    if not isinstance(value, kind):
        raise GetterError(f"getter {config.get('type')!r}: field {name!r} has the wrong "
                          f"type ({type(value).__name__})")
    return value


def _read_desktop_file(context: EvalContext, path: str) -> bytes | None:
    try:
        return context.provider.read_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except GuestError as exc:
        if exc.status == 404:
            return None
        raise


def _multi(config: dict[str, Any]) -> tuple[list[str], list[str], list[int] | None]:
    paths = _field(config, "path", list)
    dests = config.get("dest", [Path(p).name for p in paths])
    if not isinstance(dests, list) or len(dests) != len(paths):
        raise GetterError(f"getter {config.get('type')!r}: with multi, dest must be a list "
                          "as long as path")
    gives = config.get("gives")
    return [str(p) for p in paths], [str(d) for d in dests], gives


@register_getter("vm_file")
def get_vm_file(context: EvalContext, config: dict[str, Any]) -> str | list[str | None] | None:
    """Copy a file from the desktop into the cache folder; its local path (None if absent).
    With "multi": true, `path` and `dest` are lists and `gives` picks which to return."""
    if config.get("multi"):
        paths, dests, gives = _multi(config)
        local: list[str | None] = []
        for path, dest in zip(paths, dests, strict=True):
            data = _read_desktop_file(context, path)
            local.append(None if data is None else str(save_local(data, context.cache_dir,
                                                                  dest)))
        if gives is None:
            return local
        return local[gives[0]] if len(gives) == 1 else [local[i] for i in gives]
    path = _field(config, "path", str)
    dest = config.get("dest") or Path(path).name
    data = _read_desktop_file(context, path)
    return None if data is None else str(save_local(data, context.cache_dir, str(dest)))


@register_getter("cloud_file")
def get_cloud_file(context: EvalContext, config: dict[str, Any]
                   ) -> str | list[str] | None:
    """A reference file by URL (local path, file://, offline cache, or http(s)); saved in
    the cache folder and returned as a local path. Supports multi/gives like vm_file."""
    if config.get("multi"):
        urls, dests, gives = _multi(config)
        local = [str(save_local(fetch(url, context.task_id, dest, context.task_folder),
                                context.cache_dir, dest))
                 for url, dest in zip(urls, dests, strict=True)]
        if gives is None:
            return local
        return local[gives[0]] if len(gives) == 1 else [local[i] for i in gives]
    url = _field(config, "path", str)
    dest = str(config.get("dest") or Path(url).name)
    data = fetch(url, context.task_id, dest, context.task_folder)
    return str(save_local(data, context.cache_dir, dest))


def _command(context: EvalContext, config: dict[str, Any]) -> tuple[list[str] | str, bool]:
    command = _field(config, "command", (list, str))
    shell = bool(config.get("shell", isinstance(command, str)))
    return desktop_command(context.provider, command), shell


@register_getter("vm_command_line")
def get_vm_command_line(context: EvalContext, config: dict[str, Any]) -> str:
    """Standard output of a command run on the desktop."""
    command, shell = _command(context, config)
    return context.provider.execute(command, shell=shell,
                                    timeout=float(config.get("timeout", 120))).output


@register_getter("vm_command_error")
def get_vm_command_error(context: EvalContext, config: dict[str, Any]) -> str:
    """Standard error of a command run on the desktop."""
    command, shell = _command(context, config)
    return context.provider.execute(command, shell=shell,
                                    timeout=float(config.get("timeout", 120))).error


@register_getter("rule")
def get_rule(context: EvalContext, config: dict[str, Any]) -> Any:
    """The literal `rules` of the config (what a metric compares against)."""
    return _field(config, "rules", object)


def _desktop_path(context: EvalContext, path: str) -> str:
    """`path` as commands on the desktop see it: a sandbox maps OSWorld's /home/user (and
    ~) onto its own home folder, which its commands only know by the real name."""
    resolve = getattr(context.provider, "resolve_path", None)
    if resolve is None:
        return path
    try:
        return str(resolve(path))
    except PermissionError:
        return path


@register_getter("list_directory")
def get_list_directory(context: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """The tree under a folder on the desktop, as OSWorld's /list_directory returns it:
    {"type": "directory", "name": ..., "children": [...]}; None if the folder is absent."""
    path = _field(config, "path", str)
    result = context.provider.execute(
        ["find", _desktop_path(context, path), "-mindepth", "1", "-printf", "%y\\t%P\\n"],
        shell=False, timeout=30)
    if result.returncode != 0 and not result.output:
        return None
    root: dict[str, Any] = {"type": "directory", "name": Path(path).name or path,
                            "children": []}
    folders: dict[str, dict[str, Any]] = {"": root}
    entries = [line.split("\t", 1) for line in result.output.splitlines() if "\t" in line]
    for kind, rel in sorted(entries, key=lambda e: e[1]):
        parent = folders.get(str(Path(rel).parent) if "/" in rel else "", root)
        node: dict[str, Any] = {"type": "directory" if kind == "d" else "file",
                                "name": Path(rel).name}
        if kind == "d":
            node["children"] = []
            folders[rel] = node
        parent["children"].append(node)
    return root


@register_getter("vm_json")
def get_vm_json(context: EvalContext, config: dict[str, Any]) -> Any:
    """A JSON file on the desktop, decoded; `key` picks a part ("a.b", or "items.*.text"
    for a list of each item's text). None if absent or not valid JSON."""
    data = _read_desktop_file(context, _field(config, "path", str))
    if data is None:
        return None
    try:
        value: Any = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return _pick(value, [p for p in str(config.get("key", "")).split(".") if p])


def _pick(value: Any, parts: list[str]) -> Any:
    """Follow a dotted key; a "*" part maps the rest of the key over a list."""
    for i, part in enumerate(parts):
        if part == "*":
            if not isinstance(value, list):
                return None
            return [_pick(item, parts[i + 1:]) for item in value]
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value
