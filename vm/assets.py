"""Where the workbench's assets are: assets/ beside the packages (our task apps, the
bundled tasks), or $WORKBENCH_ASSETS (the frozen bundle sets it)."""

from __future__ import annotations

import os
from pathlib import Path

ASSETS = Path(os.environ.get("WORKBENCH_ASSETS",
                             Path(__file__).resolve().parents[1] / "assets"))
APPS = ASSETS / "apps"  # our task apps ($WORKBENCH_APPS in task files)
