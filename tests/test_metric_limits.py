"""Metrics run under a time and memory limit: an xlsx or PNG bomb, or a metric that never
returns, scores 0 with the reason on the evaluation, and the evaluating process goes on."""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.test_tasks_evaluate import FolderDesktop, as_provider, task
from vm.actions import Done
from vm.tasks import evaluate_task
from vm.tasks.metric_limits import (
    MetricLimitExceeded,
    MetricLimits,
    MetricRaised,
    call_with_limits,
)
from vm.tasks.metrics.images import check_structure_sim
from vm.tasks.metrics.table import compare_table
from vm.tasks.registry import METRICS, register_metric

SMALL = MetricLimits(timeout=900.0, memory_mb=400)  # the time limit: out of reach
SAME_DATA = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}


def xlsx(path: Path, rows: Iterator[str] | list[str]) -> Path:
    """A minimal workbook whose one sheet holds `rows` (each a <row> element), streamed."""
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxml'
            'formats.org/package/2006/content-types"><Default Extension="rels" ContentType='
            '"application/vnd.openxmlformats-package.relationships+xml"/><Default Extension'
            '="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'
            '.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="applic'
            'ation/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>'),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.open'
            'xmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http:'
            '//schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
            'Target="xl/workbook.xml"/></Relationships>'),
        "xl/workbook.xml": (
            '<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlfo'
            'rmats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/o'
            'fficeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id'
            '="rId1"/></sheets></workbook>'),
        "xl/_rels/workbook.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.open'
            'xmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http:'
            '//schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
            'Target="worksheets/sheet1.xml"/></Relationships>'),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
        with archive.open("xl/worksheets/sheet1.xml", "w") as sheet:
            sheet.write(b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://sc'
                        b'hemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>')
            for row in rows:
                sheet.write(row.encode())
            sheet.write(b"</sheetData></worksheet>")
    return path


def row(number: int) -> str:
    return (f'<row r="{number}"><c r="A{number}" t="inlineStr"><is><t>widget</t></is></c>'
            f'<c r="B{number}"><v>{number}</v></c></row>')


# rows without references (readers count them) compress to almost nothing
SAME_ROW = '<row><c t="inlineStr"><is><t>widget</t></is></c><c><v>7</v></c></row>'


def png_bomb(path: Path, side: int) -> Path:
    """A valid, all-black RGB PNG of side x side pixels, written without ever holding the
    image: each scanline is a filter byte and zeros, compressed as a stream."""
    import struct

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    compressor = zlib.compressobj(9)
    line = b"\x00" * (1 + side * 3)
    data = b"".join(compressor.compress(line) for _ in range(side)) + compressor.flush()
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data)
                     + chunk(b"IEND", b""))
    return path


def test_an_ordinary_metric_scores_as_it_would_in_process(tmp_path: Path) -> None:
    left = xlsx(tmp_path / "a.xlsx", [row(n) for n in range(1, 20)])
    right = xlsx(tmp_path / "b.xlsx", [row(n) for n in range(1, 20)])
    other = xlsx(tmp_path / "c.xlsx", [row(n) for n in range(2, 21)])
    assert compare_table(str(left), str(right), **SAME_DATA) == 1.0
    assert call_with_limits(compare_table, (str(left), str(right)), SAME_DATA, SMALL) == 1.0
    assert call_with_limits(compare_table, (str(left), str(other)), SAME_DATA, SMALL) == 0.0


@pytest.mark.slow
def test_an_xlsx_bomb_stops_at_the_memory_limit(tmp_path: Path) -> None:
    bomb = xlsx(tmp_path / "bomb.xlsx", (SAME_ROW for _ in range(1_000_000)))
    assert bomb.stat().st_size < 300_000  # small on disk, a million rows inside
    gold = xlsx(tmp_path / "gold.xlsx", [SAME_ROW])
    # Reading it whole takes about 1 GB (measured: 535 MB for half as many rows), so it
    # meets the memory limit however fast the machine; the time limit is out of reach.
    limits = MetricLimits(timeout=900.0, memory_mb=200)
    with pytest.raises(MetricLimitExceeded, match="memory limit of 200 MiB"):
        call_with_limits(compare_table, (str(bomb), str(gold)), SAME_DATA, limits)


def test_a_png_bomb_stops_at_the_memory_limit(tmp_path: Path) -> None:
    bomb = png_bomb(tmp_path / "bomb.png", 13000)
    assert bomb.stat().st_size < 1_000_000
    with Image.open(bomb) as image:
        assert image.size == (13000, 13000)  # a real PNG: only its decoding is too big
    with pytest.raises(MetricLimitExceeded, match="memory limit"):
        call_with_limits(check_structure_sim, (str(bomb), str(bomb)), {}, SMALL)


def _spin(*args: Any, **options: Any) -> float:
    while True:
        pass


def test_a_metric_that_never_returns_is_stopped_at_the_time_limit() -> None:
    # The loop cannot end, so however slow the machine the limit is what stops it.
    with pytest.raises(MetricLimitExceeded, match="time limit of 1 s"):
        call_with_limits(_spin, (), {}, MetricLimits(timeout=1.0, memory_mb=100))


def test_a_metric_error_keeps_its_type_and_message() -> None:
    def broken(value: str) -> float:
        raise ValueError(f"cannot read {value}")

    with pytest.raises(MetricRaised, match=r"ValueError: cannot read out\.xlsx"):
        call_with_limits(broken, ("out.xlsx",), {}, SMALL)


def test_limits_come_from_the_environment_and_bad_values_name_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_METRIC_TIMEOUT", "30")
    monkeypatch.setenv("WORKBENCH_METRIC_MEMORY_MB", "512")
    assert MetricLimits.from_environment() == MetricLimits(timeout=30.0, memory_mb=512)
    monkeypatch.setenv("WORKBENCH_METRIC_MEMORY_MB", "lots")
    with pytest.raises(ValueError, match=r"\$WORKBENCH_METRIC_MEMORY_MB: expected a number"):
        MetricLimits.from_environment()


@pytest.fixture
def allocating_metric() -> Iterator[str]:
    @register_metric("allocates_forever")
    def allocates_forever(result: Any, expected: Any = None, **options: Any) -> float:
        hoard = []
        while True:
            hoard.append(bytearray(16 * 1024 * 1024))

    yield "allocates_forever"
    METRICS.pop("allocates_forever", None)


def test_a_bomb_in_an_evaluation_scores_0_with_the_reason_and_the_run_goes_on(
        tmp_path: Path, allocating_metric: str) -> None:
    desktop = as_provider(FolderDesktop(tmp_path))
    before = os.getpid()
    bombed = task({"func": allocating_metric,
                   "result": {"type": "rule", "rules": {"x": 1}},
                   "expected": {"type": "rule", "rules": {"x": 1}}})
    evaluation = evaluate_task(desktop, bombed, Done(), limits=SMALL)
    assert evaluation.score == 0.0
    assert evaluation.reason is not None
    assert "evaluator.func[0] 'allocates_forever' could not score" in evaluation.reason
    assert "memory limit of 400 MiB" in evaluation.reason
    # the same process evaluates the next task normally
    assert os.getpid() == before
    (tmp_path / "out.txt").write_text("same")
    (tmp_path / "gold.txt").write_text("same")
    fine = task({"func": "compare_text_file",
                 "result": {"type": "vm_file", "path": "/home/user/out.txt"},
                 "expected": {"type": "vm_file", "path": "/home/user/gold.txt"}})
    assert evaluate_task(desktop, fine, Done(), limits=SMALL).score == 1.0
