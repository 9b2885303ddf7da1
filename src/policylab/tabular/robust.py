"""Robust MDPs with sa-rectangular L1 uncertainty sets (papers/seed_control_theory.md
§1.1, Wang, Ho & Petrik, ICML 2023, arXiv:2212.10439).

    𝒫_{s,a} = {p ∈ Δ_S : ‖p − p̄_{s,a}‖₁ ≤ κ_{s,a},  p(s') = 0 where p̄_{s,a}(s') = 0}

Rewards are maximised and the adversary minimises (a cost paper's worst case with
R = −C). `l1_worst` is the closed-form inner maximiser of the DRPG code [code
JerrisonWang/ICML-DRPG:Sampling Garnet.cpp:worstcase_l1]; `robust_evaluate` is robust
policy evaluation v = Σ_a π(a|s)·min_{p∈𝒫_{s,a}} pᵀ(R + γv), solved by the adversary's
policy iteration (exact linear solves, so its fixed point is exact — the DRPG code's
value iteration to ‖Δv‖₂ ≤ 1e-8 reaches the same point); `robust_value_iteration` gives
the robust optimum, the oracle every robust method is scored against."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.tabular.mdp import DTYPE, TabularMDP, check_policy
from policylab.tabular.solve import NotConverged, evaluate, greedy


def l1_worst(pbar: torch.Tensor, z: torch.Tensor, kappa) -> torch.Tensor:
    """argmax_{p ∈ 𝒫} pᵀz per row, in closed form: k = argmax z within the support (first
    index on ties); ε = min(κ/2, 1 − p̄_k); ε is added to p_k and removed from the
    smallest-z entries of the support first (stable order). pbar, z: [..., K]; kappa: a
    number or [...]."""
    kappa = torch.as_tensor(kappa, dtype=pbar.dtype).expand(pbar.shape[:-1])
    if (kappa < 0).any():
        raise ValueError(f"kappa: the L1 radius must be ≥ 0, got min {kappa.min().item()}")
    support = pbar > 0
    k = z.masked_fill(~support, float("-inf")).argmax(-1, keepdim=True)
    eps = torch.minimum(kappa / 2, 1 - pbar.gather(-1, k).squeeze(-1)).unsqueeze(-1)
    available = pbar.scatter(-1, k, 0.0)
    order = torch.sort(z, dim=-1, stable=True).indices
    avail_sorted = available.gather(-1, order)
    before = avail_sorted.cumsum(-1) - avail_sorted
    take_sorted = torch.minimum((eps - before).clamp_min(0.0), avail_sorted)
    take = torch.zeros_like(pbar).scatter(-1, order, take_sorted)
    return (pbar - take).scatter_add(-1, k, eps)


@dataclass(frozen=True)
class L1Ball:
    """The sa-rectangular set around the MDP's kernel: radius kappa [S, A] (or a number)."""

    kappa: torch.Tensor

    def __init__(self, kappa, n_states: int | None = None, n_actions: int | None = None):
        kappa = torch.as_tensor(kappa, dtype=DTYPE)
        if kappa.dim() == 0 and n_states is not None:
            kappa = kappa.expand(n_states, n_actions).clone()
        if not torch.isfinite(kappa).all() or (kappa < 0).any():
            raise ValueError(f"L1Ball: kappa must be finite and ≥ 0, got {kappa.tolist()}")
        object.__setattr__(self, "kappa", kappa)

    def check(self, mdp: TabularMDP) -> None:
        if self.kappa.shape != (mdp.n_states, mdp.n_actions):
            raise ValueError(
                f"L1Ball: kappa has shape {tuple(self.kappa.shape)}, the MDP needs "
                f"[{mdp.n_states}, {mdp.n_actions}] (one radius per (s, a))"
            )

    def worst_kernel(self, mdp: TabularMDP, V: torch.Tensor) -> torch.Tensor:
        """The adversary's response to V: per (s, a), argmin_{p∈𝒫} pᵀ(R(s,a,·) + γV)."""
        self.check(mdp)
        return l1_worst(mdp.P, -(mdp.R + mdp.gamma * V), self.kappa)

    def used(self, mdp: TabularMDP, P: torch.Tensor) -> float:
        """mean over (s, a) of ‖P − P̄‖₁/κ (0 where κ = 0): how much of the set is used."""
        dist = (P - mdp.P).abs().sum(-1)
        return float(torch.where(self.kappa > 0, dist / self.kappa.clamp_min(1e-300), 0).mean())


