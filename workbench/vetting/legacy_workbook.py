"""A blank Excel 97-2003 workbook (`.xls`): one empty sheet, as a stand-in file.

An `.xls` file is a compound file (Microsoft's [MS-CFB], a small FAT file system in one
file) holding one stream, "Workbook", of BIFF8 records ([MS-XLS]). No maintained Python
library writes the format, so this module writes the few parts a reader needs:

- the compound file: a 512-byte header, one FAT sector, one directory sector (the root
  entry and the "Workbook" stream) and the stream's sectors. The stream is padded to
  4096 bytes, the size from which a stream lives in ordinary sectors rather than in the
  mini stream, so no mini FAT is needed;
- the workbook stream: the workbook's globals (BOF, code page, window, a font, the
  formats every cell points at, the sheet's entry) and one worksheet (BOF, its empty
  dimensions, its window, EOF).
"""

from __future__ import annotations

import struct

SECTOR = 512
MINI_STREAM_CUTOFF = 4096  # streams this size or larger live in ordinary sectors
FREE, END_OF_CHAIN, FAT_SECTOR, NO_STREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
SIGNATURE = bytes.fromhex("d0cf11e0a1b11ae1")

# BIFF8 record types
BOF, EOF, CODEPAGE, WINDOW1, FONT, XF, STYLE, BOUNDSHEET = (
    0x0809, 0x000A, 0x0042, 0x003D, 0x0031, 0x00E0, 0x0293, 0x0085)
DIMENSIONS, WINDOW2 = 0x0200, 0x023E
GLOBALS, WORKSHEET = 0x0005, 0x0010  # a BOF's kind of substream
UTF16 = 1200  # the code page of a BIFF8 workbook's strings
FORBIDDEN_IN_SHEET_NAMES = ":\\/?*[]"


def _record(kind: int, body: bytes = b"") -> bytes:
    return struct.pack("<HH", kind, len(body)) + body


def _bof(substream: int) -> bytes:
    # BIFF8 (0x0600), the substream's kind, the build and year of the writing application
    return _record(BOF, struct.pack("<HHHHII", 0x0600, substream, 0x0DBB, 0x07CC, 0, 0x06))


def _short_text(text: str) -> bytes:
    """A string with a one-byte length, its characters stored uncompressed (UTF-16)."""
    encoded = text.encode("utf-16-le")
    return struct.pack("<BB", len(encoded) // 2, 1) + encoded


def _font() -> bytes:
    # 10 pt (in twentieths of a point), no attributes, automatic colour, normal weight
    return _record(FONT, struct.pack("<HHHHHBBBB", 200, 0, 0x7FFF, 400, 0, 0, 0, 0, 0)
                   + _short_text("Arial"))


def _xf(style: bool) -> bytes:
    """A cell format: font 0, the General number format; a style format (the 16 that
    Excel expects first) or a cell format whose parent is style format 0."""
    kind = 0xFFF5 if style else 0x0001  # style flag and parent 0xFFF; cell: locked
    attributes = 0xF4 if style else 0x00  # a style leaves no attribute group set
    return _record(XF, struct.pack("<HHHBBBBIIH", 0, 0, kind, 0x20, 0, 0, attributes,
                                   0, 0, 0x20C0))


def _globals(sheet_offset: int, sheet: str) -> bytes:
    window = struct.pack("<HHHHHHHHH", 0, 0, 0x4000, 0x2000, 0x0038, 0, 0, 1, 0x0258)
    normal_style = _record(STYLE, struct.pack("<HBB", 0x8000, 0x00, 0xFF))
    sheet_entry = _record(BOUNDSHEET, struct.pack("<IBB", sheet_offset, 0, 0)
                          + _short_text(sheet))
    return b"".join([
        _bof(GLOBALS), _record(CODEPAGE, struct.pack("<H", UTF16)),
        _record(WINDOW1, window),
        *[_font()] * 5,  # BIFF has no font 4: a reader counts on five to index past it
        *[_xf(style=True)] * 16, _xf(style=False), normal_style,
        sheet_entry, _record(EOF)])


def _worksheet() -> bytes:
    # no rows or columns used; the sheet's window: gridlines, headers, zeros, selected
    return b"".join([
        _bof(WORKSHEET), _record(DIMENSIONS, struct.pack("<IIHHH", 0, 0, 0, 0, 0)),
        _record(WINDOW2, struct.pack("<HHHIHHI", 0x06B6, 0, 0, 0x40, 0, 0, 0)),
        _record(EOF)])


def workbook_stream(sheet: str) -> bytes:
    """The "Workbook" stream: the globals, then the sheet they point at."""
    sheet_offset = len(_globals(0, sheet))  # the globals' size does not depend on it
    return _globals(sheet_offset, sheet) + _worksheet()


def _directory_entry(name: str, kind: int, child: int, start: int, size: int) -> bytes:
    encoded = (name + "\0").encode("utf-16-le") if name else b""
    return (encoded.ljust(64, b"\0")
            + struct.pack("<HBB", len(encoded), kind, 1 if name else 0)  # black node
            + struct.pack("<III", NO_STREAM, NO_STREAM, child)
            + bytes(16 + 4 + 8 + 8)  # class id, state bits, creation and change times
            + struct.pack("<IQ", start, size))


def compound_file(stream_name: str, data: bytes) -> bytes:
    """A version 3 compound file holding one stream, `data` under `stream_name`
    (padded to MINI_STREAM_CUTOFF so that it needs no mini stream)."""
    data = data.ljust(MINI_STREAM_CUTOFF, b"\0")
    data = data.ljust(-(-len(data) // SECTOR) * SECTOR, b"\0")
    data_sectors = len(data) // SECTOR
    if data_sectors + 2 > SECTOR // 4:
        raise ValueError(f"a stream of {len(data)} bytes needs more than one FAT sector")
    # sector 0: the FAT; sector 1: the directory; sectors 2 on: the stream
    chain = [FAT_SECTOR, END_OF_CHAIN] + [2 + i + 1 for i in range(data_sectors - 1)]
    fat = chain + [END_OF_CHAIN] + [FREE] * (SECTOR // 4 - len(chain) - 1)
    header = (SIGNATURE + bytes(16)
              + struct.pack("<HHHHH", 0x003E, 0x0003, 0xFFFE, 9, 6) + bytes(6)
              + struct.pack("<IIIIIIIII", 0, 1, 1, 0, MINI_STREAM_CUTOFF, END_OF_CHAIN, 0,
                            END_OF_CHAIN, 0)
              + struct.pack("<I", 0) + struct.pack("<I", FREE) * 108)
    directory = (_directory_entry("Root Entry", 5, 1, END_OF_CHAIN, 0)
                 + _directory_entry(stream_name, 2, NO_STREAM, 2, len(data))
                 + _directory_entry("", 0, NO_STREAM, 0, 0) * 2)
    return header + struct.pack(f"<{SECTOR // 4}I", *fat) + directory + data


def blank_workbook(sheet: str = "Sheet1") -> bytes:
    """An Excel 97-2003 workbook with one empty sheet named `sheet` (1 to 31 characters,
    none of Excel's forbidden ones)."""
    if not 1 <= len(sheet) <= 31 or any(c in FORBIDDEN_IN_SHEET_NAMES for c in sheet):
        raise ValueError(f"sheet name {sheet!r}: 1 to 31 characters, none of "
                         f"{FORBIDDEN_IN_SHEET_NAMES}")
    return compound_file("Workbook", workbook_stream(sheet))
