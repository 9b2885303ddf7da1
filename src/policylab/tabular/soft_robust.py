"""Soft-robust MDPs ≡ risk-sensitive MDPs (Zhang, Hu & Li, ICLR 2024, arXiv:2306.11626;
papers/seed_control_theory.md §2): exact evaluation, the tilted kernel, the policy-gradient
theorem, the optimum, and three registered methods — projected PG and the offline pair
RFZI / fitted Q iteration.

Entropic risk at level β > 0 (rewards maximised; the adversary pays a KL penalty):
    σ_p(X) = −(1/β)·log E_p[e^{−βX}] = min_{p'} { E_{p'}X + (1/β)·KL(p'‖p) }
    Q^π(s,a) = r(s,a) + γ·σ_{P(·|s,a)}(V^π),   V^π(s) = Σ_a π(a|s)·Q^π(s,a)
    P̂(s'|s,a) ∝ P(s'|s,a)·e^{−βV^π(s')}                (the minimising kernel)
    ∂J/∂π(a|s) = d̂^π(s)·Q^π(s,a)/(1 − γ),  d̂ = (1 − γ)·ρᵀ(I − γP̂_π)⁻¹
[code huyangsh/risk-sensitive-RL_ICRL-2024:env/RMDP.py DP_pi, V_to_Q, _prob_hat,
visit_freq; agent/PolicyGradient.py update]. β below 1e-8 switches to the risk-neutral
operator σ_p(X) = E_pX [ours, §2.4]. log E e^{−βV} is a logsumexp, so a large β cannot
overflow. r(s,a) may not depend on s' (the paper's model)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from policylab.algebra.options import option
from policylab.algebra.simplex import project_simplex
from policylab.recipes.base import S
from policylab.tabular.mdp import DTYPE, TabularMDP, check_policy, garnet, ring_mdp
from policylab.tabular.methods import Problem, State, TabularMethod, add
from policylab.tabular.solve import NotConverged, greedy, policy_iteration, policy_kernel
from policylab.tabular.tasks import random_policy, tabular_tasks

NEUTRAL_BETA = 1e-8  # below it the entropic risk is the expectation [ours, §2.4]


@dataclass(frozen=True)
class SoftEvaluation:
    V: torch.Tensor  # [S]
    Q: torch.Tensor  # [S, A]
    P_hat: torch.Tensor  # [S, A, S'] the tilted (worst) kernel at V
    iterations: int  # Newton steps


@dataclass(frozen=True)
class SoftRobust:
    """The KL-regularised (entropic-risk) soft-robust model at risk level β ≥ 0."""

    beta: float

    def __init__(self, beta: float) -> None:
        if not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta >= 0):
            raise ValueError(f"beta: the risk level must be a finite number ≥ 0, got {beta!r}")
        object.__setattr__(self, "beta", float(beta))

    @property
    def neutral(self) -> bool:
        return self.beta < NEUTRAL_BETA

    # ---- one distribution ------------------------------------------------------------------
    def risk(self, p: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """σ_p(X) = −(1/β)·logsumexp(log p − βX) over the last axis; E_pX when β < 1e-8."""
        if self.neutral:
            return (p * X).sum(-1)
        return -torch.logsumexp(p.log() - self.beta * X, -1) / self.beta

    def tilt(self, p: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """p̂ ∝ p·e^{−βX} (the minimiser of E_{p'}X + KL(p'‖p)/β) [code RMDP._prob_hat]."""
        if self.neutral:
            return p.expand(torch.broadcast_shapes(p.shape, X.shape)).clone()
        return torch.softmax(p.log() - self.beta * X, -1)

    # ---- the MDP ---------------------------------------------------------------------------
    def rewards(self, mdp: TabularMDP) -> torch.Tensor:
        """r(s,a) [S, A]; an error if the MDP's reward depends on s'."""
        if (mdp.R - mdp.R[..., :1]).abs().max() > 0:
            raise ValueError(
                "SoftRobust: R must be r(s,a), constant in s' (the paper's model); this "
                "MDP's reward varies with s' — build it with R of shape [S, A]"
            )
        return mdp.R[..., 0]

    def q_from_v(self, mdp: TabularMDP, V: torch.Tensor) -> torch.Tensor:
        """Q(s,a) = r(s,a) − (γ/β)·log Σ_s' P(s'|s,a)·e^{−βV(s')} [code RMDP.V_to_Q]."""
        return self.rewards(mdp) + mdp.gamma * self.risk(mdp.P, V)

    def tilted_kernel(self, mdp: TabularMDP, V: torch.Tensor) -> torch.Tensor:
        """P̂(s'|s,a) ∝ P(s'|s,a)·e^{−βV(s')} [S, A, S']."""
        return self.tilt(mdp.P, V)

    def evaluate(
        self,
        mdp: TabularMDP,
        pi: torch.Tensor,
        *,
        tol: float = 1e-11,
        max_iter: int = 100,
        check_rows: bool = True,
    ) -> SoftEvaluation:
        """V^π, the fixed point of V = T_π(V) = Σ_a π·Q(V), by Newton's method [ours; the
        code iterates T_π to ‖ΔV‖₂ ≤ 1e-5]. T_π is a minimum of affine maps (the duality),
        so Newton is the adversary's policy iteration: V ← (I − γP̂_π)⁻¹(T_π(V) − γP̂_πV),
        from any start, stopped at ‖T_π(V) − V‖_∞ ≤ tol. `check_rows=False` accepts any
        table ≥ 0 with row sums < 1/γ (finite differences of the direct parameterisation)."""
        S, A = mdp.n_states, mdp.n_actions
        if check_rows:
            pi = check_policy(pi, S, A)
        elif pi.shape != (S, A) or (pi < 0).any() or mdp.gamma * pi.sum(-1).max() >= 1:
            raise ValueError(f"pi: expected a table [{S}, {A}] ≥ 0 with row sums < 1/γ")
        r, gamma = self.rewards(mdp), mdp.gamma
        eye = torch.eye(S, dtype=DTYPE)
        V = torch.linalg.solve(eye - gamma * policy_kernel(pi, mdp.P), (pi * r).sum(-1))
        for it in range(max_iter):
            Q = r + gamma * self.risk(mdp.P, V)
            T = (pi * Q).sum(-1)
            if (T - V).abs().max() <= tol:
                return SoftEvaluation(V, Q, self.tilted_kernel(mdp, V), it)
            P_pi = policy_kernel(pi, self.tilted_kernel(mdp, V))
            V = torch.linalg.solve(eye - mdp.gamma * P_pi, T - mdp.gamma * P_pi @ V)
        raise NotConverged(
            f"SoftRobust.evaluate: ‖T_π(V) − V‖_∞ = {(T - V).abs().max().item():.3g} > {tol:g} "
            f"after {max_iter} Newton steps (β = {self.beta:g})"
        )

    def objective(self, mdp: TabularMDP, pi: torch.Tensor, **kw) -> float:
        """J(π) = ρᵀV^π."""
        return float(mdp.rho @ self.evaluate(mdp, pi, **kw).V)

    def occupancy(self, mdp: TabularMDP, pi: torch.Tensor, P_hat: torch.Tensor) -> torch.Tensor:
        """d̂(s) = (1 − γ)·[ρᵀ(I − γP̂_π)⁻¹](s), exact (the code truncates at T_est = 100)."""
        eye = torch.eye(mdp.n_states, dtype=DTYPE)
        M = (eye - mdp.gamma * policy_kernel(pi, P_hat)).T
        return (1 - mdp.gamma) * torch.linalg.solve(M, mdp.rho)

    def gradient(self, mdp: TabularMDP, pi: torch.Tensor, **kw) -> torch.Tensor:
        """∂J/∂π(a|s) = d̂(s)·Q(s,a)/(1 − γ) [S, A] [paper Thm (PG); code PolicyGradient]."""
        ev = self.evaluate(mdp, pi, **kw)
        d = self.occupancy(mdp, pi, ev.P_hat)
        return d.unsqueeze(-1) * ev.Q / (1 - mdp.gamma)

    def optimum(self, mdp: TabularMDP, *, max_iter: int = 1_000):
        """(V*, π*) of V*(s) = max_a Q(V*)(s,a) by policy iteration over exact soft-robust
        evaluations (an action changes only on a gain above 1e-12, so ties cannot cycle)."""
        pi = greedy(self.rewards(mdp))
        for _ in range(max_iter):
            ev = self.evaluate(mdp, pi)
            better = ev.Q.max(-1).values > (pi * ev.Q).sum(-1) + 1e-12
            if not better.any():
                return ev.V, pi
            pi = torch.where(better.unsqueeze(-1), greedy(ev.Q), pi)
        raise NotConverged(f"SoftRobust.optimum: the policy still changed after {max_iter} rounds")

    def value_iteration(self, mdp: TabularMDP, *, tol: float = 1e-10, max_iter: int = 100_000):
        """(V*, π*) by V ← max_a Q(V) [code RMDP._DP_opt] to ‖V − V*‖_∞ ≤ tol/2."""
        V = torch.zeros(mdp.n_states, dtype=DTYPE)
        stop = tol * (1 - mdp.gamma) / max(2 * mdp.gamma, 1e-12)
        for _ in range(max_iter):
            new = self.q_from_v(mdp, V).max(-1).values
            if (new - V).abs().max() <= stop:
                return new, greedy(self.q_from_v(mdp, new))
            V = new
        raise NotConverged(f"SoftRobust.value_iteration: ‖ΔV‖ above {stop:g} after {max_iter}")


# ---- offline data and the fitted iterations ------------------------------------------------
def draw_offline_data(
    mdp: TabularMDP, samples_per_pair: int, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """n transitions (s, a, r, s') from every (s, a), s' ∼ P(·|s,a), r = r(s,a): the
    behaviour is uniformly random over actions [code data_generator.py alg_name "random"];
    a fixed count per pair (a generative model) is our choice, so n is the sample size the
    bound counts (the code records one random-policy trajectory of 10⁶ steps)."""
    if samples_per_pair < 1:
        raise ValueError(f"samples_per_pair: must be ≥ 1, got {samples_per_pair}")
    Sn, A = mdp.n_states, mdp.n_actions
    pairs = torch.arange(Sn * A).repeat_interleave(samples_per_pair)
    nxt = torch.multinomial(mdp.P.reshape(Sn * A, Sn), samples_per_pair, True, generator=generator)
    s, a = pairs // A, pairs % A
    return {"s": s, "a": a, "r": mdp.R[s, a, 0], "s_next": nxt.reshape(-1)}


def empirical_counts(data: dict[str, torch.Tensor], n_states: int, n_actions: int):
    """N(s,a,s') [S, A, S'] from the rows, so a mean over data is Σ_s' N·f(s')/N(s,a)."""
    flat = (data["s"] * n_actions + data["a"]) * n_states + data["s_next"]
    return torch.bincount(flat, minlength=n_states * n_actions * n_states).reshape(
        n_states, n_actions, n_states
    )


def rfzi_update(log_Z, r, counts, beta: float, gamma: float, code_compat: bool = False):
    """One tabular RFZI step on log Z [S, A] (stored in logs: Z underflows for large βV):
        V_k(s)       = max_a [r(s,a) − (γ/β)·log Z_k(s,a)]
        Z_{k+1}(s,a) = mean over the data's (s,a,s') of e^{−βV_k(s')}
    unseen (s,a) keep Z_k [paper Alg. RFZI; code RFZI_Tabular.update]. code_compat: the
    code's form, V = max_a [r − (1/β)·log Z] and the mean of e^{−βγV} (risk level βγ)."""
    coeff, level = (1.0, beta * gamma) if code_compat else (gamma, beta)
    V = (r - coeff / beta * log_Z).max(-1).values
    n = counts.sum(-1)
    new = torch.logsumexp(counts.to(DTYPE).log() - level * V, -1) - n.to(DTYPE).log()
    return torch.where(n > 0, new, log_Z)


def rfzi_policy(log_Z, r, beta: float, gamma: float, code_compat: bool = False):
    """Greedy in r − (γ/β)·log Z; code_compat ranks by r − Z/β [code RFZI_Tabular.get_policy]."""
    score = r - log_Z.exp() / beta if code_compat else r - gamma / beta * log_Z
    return greedy(score)


def fitted_q_update(Q, r, counts, gamma: float):
    """Risk-neutral fitted Q iteration: Q ← r + γ·(mean over data of max_a Q(s',a)); unseen
    (s,a) keep Q."""
    n = counts.sum(-1)
    mean_next = (counts.to(DTYPE) @ Q.max(-1).values) / n.clamp_min(1)
    return torch.where(n > 0, r + gamma * mean_next, Q)


# ---- registered methods --------------------------------------------------------------------
@dataclass
class SoftPGOptions:
    step: float = option(0.1, "step η of π ← Proj_Δ(π + η·d̂·Q/(1 − γ))")
    eval_tol: float = option(1e-11, "Newton evaluation stops at ‖T_π(V) − V‖_∞ ≤ eval_tol")

    def __post_init__(self) -> None:
        if not self.step > 0:
            raise ValueError(f"step: must be > 0, got {self.step}")
        if not self.eval_tol > 0:
            raise ValueError(f"eval_tol: must be > 0, got {self.eval_tol}")


@dataclass
class OfflineOptions:
    samples_per_pair: int = option(100, "offline transitions drawn from every (s, a)")
    rfzi_code_compat: bool = option(False, "RFZI: the code's risk level βγ and Z/β ranking")

    def __post_init__(self) -> None:
        if int(self.samples_per_pair) < 1:
            raise ValueError(f"samples_per_pair: must be ≥ 1, got {self.samples_per_pair}")


def soft_model(problem: Problem) -> SoftRobust:
    model = problem.extras.get("soft_robust")
    if model is None:
        raise ValueError("this method needs a soft-robust task (extras['soft_robust'] missing)")
    return model


def pg_init(problem: Problem, options, generator) -> State:
    return {"pi": problem.initial_policy.clone()}


def table_policy(problem: Problem, state: State) -> torch.Tensor:
    return state["pi"]


def pg_step(problem: Problem, state: State, options: SoftPGOptions, generator):
    soft, mdp, pi = soft_model(problem), problem.mdp, state["pi"]
    ev = soft.evaluate(mdp, pi, tol=options.eval_tol)
    G = soft.occupancy(mdp, pi, ev.P_hat).unsqueeze(-1) * ev.Q / (1 - mdp.gamma)
    metrics = {"grad/norm": float(G.norm()), "inner/iterations": ev.iterations, "cost": 1}
    return {"pi": project_simplex(pi + options.step * G)}, metrics


def offline_init(problem: Problem, options: OfflineOptions, generator) -> State:
    data = draw_offline_data(problem.mdp, int(options.samples_per_pair), generator)
    r = soft_model(problem).rewards(problem.mdp)
    # Z₀ = 1 [code tabular_train.py Z_init]; Q₀ = r, the bracket's value at Z₀ = 1 [ours]
    return {
        **data,
        "log_Z": torch.zeros_like(r),
        "Q": r.clone(),
        "rfzi_code_compat": bool(options.rfzi_code_compat),
    }


def rfzi_step(problem: Problem, state: State, options: OfflineOptions, generator):
    soft, mdp = soft_model(problem), problem.mdp
    if soft.neutral:
        raise ValueError(f"rfzi: β = {soft.beta:g} is below {NEUTRAL_BETA:g}; use fitted_q")
    counts = empirical_counts(state, mdp.n_states, mdp.n_actions)
    new = rfzi_update(
        state["log_Z"], soft.rewards(mdp), counts, soft.beta, mdp.gamma, options.rfzi_code_compat
    )
    metrics = {"fit/delta_log_z": float((new - state["log_Z"]).abs().max()), "cost": 1}
    return {**state, "log_Z": new}, metrics


def rfzi_greedy(problem: Problem, state: State) -> torch.Tensor:
    soft = soft_model(problem)
    r, compat = soft.rewards(problem.mdp), bool(state["rfzi_code_compat"])
    return rfzi_policy(state["log_Z"], r, soft.beta, problem.mdp.gamma, compat)


def fitted_q_step(problem: Problem, state: State, options: OfflineOptions, generator):
    mdp = problem.mdp
    counts = empirical_counts(state, mdp.n_states, mdp.n_actions)
    new = fitted_q_update(state["Q"], soft_model(problem).rewards(mdp), counts, mdp.gamma)
    return {**state, "Q": new}, {"fit/delta_q": float((new - state["Q"]).abs().max()), "cost": 1}


def fitted_q_greedy(problem: Problem, state: State) -> torch.Tensor:
    return greedy(state["Q"])


PG_DEFAULTS = {
    "step": S(0.1, "[code risk-sensitive-RL_ICRL-2024:PG_train.py eta = 0.1]"),
    "eval_tol": S(1e-11, "[ours] exact evaluation (the code iterates DP_pi to ‖ΔV‖₂ ≤ 1e-5)"),
}
OFFLINE_DEFAULTS = {
    "samples_per_pair": S(100, "[ours] n per (s, a); the code logs one 10⁶-step trajectory"),
    "rfzi_code_compat": S(False, "[ours] §2.1: the paper's iteration; True = the code's"),
}

add(
    TabularMethod(
        name="soft_robust_pg",
        title="Projected policy gradient on the soft-robust (entropic-risk) value",
        paper="Zhang, Hu & Li 2024, Soft Robust MDPs and Risk-Sensitive MDPs, arXiv:2306.11626",
        formula=(
            "V = Σ_a π·[r − (γ/β)·log E_P e^{−βV}];  P̂ ∝ P·e^{−βV}\n"
            "G = d̂^π·Q^π/(1 − γ) (d̂ under P̂);  π ← Proj_Δ(π + η·G)"
        ),
        options=SoftPGOptions,
        defaults=PG_DEFAULTS,
        init=pg_init,
        step=pg_step,
        policy=table_policy,
        notes=(
            "The code stops at V* − J < 1e-6 or 5·10⁴ iterations [code PG_train.py]: run the "
            "trainer with stop_gap=1e-6.",
            "d̂ is the exact occupancy under P̂ (the code truncates its sum at 100 steps).",
        ),
    )
)

add(
    TabularMethod(
        name="rfzi",
        title="RFZI, robust fitted Z iteration (tabular, offline)",
        paper="Zhang, Hu & Li 2024, arXiv:2306.11626 (Alg. RFZI)",
        formula=(
            "V_k(s) = max_a [r − (γ/β)·log Z_k(s,a)];  Z_{k+1}(s,a) = mean_{(s,a,s')∈D} "
            "e^{−βV_k(s')};  π = argmax_a [r − (γ/β)·log Z]"
        ),
        options=OfflineOptions,
        defaults=OFFLINE_DEFAULTS,
        init=offline_init,
        step=rfzi_step,
        policy=rfzi_greedy,
        notes=(
            "The data are drawn in init from the run's generator; one step = one iteration.",
            "Z is stored as log Z; rewards r(s,a) are read from the task, as the code does.",
            "rfzi_code_compat=True: the code's exponent −βγ·max_a[r − log Z/β] and its "
            "ranking by r − Z/β.",
        ),
    )
)

add(
    TabularMethod(
        name="fitted_q",
        title="Risk-neutral fitted Q iteration (tabular, offline; RFZI's baseline)",
        paper="Zhang, Hu & Li 2024 (baseline), arXiv:2306.11626",
        formula="Q_{k+1}(s,a) = r + γ·mean_{(s,a,s')∈D} max_a' Q_k(s',a');  π = argmax_a Q",
        options=OfflineOptions,
        defaults=OFFLINE_DEFAULTS,
        init=offline_init,
        step=fitted_q_step,
        policy=fitted_q_greedy,
        notes=("Same data as rfzi for the same seed; ignores β (rfzi_code_compat unused).",),
    )
)


# ---- tasks ---------------------------------------------------------------------------------
def soft_problem(mdp: TabularMDP, beta: float, initial: torch.Tensor) -> Problem:
    soft = SoftRobust(beta)
    V_star, pi_star = soft.optimum(mdp)
    neutral_best = policy_iteration(mdp)[1]
    return Problem(
        mdp,
        lambda pi: soft.objective(mdp, pi),
        float(mdp.rho @ V_star),
        initial,
        budget_unit="steps (one exact gradient or one fitted iteration)",
        extras={
            "soft_robust": soft,
            "beta": soft.beta,
            "optimal_policy": pi_star,
            "neutral_optimum_differs": bool((neutral_best != pi_star).any()),
        },
    )


def soft_robust_ring(
    seed: int, beta: float = 3.0, slip: float = 0.01, gamma: float = 0.95
) -> Problem:
    """The code's Toy-10 ring [code PG_train.py: β 3, p 0.01, γ 0.95]. The ring is one fixed
    MDP, so the seed varies the start: seed 0 is the code's uniform policy, any other seed a
    random one (rows ∝ U(0.1, 0.5)) [ours]; offline methods also draw their data by seed."""
    mdp = ring_mdp(slip=slip, gamma=gamma)
    g = torch.Generator().manual_seed(10_000 + seed)
    start = mdp.uniform_policy() if seed == 0 else random_policy(mdp.n_states, 3, g)
    return soft_problem(mdp, beta, start)


def soft_robust_garnet(
    seed: int,
    beta: float = 3.0,
    n_states: int = 10,
    n_actions: int = 4,
    branches: int = 3,
    gamma: float = 0.95,
) -> Problem:
    """A Garnet per seed with rewards U(0, 5) per (s, a) (the paper's r(s,a)), scored by the
    soft-robust value at level β [ours: β 3 as the PG code]; a random starting policy."""
    mdp = garnet(n_states, n_actions, branches, seed=seed, gamma=gamma, next_state_rewards=False)
    g = torch.Generator().manual_seed(10_000 + seed)
    return soft_problem(mdp, beta, random_policy(n_states, n_actions, g))


tabular_tasks.add("soft_robust_ring", soft_robust_ring)
tabular_tasks.add("soft_robust_garnet", soft_robust_garnet)
