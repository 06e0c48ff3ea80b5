"""The guest's screen through QMP `screendump`: PNG bytes (PPM converted to PNG where QEMU
cannot write PNG), and the size of the last one taken."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

from vm.observation import png_size
from vm.providers.qemu.qmp import QMPClient, QMPError


class Screen:
    """Screendumps of one VM; `size` is the last one's (None until one is taken, and after
    anything that may change the guest's resolution)."""

    def __init__(self) -> None:
        self.size: tuple[int, int] | None = None
        self._png_screendump = True
        self._screendumps = itertools.count()

    def capture(self, qmp: QMPClient, folder: Path, timeout: float) -> bytes:
        """The screen as PNG bytes; QEMU writes the dump into `folder` (read, then removed)."""
        number = next(self._screendumps)
        if self._png_screendump:
            target = folder / f"screen-{number}.png"
            try:
                qmp.execute("screendump", {"filename": str(target), "format": "png"},
                            timeout=timeout)
                data = _take(target)
            except QMPError as exc:
                if "format" not in exc.description.lower():
                    raise
                self._png_screendump = False  # QEMU < 7.1 or built without libpng
        if not self._png_screendump:
            from PIL import Image

            target = folder / f"screen-{number}.ppm"
            qmp.execute("screendump", {"filename": str(target)}, timeout=timeout)
            buffer = io.BytesIO()
            with Image.open(io.BytesIO(_take(target))) as image:
                image.save(buffer, format="PNG")
            data = buffer.getvalue()
        self.size = png_size(data)
        return data


def _take(path: Path) -> bytes:
    try:
        return path.read_bytes()
    finally:
        path.unlink(missing_ok=True)
