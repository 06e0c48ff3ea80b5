"""What it takes to run each task of an OSWorld evaluation_examples tree here: does the file
load, is every setup step, getter and metric it names implemented, which files it
downloads, whether it needs the user's accounts or the web, which applications it uses.

`workbench tasks audit DIR` prints this per task and per domain (or as JSON).
"""

from __future__ import annotations

import re
import shutil
import socket
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vm.tasks import registry
from vm.tasks.files import cached_path
from vm.tasks.model import Task, TaskFileError, load_task
from vm.tasks.setup import STEP_RUNNERS, load_step_modules
from workbench.vetting.domain_totals import per_domain

# What needs the user's Google account (their runners and getter ask for the
# credentials setting, vm.tasks.getters.accounts.CREDENTIALS_ENV).
CREDENTIAL_STEPS = frozenset({"googledrive", "login"})
CREDENTIAL_GETTERS = frozenset({"googledrive_file"})
# Applications our sandboxes offer only where `make setup` installed code-server (VS Code;
# vm.providers.sandbox.vscode): elsewhere tasks that use them need a VM.
VM_ONLY_APPS = frozenset({"vs_code", "vscode", "code"})
# Where a task file's URLs are not opened or fetched: the files of download steps and of
# reference getters (served by the offline cache, or stand-ins), history entries written,
# tabs closed, the constants of rule getters and URL prefixes compared with.
NOT_FETCHED_STEPS = frozenset({"download", "update_browse_history", "chrome_close_tabs"})
NOT_FETCHED_GETTERS = frozenset({"cloud_file", "cache_file", "rule", "rule_relativeTime"})
NOT_FETCHED_KEYS = frozenset({"type", "goto_prefix"})
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
_URL = re.compile(r"https?://[^\s'\"<>\\)\]]+")
# The program a sandbox runs for each application a task file's related_apps names.
APP_PROGRAMS = {
    "chrome": "chromium", "browser": "chromium", "libreoffice_calc": "soffice",
    "libreoffice calc": "soffice", "calc": "soffice", "libreoffice_impress": "soffice",
    "libreoffice_writer": "soffice", "writer": "soffice", "libreoffice": "soffice",
    "gimp": "gimp", "vlc": "vlc", "thunderbird": "thunderbird", "picard": "picard",
}


@dataclass
class TaskAudit:
    """One task file's audit."""

    file: str
    domain: str
    id: str = ""
    loads: bool = True
    load_error: str = ""
    missing_steps: list[str] = field(default_factory=list)
    missing_getters: list[str] = field(default_factory=list)
    missing_metrics: list[str] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)  # http(s) URLs of its files
    uncached_downloads: list[str] = field(default_factory=list)  # not in the offline cache
    needs_credentials: bool = False
    apps: list[str] = field(default_factory=list)
    needs_vm: bool = False  # uses an application a sandbox does not have
    missing_apps: list[str] = field(default_factory=list)  # not installed on this machine
    # external URLs it opens or fetches at setup, or its getters read (web_urls): offline,
    # such a task cannot start from OSWorld's state (a page that never loaded set nothing)
    web_urls: list[str] = field(default_factory=list)

    @property
    def needs_web(self) -> bool:
        return bool(self.web_urls)

    @property
    def setup_supported(self) -> bool:
        return self.loads and not self.missing_steps

    @property
    def evaluator_supported(self) -> bool:
        return self.loads and not self.missing_getters and not self.missing_metrics

    @property
    def supported(self) -> bool:
        """Every step, getter and metric it names is implemented."""
        return self.setup_supported and self.evaluator_supported

    @property
    def ready(self) -> bool:
        """Implemented and needing no accounts: runs with what is here."""
        return self.supported and not self.needs_credentials

    @property
    def runs_in_sandbox(self) -> bool:
        """Ready, and every application it uses is installed here: no VM needed."""
        return self.ready and not self.needs_vm and not self.missing_apps

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(setup_supported=self.setup_supported,
                   evaluator_supported=self.evaluator_supported,
                   supported=self.supported, ready=self.ready,
                   runs_in_sandbox=self.runs_in_sandbox, needs_web=self.needs_web)
        return out


