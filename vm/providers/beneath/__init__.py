"""File work beneath a folder an untrusted program also writes (a sandbox's home or /tmp):
each path is resolved and opened in one step from the folder's descriptor, so no link or
'..' the program plants or swaps in (even mid-call) leads the workbench out of it.

The parts: `folder` (`Beneath`, the file operations), `openat2` (the system call and
whether this kernel has it) and `tree_copy` (copying a whole tree). Outside code imports
the names below from this package.
"""

from __future__ import annotations

from vm.providers.beneath.folder import Beneath, OutsideRoot, clear_set_id_bits
from vm.providers.beneath.openat2 import openat2_available
from vm.providers.beneath.tree_copy import CopyReport

__all__ = ["Beneath", "CopyReport", "OutsideRoot", "clear_set_id_bits", "openat2_available"]
