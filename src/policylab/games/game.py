"""Differentiable games: N players, player i owns the block x_i of the joint x ∈ R^d and
minimises its cost f_i(x) (Sharma, Small-Gain Nash, arXiv:2512.06791, §2; spec §0.3, §4.1).

- pseudo-gradient F(x) = (∇_{x_1} f_1(x), …, ∇_{x_N} f_N(x)): [d]; simultaneous gradient
  play is x ← x − h·F(x).
- game Jacobian J(x) = ∂F/∂x: [d, d] (reverse-mode autograd); block J_ij = ∇²_{x_i x_j} f_i.
- block bounds on a region (points): μ_i = min_x λ_min(J_ii(x)), L_ij = max_x ‖J_ij(x)‖₂,
  β = max_x ‖J(x)‖₂ — exact for a quadratic game (constant J), estimates otherwise
  (spec §4.3: "sampled regions give estimates, not proofs").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

F64 = torch.float64
MAX_REGION_POINTS = 4096  # [ours] beyond this a box grid is refused; pass points instead


@dataclass(frozen=True)
class DifferentiableGame:
    """`player_dims[i]` coordinates per player, in order; `costs[i](x: [d]) -> scalar`.

    `quadratic=True` declares J constant (every cost quadratic in x), so one point gives
    exact bounds and certificates are proofs; otherwise they are sampled estimates.
    """

    player_dims: tuple[int, ...]
    costs: tuple[Callable[[torch.Tensor], torch.Tensor], ...]
    quadratic: bool = False

    def __post_init__(self) -> None:
        dims = tuple(int(n) for n in self.player_dims)
        if not dims or any(n < 1 for n in dims):
            raise ValueError(
                f"DifferentiableGame.player_dims = {self.player_dims}: "
                "needs one positive block size per player"
            )
        if len(self.costs) != len(dims):
            raise ValueError(
                f"DifferentiableGame.costs has {len(self.costs)} entries for "
                f"{len(dims)} players (player_dims = {dims}): one cost per player"
            )
        object.__setattr__(self, "player_dims", dims)
        object.__setattr__(self, "costs", tuple(self.costs))

    @property
    def dim(self) -> int:
        return sum(self.player_dims)

    @property
    def num_players(self) -> int:
        return len(self.player_dims)


def player_slices(player_dims: Sequence[int]) -> list[slice]:
    """Slices of the joint vector owned by each player, in order."""
    ends = list(itertools.accumulate(player_dims))
    return [slice(end - n, end) for n, end in zip(player_dims, ends, strict=True)]


def _check_point(game: DifferentiableGame, x: torch.Tensor) -> None:
    if x.shape != (game.dim,):
        raise ValueError(
            f"x has shape {tuple(x.shape)}; the game's joint strategy has shape ({game.dim},)"
        )


def pseudo_gradient(game: DifferentiableGame, x: torch.Tensor) -> torch.Tensor:
    """F(x) = (∇_{x_i} f_i(x))_i: [d] for x: [d] (each player's own-block gradient).

    Differentiable in x (the graph is kept), so `game_jacobian` can differentiate it again.
    """
    _check_point(game, x)
    with torch.enable_grad():
        z = x if x.requires_grad else x.detach().requires_grad_(True)
        parts = []
        for f, s in zip(game.costs, player_slices(game.player_dims), strict=True):
            (g,) = torch.autograd.grad(f(z), z, create_graph=True, allow_unused=True)
            parts.append(torch.zeros_like(z[s]) if g is None else g[s])
    F = torch.cat(parts)
    return F if x.requires_grad else F.detach()


def game_jacobian(game: DifferentiableGame, x: torch.Tensor) -> torch.Tensor:
    """J(x) = ∂F/∂x: [d, d], row i the gradient of F_i (reverse mode, as torch.func.jacrev).

    torch.autograd rather than torch.func.jacrev [ours]: the latter imports torch._dynamo on
    first use (seconds on 2 cores) for the same numbers.
    """
    _check_point(game, x)
    return torch.autograd.functional.jacobian(
        lambda z: pseudo_gradient(game, z), x.detach(), create_graph=False, vectorize=False
    ).detach()


def box_points(low: torch.Tensor, high: torch.Tensor, per_axis: int = 2) -> torch.Tensor:
    """Grid of `per_axis` points per coordinate over the box [low, high]: [per_axis^d, d].

    per_axis = 2 gives the 2^d vertices; larger values add the interior grid (spec §0.3:
    "region vertices + grid"). Refuses more than MAX_REGION_POINTS points.
    """
    low, high = torch.as_tensor(low, dtype=F64), torch.as_tensor(high, dtype=F64)
    if low.shape != high.shape or low.ndim != 1 or bool((high < low).any()):
        raise ValueError(
            f"box_points: low {tuple(low.shape)} and high {tuple(high.shape)} must be "
            "1-D of equal length with low <= high"
        )
    if per_axis < 2:
        raise ValueError(f"box_points: per_axis = {per_axis}; needs >= 2 (the vertices)")
    count = per_axis ** low.numel()
    if count > MAX_REGION_POINTS:
        raise ValueError(
            f"box_points: {per_axis}^{low.numel()} = {count} points exceeds "
            f"{MAX_REGION_POINTS}; pass a tensor of sample points [P, d] as the region"
        )
    pairs = zip(low.tolist(), high.tolist(), strict=True)
    axes = [torch.linspace(lo, hi, per_axis, dtype=F64) for lo, hi in pairs]
    return torch.cartesian_prod(*axes).reshape(count, low.numel())


def jacobians_on(game: DifferentiableGame, region: torch.Tensor) -> torch.Tensor:
    """Jacobians at the region's points: [P, d, d]; a quadratic game needs only the first."""
    points = torch.as_tensor(region, dtype=F64)
    if points.ndim == 1:
        points = points.unsqueeze(0)
    if points.ndim != 2 or points.shape[1] != game.dim or points.shape[0] == 0:
        raise ValueError(
            f"region has shape {tuple(points.shape)}; expected points [P, {game.dim}] "
            "(or one point [d])"
        )
    if game.quadratic:
        points = points[:1]
    return torch.stack([game_jacobian(game, p) for p in points])


@dataclass(frozen=True)
class BlockBounds:
    """μ: [N] own-curvature lower bounds, L: [N, N] coupling upper bounds (diagonal 0),
    beta: Euclidean Lipschitz bound max ‖J‖₂, exact: True when J is constant (proof)."""

    mu: torch.Tensor
    L: torch.Tensor
    beta: float
    exact: bool


def bounds_from_jacobians(jacobians: torch.Tensor, player_dims: Sequence[int]) -> BlockBounds:
    """μ_i = min_p λ_min(sym J_ii(p)), L_ij = max_p ‖J_ij(p)‖₂, β = max_p ‖J(p)‖₂.

    jacobians: [P, d, d] (or [d, d], which counts as exact: a linear pseudo-gradient).
    """
    exact = jacobians.ndim == 2
    J = jacobians.unsqueeze(0) if exact else jacobians
    d = sum(player_dims)
    if J.ndim != 3 or J.shape[1:] != (d, d):
        raise ValueError(
            f"jacobians has shape {tuple(jacobians.shape)}; expected [P, {d}, {d}] or "
            f"[{d}, {d}] for player_dims {tuple(player_dims)}"
        )
    slices = player_slices(player_dims)
    n = len(slices)
    mu = torch.empty(n, dtype=F64)
    L = torch.zeros(n, n, dtype=F64)
    for i, si in enumerate(slices):
        own = J[:, si, si]
        mu[i] = torch.linalg.eigvalsh(0.5 * (own + own.transpose(1, 2)))[:, 0].min()
        for j, sj in enumerate(slices):
            if i != j:
                L[i, j] = torch.linalg.matrix_norm(J[:, si, sj], ord=2).max()
    beta = float(torch.linalg.matrix_norm(J, ord=2).max())
    return BlockBounds(mu=mu, L=L, beta=beta, exact=exact)


def block_bounds(game: DifferentiableGame, region: torch.Tensor) -> BlockBounds:
    """μ, L, β of `game` over the region's points [P, d] (see `bounds_from_jacobians`);
    exact only for a game declared quadratic."""
    bounds = bounds_from_jacobians(jacobians_on(game, region), game.player_dims)
    return BlockBounds(bounds.mu, bounds.L, bounds.beta, exact=game.quadratic)
