"""Every tabular method and task, in one place (as algebra/catalogue.py): each method
module registers its entries into the registries defined in methods.py and tasks.py;
this module imports them all, so tables read from here are complete."""

from __future__ import annotations

from policylab.games import play  # noqa: F401  (imported to register its entries)
from policylab.tabular import drpg, dynamic, gridworld, sampled, soft_robust  # noqa: F401
from policylab.tabular.methods import tabular_methods
from policylab.tabular.tasks import build, is_tabular_task, tabular_tasks

__all__ = ["build", "is_tabular_task", "tabular_methods", "tabular_tasks"]
