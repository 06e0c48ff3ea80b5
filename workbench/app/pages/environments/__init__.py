"""The Environments screen (page), made of its list of environments, the chosen one's
snapshots, its live screen and the recording of demonstrations, one module each."""

from workbench.app.pages.environments.environment_list import WARNING_COLOR
from workbench.app.pages.environments.page import EnvironmentsPage, close_question

__all__ = ["WARNING_COLOR", "EnvironmentsPage", "close_question"]
