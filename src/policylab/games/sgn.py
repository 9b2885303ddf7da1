"""Small-Gain Nash (SGN) certificates (Sharma, arXiv:2512.06791; code AashVed/SmallGainNash
LQ_GAMES/compute_sgn_metrics.py; spec §4.1).

With block bounds μ_i ≤ λ_min(J_ii), L_ij ≥ ‖J_ij‖₂ (see `games.game`) and weights w > 0:
- SGN matrix C(w) = WA + AᵀW, A_ii = μ_i, A_ij = −L_ij, W = diag(w), i.e.
  C_ii = 2w_iμ_i, C_ij = −(w_iL_ij + w_jL_ji); margin α*(w) = ½·λ_min(D^{−1/2} C D^{−1/2}),
  D = diag(w) [code `sgn_margin`]. α* > 0 ⇒ F is α*-strongly monotone in ⟨u, v⟩_M = uᵀMv,
  M = blockdiag(w_i I); α_true(w) = λ_min(M^{−1/2}·½(MJ + JᵀM)·M^{−1/2}) ≥ α* [code
  `true_monotonicity_margin`].
- β(w) = max over the region of ‖M^{1/2} J M^{−1/2}‖₂ (Lipschitz constant of F in ‖·‖_M)
  [code `lipschitz_constant`]. Euler x ← x − hF(x) contracts in ‖·‖_M for h < 2α*/β², with
  factor ≤ √(1 − 2hα* + h²β²); RK4 guideline h ≤ c₄/β, c₄ = 2.5 [code config.py
  WeightSearchConfig.rk4_c4] (a guideline in the code, not a proof: measured in
  benchmarks/theory_sgn.py).
- Two players, ratio r = w₂/w₁, target margin α: feasible iff μ_i > α and
  p = (μ₁−α)(μ₂−α) > L₁₂L₂₁; r± = [2p − L₁₂L₂₁ ± 2√(p(p − L₁₂L₂₁))]/L₂₁² [code
  `two_player_band`].
- Weight search: two players, the code's log grid r ∈ [0.1, 1e4] (161 points) [code
  config.py] joined with 32 points inside the band, then golden-section on log r [ours];
  N ≥ 3, w = v/u with u = A⁻¹1, v = A⁻ᵀ1 (the M-matrix diagonal scaling, which makes C(w)
  positive definite whenever any w does) then coordinate refinement [ours]. The pick
  maximises α*/β² (Euler) or α*/β (RK4) [code `compute_metrics`].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from policylab.games.game import (
    F64,
    BlockBounds,
    DifferentiableGame,
    bounds_from_jacobians,
    jacobians_on,
    player_slices,
)

RK4_C4 = 2.5  # [code LQ_GAMES/config.py:WeightSearchConfig.rk4_c4]
RATIO_GRID = (1e-1, 1e4, 161)  # [code LQ_GAMES/config.py:WeightSearchConfig]
BAND_POINTS = 32  # [ours] extra ratios strictly inside the closed-form band
OBJECTIVES = ("euler", "rk4")


def _check_mu_L(mu: torch.Tensor, L: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mu, L = torch.as_tensor(mu, dtype=F64), torch.as_tensor(L, dtype=F64)
    n = mu.numel()
    if mu.ndim != 1 or L.shape != (n, n):
        raise ValueError(f"mu {tuple(mu.shape)} and L {tuple(L.shape)}: need mu [N], L [N, N]")
    if bool((L < 0).any()):
        raise ValueError(f"L = {L.tolist()}: coupling bounds are norms, must be >= 0")
    return mu, L


def sgn_margin(mu: torch.Tensor, L: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """α*(w) = ½·λ_min(D^{−1/2} C(w) D^{−1/2}); mu: [N], L: [N, N], w: [..., N] -> [...]."""
    mu, L = _check_mu_L(mu, L)
    w = torch.as_tensor(w, dtype=F64)
    if w.shape[-1] != mu.numel() or bool((w <= 0).any()):
        raise ValueError(f"w = {w.tolist()}: needs [..., {mu.numel()}] positive weights")
    off = -(w.unsqueeze(-1) * L + (w.unsqueeze(-1) * L).transpose(-1, -2))
    C = off * (1 - torch.eye(mu.numel(), dtype=F64)) + torch.diag_embed(2 * w * mu)
    s = w.rsqrt()
    scaled = s.unsqueeze(-1) * C * s.unsqueeze(-2)
    return 0.5 * torch.linalg.eigvalsh(scaled)[..., 0]


def two_player_band(
    mu: torch.Tensor, L: torch.Tensor, alpha: float = 0.0
) -> tuple[float, float] | None:
    """Ratios r = w₂/w₁ with α*(1, r) > α: the open interval (r−, r+), or None if empty.

    L₂₁ = 0 (the formula divides by zero; spec §4.3): the condition is linear in r and the
    band is (L₁₂²/(4p), ∞) [ours, same inequality]; L₁₂ = L₂₁ = 0 gives (0, ∞).
    """
    mu, L = _check_mu_L(mu, L)
    if mu.numel() != 2:
        raise ValueError(f"two_player_band: mu has {mu.numel()} players; needs exactly 2")
    m1, m2 = float(mu[0]) - alpha, float(mu[1]) - alpha
    l12, l21 = float(L[0, 1]), float(L[1, 0])
    p = m1 * m2
    if m1 <= 0 or m2 <= 0 or p <= l12 * l21:
        return None
    if l21 == 0:
        return (l12**2 / (4 * p), math.inf)
    root = 2 * math.sqrt(p * (p - l12 * l21))
    base = 2 * p - l12 * l21
    return ((base - root) / l21**2, (base + root) / l21**2)


def expand_weights(w: torch.Tensor, player_dims: tuple[int, ...]) -> torch.Tensor:
    """Diagonal of M = blockdiag(w_i I_{d_i}): [..., d] from w: [..., N]."""
    owner = [i for i, n in enumerate(player_dims) for _ in range(n)]
    return w[..., owner]


def metric_lipschitz(jacobians: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """β = max_p ‖M^{1/2} J_p M^{−1/2}‖₂; jacobians [P, d, d], m (diag of M): [K, d] -> [K]."""
    s = m.sqrt()
    scaled = s[:, None, :, None] * jacobians[None] / s[:, None, None, :]
    return torch.linalg.matrix_norm(scaled, ord=2).amax(dim=1)


def true_margin(J: torch.Tensor, w: torch.Tensor, player_dims: tuple[int, ...]) -> float:
    """α_true = λ_min(M^{−1/2}·½(MJ + JᵀM)·M^{−1/2}) for one Jacobian J: [d, d]."""
    s = expand_weights(torch.as_tensor(w, dtype=F64), player_dims).sqrt()
    JM = s[:, None] * J / s[None, :]  # M^{1/2} J M^{-1/2}, whose sym part is the same form
    return float(torch.linalg.eigvalsh(0.5 * (JM + JM.T))[0])


@dataclass(frozen=True)
class Certificate:
    """Result of a certificate check. `certified` iff alpha > 0; then every Euler step
    h < h_euler contracts in ‖·‖_M (a proof when `exact`, an estimate otherwise)."""

    w: torch.Tensor  # [N] block weights
    M: torch.Tensor  # [d, d] = blockdiag(w_i I)
    alpha: float  # α*(w) (SGN) or λ_min(sym J) (Euclidean)
    beta: float  # Lipschitz constant of F in ‖·‖_M
    h_euler: float  # 2α/β² (0 when not certified)
    h_rk4: float  # c₄/β, the code's guideline (0 when not certified)
    band: tuple[float, float] | None  # two players: feasible ratios w₂/w₁ at α = 0
    exact: bool
    reason: str

    @property
    def certified(self) -> bool:
        return self.alpha > 0

    def euler_factor(self, h: float) -> float:
        """Bound on ‖I − hJ‖_M: √(1 − 2hα + h²β²), < 1 for 0 < h < h_euler."""
        return math.sqrt(max(0.0, 1 - 2 * h * self.alpha + (h * self.beta) ** 2))


def _resolve(game_or_jacobian, region, player_dims) -> tuple[torch.Tensor, tuple[int, ...], bool]:
    if isinstance(game_or_jacobian, DifferentiableGame):
        game = game_or_jacobian
        if region is None:
            if not game.quadratic:
                raise ValueError("region is None: a non-quadratic game needs sample points")
            region = torch.zeros(game.dim, dtype=F64)
        return jacobians_on(game, region), game.player_dims, game.quadratic
    J = torch.as_tensor(game_or_jacobian, dtype=F64)
    if player_dims is None:
        raise ValueError("player_dims is None: a Jacobian needs the players' block sizes")
    dims = tuple(int(n) for n in player_dims)
    exact = J.ndim == 2
    return (J.unsqueeze(0) if exact else J), dims, exact


def _candidates(bounds: BlockBounds) -> torch.Tensor:
    n = bounds.mu.numel()
    if n == 2:
        ratios = torch.logspace(math.log10(RATIO_GRID[0]), math.log10(RATIO_GRID[1]), RATIO_GRID[2])
        band = two_player_band(bounds.mu, bounds.L)
        if band is not None:
            lo, hi = band
            hi = max(lo, 1.0) * 1e6 if math.isinf(hi) else hi  # L₂₁ = 0: open-ended band
            lo = hi * 1e-6 if lo == 0 else lo  # L₁₂ = 0: band starts at 0
            inner = torch.logspace(math.log10(lo), math.log10(hi), BAND_POINTS + 2)[1:-1]
            ratios = torch.cat([ratios, inner.to(F64)])
        return torch.stack([torch.ones_like(ratios), ratios.to(F64)], dim=1)
    A = torch.diag(bounds.mu) - bounds.L
    cands = [torch.ones(n, dtype=F64)]
    try:
        ones = torch.ones(n, dtype=F64)
        u, v = torch.linalg.solve(A, ones), torch.linalg.solve(A.T, ones)
        if bool((u > 0).all() and (v > 0).all()):
            cands.append(v / u)
    except torch.linalg.LinAlgError:
        pass
    return torch.stack(cands)


def _score(alpha: torch.Tensor, beta: torch.Tensor, objective: str) -> torch.Tensor:
    power = 2 if objective == "euler" else 1
    score = alpha / beta.clamp_min(1e-300) ** power
    return torch.where(alpha > 0, score, alpha - 1e300)  # any certified w beats all others


def _objective(bounds, jacobians, dims, w: torch.Tensor, objective: str) -> torch.Tensor:
    alpha = sgn_margin(bounds.mu, bounds.L, w)
    return _score(alpha, metric_lipschitz(jacobians, expand_weights(w, dims)), objective)


def _refine_ratio(bounds, jacobians, dims, w, cands, objective, steps: int = 30):
    """Golden-section search on log r between the grid neighbours of the best r [ours]."""
    ratios = torch.sort(cands[:, 1]).values  # the certified ratios (all inside the band)
    k = int(torch.searchsorted(ratios, w[1]))
    lo = float(ratios[max(k - 1, 0)].log())
    hi = float(ratios[min(k + 1, ratios.numel() - 1)].log())
    golden = (5**0.5 - 1) / 2

    def value(t: float) -> float:
        trial = torch.tensor([[1.0, math.exp(t)]], dtype=F64)
        return float(_objective(bounds, jacobians, dims, trial, objective)[0])

    t1, t2 = hi - golden * (hi - lo), lo + golden * (hi - lo)
    v1, v2 = value(t1), value(t2)
    for _ in range(steps):
        if v1 >= v2:
            hi, t2, v2 = t2, t1, v1
            t1 = hi - golden * (hi - lo)
            v1 = value(t1)
        else:
            lo, t1, v1 = t1, t2, v2
            t2 = lo + golden * (hi - lo)
            v2 = value(t2)
    best = torch.tensor([1.0, math.exp(0.5 * (lo + hi))], dtype=F64)
    return best if value(math.log(best[1])) > value(math.log(w[1])) else w


def _refine(bounds, jacobians, dims, w, cands, objective, sweeps: int = 3) -> torch.Tensor:
    """Coordinate search on log w (N ≥ 3) [ours]."""
    factors = torch.logspace(-2, 2, 21, dtype=F64)
    for _ in range(sweeps):
        for i in range(w.numel()):
            trial = w.repeat(factors.numel(), 1)
            trial[:, i] = w[i] * factors
            w = trial[int(_objective(bounds, jacobians, dims, trial, objective).argmax())]
    return w


def sgn_certificate(
    game_or_jacobian: DifferentiableGame | torch.Tensor,
    region: torch.Tensor | None = None,
    *,
    player_dims: tuple[int, ...] | None = None,
    weights: str | torch.Tensor = "search",
    objective: str = "euler",
) -> Certificate:
    """SGN certificate of simultaneous gradient play.

    game_or_jacobian: a `DifferentiableGame` (with `region` points [P, d]; a quadratic game
    may omit it), a Jacobian [d, d] (linear F: exact) or Jacobians [P, d, d] sampled over a
    region (estimate); the latter two need `player_dims`. weights: "search" or w: [N] > 0.
    objective: "euler" maximises α*/β², "rk4" α*/β [code `compute_metrics`].
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective = {objective!r}; accepted: {OBJECTIVES}")
    jacobians, dims, exact = _resolve(game_or_jacobian, region, player_dims)
    bounds = bounds_from_jacobians(jacobians, dims)
    n = len(dims)
    band = two_player_band(bounds.mu, bounds.L) if n == 2 else None
    if isinstance(weights, str):
        if weights != "search":
            raise ValueError(f"weights = {weights!r}; accepted: 'search' or a tensor [N] > 0")
        cands = _candidates(bounds)
    else:
        cands = torch.as_tensor(weights, dtype=F64).reshape(1, -1)
        if cands.shape[1] != n or bool((cands <= 0).any()):
            raise ValueError(f"weights = {cands.tolist()}: need {n} positive block weights")
    alpha = sgn_margin(bounds.mu, bounds.L, cands)
    if bool((alpha > 0).any()):  # β only where it can matter: the certified weights
        cands, alpha = cands[alpha > 0], alpha[alpha > 0]
        beta = metric_lipschitz(jacobians, expand_weights(cands, dims))
        w = cands[int(_score(alpha, beta, objective).argmax())]
    else:
        w = cands[int(alpha.argmax())]
    if isinstance(weights, str) and float(sgn_margin(bounds.mu, bounds.L, w)) > 0:
        refine = _refine_ratio if n == 2 else _refine
        w = refine(bounds, jacobians, dims, w, cands, objective)
    a = float(sgn_margin(bounds.mu, bounds.L, w))
    b = float(metric_lipschitz(jacobians, expand_weights(w[None], dims))[0])
    reason = _reason(bounds, a, w, exact)
    return _certificate(w, dims, a, b, band, exact, reason)


