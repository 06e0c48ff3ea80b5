"""Getters that take a file out of a presentation on the desktop (OSWorld's
desktop_env/evaluators/getters/impress.py): the sound of a slide (audio_in_slide) and the
picture behind a slide (background_image_in_slide).

Config: {"ppt_file_path": <pptx on the desktop>, "slide_index": <0-based>, "dest": <name>}.
The pptx is copied into the cache folder. A file kept inside the pptx is extracted there
under its own path in the archive (ppt/media/...), as OSWorld does; a file the pptx only
links to (file://...) is copied from the desktop and saved as `dest`. None when the pptx,
the slide or the file is not there.
"""

from __future__ import annotations

import io
import logging
import posixpath
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse
from xml.etree import ElementTree

from vm.tasks.files import save_local
from vm.tasks.getters.files import GetterError, _field, _read_desktop_file
from vm.tasks.registry import EvalContext, register_getter

logger = logging.getLogger(__name__)

_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"

Relationship = dict[str, str]


def _config(config: dict[str, Any]) -> tuple[str, int, str]:
    path = _field(config, "ppt_file_path", str)
    index = config.get("slide_index")
    try:
        slide = int(index)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise GetterError(f"getter {config.get('type')!r}: field 'slide_index' must be a "
                          f"number, got {index!r}") from None
    return path, slide, str(_field(config, "dest", str))


def _xml(archive: zipfile.ZipFile, member: str) -> ElementTree.Element | None:
    if member not in archive.namelist():
        return None
    try:
        return ElementTree.fromstring(archive.read(member))
    except ElementTree.ParseError as exc:
        logger.debug("%s is not XML: %s", member, exc)
        return None


def _relationships(archive: zipfile.ZipFile, slide: int) -> list[Relationship]:
    """The relationships of slide<slide + 1>.xml (its pictures, sounds, links)."""
    root = _xml(archive, f"ppt/slides/_rels/slide{slide + 1}.xml.rels")
    if root is None:
        return []
    return [dict(rel.attrib) for rel in root.iterfind(f"{{{_RELS}}}Relationship")]


def _member(target: str) -> str | None:
    """The archive path a slide's relative target points to; None if it leaves the
    archive."""
    path = posixpath.normpath(posixpath.join("ppt/slides", target))
    if path.startswith(("../", "/")) or path == "..":
        return None
    return path


def _linked_path(target: str) -> str | None:
    """The desktop path of a linked file (a file:// URL or an absolute path)."""
    if target.startswith("file://"):
        return unquote(urlparse(target).path)
    return target if target.startswith("/") else None


def _fetch_target(context: EvalContext, archive: zipfile.ZipFile, rel: Relationship,
                  dest: str) -> str | None:
    """The local path of the file a relationship points to: extracted from the pptx into
    the cache folder, or copied from the desktop when linked."""
    target = rel.get("Target", "")
    if rel.get("TargetMode") == "External" or target.startswith("file://"):
        linked = _linked_path(target)
        if linked is None:
            return None
        data = _read_desktop_file(context, linked)
        return None if data is None else str(save_local(data, context.cache_dir, dest))
    member = _member(target)
    if member is None or member not in archive.namelist():
        return None
    local = context.cache_dir / PurePosixPath(member)
    local.parent.mkdir(parents=True, exist_ok=True)
    return str(save_local(archive.read(member), local.parent, local.name))


def _with_pptx(context: EvalContext, config: dict[str, Any],
               pick: Callable[[zipfile.ZipFile, int, str], str | None]) -> str | None:
    """Copy the pptx into the cache folder and let `pick` take a file out of it."""
    path, slide, dest = _config(config)
    data = _read_desktop_file(context, path)
    if data is None:
        return None
    save_local(data, context.cache_dir, Path(path).name)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return pick(archive, slide, dest)
    except zipfile.BadZipFile:
        logger.debug("%s is not a pptx (zip) file", path)
        return None


@register_getter("audio_in_slide")
def get_audio_in_slide(context: EvalContext, config: dict[str, Any]) -> str | None:
    """The local path of the first sound of the slide (its first relationship whose type
    names audio); None when the slide has none."""
    def pick(archive: zipfile.ZipFile, slide: int, dest: str) -> str | None:
        for rel in _relationships(archive, slide):
            if "audio" in rel.get("Type", ""):
                return _fetch_target(context, archive, rel, dest)
        return None
    return _with_pptx(context, config, pick)


def _background_image_id(archive: zipfile.ZipFile, slide: int) -> str | None:
    """The relationship id of the first picture embedded in a background of the slide."""
    root = _xml(archive, f"ppt/slides/slide{slide + 1}.xml")
    if root is None:
        return None
    for background in root.iter(f"{{{_P}}}bgPr"):
        blip = next(background.iter(f"{{{_A}}}blip"), None)
        if blip is not None and f"{{{_R}}}embed" in blip.attrib:
            return blip.attrib[f"{{{_R}}}embed"]
    return None


@register_getter("background_image_in_slide")
def get_background_image_in_slide(context: EvalContext, config: dict[str, Any]
                                  ) -> str | None:
    """The local path of the picture that fills the slide's background; None when the
    background is not a picture."""
    def pick(archive: zipfile.ZipFile, slide: int, dest: str) -> str | None:
        image_id = _background_image_id(archive, slide)
        if image_id is None:
            return None
        for rel in _relationships(archive, slide):
            if "image" in rel.get("Type", "") and rel.get("Id") == image_id:
                return _fetch_target(context, archive, rel, dest)
        return None
    return _with_pptx(context, config, pick)
