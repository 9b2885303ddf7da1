"""Arena of seed_control_theory.md §5.3: gradient and Hessian estimates of a value from five
off-policy evaluation estimates (Tang et al., arXiv 2106.13125), scored by the centred cosine
with the exact derivatives, on the official tabular toy.

Facts carried over from the official code (robintyh1/neurips2021-meta-gradient-offpolicy-
evaluation, main.py, tabular_mdp.py, evaluation_utils.py): S = 20, A = 5, γ = 0.8, T = 20,
start state 0, P(·|s,a) ~ Dirichlet(0.001), r(s,a) ~ U(0,1) (deterministic), μ uniform,
π = 0.8·one-hot(random) + 0.2·uniform, 1000 trajectories of μ; the derivatives are taken with
respect to the logits θ = log π at the *target* π (not at π = μ: behaviour μ is fixed and
off-policy); the oracle is the infinite-horizon V^π(0) = [(I − γP_π)⁻¹ r_π]₀; the critic is
V^μ + N(0, 1)·‖V^μ‖/S (one draw per MDP); step-wise IS uses V ≡ 0; V-trace truncates at 1.

    PYTHONPATH=src python benchmarks/theory_ope.py                   # 10 MDPs × 3 seeds
    PYTHONPATH=src python benchmarks/theory_ope.py --mdps 2 --seeds 1 --trajectories 200

`--current behaviour` differentiates at π = μ (the meta-RL/DiCE setting) instead;
`--oracle truncated` scores against the T-step value instead of the infinite-horizon one.
The extra row `taylor2_code_V[time]` feeds second-order the critic as the official code
indexes it (V[time] on the per-state vector, JAX clamping out-of-range indices), to show
what that indexing does to the second-order numbers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy import stats
from torch.func import grad, hessian

from policylab.algebra.ope import (
    OPEOptions,
    centred_cosine,
    effective_sample_size,
    ope_estimators,
    require_coverage,
    truncated_value,
)

ROWS = ["stepwise_is", "doubly_robust", "vtrace", "taylor1", "taylor2", "taylor2_code_V[time]"]


def random_mdp(rng: np.random.Generator, S: int, A: int, density: float):
    """P [S, A, S] with Dirichlet(density) rows, R [S, A] ~ U(0, 1) [code tabular_mdp.py]."""
    P = rng.dirichlet(np.full(S, density), size=(S, A))
    P = P / P.sum(-1, keepdims=True)
    return torch.tensor(P), torch.tensor(rng.random((S, A)))


def sample_trajectories(rng, P, R, mu, start: int, B: int, T: int):
    """B trajectories of μ from `start`: states [B, T+1], actions [B, T], rewards [B, T]."""
    P_np, mu_np = P.numpy(), mu.numpy()
    states = np.empty((B, T + 1), dtype=np.int64)
    actions = np.empty((B, T), dtype=np.int64)
    states[:, 0] = start
    for t in range(T):
        s = states[:, t]
        a = (rng.random((B, 1)) > np.cumsum(mu_np[s], -1)).sum(-1)
        a = np.minimum(a, mu_np.shape[1] - 1)
        nxt = (rng.random((B, 1)) > np.cumsum(P_np[s, a], -1)).sum(-1)
        actions[:, t], states[:, t + 1] = a, np.minimum(nxt, P_np.shape[2] - 1)
    states, actions = torch.from_numpy(states), torch.from_numpy(actions)
    return states, actions, R[states[:, :T], actions]


def one_run(args, seed: int, index: int) -> dict[str, tuple[float, float]]:
    """(gradient cosine, Hessian cosine) per row for one MDP; also 'ess'."""
    rng = np.random.default_rng([seed, index])
    S, A, T, gamma = args.states, args.actions, args.horizon, args.gamma
    P, R = random_mdp(rng, S, A, args.dirichlet)
    mu = torch.full((S, A), 1.0 / A, dtype=torch.float64)
    pi = torch.zeros(S, A, dtype=torch.float64)
    pi[torch.arange(S), torch.from_numpy(rng.integers(0, A, S))] = 1.0
    pi = args.epsilon * pi + (1 - args.epsilon) * mu
    require_coverage(pi, mu)
    theta = torch.log(pi if args.current == "target" else mu)

    P_mu = torch.einsum("sa,sat->st", mu, P)
    V_mu = torch.linalg.solve(torch.eye(S, dtype=torch.float64) - gamma * P_mu, (mu * R).sum(-1))
    V_boot = V_mu + torch.from_numpy(rng.standard_normal(S)) * args.noise * V_mu.norm() / S

    horizon = None if args.oracle == "infinite" else T
    value = lambda th: truncated_value(P, R, th, 0, gamma, horizon)  # noqa: E731
    g_exact, H_exact = grad(value)(theta), hessian(value)(theta)

    states, actions, rewards = sample_trajectories(rng, P, R, mu, 0, args.trajectories, T)
    behaviour_logp = torch.log(mu)[states[:, :T], actions]
    mask = torch.ones(args.trajectories, T, dtype=torch.float64)
    values = V_boot[states]
    time_index = (torch.arange(T + 1) - (T + 1) + S).clamp(0, S - 1)  # code's V[time]
    values_code = V_boot[time_index].expand(args.trajectories, T + 1)
    cfg = OPEOptions(gamma=gamma, rho_max=args.truncation, c_max=args.truncation)

    out = {}
    for row in ROWS:
        fn = ope_estimators.get(row.split("_code")[0])
        v = values_code if row.endswith("V[time]") else values

        def mean_estimate(th, fn=fn, v=v):
            logp = torch.log_softmax(th, -1)[states[:, :T], actions]
            return fn(logp, behaviour_logp, rewards, v, mask, cfg).mean()

        g, H = grad(mean_estimate)(theta), hessian(mean_estimate)(theta)
        out[row] = (float(centred_cosine(g, g_exact)), float(centred_cosine(H, H_exact)))
    logp = torch.log_softmax(theta, -1)[states[:, :T], actions]
    out["ess"] = (float(effective_sample_size(logp, behaviour_logp, mask)), 0.0)
    return out


def t_interval(x: np.ndarray) -> tuple[float, float, float]:
    m = float(x.mean())
    if len(x) < 2:
        return m, float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return m, m - half, m + half


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mdps", type=int, default=10, help="MDPs per seed [code: 10 trials]")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--trajectories", type=int, default=1000, help="[code: num_simulations]")
    ap.add_argument("--states", type=int, default=20)
    ap.add_argument("--actions", type=int, default=5)
    ap.add_argument("--gamma", type=float, default=0.8)
    ap.add_argument("--horizon", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=0.8, help="off-policyness of π")
    ap.add_argument("--dirichlet", type=float, default=0.001)
    ap.add_argument("--noise", type=float, default=1.0, help="critic noise level")
    ap.add_argument("--truncation", type=float, default=1.0, help="V-trace ρ_max = c_max")
    ap.add_argument("--current", choices=["target", "behaviour"], default="target")
    ap.add_argument("--oracle", choices=["infinite", "truncated"], default="infinite")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)

    start = time.perf_counter()
    runs = [one_run(args, s, i) for s in range(args.seeds) for i in range(args.mdps)]
    n = len(runs)
    print(
        f"{n} runs ({args.seeds} seeds × {args.mdps} MDPs), {args.trajectories} trajectories, "
        f"current = {args.current}, oracle = {args.oracle}, "
        f"{time.perf_counter() - start:.0f} s; mean ESS of whole-trajectory IS weights "
        f"{np.mean([r['ess'][0] for r in runs]):.1f}"
    )
    print("| estimator | gradient cosine (95% CI) | Hessian cosine (95% CI) |")
    print("|---|---|---|")
    table = {}
    for row in ROWS:
        g = t_interval(np.array([r[row][0] for r in runs]))
        h = t_interval(np.array([r[row][1] for r in runs]))
        table[row] = (g, h)
        print(
            f"| {row} | {g[0]:.3f} [{g[1]:.3f}, {g[2]:.3f}] | {h[0]:.3f} [{h[1]:.3f}, {h[2]:.3f}] |"
        )

    def above(a: str, b: str, k: int) -> bool:  # a's interval entirely above b's
        return table[a][k][1] > table[b][k][2]

    checks = {
        "doubly_robust > stepwise_is (gradient)": above("doubly_robust", "stepwise_is", 0),
        "doubly_robust > stepwise_is (Hessian)": above("doubly_robust", "stepwise_is", 1),
        "vtrace below doubly_robust (Hessian)": above("doubly_robust", "vtrace", 1),
        "taylor1 below doubly_robust (Hessian)": above("doubly_robust", "taylor1", 1),
        "taylor2 > taylor1 (Hessian)": above("taylor2", "taylor1", 1),
    }
    for name, ok in checks.items():
        print(f"- {name}: {'yes' if ok else 'no'} (non-overlapping 95% intervals)")
    print(f"verdict: {'held' if all(checks.values()) else 'not held'}")


if __name__ == "__main__":
    main()
