"""How much two screenshots differ: the share of pixels whose colour changed.

A replay uses it to wait until the desktop shows what the recorded step acted on (a
dialog that opens a little later on a busy machine); a few pixels that always change
(a blinking text cursor) stay under a small tolerance. A caller comparing many screens
with one reference decodes the reference once (`decode`, `fraction_changed`).
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def decode(png: bytes, what: str = "screenshot") -> np.ndarray:
    """The RGB pixels of a PNG (height x width x 3); ValueError naming `what` when it
    is not a readable image."""
    try:
        with Image.open(io.BytesIO(png)) as image:
            return np.asarray(image.convert("RGB"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{what}: not a readable image: {exc}") from None


def fraction_changed(first: np.ndarray, second: np.ndarray) -> float:
    """Share (0..1) of pixels that differ between two decoded screens; 1.0 when their
    sizes differ."""
    if first.shape != second.shape:
        return 1.0
    if first.size == 0:
        return 0.0
    return float(np.any(first != second, axis=2).mean())


def changed_fraction(first: bytes, second: bytes) -> float:
    """Share (0..1) of pixels that differ between two PNG screenshots; 1.0 when their
    sizes differ. ValueError names the one that is not an image."""
    return fraction_changed(decode(first, "first screenshot"),
                            decode(second, "second screenshot"))
