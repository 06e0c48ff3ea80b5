"""The accessibility tree in a sandbox: its own D-Bus and AT-SPI bus, GTK and Qt
applications in the tree in OSWorld's layout, the guest server's /accessibility and
/terminal as OSWorld's PythonController asks for them, and nothing left behind on stop."""

from __future__ import annotations

import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest_x11 import needs_xvfb, wait_until
from vm.actions import Press, TypeText
from vm.processes import pids_with_environ
from vm.providers.sandbox import SandboxProvider
from vm.providers.sandbox.accessibility_bus import bus_available
from vm.providers.sandbox.apps import free_port

APPS = Path(__file__).resolve().parents[1] / "assets" / "apps"
ST = "{https://accessibility.ubuntu.example.org/ns/state}"
CP = "{https://accessibility.ubuntu.example.org/ns/component}"
WM_CLASS_PROBE = "todo.py"

pytestmark = [
    pytest.mark.x11,
    needs_xvfb,
    pytest.mark.skipif(bus_available() is not None,
                       reason=f"needs the accessibility bus: {bus_available()}"),
]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxProvider]:
    # a TCP port for the guest server, asked for as for any OSWorld client (which speaks
    # http://HOST:PORT; by default a sandbox's guest server is a Unix socket only)
    provider = SandboxProvider("a11y", tmp_path_factory.mktemp("workspace"),
                               guest_port=free_port())
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


def tree_of(sandbox: SandboxProvider) -> ET.Element:
    xml = sandbox.accessibility_tree()
    assert xml is not None, "a sandbox with a bus returned no tree"
    return ET.fromstring(xml)


def application(sandbox: SandboxProvider, name: str) -> ET.Element | None:
    return next((a for a in tree_of(sandbox) if a.get("name") == name), None)


def placed(element: ET.Element) -> tuple[int, int, int, int] | None:
    """(x, y, width, height) from cp:screencoord and cp:size, if both are there."""
    coord, size = element.get(f"{CP}screencoord"), element.get(f"{CP}size")
    if coord is None or size is None:
        return None
    x, y = (int(v) for v in re.findall(r"-?\d+", coord))
    width, height = (int(v) for v in re.findall(r"-?\d+", size))
    return x, y, width, height


def get(sandbox: SandboxProvider, route: str) -> requests.Response:
    """A GET as OSWorld's PythonController sends it (no body), with our token."""
    assert sandbox.guest_url is not None
    return requests.get(sandbox.guest_url + route, headers={"X-Workbench-Token": sandbox.token},
                        timeout=60)


@pytest.mark.skipif(shutil.which("mousepad") is None, reason="needs the Debian package mousepad")
def test_tree_holds_a_gtk_and_a_qt_application_with_names_roles_and_places(
        sandbox: SandboxProvider) -> None:
    sandbox.launch(["mousepad"])
    sandbox.launch([sys.executable, str(APPS / "form.py")])

    def window(app_name: str, title: str) -> list[ET.Element]:
        """[the application's top-level window] once it has its title ([] before)."""
        app = application(sandbox, app_name)
        if app is None or len(app) == 0 or title not in (app[0].get("name") or ""):
            return []
        return [app[0]]

    (mousepad,) = wait_until(lambda: window("mousepad", "Mousepad"), 60,
                             message="mousepad's frame in the tree")
    assert mousepad.tag == "frame"
    assert mousepad.get(f"{ST}showing") == "true"
    assert placed(mousepad) is not None and placed(mousepad)[2] > 0  # type: ignore[index]

    # a top-level QWidget is a "filler" to Qt's AT-SPI bridge (a QMainWindow a "frame")
    (form,) = wait_until(lambda: window("form.py", "Contact form"), 60,
                         message="the Qt form's window in the tree")
    assert form.tag in ("frame", "filler")
    fields = [t for t in form.iter("text") if t.get("name") == "Full name"]
    assert fields and placed(fields[0]) is not None, "the form's name field is not placed"
    buttons = {b.get("name") or "": placed(b) for b in form.iter("push-button")}
    assert "Submit" in buttons, f"no Submit button in {sorted(buttons)}"
    x, y, width, height = buttons["Submit"] or (0, 0, 0, 0)
    assert width > 0 and height > 0 and 0 <= x < sandbox.width and 0 <= y < sandbox.height
    # GTK text: mousepad's document is an editable text accessible
    assert any(t.get(f"{ST}editable") == "true" for t in mousepad.iter("text")), \
        "mousepad's document is not an editable text in the tree"


def test_guest_accessibility_route_answers_osworlds_request(sandbox: SandboxProvider) -> None:
    """PythonController.get_accessibility_tree: GET /accessibility → 200, {"AT": xml}."""
    sandbox.launch([sys.executable, str(APPS / "todo.py")])
    wait_until(lambda: [a for a in [application(sandbox, "todo.py")]
                        if a is not None and a.find("frame") is not None],
               60, message="the Qt main window's frame in the tree")
    response = get(sandbox, "/accessibility")
    assert response.status_code == 200, response.text
    root = ET.fromstring(response.json()["AT"])
    assert root.tag == "desktop-frame"
    assert "todo.py" in {app.get("name") for app in root}


@pytest.mark.skipif(shutil.which("lxterminal") is None,
                    reason="needs the Debian package lxterminal (an accessible VTE terminal)")
