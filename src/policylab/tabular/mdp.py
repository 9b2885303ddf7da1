"""Finite MDPs as tensors (float64), checked on construction, and their generators.

`TabularMDP(P[S,A,S'], R[S,A] or [S,A,S'], rho[S], gamma)` is a discounted MDP with rewards
maximised; `FiniteHorizonMDP(P, R, mu, horizon)` an undiscounted one over epochs
h = 0..H−1. A policy is a table pi[S, A] (or [H, S, A]) whose rows are distributions.
Costs (the robust-MDP papers minimise them) enter as R = −C: every value is then the
negative of the cost-to-go, and a cost paper's "worst case" is our minimum.

Generators: `garnet` (the DRPG code's random sparse MDPs), `ring_mdp` (the soft-robust
code's slippery ring), `finite_garnet`, and `mdp2`, the two-state example every test of
papers/seed_control_theory.md starts from."""

from __future__ import annotations

from dataclasses import dataclass

import torch

DTYPE = torch.float64
STOCHASTIC_TOL = 1e-9


def as_kernel(P, name: str = "P") -> torch.Tensor:
    """P as a float64 [S, A, S] tensor whose rows are distributions; a clear error if not."""
    P = torch.as_tensor(P, dtype=DTYPE)
    if P.dim() != 3 or P.shape[0] != P.shape[2] or min(P.shape) < 1:
        raise ValueError(f"{name}: expected shape [S, A, S], got {tuple(P.shape)}")
    if not torch.isfinite(P).all() or (P < 0).any():
        raise ValueError(f"{name}: transition probabilities must be finite and ≥ 0")
    worst = (P.sum(-1) - 1).abs().max().item()
    if worst > STOCHASTIC_TOL:
        s, a = divmod(int((P.sum(-1) - 1).abs().argmax()), P.shape[1])
        raise ValueError(
            f"{name}: row P[{s}, {a}, :] sums to {P[s, a].sum().item():.12g}, not 1 "
            f"(tolerance {STOCHASTIC_TOL:g})"
        )
    return P


def as_distribution(x, size: int, name: str) -> torch.Tensor:
    x = torch.as_tensor(x, dtype=DTYPE)
    if x.shape != (size,):
        raise ValueError(f"{name}: expected shape [{size}], got {tuple(x.shape)}")
    if not torch.isfinite(x).all() or (x < 0).any() or abs(x.sum().item() - 1) > STOCHASTIC_TOL:
        raise ValueError(f"{name}: must be a distribution (≥ 0, sums to 1), got {x.tolist()}")
    return x


def as_rewards(R, S: int, A: int) -> torch.Tensor:
    """R[S, A] or R[S, A, S] as [S, A, S] (a reward that depends on s' as the DRPG costs do)."""
    R = torch.as_tensor(R, dtype=DTYPE)
    if R.shape == (S, A):
        R = R.unsqueeze(-1).expand(S, A, S).clone()
    if R.shape != (S, A, S):
        raise ValueError(f"R: expected shape [{S}, {A}] or [{S}, {A}, {S}], got {tuple(R.shape)}")
    if not torch.isfinite(R).all():
        raise ValueError("R: rewards must be finite")
    return R


def check_policy(pi, S: int, A: int, name: str = "pi") -> torch.Tensor:
    pi = torch.as_tensor(pi, dtype=DTYPE) if not torch.is_tensor(pi) else pi.to(DTYPE)
    if pi.shape[-2:] != (S, A):
        raise ValueError(f"{name}: expected shape [..., {S}, {A}], got {tuple(pi.shape)}")
    if (pi.detach() < -1e-12).any() or (pi.detach().sum(-1) - 1).abs().max() > 1e-8:
        raise ValueError(f"{name}: each row must be a distribution over the {A} actions")
    return pi


@dataclass(frozen=True)
class TabularMDP:
    """A discounted MDP: P [S, A, S'], R [S, A, S'] (expected reward of a transition),
    rho [S] the initial distribution, gamma ∈ [0, 1)."""

    P: torch.Tensor
    R: torch.Tensor
    rho: torch.Tensor
    gamma: float

    def __init__(self, P, R, rho, gamma: float) -> None:
        P = as_kernel(P)
        S, A, _ = P.shape
        if not 0.0 <= float(gamma) < 1.0:
            raise ValueError(f"gamma: must lie in [0, 1), got {gamma}")
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "R", as_rewards(R, S, A))
        object.__setattr__(self, "rho", as_distribution(rho, S, "rho"))
        object.__setattr__(self, "gamma", float(gamma))

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]

    def expected_rewards(self, P: torch.Tensor | None = None) -> torch.Tensor:
        """r(s, a) = Σ_s' P(s'|s,a)·R(s,a,s') [S, A] under kernel P (default: the MDP's)."""
        P = self.P if P is None else P
        return (P * self.R).sum(-1)

    def uniform_policy(self) -> torch.Tensor:
        return torch.full((self.n_states, self.n_actions), 1.0 / self.n_actions, dtype=DTYPE)


