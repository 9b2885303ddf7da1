"""Exact solvers for tabular MDPs, differentiable where a gradient is wanted.

Discounted (`TabularMDP`), rewards maximised:
    V^π = (I − γP_π)⁻¹ r_π,   Q^π(s,a) = Σ_s' P(s'|s,a)(R(s,a,s') + γV^π(s'))
    d^π = (1 − γ)·ρᵀ(I − γP_π)⁻¹   (the normalised occupancy, as the DRPG and RFZI codes)
    J(π) = ρᵀV^π
Policy-gradient theorem, the two parameterisations (papers/seed_control_theory.md §0.1):
    direct   ∂J/∂π(a|s) = d(s)·Q(s,a)/(1 − γ)
    softmax  ∂J/∂θ(s,a) = d(s)·π(a|s)·(Q(s,a) − V(s))/(1 − γ)
both equal to autograd of ρᵀV through `evaluate` (tests/tabular/test_solve.py).

Finite horizon (`FiniteHorizonMDP`): `evaluate_finite` and `backward_induction`.
Iterative solvers raise `NotConverged` at their iteration limit — never a silent last
iterate."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.tabular.mdp import DTYPE, FiniteHorizonMDP, TabularMDP, check_policy


class NotConverged(RuntimeError):
    """An iterative solver reached its iteration limit before its tolerance."""


@dataclass(frozen=True)
class Evaluation:
    V: torch.Tensor  # [S]
    Q: torch.Tensor  # [S, A]


def policy_kernel(pi: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """P_π(s'|s) = Σ_a π(a|s)·P(s'|s,a) [S, S]."""
    return torch.einsum("sa,sat->st", pi, P)


def evaluate(mdp: TabularMDP, pi: torch.Tensor, P: torch.Tensor | None = None) -> Evaluation:
    """V^π and Q^π under kernel P (default: the MDP's), by one linear solve; differentiable
    in pi and P."""
    pi = check_policy(pi, mdp.n_states, mdp.n_actions)
    P = mdp.P if P is None else P
    r = mdp.expected_rewards(P)
    eye = torch.eye(mdp.n_states, dtype=DTYPE)
    V = torch.linalg.solve(eye - mdp.gamma * policy_kernel(pi, P), (pi * r).sum(-1))
    return Evaluation(V, q_from_v(mdp, V, P))


def q_from_v(mdp: TabularMDP, V: torch.Tensor, P: torch.Tensor | None = None) -> torch.Tensor:
    """Q(s,a) = Σ_s' P(s'|s,a)·(R(s,a,s') + γV(s')) [S, A]."""
    P = mdp.P if P is None else P
    return (P * (mdp.R + mdp.gamma * V)).sum(-1)


def occupancy(mdp: TabularMDP, pi: torch.Tensor, P: torch.Tensor | None = None) -> torch.Tensor:
    """d^π(s) = (1 − γ)·[ρᵀ(I − γP_π)⁻¹](s) [S], a distribution."""
    pi = check_policy(pi, mdp.n_states, mdp.n_actions)
    P = mdp.P if P is None else P
    eye = torch.eye(mdp.n_states, dtype=DTYPE)
    return (1 - mdp.gamma) * torch.linalg.solve((eye - mdp.gamma * policy_kernel(pi, P)).T, mdp.rho)


def objective(mdp: TabularMDP, pi: torch.Tensor, P: torch.Tensor | None = None) -> torch.Tensor:
    """J(π) = ρᵀV^π (a 0-d tensor)."""
    return mdp.rho @ evaluate(mdp, pi, P).V


def direct_gradient(mdp: TabularMDP, pi: torch.Tensor, P: torch.Tensor | None = None):
    """∂J/∂π(a|s) = d(s)·Q(s,a)/(1 − γ) [S, A] (the direct parameterisation)."""
    d = occupancy(mdp, pi, P)
    return d.unsqueeze(-1) * evaluate(mdp, pi, P).Q / (1 - mdp.gamma)


def softmax_gradient(mdp: TabularMDP, logits: torch.Tensor, P: torch.Tensor | None = None):
    """∂J/∂θ(s,a) = d(s)·π(a|s)·(Q(s,a) − V(s))/(1 − γ) [S, A], π = softmax(θ)."""
    pi = torch.softmax(logits.to(DTYPE), -1)
    ev = evaluate(mdp, pi, P)
    d = occupancy(mdp, pi, P)
    return d.unsqueeze(-1) * pi * (ev.Q - ev.V.unsqueeze(-1)) / (1 - mdp.gamma)


def greedy(Q: torch.Tensor) -> torch.Tensor:
    """The deterministic policy argmax_a Q(s, a) [.., S, A] (ties: the first action)."""
    return torch.nn.functional.one_hot(Q.argmax(-1), Q.shape[-1]).to(DTYPE)


def value_iteration(
    mdp: TabularMDP, *, tol: float = 1e-10, max_iter: int = 100_000
) -> tuple[torch.Tensor, torch.Tensor]:
    """(V*, π*): V ← max_a Q(V) until ‖ΔV‖_∞ ≤ tol·(1 − γ)/(2γ) (then ‖V − V*‖_∞ ≤ tol/2),
    π* greedy in the final Q."""
    V = torch.zeros(mdp.n_states, dtype=DTYPE)
    stop = tol * (1 - mdp.gamma) / max(2 * mdp.gamma, 1e-12)
    for _ in range(max_iter):
        new = q_from_v(mdp, V).max(-1).values
        if (new - V).abs().max() <= stop:
            return new, greedy(q_from_v(mdp, new))
        V = new
    raise NotConverged(f"value_iteration: ‖ΔV‖ above {stop:g} after {max_iter} iterations")


def policy_iteration(
    mdp: TabularMDP, *, max_iter: int = 1_000
) -> tuple[torch.Tensor, torch.Tensor]:
    """(V*, π*) by exact evaluation and greedy improvement until the policy is stable
    (an action changes only on a gain above 1e-12, so ties cannot cycle)."""
    pi = greedy(mdp.expected_rewards())
    for _ in range(max_iter):
        ev = evaluate(mdp, pi)
        current = (pi * ev.Q).sum(-1)
        better = ev.Q.max(-1).values > current + 1e-12
        if not better.any():
            return ev.V, pi
        pi = torch.where(better.unsqueeze(-1), greedy(ev.Q), pi)
    raise NotConverged(f"policy_iteration: the policy still changed after {max_iter} rounds")


def linear_program(mdp: TabularMDP) -> torch.Tensor:
    """V* by the primal LP  min ρᵀV  s.t.  V(s) ≥ r(s,a) + γΣ_s' P(s'|s,a)V(s')  (scipy
    HiGHS) — an independent route to the optimum, for checks. ρ must have full support."""
    from scipy.optimize import linprog

    S, A = mdp.n_states, mdp.n_actions
    if (mdp.rho <= 0).any():
        raise ValueError("linear_program: rho needs full support (the LP weights every state)")
    eye = torch.eye(S, dtype=DTYPE)
    A_ub = (mdp.gamma * mdp.P - eye.unsqueeze(1)).reshape(S * A, S)
    b_ub = -mdp.expected_rewards().reshape(S * A)
    res = linprog(
        mdp.rho.numpy(), A_ub=A_ub.numpy(), b_ub=b_ub.numpy(), bounds=(None, None), method="highs"
    )
    if not res.success:
        raise NotConverged(f"linear_program: {res.message}")
    return torch.as_tensor(res.x, dtype=DTYPE)


# ---- finite horizon -------------------------------------------------------------------------
@dataclass(frozen=True)
class FiniteEvaluation:
    V: torch.Tensor  # [H + 1, S], V[H] = 0
    Q: torch.Tensor  # [H, S, A]
    state_dist: torch.Tensor  # [H, S], P(s_h = s) from μ
    J: torch.Tensor  # 0-d


def evaluate_finite(mdp: FiniteHorizonMDP, pi: torch.Tensor) -> FiniteEvaluation:
    """Backward recursion Q_h = R + P·V_{h+1}, V_h = Σ_a π_h Q_h (V_H = 0); forward state
    distributions from μ; J = μᵀV_0. pi: [H, S, A]; differentiable."""
    H, S, A = mdp.horizon, mdp.n_states, mdp.n_actions
    pi = check_policy(pi, S, A)
    if pi.shape != (H, S, A):
        raise ValueError(
            f"pi: expected shape [{H}, {S}, {A}] (one table per epoch), got {tuple(pi.shape)}"
        )
    V = [torch.zeros(S, dtype=DTYPE)]
    Q = []
    for h in reversed(range(H)):
        q = mdp.R + mdp.P @ V[0]
        Q.insert(0, q)
        V.insert(0, (pi[h] * q).sum(-1))
    dist = [mdp.mu]
    for h in range(H - 1):
        dist.append(dist[-1] @ policy_kernel(pi[h], mdp.P))
    return FiniteEvaluation(torch.stack(V), torch.stack(Q), torch.stack(dist), mdp.mu @ V[0])


def backward_induction(mdp: FiniteHorizonMDP) -> tuple[torch.Tensor, torch.Tensor]:
    """(V*[H + 1, S], π*[H, S, A]): the optimum by dynamic programming (ties: first action)."""
    H, S = mdp.horizon, mdp.n_states
    V = torch.zeros(H + 1, S, dtype=DTYPE)
    pi = torch.zeros(H, S, mdp.n_actions, dtype=DTYPE)
    for h in reversed(range(H)):
        q = mdp.R + mdp.P @ V[h + 1]
        V[h] = q.max(-1).values
        pi[h] = greedy(q)
    return V, pi
