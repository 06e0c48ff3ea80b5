"""The guest server against bad input (issue 19): NUL bytes, the root as an upload target,
deep trees and deep JSON, oversized chunked bodies, silent connections, non-ASCII tokens
and the token file's mode. A real server on loopback, in the test process."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from vm.guest import GuestConfig
from vm.guest.config import ConfigError, parse_args, write_token_file
from vm.guest.files import MAX_TREE_DEPTH, write_atomic
from vm.guest.server import GuestState
from vm.guest.serving import make_guest_server

TOKEN = "hardening-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Served:
    """A guest server running in a thread of the test process."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = url
        self.root = root
        self.port = int(url.rsplit(":", 1)[1])

    def post(self, route: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 30)
        headers = {**AUTH, **kwargs.pop("headers", {})}
        return requests.post(self.url + route, headers=headers, **kwargs)


@contextlib.contextmanager
def serve(root: Path, **settings: Any) -> Iterator[Served]:
    """Serve GuestConfig(roots=(root,), display=None, **settings) on a free loopback port.
    Without a display no route can touch the desktop the tests run on."""
    config = GuestConfig(**{"token": TOKEN, "port": 0, "roots": (root,), "display": None,
                            **settings})
    server = make_guest_server(config)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="guest-server", daemon=True)
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{server.server_address[1]}", root)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)
        state = server.app.extensions["vm.guest"]  # type: ignore[attr-defined]
        assert isinstance(state, GuestState)
        state.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture
def guest(root: Path) -> Iterator[Served]:
    with serve(root) as served:
        yield served


def message(response: requests.Response) -> str:
    return str(response.json()["message"])


def folder_chain(top: Path, depth: int) -> list[Path]:
    """`depth` folders `a` inside each other under `top`, made one by one (pathlib's
    mkdir(parents=True) recurses once per folder)."""
    chain = [top]
    for _ in range(depth):
        chain.append(chain[-1] / "a")
        chain[-1].mkdir()
    return chain


def remove_chain(chain: list[Path]) -> None:
    """Remove what folder_chain made, deepest first (shutil.rmtree recurses too)."""
    for folder in reversed(chain):
        for item in folder.iterdir():
            if not item.is_dir() or item.is_symlink():
                item.unlink()
        folder.rmdir()


# ---------------------------------------------------------------------------------------
# 1. NUL and other text no file or program can have


