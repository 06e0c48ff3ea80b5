"""Copying a live home for a snapshot: a file deleted between cp's listing and its copy
is gone from the home too, so the copy stands; every other cp failure is an error."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from vm.errors import SnapshotError
from vm.providers.sandbox.snapshots import _copy_tree, vanished_only


def _cp_stderr(*args: str) -> str:
    """What this machine's cp says (C locale, as _copy_tree runs it)."""
    result = subprocess.run(["cp", "-a", "--", *args], capture_output=True, text=True,
                            env={**os.environ, "LC_ALL": "C"})
    assert result.returncode != 0
    return result.stderr


def test_a_file_that_vanished_mid_copy_is_recognised_in_cps_own_words(tmp_path: Path
                                                                       ) -> None:
    home = tmp_path / "home"
    (home / ".thunderbird").mkdir(parents=True)
    gone = home / ".thunderbird" / "places.sqlite-journal"
    # cp's message for a listed file that is no longer there (asked for directly)
    stderr = _cp_stderr(str(gone), str(tmp_path / "copy"))
    assert vanished_only(stderr, home) == [str(gone)]
    # the same message about a file outside the folder being copied is not a vanish
    assert vanished_only(stderr, tmp_path / "other") == []
    # mixed with another complaint: a real failure
    assert vanished_only(stderr + "cp: cannot create regular file 'x': Permission "
                         "denied\n", home) == []
    assert vanished_only("", home) == []


def test_copy_tree_copies_and_fails_loudly_on_a_real_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "Desktop").mkdir(parents=True)
    (home / "Desktop" / "notes.txt").write_text("kept")
    _copy_tree(home, tmp_path / "copy")
    assert (tmp_path / "copy" / "Desktop" / "notes.txt").read_text() == "kept"
    with pytest.raises(SnapshotError, match=r"copying .*home.* failed"):
        _copy_tree(home, tmp_path / "no" / "such" / "folder" / "copy")
