"""How much two screenshots differ: the share of pixels whose colour changed.

A replay uses it to wait until the desktop shows what the recorded step acted on (a
dialog that opens a little later on a busy machine); a few pixels that always change
(a blinking text cursor) stay under a small tolerance.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def _rgb(png: bytes, what: str) -> np.ndarray:
    try:
        with Image.open(io.BytesIO(png)) as image:
            return np.asarray(image.convert("RGB"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{what}: not a readable image: {exc}") from None


def changed_fraction(first: bytes, second: bytes) -> float:
    """Share (0..1) of pixels that differ between two PNG screenshots; 1.0 when their
    sizes differ. ValueError names the one that is not an image."""
    a = _rgb(first, "first screenshot")
    b = _rgb(second, "second screenshot")
    if a.shape != b.shape:
        return 1.0
    if a.size == 0:
        return 0.0
    return float(np.any(a != b, axis=2).mean())