@dataclass(frozen=True)
class RobustEvaluation:
    V: torch.Tensor  # [S], the robust value of π
    Q: torch.Tensor  # [S, A], under the worst kernel
    P: torch.Tensor  # [S, A, S], the worst kernel for π
    iterations: int


def robust_evaluate(
    mdp: TabularMDP, pi: torch.Tensor, ball: L1Ball, *, tol: float = 1e-10, max_iter: int = 500
) -> RobustEvaluation:
    """Robust policy evaluation by the adversary's policy iteration: V ← V^{π, P(V)},
    P(V) the worst kernel for V, until ‖ΔV‖_∞ ≤ tol (V decreases monotonically)."""
    pi = check_policy(pi, mdp.n_states, mdp.n_actions)
    V = evaluate(mdp, pi).V
    for it in range(1, max_iter + 1):
        P = ball.worst_kernel(mdp, V)
        ev = evaluate(mdp, pi, P)
        if (ev.V - V).abs().max() <= tol:
            return RobustEvaluation(ev.V, ev.Q, P, it)
        V = ev.V
    raise NotConverged(f"robust_evaluate: ‖ΔV‖ above {tol:g} after {max_iter} iterations")


def robust_value_iteration(
    mdp: TabularMDP, ball: L1Ball, *, tol: float = 1e-10, max_iter: int = 100_000
) -> tuple[torch.Tensor, torch.Tensor]:
    """(V*, π*) of the robust MDP: V ← max_a min_{p∈𝒫_{s,a}} pᵀ(R + γV) until
    ‖ΔV‖_∞ ≤ tol·(1 − γ)/(2γ); π* greedy (first action on ties), then V* = its exact
    robust value."""
    V = torch.zeros(mdp.n_states, dtype=DTYPE)
    stop = tol * (1 - mdp.gamma) / max(2 * mdp.gamma, 1e-12)
    for _ in range(max_iter):
        P = ball.worst_kernel(mdp, V)
        new = (P * (mdp.R + mdp.gamma * V)).sum(-1).max(-1).values
        if (new - V).abs().max() <= stop:
            P = ball.worst_kernel(mdp, new)
            pi = greedy((P * (mdp.R + mdp.gamma * new)).sum(-1))
            return robust_evaluate(mdp, pi, ball).V, pi
        V = new
    raise NotConverged(f"robust_value_iteration: ‖ΔV‖ above {stop:g} after {max_iter} iterations")


def robust_policy_iteration(
    mdp: TabularMDP, ball: L1Ball, *, max_iter: int = 1_000
) -> tuple[torch.Tensor, torch.Tensor]:
    """(V*, π*) of the robust MDP by robust policy iteration (Iyengar 2005): π ← greedy in
    the robust Q of π's exact robust value, until no action gains more than 1e-12. Same
    fixed point as `robust_value_iteration` (tests/tabular/test_robust.py), in a handful
    of exact evaluations instead of hundreds of sweeps: the tasks' oracle."""
    pi = greedy(mdp.expected_rewards())
    for _ in range(max_iter):
        rob = robust_evaluate(mdp, pi, ball)
        P = ball.worst_kernel(mdp, rob.V)
        Q = (P * (mdp.R + mdp.gamma * rob.V)).sum(-1)
        better = Q.max(-1).values > (pi * Q).sum(-1) + 1e-12
        if not better.any():
            return rob.V, pi
        pi = torch.where(better.unsqueeze(-1), greedy(Q), pi)
    raise NotConverged(f"robust_policy_iteration: the policy still changed after {max_iter} rounds")


