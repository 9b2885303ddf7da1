"""The RepRL grid-world as an exact finite-horizon MDP, and ES and RepES as tabular
methods on it (Nabati, Tennenholtz & Mannor, arXiv:2305.19922, App. F.1 and Alg. 4–5;
papers/seed_control_theory.md §7.2–7.3).

Grid 8×8, cells (x, y) ∈ {1..8}², start (1, 1), horizon H = 20, γ = 1, four moves
(+x, −x, +y, −y; a move off the grid stays put), reward N(μ(x, y), σ²) for the cell the
action is taken in, σ = 3 [paper App. F.1]. The mean, our reading of the paper's constants
(R₁ = 2.5, R₂ = 0.3, R₃ = 13, a₁ = 0.125, a₂ = 8; the formula itself was not read):

    μ(x, y) = R₁·exp(−a₁‖(x, y) − (1, 1)‖²) + R₂ + R₃·exp(−a₂‖(x, y) − (8, 8)‖²)

a broad hill at the start (a local optimum: staying scores 20·2.8 = 56) and a sharp goal
in the far corner, 14 moves away (the optimum goes there and stays).

The task's value is the EXACT expected return of the stationary policy (the table
repeated over the H epochs, `evaluate_finite`); the optimum comes from
`backward_induction` (non-stationary policies, an upper bound on stationary ones); at
construction we check that a stationary deterministic policy attains it
(`extras["stationary_attains_optimum"]`), so v* is also the best stationary value."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from policylab.algebra.options import check_choice, option
from policylab.recipes.base import S
from policylab.search.es import antithetic_perturbations, es_gradient, es_step
from policylab.search.reprl import (
    init_representation,
    mlp_init,
    mlp_sizes,
    policy_tables,
    rep_es_round,
)
from policylab.tabular.mdp import DTYPE, FiniteHorizonMDP
from policylab.tabular.methods import Problem, State, TabularMethod, add
from policylab.tabular.solve import backward_induction, evaluate_finite
from policylab.tabular.tasks import tabular_tasks

MOVES = ((1, 0), (-1, 0), (0, 1), (0, -1))  # +x, −x, +y, −y


def reward_mean(x, y, R1=2.5, R2=0.3, R3=13.0, a1=0.125, a2=8.0, size=8):
    """μ(x, y) above (our reading of App. F.1's constants)."""
    d_start = (x - 1) ** 2 + (y - 1) ** 2
    d_goal = (x - size) ** 2 + (y - size) ** 2
    return R1 * math.exp(-a1 * d_start) + R2 + R3 * math.exp(-a2 * d_goal)


def gridworld_mdp(size: int = 8, horizon: int = 20, **constants) -> FiniteHorizonMDP:
    """State s = (x − 1)·size + (y − 1); P [S, 4, S] deterministic; R [S, 4] = μ(x, y)."""
    if size < 2:
        raise ValueError(f"size: the grid needs ≥ 2 cells a side, got {size}")
    n = size * size
    P = torch.zeros(n, len(MOVES), n, dtype=DTYPE)
    R = torch.zeros(n, len(MOVES), dtype=DTYPE)
    for x in range(1, size + 1):
        for y in range(1, size + 1):
            s = (x - 1) * size + (y - 1)
            R[s] = reward_mean(x, y, size=size, **constants)
            for a, (dx, dy) in enumerate(MOVES):
                nx, ny = min(max(x + dx, 1), size), min(max(y + dy, 1), size)
                P[s, a, (nx - 1) * size + (ny - 1)] = 1.0
    mu = torch.zeros(n, dtype=DTYPE)
    mu[0] = 1.0
    return FiniteHorizonMDP(P, R, mu, horizon)


def stationary_values(mdp: FiniteHorizonMDP, pis: torch.Tensor) -> torch.Tensor:
    """J(π) = Σ_h d_hᵀ r_π for stationary tables pis [B, S, A] → [B] (forward state
    distributions d_{h+1} = d_h P_π, d_0 = μ); equals `evaluate_finite` on the table
    repeated over the epochs, batched."""
    d = mdp.mu.expand(pis.shape[0], -1)
    J = torch.zeros(pis.shape[0], dtype=DTYPE)
    for _ in range(mdp.horizon):
        J = J + torch.einsum("bs,bsa,sa->b", d, pis, mdp.R)
        d = torch.einsum("bs,bsa,sat->bt", d, pis, mdp.P)
    return J


def sample_returns(
    mdp: FiniteHorizonMDP, pis: torch.Tensor, noise: float, generator: torch.Generator
) -> torch.Tensor:
    """One trajectory per table pis [B, S, A] → sampled returns [B]: s₀ ∼ μ, a_h ∼ π(·|s_h),
    s_{h+1} ∼ P(·|s_h, a_h), G = Σ_h r(s_h, a_h) + ε with ε ∼ N(0, H·σ²) (the sum of the
    per-step N(0, σ²) noises, drawn at once: the same law)."""
    B = pis.shape[0]
    s = torch.multinomial(mdp.mu.expand(B, -1), 1, generator=generator)[:, 0]
    G = torch.zeros(B, dtype=DTYPE)
    rows = torch.arange(B)
    for _ in range(mdp.horizon):
        a = torch.multinomial(pis[rows, s], 1, generator=generator)[:, 0]
        G = G + mdp.R[s, a]
        s = torch.multinomial(mdp.P[s, a], 1, generator=generator)[:, 0]
    return G + noise * math.sqrt(mdp.horizon) * torch.randn(B, generator=generator, dtype=DTYPE)


def realise_stationary(mdp: FiniteHorizonMDP, pi_star: torch.Tensor) -> torch.Tensor | None:
    """A stationary deterministic table that follows the deterministic optimum π*[H, S, A]
    along its path from the start, or None when the path asks two actions of one state."""
    table = torch.zeros(mdp.n_states, mdp.n_actions, dtype=DTYPE)
    table[:, 0] = 1.0
    chosen: dict[int, int] = {}
    s = int(mdp.mu.argmax())
    for h in range(mdp.horizon):
        a = int(pi_star[h, s].argmax())
        if chosen.setdefault(s, a) != a:
            return None
        table[s] = 0.0
        table[s, a] = 1.0
        s = int(mdp.P[s, a].argmax())
    return table


def gridworld(seed: int, size: int = 8, horizon: int = 20, noise: float = 3.0) -> Problem:
    """`tabular/gridworld`: the MDP is the same for every seed (the seed draws the methods'
    starting parameters and noise); the start policy scored as 0 is the uniform table."""
    if noise < 0:
        raise ValueError(f"noise: the reward std σ must be ≥ 0, got {noise}")
    mdp = gridworld_mdp(size, horizon)
    V_star, pi_star = backward_induction(mdp)
    optimum = float(mdp.mu @ V_star[0])
    table = realise_stationary(mdp, pi_star)
    attains = (
        table is not None and abs(float(stationary_values(mdp, table[None])[0]) - optimum) < 1e-9
    )

    def value(pi: torch.Tensor) -> float:
        return float(evaluate_finite(mdp, pi.expand(mdp.horizon, -1, -1)).J)

    uniform = torch.full((mdp.n_states, mdp.n_actions), 1.0 / mdp.n_actions, dtype=DTYPE)
    return Problem(
        mdp,
        value,
        optimum,
        uniform,
        budget_unit="trajectories",
        extras={
            "reward_noise": noise,
            "stationary_attains_optimum": attains,
            "optimal_stationary_policy": table,
        },
    )


tabular_tasks.add("gridworld", gridworld)


# --- ES and RepES as tabular methods (policy: a softmax MLP on the one-hot state) -------


@dataclass
class ESOptions:
    layers: int = option(3, "hidden layers of the policy MLP (tanh)")
    hidden: int = option(32, "units per hidden layer")
    trajectories: int = option(100, "trajectories per round (θ ± δ_i, one each)")
    perturbation_std: float = option(0.1, "ν: δ ∼ N(0, ν²I)")
    step: float = option(0.1, "α: θ ← θ + α·g")

    def __post_init__(self) -> None:
        if self.layers < 1 or self.hidden < 1:
            raise ValueError(f"layers, hidden: must be ≥ 1, got {self.layers}, {self.hidden}")
        if self.trajectories < 2 or self.trajectories % 2:
            raise ValueError(f"trajectories: an even number ≥ 2, got {self.trajectories}")
        if not self.perturbation_std > 0 or not self.step > 0:
            raise ValueError(
                f"perturbation_std, step: must be > 0, got {self.perturbation_std}, {self.step}"
            )


@dataclass
class RepESOptions(ESOptions):
    decision_set: int = option(2048, "candidates θ ± δ'_j valued by the bandit (even)")
    bandit: str = option("ts", "ts (Thompson sampling) or oful")
    ridge: float = option(0.1, "λ of V = λI + Σxxᵀ")
    ts_scale: float = option(1.0, "σ of w̃ ∼ N(ŵ, σ²V⁻¹), standardised-return units")
    oful_alpha: float = option(1.0, "α of ⟨x, ŵ⟩ + α‖x‖_{V⁻¹}")
    representation: str = option("mlp", "mlp (learned encoder) or random_projection")
    latent_dim: int = option(16, "dimension of f(θ)")
    encoder_hidden: int = option(64, "hidden units of the encoder MLP")
    encoder_steps: int = option(5, "Adam steps on the encoder per round")
    encoder_batch: int = option(256, "minibatch of the encoder's regression")
    encoder_lr: float = option(1e-3, "Adam step size of the encoder")
    history: int = option(1000, "evaluated (θ, G) pairs kept for the encoder and the bandit")
    heldout: int = option(64, "held-out perturbations for bandit/linearity_r2 (exact values)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("rep_es", "bandit", self.bandit, ("ts", "oful"))
        check_choice("rep_es", "representation", self.representation, ("mlp", "random_projection"))
        if self.decision_set < 2 or self.decision_set % 2 or self.heldout < 2:
            raise ValueError(
                f"decision_set, heldout: even numbers ≥ 2, got {self.decision_set}, {self.heldout}"
            )
        if self.history < self.trajectories:
            raise ValueError(
                f"history: must hold ≥ one round ({self.trajectories}), got {self.history}"
            )
        if not self.ridge > 0:
            raise ValueError(f"ridge: λ must be > 0, got {self.ridge}")


def policy_mlp_sizes(problem: Problem, state: State) -> list[tuple[int, int]]:
    """The policy MLP's layer shapes: S one-hot inputs → state["layers"] × state["hidden"]
    (tanh) → A logits."""
    hidden = (int(state["hidden"]),) * int(state["layers"])
    return mlp_sizes(problem.mdp.n_states, hidden, problem.mdp.n_actions)


def init_es(problem: Problem, options: ESOptions, generator) -> State:
    state = {"layers": options.layers, "hidden": options.hidden}
    state["theta"] = mlp_init(policy_mlp_sizes(problem, state), generator)
    return state


def init_rep_es(problem: Problem, options: RepESOptions, generator) -> State:
    state = init_es(problem, options, generator)
    D = state["theta"].numel()
    state.update(init_representation(D, options, generator))
    state.update(
        buf_theta=torch.zeros(options.history, D, dtype=torch.float32),
        buf_G=torch.zeros(options.history, dtype=DTYPE),
        buf_pos=0,
        buf_n=0,
    )
    return state


def mlp_policy(problem: Problem, state: State) -> torch.Tensor:
    """The mean parameters' table π_θ [S, A] (softmax MLP on one-hot states)."""
    return policy_tables(state["theta"].unsqueeze(0), policy_mlp_sizes(problem, state))[0]


def es_round(problem: Problem, state: State, options: ESOptions, generator):
    """Alg. 4: g = (1/N)Σ[G(θ + δ_i) − G(θ − δ_i)]δ_i from one sampled trajectory each."""
    sizes, theta = policy_mlp_sizes(problem, state), state["theta"]
    delta = antithetic_perturbations(
        options.trajectories // 2, theta.numel(), options.perturbation_std, generator
    )
    pis = policy_tables(torch.cat([theta + delta, theta - delta]), sizes)
    G = sample_returns(problem.mdp, pis, problem.extras["reward_noise"], generator)
    half = delta.shape[0]
    g = es_gradient(G[:half], G[half:], delta)
    metrics = {
        "cost": 2 * half,
        "rollout/return_mean": float(G.mean()),
        "grad/norm": float(g.norm()),
    }
    return {**state, "theta": es_step(theta, g, options.step)}, metrics


def rep_es_step(problem: Problem, state: State, options: RepESOptions, generator):
    """Alg. 5 (search/reprl.py `rep_es_round`) with exact values for the bandit metrics."""
    sizes = policy_mlp_sizes(problem, state)
    state = dict(state)
    state["buf_theta"], state["buf_G"] = state["buf_theta"].clone(), state["buf_G"].clone()
    noise = problem.extras["reward_noise"]

    def rollout(params: torch.Tensor) -> torch.Tensor:
        return sample_returns(problem.mdp, policy_tables(params, sizes), noise, generator)

    def exact(params: torch.Tensor) -> torch.Tensor:
        return stationary_values(problem.mdp, policy_tables(params, sizes))

    metrics = rep_es_round(state, options, rollout, generator, exact=exact)
    return state, metrics


APP_F1 = "[paper arXiv:2305.19922 App. F.1]"
ES_DEFAULTS = {
    "layers": S(3, f"{APP_F1} policy MLP 3 layers × 32, tanh, softmax"),
    "hidden": S(32, f"{APP_F1} policy MLP 3 layers × 32"),
    "trajectories": S(100, f"{APP_F1} 100 trajectories per round"),
    "perturbation_std": S(0.1, f"{APP_F1} perturbation std 0.1"),
    "step": S(0.1, f"{APP_F1} ES step 0.1"),
}
REP_ES_DEFAULTS = {
    **ES_DEFAULTS,
    "decision_set": S(2048, f"{APP_F1} decision set 2048"),
    "bandit": S("ts", f"{APP_F1} linear Thompson sampling"),
    "ridge": S(0.1, f"{APP_F1} λ = 0.1"),
    "ts_scale": S(
        1.0, "[ours] the paper's TS scale was not read; unit scale on standardised returns"
    ),
    "oful_alpha": S(1.0, "[ours] unit confidence width"),
    "representation": S("mlp", "[ours] an MLP over the parameters (the paper: DWSNet 4 × 16)"),
    "latent_dim": S(16, "[ours] after the paper's DWSNet width 16"),
    "encoder_hidden": S(64, "[ours]"),
    "encoder_steps": S(5, "[ours] a few Adam steps per round keep 2 CPU cores in budget"),
    "encoder_batch": S(256, "[ours]"),
    "encoder_lr": S(1e-3, "[ours] Adam's usual step"),
    "history": S(1000, "[ours] the last 10 rounds' evaluations"),
    "heldout": S(64, "[ours] diagnostics only; not counted in the budget"),
}

add(
    TabularMethod(
        name="es",
        title="ES, antithetic evolution strategies over a softmax MLP policy",
        paper="Nabati, Tennenholtz & Mannor 2023 (Alg. 4, the baseline), arXiv:2305.19922",
        formula="g = (1/N)Σ_i [G(θ+δ_i) − G(θ−δ_i)]·δ_i,  δ ∼ N(0, ν²I);  θ ← θ + α·g",
        options=ESOptions,
        defaults=ES_DEFAULTS,
        init=init_es,
        step=es_round,
        policy=mlp_policy,
        notes=("One sampled trajectory per candidate; cost = trajectories per round.",),
    )
)

add(
    TabularMethod(
        name="rep_es",
        title="RepES, ES driven by a linear bandit over a learned policy representation",
        paper="Nabati, Tennenholtz & Mannor 2023, Representation-Driven Reinforcement "
        "Learning, arXiv:2305.19922 (Alg. 5)",
        formula=(
            "evaluation set θ ± δ_i rolled out → (θ, G) history; f trained with κᵀf(θ) ≈ G\n"
            "V = λI + Σxxᵀ, ŵ = V⁻¹Σxy, x = [f(θ), 1];  v̂ = ⟨x, w̃⟩, w̃ ∼ N(ŵ, σ²V⁻¹)\n"
            "g = (1/N)Σ_j [v̂(θ+δ'_j) − v̂(θ−δ'_j)]·δ'_j over the decision set;  θ ← θ + α·g"
        ),
        options=RepESOptions,
        defaults=REP_ES_DEFAULTS,
        init=init_rep_es,
        step=rep_es_step,
        policy=mlp_policy,
        notes=(
            "The representation is an MLP over (θ' − θ)/ν, not the paper's DWSNet.",
            "bandit/linearity_r2 and bandit/optimism use exact values (not in the budget).",
        ),
    )
)
