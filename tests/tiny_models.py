"""The tiny random Qwen2.5-VL model for tests (built by agents.tiny_model), once per
session in a temporary folder, and a fixture serving it over HTTP.

    path = tiny_qwen25_vl()          # built once per test session, then reused
    model = AutoModelForImageTextToText.from_pretrained(path)
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.tiny_model import (  # noqa: F401  (names tests and benchmarks import)
    CHAT_TEMPLATE,
    CORPUS,
    HIDDEN,
    SPECIAL_TOKENS,
    VOCAB_SIZE,
    build_tiny_qwen25_vl,
    build_tokenizer,
)

_TEMP_ROOTS: list[Path] = []


def _remove_temp_roots() -> None:
    for root in _TEMP_ROOTS:
        shutil.rmtree(root, ignore_errors=True)


@functools.cache
def tiny_qwen25_vl(seed: int = 0) -> Path:
    """The tiny checkpoint's folder, built once per process (deleted at exit)."""
    root = Path(tempfile.mkdtemp(prefix="tiny-qwen25vl-"))
    if not _TEMP_ROOTS:
        atexit.register(_remove_temp_roots)
    _TEMP_ROOTS.append(root)
    return build_tiny_qwen25_vl(root / "model", seed=seed)


def png_screen(width: int, height: int, colour: str = "white") -> bytes:
    """A plain PNG screenshot of the given size."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, "PNG")
    return buffer.getvalue()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a test starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_serving(process: subprocess.Popen[bytes], base: str, log: Path,
                       timeout: float, what: str) -> None:
    """Wait until `base`/health answers 200; fail the test with the end of `log` when
    `process` exits first or `timeout` seconds pass."""
    import requests

    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what} did not come up:\n{log.read_text()[-4000:]}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def served_tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`transformers serve` on the tiny checkpoint: (base URL, model name)."""
    cli = Path(sys.executable).with_name("transformers")
    if not cli.exists() and shutil.which("transformers") is None:
        # a dev dependency (transformers[serving]): missing means a broken setup, not a
        # test that may be left out
        pytest.fail(f"the transformers CLI is neither beside {sys.executable} nor on PATH; "
                    "it comes with the dev extra (transformers[serving]): run `make setup`")
    folder = build_tiny_qwen25_vl(tmp_path_factory.mktemp("served") / "model")
    port = free_port()
    log = (folder.parent / "serve.log").open("w")
    process = subprocess.Popen(
        [str(cli if cli.exists() else "transformers"), "serve", str(folder), "--host",
         "127.0.0.1", "--port", str(port), "--device", "cpu"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(process, base, folder.parent / "serve.log", 120,
                           "transformers serve")
        yield f"{base}/v1", str(folder)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
