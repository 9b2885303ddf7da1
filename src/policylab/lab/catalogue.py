"""Every lab method and task, in one place (as tabular/catalogue.py): each module below
registers its entries; tables read from here are complete."""

from __future__ import annotations

from policylab.lab import build, hgam, is_lab_task, lab_methods, lab_tasks  # noqa: F401

__all__ = ["build", "is_lab_task", "lab_methods", "lab_tasks"]
