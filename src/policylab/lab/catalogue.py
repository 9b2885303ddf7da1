"""Every lab method and task, in one place (as tabular/catalogue.py): each module below
registers its entries; tables read from here are complete."""

from __future__ import annotations

from policylab.lab import (
    build,
    disk,  # noqa: F401  (DISK §15: lab/image_pairs)
    is_lab_task,
    lab_methods,
    lab_tasks,
)

__all__ = ["build", "is_lab_task", "lab_methods", "lab_tasks"]