@pytest.mark.parametrize(("route", "request_body", "field"), [
    ("/file", {"data": {"file_path": "notes\0.txt"}}, "file_path"),
    ("/file", {"json": {"file_path": "notes\0.txt"}}, "file_path"),
    ("/setup/upload", {"data": {"file_path": "up\0.txt"},
                       "files": {"file_data": ("x", b"payload")}}, "file_path"),
    ("/list_directory", {"json": {"path": "sub\0"}}, "path"),
    ("/setup/download_file", {"json": {"url": "file:///etc/hostname\0",
                                       "path": "copy.txt"}}, "url"),
    ("/setup/download_file", {"json": {"url": "notes.txt", "path": "copy\0.txt"}}, "path"),
    ("/setup/open_file", {"json": {"path": "notes\0.txt"}}, "path"),
    ("/setup/change_wallpaper", {"json": {"path": "sea\0.png"}}, "path"),
])
def test_nul_in_a_path_is_a_400_naming_the_field(
        guest: Served, route: str, request_body: dict[str, Any], field: str) -> None:
    (guest.root / "notes.txt").write_text("notes")
    response = guest.post(route, **request_body)
    assert response.status_code == 400, response.text
    assert message(response).startswith(f"{field}: ") and "NUL" in message(response)
    assert sorted(p.name for p in guest.root.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(("route", "body", "field"), [
    ("/execute", {"command": ["echo", "a\0b"]}, "command[1]"),
    ("/execute", {"command": "echo a\0b"}, "command"),
    ("/setup/execute", {"command": "echo a\0b", "shell": True}, "command"),
    ("/setup/execute", {"command": ["echo $0", "a\0"], "shell": True}, "command[1]"),
    ("/setup/launch", {"command": ["true\0"]}, "command[0]"),
    ("/execute", {"command": ["echo", "\ud800"]}, "command[1]"),  # a lone surrogate
    ("/run_python", {"code": "print(1)\0"}, "code"),
    ("/run_python", {"code": "print('\ud800')"}, "code"),
    ("/run_bash_script", {"script": "echo a\0b"}, "script"),
    ("/run_bash_script", {"script": "true", "working_dir": "/tmp\0"}, "working_dir"),
])
def test_nul_in_a_command_is_a_400_naming_the_item(
        guest: Served, route: str, body: dict[str, Any], field: str) -> None:
    response = guest.post(route, json=body)
    assert response.status_code == 400, response.text
    text = response.json().get("message") or response.json()["output"]
    assert text.startswith(f"{field}: "), text


def test_paths_no_file_can_have_are_a_400(guest: Served) -> None:
    loop = guest.root / "loop"
    loop.symlink_to(loop)
    for path, expected in [
            ("x" * 300, "longer than 255 bytes"),
            ("a/" * 2100, "longer than 4095 bytes"),
            (str(loop / "inside.txt"), "symlink loop"),
            ("bad-\udc80\ud800.txt", "not encodable")]:
        response = guest.post("/file", json={"file_path": path})
        assert response.status_code == 400, (path[:20], response.text)
        assert message(response).startswith("file_path: ") and expected in message(response)


# ---------------------------------------------------------------------------------------
# 2. uploads: never onto the root or a folder, temp files beside the target


def test_upload_onto_the_root_folder_is_refused_and_leaves_nothing_beside_it(
        guest: Served) -> None:
    (guest.root / "keep.txt").write_text("kept")
    (guest.root / "folder").mkdir()
    outside_before = sorted(os.listdir(guest.root.parent))
    for target, expected in [(str(guest.root), "is a root folder"),
                             (f"{guest.root}/", "is a root folder"),
                             (".", "is a root folder"),
                             ("folder", "is a folder")]:
        response = guest.post("/setup/upload", data={"file_path": target},
                              files={"file_data": ("x", b"payload")})
        assert response.status_code == 400, (target, response.text)
        assert message(response).startswith("file_path: ") and expected in message(response)
        download = guest.post("/setup/download_file",
                              json={"url": "keep.txt", "path": target})
        assert download.status_code == 400, (target, download.text)
    assert guest.root.is_dir() and (guest.root / "folder").is_dir()
    assert sorted(os.listdir(guest.root.parent)) == outside_before
    assert sorted(os.listdir(guest.root)) == ["folder", "keep.txt"]


def test_upload_through_a_file_is_a_400_and_leaves_no_temp_file(guest: Served) -> None:
    (guest.root / "plain.txt").write_text("plain")
    response = guest.post("/setup/upload", data={"file_path": "plain.txt/inner.txt"},
                          files={"file_data": ("x", b"payload")})
    assert response.status_code == 400, response.text
    assert "plain.txt" in message(response)
    assert sorted(os.listdir(guest.root)) == ["plain.txt"]


def test_write_atomic_keeps_its_temp_file_in_the_targets_folder_and_removes_it(
        tmp_path: Path) -> None:
    target = tmp_path / "folder" / "out.bin"
    seen: list[list[str]] = []

    def chunks() -> Iterator[bytes]:
        yield b"first"
        seen.append(sorted(os.listdir(target.parent)))
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        write_atomic(target, chunks())
    assert len(seen[0]) == 1 and seen[0][0].startswith(".out.bin.")  # in the target's folder
    assert os.listdir(target.parent) == [] and sorted(os.listdir(tmp_path)) == ["folder"]


def test_upload_creates_a_folder_chain_1000_deep(guest: Served) -> None:
    relative = "/".join(["d"] * 1000) + "/deep.txt"
    try:
        response = guest.post("/setup/upload", data={"file_path": relative},
                              files={"file_data": ("x", b"deep")})
        assert response.status_code == 200, response.text[:300]
        assert (guest.root / relative).read_bytes() == b"deep"
    finally:
        (guest.root / relative).unlink(missing_ok=True)
        folders = [guest.root / "/".join(["d"] * n) for n in range(1, 1001)]
        for folder in reversed(folders):
            if folder.is_dir():
                folder.rmdir()


# ---------------------------------------------------------------------------------------
# 3. a tree 1100 folders deep


def test_list_directory_of_a_tree_1100_deep_answers_its_top_part(guest: Served) -> None:
    chain = folder_chain(guest.root / "deep", 0)
    chain[0].mkdir()
    chain = folder_chain(chain[0], 1100)
    (chain[-1] / "bottom.txt").write_text("at the bottom")
    try:
        response = guest.post("/list_directory", json={"path": "deep"})
        assert response.status_code == 200, response.text[:300]
        answer = response.json()
        assert answer["truncated"] is True
        node, depth = answer["directory_tree"], 0
        while node["children"]:
            assert "truncated" not in node
            (node,) = node["children"]
            depth += 1
        assert depth == MAX_TREE_DEPTH and node["truncated"] is True

        shallow = guest.post("/list_directory", json={"path": "/".join(["deep"] +
                                                                       ["a"] * 1090)})
        assert shallow.status_code == 200 and shallow.json()["truncated"] is False
        tree = shallow.json()["directory_tree"]
        for _ in range(10):
            (tree,) = tree["children"]
        assert tree["children"] == [{"type": "file", "name": "bottom.txt"}]
    finally:
        remove_chain(chain)


# ---------------------------------------------------------------------------------------
# 4. JSON nested too deeply, integers too long


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"a": ' * 100_000,
                                  json.dumps({"path": [[[["x"]]]] * 1}).replace(
                                      '["x"]', "[" * 70 + '"x"' + "]" * 70).encode()],
                         ids=["arrays-100k", "objects-100k", "70-levels-in-a-field"])
