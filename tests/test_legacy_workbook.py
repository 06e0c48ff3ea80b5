"""The blank Excel 97-2003 workbook that `tasks smoke --stand-ins` gives for an `.xls`
file (workbench/vetting/legacy_workbook.py), read by LibreOffice, as OSWorld's tasks open
it: LibreOffice converts it to OpenDocument with the sheet it names."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.vetting.legacy_workbook import blank_workbook
from workbench.vetting.stand_ins import stand_in_bytes


def _sheets_libreoffice_reads(path: Path, tmp_path: Path) -> dict[str, int]:
    """Sheet name -> rows, of `path` as LibreOffice converts it to .ods."""
    import pandas

    out = tmp_path / "out"
    done = subprocess.run(
        ["soffice", "--headless", f"-env:UserInstallation={(tmp_path / 'profile').as_uri()}",
         "--convert-to", "ods", "--outdir", str(out), str(path)],
        capture_output=True, text=True, timeout=180)
    converted = out / f"{path.stem}.ods"
    assert converted.is_file(), (done.stdout, done.stderr)
    sheets = pandas.read_excel(converted, engine="odf", sheet_name=None, header=None)
    return {name: len(frame) for name, frame in sheets.items()}


@pytest.mark.skipif(shutil.which("soffice") is None, reason="needs LibreOffice (make setup)")
def test_libreoffice_reads_the_blank_workbook_and_its_sheet_name(tmp_path: Path) -> None:
    # a name other than "Sheet1", LibreOffice's own default, shows it read the workbook
    named = tmp_path / "ledger.xls"
    named.write_bytes(blank_workbook("Ledger ärger"))
    assert _sheets_libreoffice_reads(named, tmp_path / "named") == {"Ledger ärger": 0}
    stand_in = tmp_path / "cell_search.xls"  # OSWorld's f8cfa149 opens this name
    stand_in.write_bytes(stand_in_bytes(stand_in.name))
    assert _sheets_libreoffice_reads(stand_in, tmp_path / "stand-in") == {"Sheet1": 0}


@pytest.mark.parametrize("name", ["", "x" * 32, "a/b", "what?", "[1]"])
def test_a_sheet_name_excel_refuses_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="1 to 31 characters"):
        blank_workbook(name)
