"""Every lab method and task, in one place (as tabular/catalogue.py): each module below
registers its entries; tables read from here are complete."""

from __future__ import annotations

import policylab.lab.hnpg  # noqa: F401  (§8: lab/combination_lock; hnpg, trpo, fqe_greedy)
from policylab.lab import build, is_lab_task, lab_methods, lab_tasks

__all__ = ["build", "is_lab_task", "lab_methods", "lab_tasks"]
