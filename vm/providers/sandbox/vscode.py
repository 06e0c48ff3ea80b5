"""`code`, OSWorld's VS Code command, in a sandbox: code-server (VS Code's workbench served
to a browser, installed by `make setup` under CODE_SERVER_PREFIX) in a Chromium `--app=`
window titled as VS Code titles its windows (docs/osworld.md, "VS Code").

Run inside a sandbox as `python -m vm.providers.sandbox.vscode ARGS` (its commands folder's
`code`). `--list-extensions`, `--install-extension X`, `--version` and the other
extension commands run at once on the user's VS Code folders (~/.config/Code,
~/.vscode/extensions, where OSWorld's getters read them). Anything else opens a window: on
the sandbox's one code-server (started on a free loopback port when none answers), a
folder or workspace in a window of its own, a file in an empty window it is then sent to.
The first `code` started owns the server and stays alive while it runs: it is the process
a snapshot records and a revert relaunches; later ones open their window and exit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

CODE_SERVER_PREFIX = Path("/opt/workbench/code-server")  # the Makefile's CODE_SERVER_PREFIX
# where the workbench looks for it instead (tests name an empty folder: "not installed");
# a sandbox shows /opt, not other host folders, so only that default reaches inside
PREFIX_VARIABLE = "WORKBENCH_CODE_SERVER_PREFIX"
APP_NAME = "Visual Studio Code"
# VS Code's default title without its profile name, ending as OSWorld's checks expect
# ("project - Visual Studio Code", "test.py - Visual Studio Code"); code-server 4.90 has no
# --app-name, so the machine settings say it and the user's settings.json stays unwritten
WINDOW_TITLE = "${dirty}${activeEditorShort}${separator}${rootName}${separator}" + APP_NAME
# code-server's own flags that run at once, without a window (VS Code's CLI commands)
AT_ONCE = frozenset({"--list-extensions", "--install-extension", "--uninstall-extension",
                     "--show-versions", "--version", "-v", "--help", "-h",
                     "--locate-extension"})
# VS Code flags code-server does not take, with whether each takes a value
DROPPED = {"-g": False, "--goto": False, "-n": False, "--new-window": False,
           "-r": False, "--reuse-window": False, "-w": False, "--wait": False,
           "--disable-gpu": False, "--verbose": False, "--log": True, "--locale": True,
           "--profile": True, "--user-data-dir": True, "--extensions-dir": True}
_LINE_SUFFIX = re.compile(r"^(.*?)(?::\d+){1,2}$")  # FILE:LINE[:COLUMN] (-g)
_LISTENING = re.compile(r"HTTP server listening on (http://127\.0\.0\.1:\d+)/?")
SERVER_TIMEOUT = 120.0  # s: this loaded 2-core machine took 7 s at load 13
WINDOW_TIMEOUT = 180.0  # s: a file's window registering with the server (37 s measured)


def code_server_prefix() -> Path:
    return Path(os.environ.get(PREFIX_VARIABLE) or CODE_SERVER_PREFIX)


def installed(prefix: Path | None = None) -> bool:
    """Whether `make setup` installed code-server (its stamp, written last)."""
    prefix = prefix or code_server_prefix()
    return (prefix / "installed").is_file() and (prefix / "node" / "bin" / "node").is_file()


class CodeServer:
    """The paths and command lines of one home's code-server."""

    def __init__(self, home: Path, runtime: Path, prefix: Path | None = None) -> None:
        self.home = home
        self.prefix = prefix or code_server_prefix()
        self.runtime = runtime  # the sandbox's own /tmp: state that a revert must not keep
        self.user_data = home / ".config" / "Code"
        self.extensions = home / ".vscode" / "extensions"

    def cli(self, args: Sequence[str]) -> list[str]:
        """code-server with the user's VS Code folders and no config file, then `args`."""
        return [str(self.prefix / "node" / "bin" / "node"),
                str(self.prefix / "bin" / "code-server"),
                "--config", os.devnull, "--user-data-dir", str(self.user_data),
                "--extensions-dir", str(self.extensions), *args]

    def environment(self) -> dict[str, str]:
        node_bin = str(self.prefix / "node" / "bin")
        return {**os.environ, "PATH": f"{node_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def prepare(self) -> None:
        """~/.config/Code (code-server cannot make its session socket in a fresh home) and
        the machine settings naming the window as VS Code does."""
        machine = self.user_data / "Machine" / "settings.json"
        machine.parent.mkdir(parents=True, exist_ok=True)
        self.extensions.mkdir(parents=True, exist_ok=True)
        if not machine.exists():
            machine.write_text(json.dumps({"window.title": WINDOW_TITLE}, indent=4) + "\n")

    @property
    def state_file(self) -> Path:
        return self.runtime / "server.json"

    def running_url(self) -> str | None:
        """The URL of this home's server when one answers."""
        try:
            url = str(json.loads(self.state_file.read_text())["url"])
            with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
                return url if response.status == 200 else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def start_server(self) -> tuple[subprocess.Popen[bytes], str]:
        """Start the server on a free loopback port; (its process, its URL)."""
        self.prepare()
        self.runtime.mkdir(parents=True, exist_ok=True)
        log_path = self.runtime / "server.log"
        with open(log_path, "wb") as log_file:
            server = subprocess.Popen(
                self.cli(["--bind-addr", "127.0.0.1:0", "--auth", "none",
                          "--disable-telemetry", "--disable-update-check",
                          "--disable-workspace-trust"]),
                env=self.environment(), stdin=subprocess.DEVNULL, stdout=log_file,
                stderr=subprocess.STDOUT)
        deadline = time.monotonic() + SERVER_TIMEOUT
        while time.monotonic() < deadline:
            found = _LISTENING.search(log_path.read_text(errors="replace"))
            if found:
                url = found.group(1)
                tmp = self.state_file.with_suffix(".tmp")
                tmp.write_text(json.dumps({"url": url, "pid": server.pid}))
                tmp.rename(self.state_file)
                return server, url
            if server.poll() is not None:
                break
            time.sleep(0.1)
        server.kill()
        tail = log_path.read_text(errors="replace")[-800:]
        raise RuntimeError(f"code-server did not start (see {log_path}): {tail}")

    def window_argv(self, url: str) -> list[str]:
        """A Chromium `--app=` window on `url`, with a browser profile of its own (never the
        task's Chrome profile in ~/.config/google-chrome)."""
        from vm.providers.sandbox.apps import CHROME_FLAGS

        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            raise RuntimeError("code: its window is a Chromium app window: install the "
                               "Debian package chromium")
        argv = [binary, f"--user-data-dir={self.runtime / 'browser'}", *CHROME_FLAGS,
                "--start-maximized", f"--app={url}"]
        if os.geteuid() == 0:
            argv.append("--no-sandbox")  # Chromium refuses to run as root without it
        return argv

    def send_file(self, path: Path, deadline: float) -> None:
        """Open `path` in the window that registered with the server last (an empty one
        opened for it), waiting for a window to register."""
        while True:
            result = subprocess.run(self.cli(["--reuse-window", str(path)]),
                                    env=self.environment(), capture_output=True,
                                    stdin=subprocess.DEVNULL, timeout=60)
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"code: no window took {path}: "
                                   f"{result.stderr.decode(errors='replace')[-400:]}")
            time.sleep(0.5)