@dataclass
class DomainTotals:
    domain: str
    tasks: int = 0
    loads: int = 0
    setup_supported: int = 0
    evaluator_supported: int = 0
    supported: int = 0
    ready: int = 0
    needs_credentials: int = 0
    with_downloads: int = 0
    needs_vm: int = 0
    runs_in_sandbox: int = 0
    needs_web: int = 0

    def add(self, audit: TaskAudit) -> None:
        self.tasks += 1
        self.loads += audit.loads
        self.setup_supported += audit.setup_supported
        self.evaluator_supported += audit.evaluator_supported
        self.supported += audit.supported
        self.ready += audit.ready
        self.needs_credentials += audit.needs_credentials
        self.with_downloads += bool(audit.downloads)
        self.needs_vm += audit.needs_vm
        self.runs_in_sandbox += audit.runs_in_sandbox
        self.needs_web += audit.needs_web


def _getter_configs(task: Task) -> Iterator[dict[str, Any]]:
    for configs in (task.evaluator.result, task.evaluator.expected):
        for config in configs:
            if config is not None:
                yield config


def _is_download(url: Any) -> bool:
    return isinstance(url, str) and urllib.parse.urlparse(url).scheme in ("http", "https")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def task_downloads(task: Task) -> list[tuple[str, str]]:
    """(url, file name) of every file the task fetches from the network: its download
    steps and its reference files (cloud_file, cache_file)."""
    found: list[tuple[str, str]] = []
    for step in task.config + task.evaluator.postconfig:
        if step.type == "download":
            for entry in step.parameters.get("files") or []:
                if isinstance(entry, dict) and _is_download(entry.get("url")):
                    name = Path(str(entry.get("path") or entry["url"])).name
                    found.append((entry["url"], name))
    for config in _getter_configs(task):
        if config.get("type") not in ("cloud_file", "cache_file"):
            continue
        urls = _strings(config.get("path"))
        dests = _strings(config.get("dest")) or [""] * len(urls)
        if len(dests) != len(urls):
            dests = [""] * len(urls)
        for url, dest in zip(urls, dests, strict=True):
            if _is_download(url):
                name = dest or Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)).name
                found.append((url, name))
    return found


def _urls(value: Any, skip_keys: frozenset[str] = frozenset()) -> Iterator[str]:
    if isinstance(value, str):
        yield from _URL.findall(value)
    elif isinstance(value, list):
        for item in value:
            yield from _urls(item, skip_keys)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in skip_keys:
                yield from _urls(item, skip_keys)


def web_urls(task: Task) -> list[str]:
    """The external URLs `task` opens or fetches at setup (tabs it opens, pages a command
    names: a browser's start page, ...) or its getters read (a page's information, a PDF
    at a URL), in file order without repeats. Not counted: the files of download steps and
    reference getters (the offline cache serves them), history entries it writes, tabs it
    closes, rule constants and URL prefixes compared with, and addresses of this machine."""
    found: list[str] = []
    for step in task.config + task.evaluator.postconfig:
        if step.type not in NOT_FETCHED_STEPS:
            found += _urls(step.parameters)
    for config in _getter_configs(task):
        if config.get("type") not in NOT_FETCHED_GETTERS:
            found += _urls(config, NOT_FETCHED_KEYS)
    return [url for url in dict.fromkeys(found)
            if (urllib.parse.urlparse(url).hostname or "") not in LOCAL_HOSTS]


def web_reachable(urls: Iterable[str], timeout: float = 3.0, hosts: int = 2) -> bool:
    """Whether this machine reaches the web: a TCP connection to the host of one of the
    first `hosts` distinct hosts of `urls` (a task's own pages) opens within `timeout`."""
    tried: set[str] = set()
    for url in urls:
        parts = urllib.parse.urlparse(url)
        if not parts.hostname or parts.hostname in tried:
            continue
        tried.add(parts.hostname)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname, port), timeout=timeout):
                return True
        except OSError:  # no route, no name resolution, refused, timed out
            pass
        if len(tried) >= hosts:
            break
    return False