def test_json_nested_too_deeply_is_a_400(guest: Served, body: bytes) -> None:
    response = guest.post("/list_directory", data=body,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text[:300]
    assert message(response).startswith("request body: ")
    assert "nested too deeply" in message(response)


def test_integers_too_long_for_python_are_a_400(guest: Served) -> None:
    too_long = b'{"path": ' + b"7" * 5000 + b"}"
    response = guest.post("/list_directory", data=too_long,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text[:300]
    assert message(response).startswith("request body: ") and "digits" in message(response)
    # 4000 digits parse, but have no float: the timeout check must not overflow
    huge = b'{"command": ["true"], "timeout": ' + b"9" * 4000 + b"}"
    response = guest.post("/execute", data=huge, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and message(response).startswith("timeout: ")


# ---------------------------------------------------------------------------------------
# 5. chunked bodies get the same size limit


def chunked(data: bytes, size: int = 1000) -> Iterator[bytes]:
    """A body requests sends with Transfer-Encoding: chunked (it has no length)."""
    return iter([data[i:i + size] for i in range(0, len(data), size)])


def upload_chunked(guest: Any, name: str, data: bytes) -> requests.Response:
    """/setup/upload of `data` as `name`, its multipart body sent chunked."""
    upload = requests.Request("POST", guest.url + "/setup/upload", headers=AUTH,
                              data={"file_path": name},
                              files={"file_data": (name, data)}).prepare()
    assert isinstance(upload.body, bytes)
    return requests.post(upload.url or "", data=chunked(upload.body), timeout=30,
                         headers={**AUTH, "Content-Type": upload.headers["Content-Type"]})


def test_an_oversized_chunked_body_is_a_413_like_a_content_length_one(root: Path) -> None:
    with serve(root, max_request_bytes=2000) as guest:
        big_json = json.dumps({"path": "x" * 5000}).encode()
        for body in (big_json, chunked(big_json)):
            response = guest.post("/list_directory", data=body,
                                  headers={"Content-Type": "application/json"})
            assert response.status_code == 413, response.text[:300]
            assert "2000" in message(response)

        response = upload_chunked(guest, "big.bin", b"x" * 5000)
        assert response.status_code == 413, response.text[:300]
        assert not (root / "big.bin").exists()

        exact = json.dumps({"path": "."}).encode()
        exact = exact[:-1] + b" " * (2000 - len(exact)) + b"}"
        assert len(exact) == 2000
        response = guest.post("/list_directory", data=chunked(exact, 300),
                              headers={"Content-Type": "application/json"})
        assert response.status_code == 200, response.text[:300]

        response = upload_chunked(guest, "small.bin", b"y" * 500)
        assert response.status_code == 200 and (root / "small.bin").read_bytes() == b"y" * 500


# ---------------------------------------------------------------------------------------
# 6. silent and half-sent connections are dropped


def closed_by_server(connection: socket.socket) -> bool:
    """Read until the server closes the connection (True) or 30 s pass without it."""
    connection.settimeout(30)
    try:
        while connection.recv(4096):
            pass  # a half-sent body is answered (400) before the close
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def test_a_silent_or_half_sent_connection_is_closed_while_others_are_served(
        root: Path) -> None:
    with serve(root, connection_timeout=0.5) as guest:
        address = ("127.0.0.1", guest.port)
        silent = socket.create_connection(address)
        half_line = socket.create_connection(address)
        half_line.sendall(b"POST /list_direc")
        half_body = socket.create_connection(address)
        half_body.sendall(b"POST /list_directory HTTP/1.1\r\nHost: x\r\n"
                          b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                          b'{"path": ')
        with silent, half_line, half_body:
            # the server still answers while those three hold their connections open
            assert requests.get(guest.url + "/platform", headers=AUTH, timeout=30).text \
                   == "Linux"
            assert closed_by_server(silent)
            assert closed_by_server(half_line)
            assert closed_by_server(half_body)
        assert requests.get(guest.url + "/platform", headers=AUTH, timeout=30).text == "Linux"


def test_connection_timeout_is_a_positive_setting_with_a_default() -> None:
    assert parse_args(["--no-token"], environ={"HOME": "/tmp"}).connection_timeout == 60.0
    assert parse_args(["--no-token", "--connection-timeout", "2.5"],
                      environ={"HOME": "/tmp"}).connection_timeout == 2.5
    for bad in ("0", "-1", "nan", "inf"):
        with pytest.raises(ConfigError, match="connection_timeout: must be a positive"):
            parse_args(["--no-token", "--connection-timeout", bad], environ={"HOME": "/tmp"})


# ---------------------------------------------------------------------------------------
# 7. tokens are ASCII


def test_a_non_ascii_token_is_refused_when_configured(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="token: the token must be printable ASCII"):
        GuestConfig(token="tök-1", display=None)
    for bad in ("tab\there", " padded ", "line\nbreak"):
        with pytest.raises(ConfigError, match="token: the token must"):
            GuestConfig(token=bad, display=None)
    home = {"HOME": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"^--token: the token must be printable ASCII"):
        parse_args(["--token", "tök-2"], environ=home)
    with pytest.raises(ConfigError, match=r"^\$WORKBENCH_GUEST_TOKEN: the token must"):
        parse_args([], environ={**home, "WORKBENCH_GUEST_TOKEN": "tök-3"})
    token_file = tmp_path / "token"
    token_file.write_text("tök-4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^--token-file {token_file}: the token must"):
        parse_args(["--token-file", str(token_file)], environ=home)
    token_file.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="is not text"):
        parse_args(["--token-file", str(token_file)], environ=home)
    for error in ("tök-1", "tök-2", "tök-3", "tök-4"):  # never shown back
        with pytest.raises(ConfigError) as caught:
            GuestConfig(token=error, display=None)
        assert error not in str(caught.value)


def test_a_non_ascii_token_header_is_a_401(guest: Served) -> None:
    for headers in ({"Authorization": "Bearer tök".encode()},
                    {"Authorization": "Bearer t\xf6k".encode("latin-1")},
                    {"X-Workbench-Token": "\u20ac".encode()},
                    {"X-Workbench-Token": bytes(range(0x80, 0x100))}):
        response = requests.get(guest.url + "/platform", headers=headers, timeout=30)
        assert response.status_code == 401, (headers, response.text)
        assert "token" in message(response)


# ---------------------------------------------------------------------------------------
# 8. the token file is never readable by others


def test_token_file_is_created_readable_by_its_owner_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    created_modes: list[int] = []
    real_open = os.open

    def recording_open(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if flags & os.O_CREAT:
            created_modes.append(mode)
        return real_open(path, flags, mode, **kwargs)

    def no_chmod(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the token file must be born 0600, not chmod-ed afterwards")

    wider = tmp_path / "wider-token"  # an older token file readable by everybody
    wider.write_text("old\n")
    wider.chmod(0o644)
    monkeypatch.setattr(os, "open", recording_open)
    monkeypatch.setattr(os, "chmod", no_chmod)
    old_umask = os.umask(0)  # the mode must not depend on a careful umask
    try:
        fresh = tmp_path / "fresh-token"
        write_token_file(fresh, "s3cret-token")
        write_token_file(wider, "n3w-token")
    finally:
        os.umask(old_umask)
    assert created_modes and all(mode & 0o077 == 0 for mode in created_modes), created_modes
    for path, token in ((fresh, "s3cret-token"), (wider, "n3w-token")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert parse_args(["--token-file", str(path)],
                          environ={"HOME": str(tmp_path)}).token == token
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh-token", "wider-token"]
    with pytest.raises(ConfigError, match="printable ASCII"):
        write_token_file(tmp_path / "bad", "tök")


def test_urls_that_cannot_be_parsed_or_fetched_here_are_a_400(guest: Served) -> None:
    """Found by tests/test_guest_fuzz.py: urlparse raises ValueError on a bracketed host
    that is no IP address."""
    for url, expected in [("file://[x]/notes.txt", "url: cannot parse"),
                          ("ftp://example.org/notes.txt", "url: unsupported scheme")]:
        response = guest.post("/setup/download_file", json={"url": url, "path": "copy.txt"})
        assert response.status_code == 400, (url, response.text[:300])
        assert message(response).startswith(expected)
    assert not (guest.root / "copy.txt").exists()