def parametric_kernel(pbar: torch.Tensor, theta_phi: torch.Tensor, lam_psi) -> torch.Tensor:
    """The DRPG inventory code's kernel [code ICML-DRPG:inventory script Trans_Psa]:
    p_ξ(s'|s,a) ∝ p̄(s'|s,a)·exp(θᵀφ(s') / λᵀψ(s,a)); pbar [..., S], theta_phi [S],
    lam_psi [...] (> 0; the code keeps λ ≥ 1e-5)."""
    lam_psi = torch.as_tensor(lam_psi, dtype=pbar.dtype)
    if (lam_psi <= 0).any():
        raise ValueError("parametric_kernel: λᵀψ(s, a) must be > 0")
    logits = torch.log(pbar.clamp_min(1e-300)) + theta_phi / lam_psi.unsqueeze(-1)
    return torch.softmax(logits.masked_fill(pbar <= 0, float("-inf")), -1)


def project_l1_simplex(y: torch.Tensor, pbar: torch.Tensor, kappa, *, iters: int = 100):
    """Euclidean projection of each row of y [R, K] onto 𝒫 = {p ∈ Δ : ‖p − p̄‖₁ ≤ κ,
    p = 0 off the support of p̄} — the set DRPG's gradient inner solver ascends in.

    KKT: p_i = max(0, p̄_i + S_λ(y_i + ν − p̄_i)) on the support (S_λ soft-thresholding),
    with ν making Σp = 1 — found exactly, Σp being piecewise linear in ν with breakpoints
    p̄_i − y_i ± λ and −y_i − λ — and λ ≥ 0 the L1 multiplier, by bisection (the L1
    distance falls as λ grows). Our construction [ours]; the DRPG code projects with a
    quadratic-program solver (Gurobi)."""
    R, K = y.shape
    kappa = torch.as_tensor(kappa, dtype=y.dtype).expand(R)
    support = pbar > 0
    n_support = support.sum(-1, keepdim=True).to(y.dtype)

    def rows(nu: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:  # nu [R, M] → p [R, M, K]
        x = y[:, None, :] + nu[..., None] - pbar[:, None, :]
        shrunk = torch.sign(x) * (x.abs() - lam[:, None, None]).clamp_min(0.0)
        return (pbar[:, None, :] + shrunk).clamp_min(0.0) * support[:, None, :]

    def at(lam: torch.Tensor) -> torch.Tensor:  # the exact ν for Σp = 1, then p [R, K]
        far = torch.full_like(y, float("inf"))
        breaks = (
            torch.cat(
                [
                    torch.where(support, pbar - y + lam[:, None], far),
                    torch.where(support, pbar - y - lam[:, None], far),
                    torch.where(support, -y - lam[:, None], far),
                ],
                -1,
            )
            .sort(-1)
            .values
        )
        finite = torch.where(torch.isinf(breaks), breaks.new_zeros(()), breaks)
        g = rows(finite, lam).sum(-1)  # Σp at every breakpoint, nondecreasing
        g = torch.where(torch.isinf(breaks), torch.full_like(g, float("inf")), g)
        j = (g < 1).sum(-1, keepdim=True).clamp(1, breaks.shape[-1] - 1)
        b0, b1 = finite.gather(-1, j - 1), finite.gather(-1, j)
        g0, g1 = g.gather(-1, j - 1), g.gather(-1, j)
        last = torch.isinf(g1)  # past the last breakpoint: slope = |support|
        top = finite.gather(-1, (torch.isfinite(breaks).sum(-1, keepdim=True) - 1))
        g_top = rows(top, lam).sum(-1)
        nu = torch.where(
            last,
            top + (1 - g_top) / n_support,
            b0 + (1 - g0) * (b1 - b0) / (g1 - g0).clamp_min(1e-300),
        )
        return rows(nu, lam)[:, 0, :]

    zero = torch.zeros(R, dtype=y.dtype)
    p = at(zero)
    over = (p - pbar).abs().sum(-1) > kappa + 1e-12
    if not over.any():
        return p
    lo, hi = zero.clone(), (y - pbar).abs().amax(-1) + 1.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        too_far = (at(mid) - pbar).abs().sum(-1) > kappa
        lo, hi = torch.where(too_far, mid, lo), torch.where(too_far, hi, mid)
    return torch.where(over[:, None], at(hi), p)
