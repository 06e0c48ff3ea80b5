"""Scripted solutions (oracles) of the bundled tasks on LibreOffice Calc, Writer and Impress.

Registered with vm.tasks.oracles.oracle; vm.tasks.oracles imports this module at its end.
"""

from __future__ import annotations
