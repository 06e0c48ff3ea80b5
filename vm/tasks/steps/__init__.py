"""OSWorld's setup step types beyond the basic ones in vm/tasks/setup.py, one module per
application, each registering its runners with `vm.tasks.setup.register_step`.

| module | step types |
| --- | --- |
| chrome | chrome_open_tabs, chrome_close_tabs, update_browse_history |
| accounts | googledrive, login (need the user's credentials setting) |
"""

from __future__ import annotations

from vm.tasks.optional_modules import import_all

MODULES = ("chrome", "accounts")

MISSING: dict[str, str] = {}  # module -> the import error that kept it out


def load_all() -> None:
    import_all(__name__, MODULES, MISSING)