def _reason(bounds: BlockBounds, alpha: float, w: torch.Tensor, exact: bool) -> str:
    bad = [i for i, m in enumerate(bounds.mu.tolist()) if m <= 0]
    if bad:
        mus = ", ".join(f"μ_{i + 1} = {float(bounds.mu[i]):.6g}" for i in bad)
        return f"not certified: {mus} <= 0 (a player's own curvature must be positive)"
    if alpha <= 0:
        if bounds.mu.numel() == 2:
            l12, l21 = float(bounds.L[0, 1]), float(bounds.L[1, 0])
            m = bounds.mu.tolist()
            return (
                f"not certified: μ₁μ₂ = {m[0] * m[1]:.6g} <= L₁₂L₂₁ = {l12 * l21:.6g} "
                "(small-gain condition fails for every weight ratio)"
            )
        return f"not certified: best α* = {alpha:.6g} <= 0 at w = {w.tolist()}"
    kind = "proof (constant Jacobian)" if exact else "estimate (sampled region, not a proof)"
    return f"certified: α* = {alpha:.6g} > 0; {kind}"


def _certificate(w, dims, alpha, beta, band, exact, reason) -> Certificate:
    ok = alpha > 0 and beta > 0
    m = expand_weights(w, dims)
    return Certificate(
        w=w,
        M=torch.diag(m),
        alpha=alpha,
        beta=beta,
        h_euler=2 * alpha / beta**2 if ok else 0.0,
        h_rk4=RK4_C4 / beta if ok else 0.0,
        band=band,
        exact=exact,
        reason=reason,
    )