def window_targets(args: Sequence[str], cwd: Path) -> list[Path]:
    """The files and folders `code ARGS` opens, VS Code's flags dropped (-g's FILE:LINE is
    the file)."""
    targets: list[Path] = []
    words = iter(args)
    for word in words:
        name = word.split("=", 1)[0]
        if name in DROPPED:
            if DROPPED[name] and "=" not in word:
                next(words, None)
            continue
        if word.startswith("-"):
            continue
        path = Path(os.path.expanduser(word))
        path = path if path.is_absolute() else cwd / path
        if not path.exists() and (found := _LINE_SUFFIX.match(str(path))):
            path = Path(found.group(1))
        targets.append(Path(os.path.normpath(path)))
    return targets


def window_url(server_url: str, target: Path | None) -> str:
    """The page a window opens: a folder, a workspace file, else an empty window."""
    if target is not None and target.is_dir():
        return f"{server_url}/?folder={urllib.parse.quote(str(target))}"
    if target is not None and target.suffix == ".code-workspace":
        return f"{server_url}/?workspace={urllib.parse.quote(str(target))}"
    return f"{server_url}/?ew=true"


def open_windows(server: CodeServer, url: str, targets: list[Path], reuse: bool = False
                 ) -> list[subprocess.Popen[bytes]]:
    """Open a window per folder or workspace; files go to one empty window (with
    `reuse`, to the window already open when one takes them, as VS Code does)."""
    windows: list[Path | None] = [t for t in targets
                                  if t.is_dir() or t.suffix == ".code-workspace"]
    files = [t for t in targets if t not in windows]
    if reuse and files and not windows:
        try:
            for path in files:
                server.send_file(path, deadline=0.0)
            return []
        except RuntimeError:
            pass  # no window open: an empty one below
    browsers = []
    for target in windows or [None]:  # `code` alone, or files only: an empty window
        browsers.append(subprocess.Popen(server.window_argv(window_url(url, target)),
                                         stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + WINDOW_TIMEOUT
    for path in files:
        server.send_file(path, deadline)
    return browsers


def main(argv: Sequence[str]) -> int:
    if not installed():
        print("code: VS Code runs as code-server in a sandbox, and it is not installed: "
              "run `make setup` with the npm registry reachable (or run this task on a VM)",
              file=sys.stderr)
        return 127
    home = Path(os.environ.get("HOME") or "/home/user")
    runtime = Path(os.environ.get("TMPDIR") or "/tmp") / "workbench-code"
    server = CodeServer(home, runtime)
    if any(word.split("=", 1)[0] in AT_ONCE for word in argv):
        server.prepare()
        return subprocess.run(server.cli(list(argv)), env=server.environment()).returncode
    targets = window_targets(argv, Path.cwd())
    url = server.running_url()
    if url is not None:
        open_windows(server, url, targets, reuse=True)
        return 0
    process, url = server.start_server()

    def stop(_signum: int, _frame: object) -> None:
        process.terminate()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        try:
            open_windows(server, url, targets)
        except RuntimeError as exc:  # the server and its window stay: the agent may go on
            print(exc, file=sys.stderr)
        return process.wait()
    finally:
        if process.poll() is None:
            process.terminate()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
