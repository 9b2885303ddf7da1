"""Archive metrics (papers/seed_control_theory.md §9.3): coverage = filled / cells,
QD-score = Σ over filled cells of (f − offset), best f = max f over filled cells.
occupied [C] bool, fitness [C]."""

from __future__ import annotations

import torch


def coverage(occupied: torch.Tensor) -> float:
    return float(occupied.double().mean())


def qd_score(occupied: torch.Tensor, fitness: torch.Tensor, offset: float = 0.0) -> float:
    """Σ_filled (f − offset); offset makes every f positive (0 suffices when f ≥ 0)."""
    return float(((fitness - offset) * occupied).sum())


def best_fitness(occupied: torch.Tensor, fitness: torch.Tensor) -> float:
    """max f over filled cells (−inf for an empty archive)."""
    return float(fitness[occupied].max()) if bool(occupied.any()) else float("-inf")
