"""Every lab method and task, in one place (as tabular/catalogue.py): each module below
registers its entries; tables read from here are complete."""

from __future__ import annotations

import policylab.lab.disk  # noqa: F401  (§15 DISK: lab/image_pairs; disk, supervised_grid, harris)
from policylab.lab import build, is_lab_task, lab_methods, lab_tasks

__all__ = ["build", "is_lab_task", "lab_methods", "lab_tasks"]