def test_terminal_route_returns_what_was_typed_in_a_vte_terminal(
        sandbox: SandboxProvider) -> None:
    """PythonController.get_terminal_output: GET /terminal → {"output": text}."""
    sandbox.launch(["lxterminal"])

    def terminal() -> list[ET.Element]:
        """[lxterminal's terminal] once it has the keyboard focus ([] before)."""
        app = application(sandbox, "lxterminal")
        found = None if app is None else next(app.iter("terminal"), None)
        return [found] if found is not None and found.get(f"{ST}focused") == "true" else []

    wait_until(terminal, 60, message="lxterminal's focused terminal in the tree")
    sandbox.perform(TypeText("echo a11y-$((6*7))"))
    sandbox.perform(Press("enter"))

    def output() -> str | None:
        response = get(sandbox, "/terminal")
        assert response.status_code == 200, response.text
        text = response.json()["output"]
        return text if text and "a11y-42" in text else None

    text = wait_until(output, 30, message="the command's output in /terminal")
    assert "echo a11y-$((6*7))" in text  # the typed command, then its output
    # Close the terminal (its shell exits, its only window closes): the module's later
    # tests share this desktop, and a terminal's text they read twice must not move.
    sandbox.perform(TypeText("exit"))
    sandbox.perform(Press("enter"))
    wait_until(lambda: get(sandbox, "/terminal").json()["output"] is None,
               60, message="no terminal left in /terminal after its shell exited")


def test_stop_ends_the_bus_and_every_process_it_started(tmp_path: Path) -> None:
    provider = SandboxProvider("a11y-stop", tmp_path, guest_server=False)
    provider.start()
    state = provider.state
    assert state is not None and state.bus_marker and state.bus_runtime_dir
    marker, runtime_dir = state.bus_marker, state.bus_runtime_dir
    assert pids_with_environ(marker), "no process carries the bus's marker"
    assert provider.app_env()["DBUS_SESSION_BUS_ADDRESS"] == state.bus_address
    assert "NO_AT_BRIDGE" not in provider.app_env()
    provider.stop()
    assert pids_with_environ(marker) == []
    assert not os.path.exists(runtime_dir)


def test_osworlds_python_controller_answers_on_every_route(sandbox: SandboxProvider,
                                                           tmp_path: Path) -> None:
    """OSWorld's released PythonController (desktop-env 1.0.2, its code unchanged) against
    the sandbox's guest server: a non-empty accessibility tree and an answer on each route
    it calls. Only the transport adds our token (unmodified clients otherwise need the
    server's --no-token)."""
    import types
    import urllib.parse

    from tests.osworld_reference import reference_controller

    controller_class = reference_controller()
    module: Any = sys.modules[controller_class.__module__]  # loaded from OSWorld's source
    headers = {"X-Workbench-Token": sandbox.token}

    def with_token(method: Any) -> Any:
        def call(url: str, **kwargs: Any) -> Any:
            kwargs["headers"] = {**(kwargs.get("headers") or {}), **headers}
            return method(url, **kwargs)
        return call

    transport = types.SimpleNamespace(get=with_token(requests.get),
                                      post=with_token(requests.post),
                                      Response=requests.Response,
                                      exceptions=requests.exceptions)
    assert sandbox.guest_url is not None
    address = urllib.parse.urlsplit(sandbox.guest_url)
    controller = controller_class(address.hostname, address.port)
    controller.retry_times, controller.retry_interval = 2, 0.1
    original = module.requests
    module.requests = transport
    try:
        sandbox.launch([sys.executable, str(APPS / "todo.py")])
        wait_until(lambda: [a for a in [application(sandbox, "todo.py")]
                            if a is not None and a.find("frame") is not None],
                   60, message="the Qt main window's frame in the tree")
        tree = controller.get_accessibility_tree()
        assert tree and "todo.py" in {a.get("name") for a in ET.fromstring(tree)}
        shot = controller.get_screenshot()
        assert shot is not None and shot[:8] == b"\x89PNG\r\n\x1a\n"
        assert controller.get_vm_screen_size() == {"width": sandbox.width,
                                                   "height": sandbox.height}
        # a fresh sandbox's home has ~/Desktop, as OSWorld's image has it
        # OSWorld's path: the sandbox home is /home/user inside its namespaces
        assert controller.get_vm_desktop_path() == "/home/user/Desktop"
        (sandbox.home / "probe.txt").write_text("probe")
        assert controller.get_file("/home/user/probe.txt") == b"probe"
        tree_of_home = controller.get_vm_directory_tree("/home/user")
        assert tree_of_home and "probe.txt" in {c["name"] for c in tree_of_home["children"]}
        script = controller.run_bash_script("echo bash-$((6*7))")
        assert script and "bash-42" in script["output"]
        python = controller.run_python_script("print(6*7)")
        assert python and "42" in python["output"]
        assert controller.get_vm_platform() == "Linux"
        window = controller.get_vm_window_size(WM_CLASS_PROBE)
        assert window is not None and window["width"] > 0 and window["height"] > 0
        # the terminal's text as the route gives it (None while no terminal is open)
        assert controller.get_terminal_output() == get(sandbox, "/terminal").json()["output"]
    finally:
        module.requests = original
