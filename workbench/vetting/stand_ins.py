"""Stand-ins for task files that can be neither found in the offline cache nor downloaded:
a valid, minimal file of the type the file name's extension says (an empty workbook, a
blank page, a one-pixel image, ...), so a task's setup and getters run without its real
documents (`workbench tasks smoke --stand-ins`). A score computed on stand-ins says nothing
about the task; the smoke report marks it so.

Stand-ins are written to their own temporary folder, never to the offline cache: a later
run must not take one for the real file.
"""

from __future__ import annotations

import io
import tempfile
import threading
import wave
import zipfile
from collections.abc import Callable
from pathlib import Path

from vm.atomic_write import write_atomic
from vm.tasks.files import plain_name
from workbench.vetting.legacy_workbook import blank_workbook


def _workbook() -> bytes:
    from openpyxl import Workbook

    out = io.BytesIO()
    Workbook().save(out)
    return out.getvalue()


def _document() -> bytes:
    from docx import Document

    out = io.BytesIO()
    Document().save(out)
    return out.getvalue()


def _presentation() -> bytes:
    from pptx import Presentation

    out = io.BytesIO()
    Presentation().save(out)
    return out.getvalue()


_ODF_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
           'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
           'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
           'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
           'office:version="1.2"')
# OpenDocument kinds: (media type, the body's element, what one blank body holds)
_ODF_BODIES = {
    "ods": ("application/vnd.oasis.opendocument.spreadsheet", "spreadsheet",
            '<table:table table:name="Sheet1"><table:table-row><table:table-cell/>'
            "</table:table-row></table:table>"),
    "odt": ("application/vnd.oasis.opendocument.text", "text", "<text:p/>"),
    "odp": ("application/vnd.oasis.opendocument.presentation", "presentation",
            '<draw:page draw:name="page1"/>'),
}


def _open_document(kind: str) -> Callable[[], bytes]:
    """A blank OpenDocument file (a sheet, a page, a slide): its `mimetype` first and
    stored, its content and its manifest, as LibreOffice reads them."""
    media_type, body, blank = _ODF_BODIES[kind]

    def make() -> bytes:
        content = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-content '
                   f"{_ODF_NS}><office:body><office:{body}>{blank}</office:{body}>"
                   "</office:body></office:document-content>")
        manifest = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
                    '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" '
                    'manifest:version="1.2"><manifest:file-entry manifest:full-path="/" '
                    f'manifest:media-type="{media_type}"/><manifest:file-entry '
                    'manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                    "</manifest:manifest>")
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            archive.writestr("mimetype", media_type, compress_type=zipfile.ZIP_STORED)
            archive.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
            archive.writestr("META-INF/manifest.xml", manifest,
                             compress_type=zipfile.ZIP_DEFLATED)
        return out.getvalue()
    return make


def _image(kind: str) -> Callable[[], bytes]:
    def make() -> bytes:
        from PIL import Image

        out = io.BytesIO()
        Image.new("RGB", (8, 8), "white").save(out, kind)
        return out.getvalue()
    return make


def _video() -> bytes:
    """One second of a white 16x16 video (MPEG-4 Part 2 in an MP4 file), by OpenCV."""
    import cv2
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="workbench-stand-in-") as folder:
        path = Path(folder) / "stand-in.mp4"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), 10, (16, 16))
        frame = np.full((16, 16, 3), 255, dtype=np.uint8)
        for _ in range(10):
            writer.write(frame)
        writer.release()
        return path.read_bytes() if path.is_file() else b""


def _audio() -> bytes:
    """A tenth of a second of silence as 16-bit mono WAV."""
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(8000)
        sound.writeframes(b"\0\0" * 800)
    return out.getvalue()


def _archive() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("stand-in.txt", "stand-in\n")
    return out.getvalue()


def _text(content: str) -> Callable[[], bytes]:
    return lambda: content.encode()


# Extension -> a maker of a minimal valid file of that type; other extensions get an
# empty file.
MAKERS: dict[str, Callable[[], bytes]] = {
    "xlsx": _workbook, "xls": blank_workbook, "docx": _document, "pptx": _presentation,
    "ods": _open_document("ods"), "odt": _open_document("odt"), "odp": _open_document("odp"),
    "pdf": _image("PDF"), "png": _image("PNG"), "jpg": _image("JPEG"),
    "jpeg": _image("JPEG"), "gif": _image("GIF"), "bmp": _image("BMP"),
    "webp": _image("WEBP"), "tif": _image("TIFF"), "tiff": _image("TIFF"),
    "mp4": _video, "wav": _audio, "zip": _archive,
    "txt": _text("stand-in\n"), "md": _text("stand-in\n"), "csv": _text("column\nvalue\n"),
    "json": _text("{}\n"), "html": _text("<!DOCTYPE html><html><body></body></html>\n"),
    "xml": _text("<?xml version='1.0'?><root/>\n"),
    "svg": _text("<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'/>\n"),
}


def stand_in_bytes(name: str) -> bytes:
    """A minimal valid file of the type `name`'s extension says (empty when unknown)."""
    extension = Path(name).suffix.lower().lstrip(".")
    maker = MAKERS.get(extension)
    return maker() if maker is not None else b""


class StandIns:
    """Stand-ins handed out during a run, kept under `folder` (`<task id>/<file name>`),
    and which task got which (read by the smoke report). Thread-safe: tasks run on
    several desktops at once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._used: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def provide(self, url: str, task_id: str, name: str) -> bytes:
        """The stand-in for `url` (saved as `name` for `task_id`), made once."""
        path = (self.folder / plain_name(task_id or "_", "task id")
                / plain_name(name, "file name"))
        with self._lock:
            urls = self._used.setdefault(task_id, [])
            if url not in urls:
                urls.append(url)
            if not path.is_file():
                write_atomic(path, stand_in_bytes(name))
            return path.read_bytes()

    def used_by(self, task_id: str) -> list[str]:
        """The URLs `task_id` got stand-ins for, in the order asked."""
        with self._lock:
            return list(self._used.get(task_id, []))

    def forget(self, task_id: str) -> None:
        """Start the task's record afresh (before it runs again)."""
        with self._lock:
            self._used.pop(task_id, None)
