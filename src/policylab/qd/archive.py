"""A MAP-Elites grid archive with CMA-MAE thresholds (Fontaine & Nikolaidis, Covariance
Matrix Adaptation MAP-Annealing, arXiv:2205.10752, Alg. 1; pyribs `GridArchive` with
`learning_rate`), as PPGA uses it (papers/seed_control_theory.md §9.1):

    e   = cell of the measures m
    Δ   = f − t_e                      (the improvement; the ES ranks by it)
    if f > t_e:  inserted,  t_e ← (1 − α_A)·t_e + α_A·f
    t_e starts at `threshold_min`

α_A = 1 is plain MAP-Elites (the threshold is the elite's f). The archive also keeps, per
cell, the best f ever inserted and its solution — pyribs' separate "result archive" — so
coverage and QD-score read the best solutions, not the annealed thresholds (with α_A < 1 a
later, worse solution may pass the threshold; it never replaces a better elite here).

Measures outside [low, high] fall into the edge cells (pyribs' rule)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

DTYPE = torch.float64


def cma_mae_threshold(threshold: float, f: float, alpha: float) -> tuple[float, float, bool]:
    """One cell's CMA-MAE rule: (Δ = f − t, the new threshold, inserted = f > t).
    T9.2: t = 0, α = 0.1, f = 10 → (10, 1.0, True)."""
    delta = f - threshold
    if delta > 0:
        return delta, f if alpha == 1.0 else (1.0 - alpha) * threshold + alpha * f, True
    return delta, threshold, False


@dataclass
class GridArchive:
    """A grid of `cells` per measure over [low, high]; all state is tensors (checkpoint with
    `state()`, rebuild with `GridArchive.from_state`).

    thresholds [C], occupied [C] (bool), fitness [C] (best f inserted), measures [C, k],
    solutions [C, D], with C = Π cells."""

    cells: tuple[int, ...]
    low: float
    high: float
    solution_dim: int
    alpha: float = 0.1
    threshold_min: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(
                f"alpha: the archive learning rate α_A must be in (0, 1], got {self.alpha}"
            )
        if self.threshold_min == float("-inf") and self.alpha < 1.0:
            raise ValueError(
                f"threshold_min: −inf needs alpha = 1 (plain MAP-Elites), got alpha = {self.alpha}"
            )
        if not self.high > self.low:
            raise ValueError(f"high: must exceed low = {self.low}, got {self.high}")
        if any(c < 1 for c in self.cells):
            raise ValueError(f"cells: each measure needs ≥ 1 cell, got {self.cells}")
        n = 1
        for c in self.cells:
            n *= c
        self.thresholds = torch.full((n,), float(self.threshold_min), dtype=DTYPE)
        self.occupied = torch.zeros(n, dtype=torch.bool)
        self.fitness = torch.zeros(n, dtype=DTYPE)
        self.measures = torch.zeros(n, len(self.cells), dtype=DTYPE)
        self.solutions = torch.zeros(n, self.solution_dim, dtype=DTYPE)

    @property
    def size(self) -> int:
        return self.thresholds.numel()

    def index(self, measures: torch.Tensor) -> torch.Tensor:
        """Flat cell index [n] of measures [n, k] (row-major over the grid)."""
        cells = torch.tensor(self.cells)
        width = (self.high - self.low) / cells
        grid = torch.floor((measures - self.low) / width).long()
        grid = torch.minimum(torch.clamp(grid, min=0), cells - 1)
        flat = torch.zeros(measures.shape[0], dtype=torch.long)
        for j, c in enumerate(self.cells):
            flat = flat * c + grid[:, j]
        return flat

    def add(
        self, solutions: torch.Tensor, fitness: torch.Tensor, measures: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Insert each row in order: (Δ [n], inserted [n] bool). solutions [n, D],
        fitness [n], measures [n, k]."""
        idx = self.index(measures)
        deltas = torch.empty(len(idx), dtype=DTYPE)
        inserted = torch.zeros(len(idx), dtype=torch.bool)
        for i, e in enumerate(idx.tolist()):
            f = float(fitness[i])
            deltas[i], t, inserted[i] = cma_mae_threshold(float(self.thresholds[e]), f, self.alpha)
            self.thresholds[e] = t
            if inserted[i] and (not self.occupied[e] or f > self.fitness[e]):
                self.occupied[e] = True
                self.fitness[e] = f
                self.measures[e] = measures[i]
                self.solutions[e] = solutions[i]
        return deltas, inserted

    def sample_elites(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """n solutions [n, D] drawn uniformly (with replacement) among the occupied cells."""
        filled = torch.nonzero(self.occupied).flatten()
        if len(filled) == 0:
            raise ValueError("sample_elites: the archive is empty")
        pick = torch.randint(len(filled), (n,), generator=generator)
        return self.solutions[filled[pick]].clone()

    def state(self) -> dict[str, torch.Tensor]:
        return {
            "thresholds": self.thresholds.clone(),
            "occupied": self.occupied.clone(),
            "fitness": self.fitness.clone(),
            "measures": self.measures.clone(),
            "solutions": self.solutions.clone(),
        }

    @classmethod
    def from_state(cls, saved: dict[str, torch.Tensor], **settings) -> GridArchive:
        archive = cls(**settings)
        for name, value in saved.items():
            setattr(archive, name, value.clone())
        return archive