def audit_task(task: Task, file: str = "") -> TaskAudit:
    load_step_modules()
    steps = {s.type for s in task.config + task.evaluator.postconfig}
    getters = {str(c.get("type")) for c in _getter_configs(task)}
    metrics = set(task.evaluator.func)
    downloads = task_downloads(task)
    apps = sorted({str(a) for a in task.related_apps})
    needs_vm = bool(set(apps) & VM_ONLY_APPS or task.domain in VM_ONLY_APPS) \
        and not code_server_installed()
    return TaskAudit(
        file=file or task.path, domain=task.domain, id=task.id,
        missing_steps=sorted(s for s in steps if s not in STEP_RUNNERS),
        missing_getters=sorted(g for g in getters if not registry.has_getter(g)),
        missing_metrics=sorted(m for m in metrics if not registry.has_metric(m)),
        downloads=[url for url, _ in downloads],
        uncached_downloads=[url for url, name in downloads
                            if not cached_path(task.id, name).is_file()],
        needs_credentials=bool(steps & CREDENTIAL_STEPS or getters & CREDENTIAL_GETTERS),
        apps=apps, needs_vm=needs_vm, missing_apps=[] if needs_vm else missing_apps(task),
        web_urls=web_urls(task),
    )


def code_server_installed() -> bool:
    """Whether sandboxes run VS Code (code-server, installed by `make setup`)."""
    from vm.providers.sandbox.vscode import installed

    return installed()


def missing_apps(task: Task) -> list[str]:
    """The applications `task` uses (its related_apps, the programs its steps launch) that
    this machine does not have, each with the reason."""
    from vm.providers.sandbox.apps import AppMissing, NeedsVM, SandboxApps

    missing = {name for name in (APP_PROGRAMS.get(str(a).lower()) for a in task.related_apps)
               if name and shutil.which(name) is None}
    apps = SandboxApps(Path("/home/user"), devtools_port=9222)
    for step in task.config + task.evaluator.postconfig:
        command = step.parameters.get("command")
        if step.type != "launch" or not command:
            continue
        try:
            apps.command(command, bool(step.parameters.get("shell")))
        except (AppMissing, NeedsVM, ValueError) as exc:  # ValueError: unsplittable line
            missing.add(str(exc))
    return sorted(missing)


def task_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(domain, file) for every task file of an evaluation_examples tree (or its
    examples/ folder)."""
    examples = root / "examples" if (root / "examples").is_dir() else root
    if not examples.is_dir():
        raise FileNotFoundError(f"{root}: no such folder")
    for folder in sorted(p for p in examples.iterdir() if p.is_dir()):
        for file in sorted(folder.glob("*.json")):
            yield folder.name, file


def audit_tree(root: str | Path) -> list[TaskAudit]:
    """Audit every task file under `root`; a file that does not load is listed with why."""
    audits = []
    for domain, file in task_files(Path(root)):
        try:
            task = load_task(file, domain)
        except (TaskFileError, OSError) as exc:
            audits.append(TaskAudit(file=str(file), domain=domain, id=file.stem, loads=False,
                                    load_error=str(exc)))
            continue
        audits.append(audit_task(task, str(file)))
    return audits


def totals(audits: Iterable[TaskAudit]) -> dict[str, DomainTotals]:
    """Per-domain totals, plus "all" last."""
    return per_domain(audits, DomainTotals)


def unavailable_modules() -> dict[str, str]:
    """Metric, getter and step modules left out because their libraries are missing."""
    from vm.tasks import getters, metrics, steps

    registry.has_metric("")  # loads the built-in modules
    load_step_modules()
    out = {}
    for kind, missing in (("metrics", metrics.MISSING), ("getters", getters.MISSING),
                          ("steps", steps.MISSING)):
        out.update({f"{kind}.{name}": why for name, why in missing.items()})
    return out