def euclidean_certificate(
    game_or_jacobian: DifferentiableGame | torch.Tensor,
    region: torch.Tensor | None = None,
    *,
    player_dims: tuple[int, ...] | None = None,
) -> Certificate:
    """Euclidean (Rosen, w = 1) certificate from the full Jacobian, no block bounds:
    α = min_p λ_min(½(J_p + J_pᵀ)), β = max_p ‖J_p‖₂, h_euler = 2α/β² [code
    `euclidean_monotonicity_margin`]."""
    jacobians, dims, exact = _resolve(game_or_jacobian, region, player_dims)
    sym = 0.5 * (jacobians + jacobians.transpose(1, 2))
    alpha = float(torch.linalg.eigvalsh(sym)[:, 0].min())
    beta = float(torch.linalg.matrix_norm(jacobians, ord=2).max())
    if alpha > 0:
        reason = f"certified: λ_min(sym J) = {alpha:.6g} > 0"
    else:
        reason = f"not certified: λ_min(sym J) = {alpha:.6g} <= 0 (not Euclidean-monotone)"
    return _certificate(torch.ones(len(dims), dtype=F64), dims, alpha, beta, None, exact, reason)


__all__ = [
    "Certificate",
    "euclidean_certificate",
    "expand_weights",
    "metric_lipschitz",
    "player_slices",
    "sgn_certificate",
    "sgn_margin",
    "true_margin",
    "two_player_band",
]