@dataclass(frozen=True)
class FiniteHorizonMDP:
    """An undiscounted MDP over epochs h = 0..H−1: P [S, A, S'], R [S, A], mu [S] the
    distribution of s₀, horizon H ≥ 1. J(π) = E_{s₀∼μ}[Σ_h r(s_h, a_h)]."""

    P: torch.Tensor
    R: torch.Tensor
    mu: torch.Tensor
    horizon: int

    def __init__(self, P, R, mu, horizon: int) -> None:
        P = as_kernel(P)
        S, A, _ = P.shape
        R = torch.as_tensor(R, dtype=DTYPE)
        if R.shape != (S, A) or not torch.isfinite(R).all():
            raise ValueError(
                f"R: expected finite rewards of shape [{S}, {A}], got {tuple(R.shape)}"
            )
        if int(horizon) < 1:
            raise ValueError(f"horizon: must be ≥ 1, got {horizon}")
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "R", R)
        object.__setattr__(self, "mu", as_distribution(mu, S, "mu"))
        object.__setattr__(self, "horizon", int(horizon))

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]

    def uniform_policy(self) -> torch.Tensor:
        S, A, H = self.n_states, self.n_actions, self.horizon
        return torch.full((H, S, A), 1.0 / A, dtype=DTYPE)


# ---- instances ------------------------------------------------------------------------------
def mdp2() -> TabularMDP:
    """The two-state MDP of papers/seed_control_theory.md §0.1 (γ 0.9, ρ = [1, 0])."""
    P = [[[0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.0, 1.0]]]
    return TabularMDP(P, [[1.0, 0.0], [0.0, 2.0]], [1.0, 0.0], 0.9)


def garnet(
    n_states: int,
    n_actions: int,
    branches: int,
    *,
    seed: int,
    gamma: float = 0.95,
    reward_scale: float = 5.0,
    next_state_rewards: bool = True,
) -> TabularMDP:
    """A random sparse MDP as the DRPG code draws it [code JerrisonWang/ICML-DRPG:Garnet
    Problem/Sampling Garnet.cpp:Garnet_SARMDPs]: each (s, a) reaches `branches` distinct
    random states with weights U(0, 5) normalised; rewards U(0, reward_scale) per (s, a, s')
    (per (s, a) when next_state_rewards is False); ρ ∝ U(0, 5). Here rewards are maximised;
    the cost papers' instances are `garnet(...)` with R = −C."""
    if not 1 <= branches <= n_states:
        raise ValueError(f"branches: must lie in [1, n_states={n_states}], got {branches}")
    g = torch.Generator().manual_seed(seed)
    S, A = n_states, n_actions
    P = torch.zeros(S, A, S, dtype=DTYPE)
    for s in range(S):
        for a in range(A):
            reach = torch.randperm(S, generator=g)[:branches]
            w = torch.rand(branches, generator=g, dtype=DTYPE) * 5 + 1e-3
            P[s, a, reach] = w / w.sum()
    shape = (S, A, S) if next_state_rewards else (S, A)
    R = torch.rand(shape, generator=g, dtype=DTYPE) * reward_scale
    rho = torch.rand(S, generator=g, dtype=DTYPE) * 5 + 1e-3
    return TabularMDP(P, R, rho / rho.sum(), gamma)


# the soft-robust code's "Toy-10" rewards over a ring of 14 states [code
# huyangsh/risk-sensitive-RL_ICRL-2024:env/utils.py get_reward_src]
TOY10_REWARDS = (0, 0, -1, 2, -1, 0, 0, -10, 5, -10, 0, 0.9, 1, 0)


def ring_mdp(rewards=TOY10_REWARDS, *, slip: float = 0.01, gamma: float = 0.95) -> TabularMDP:
    """The soft-robust code's ring [code risk-sensitive-RL_ICRL-2024:build_toy_env]:
    actions left / stay / right move s → s + a − 1 (mod S) w.p. 1 − 2·slip, and one
    further step either way w.p. slip each; the reward is the state's (r(s, a) = reward[s]);
    ρ uniform."""
    if not 0.0 <= slip <= 0.5:
        raise ValueError(f"slip: must lie in [0, 0.5], got {slip}")
    r = torch.as_tensor(rewards, dtype=DTYPE)
    S = len(r)
    P = torch.zeros(S, 3, S, dtype=DTYPE)
    for s in range(S):
        for a in range(3):
            nxt = (s + a - 1) % S
            P[s, a, nxt] += 1 - 2 * slip
            P[s, a, (nxt - 1) % S] += slip
            P[s, a, (nxt + 1) % S] += slip
    return TabularMDP(
        P, r.unsqueeze(-1).expand(S, 3), torch.full((S,), 1.0 / S, dtype=DTYPE), gamma
    )


def finite_garnet(
    n_states: int, n_actions: int, branches: int, horizon: int, *, seed: int
) -> FiniteHorizonMDP:
    """A Garnet kernel with rewards U(0, 1) per (s, a) and a uniform μ, over `horizon`
    epochs (papers/seed_control_theory.md §3.2)."""
    base = garnet(
        n_states, n_actions, branches, seed=seed, reward_scale=1.0, next_state_rewards=False
    )
    S = n_states
    return FiniteHorizonMDP(base.P, base.R[..., 0], torch.full((S,), 1.0 / S, dtype=DTYPE), horizon)
