"""Dynamic policy gradient: a time-indexed softmax policy trained backwards in time
(Klein, Weissmann & Döring, *Beyond Stationarity*, ICLR 2024, arXiv:2310.02671;
papers/seed_control_theory.md §3), and simultaneous PG, its baseline.

Finite horizon, epochs h = 0..H−1, π_h = softmax(θ_h), θ [H, S, A]:
    J(θ) = E_{s₀∼μ}[Σ_h r(s_h, a_h)],  Q_h = r + P·V_{h+1},  V_h = Σ_a π_h Q_h,  V_H = 0
simultaneous (`block_schedule="simultaneous"`), every epoch at once:
    ∂J/∂θ_h(s,a) = P(s_h = s)·π_h(a|s)·(Q_h(s,a) − V_h(s)),   θ ← θ + η·∇J
dynamic (`block_schedule="backward"`), one epoch at a time from h = H−1 down to 0, the
later epochs frozen, on the contextual bandit J_h(θ_h) = Σ_s μ_h(s) Σ_a π_h(a|s) Q_h(s,a):
    ∂J_h/∂θ_h(s,a) = μ_h(s)·π_h(a|s)·(Q_h(s,a) − V_h(s)),    θ_h ← θ_h + η_h·∇J_h
then θ_h is frozen. μ_h must have full support [paper]; uniform is our default.

Step sizes [ours — the paper's constants were not retrieved]: a softmax bandit with rewards
in a range R is (5/2)·R-smooth (Mei et al. 2020, arXiv:2005.06392, Lemma 2); epoch h's
returns span (H − h)·R_max, so η_h = 2/(5(H − h)·R_max). The simultaneous objective's
smoothness grows as H² (each block row of the Hessian sums H − max(h, h′) over h′), so
its step is η = 2/(5·H²·R_max), the same constant at the order of the paper's bound;
at H = 1 both rules give 2/(5·R_max) and the two methods coincide.

Sampled versions: K episodes per step. Simultaneous: full episodes from μ, REINFORCE on
every decision with the return-to-go. Dynamic: s_h ∼ μ_h, a ∼ π_h, then the frozen later
epochs to the end; REINFORCE on the single decision at h [our reading]. Both call the
registered `reinforce` policy loss over rows = decisions (T = 1). One step costs K
episodes (an episode from h to H counts as one, later epochs simulated in full)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from policylab.algebra.catalogue import policy_losses
from policylab.algebra.options import check_choice, option
from policylab.recipes.base import S
from policylab.tabular.mdp import DTYPE, FiniteHorizonMDP, finite_garnet
from policylab.tabular.methods import Problem, State, TabularMethod, add
from policylab.tabular.solve import backward_induction, evaluate_finite
from policylab.tabular.tasks import tabular_tasks

log = logging.getLogger(__name__)

BLOCK_SCHEDULES = ("simultaneous", "backward")
EPOCH_DISTS = ("uniform", "mu")


# ---- the time-indexed policy and its exact gradients ---------------------------------------
def time_indexed_policy(logits: torch.Tensor) -> torch.Tensor:
    """π_h(a|s) = softmax(θ_h(s, ·)) [H, S, A]."""
    return torch.softmax(logits.to(DTYPE), -1)


def simultaneous_gradient(mdp: FiniteHorizonMDP, logits: torch.Tensor) -> torch.Tensor:
    """∂J/∂θ_h(s,a) = P(s_h = s)·π_h(a|s)·(Q_h(s,a) − V_h(s)) [H, S, A]."""
    pi = time_indexed_policy(logits)
    ev = evaluate_finite(mdp, pi)
    return ev.state_dist.unsqueeze(-1) * pi * (ev.Q - ev.V[:-1].unsqueeze(-1))


def epoch_q(mdp: FiniteHorizonMDP, logits: torch.Tensor, h: int) -> torch.Tensor:
    """Q_h = r + P·V_{h+1} [S, A] under the epochs h+1..H−1 of `logits` (V_H = 0)."""
    V = torch.zeros(mdp.n_states, dtype=DTYPE)
    pi = time_indexed_policy(logits)
    for t in reversed(range(h + 1, mdp.horizon)):
        V = (pi[t] * (mdp.R + mdp.P @ V)).sum(-1)
    return mdp.R + mdp.P @ V


def check_epoch_dist(mu_h, n_states: int, name: str = "mu_h") -> torch.Tensor:
    """μ_h as a full-support distribution [S]: dynamic PG never trains a state μ_h misses."""
    mu_h = torch.as_tensor(mu_h, dtype=DTYPE)
    if mu_h.shape != (n_states,) or abs(mu_h.sum().item() - 1) > 1e-9:
        raise ValueError(f"{name}: expected a distribution of shape [{n_states}], got {mu_h}")
    if (mu_h <= 0).any():
        raise ValueError(
            f"{name}: needs full support (every state > 0), got {mu_h.tolist()}; "
            "dynamic PG would never train the states it misses"
        )
    return mu_h


def dynamic_gradient(q: torch.Tensor, logits_h: torch.Tensor, mu_h: torch.Tensor):
    """∂J_h/∂θ_h(s,a) = μ_h(s)·π_h(a|s)·(Q_h(s,a) − V_h(s)) [S, A] for Q_h = q [S, A]."""
    pi = torch.softmax(logits_h.to(DTYPE), -1)
    return mu_h.unsqueeze(-1) * pi * (q - (pi * q).sum(-1, keepdim=True))


def epoch_gap(q: torch.Tensor, logits_h: torch.Tensor, mu_h: torch.Tensor) -> float:
    """Σ_s μ_h(s)·(max_a Q_h(s,a) − V_h(s)): epoch h's own sub-optimality given the later
    epochs (the bandit J_h's gap)."""
    pi = torch.softmax(logits_h.to(DTYPE), -1)
    return float(mu_h @ (q.max(-1).values - (pi * q).sum(-1)))


def step_size(schedule: str, horizon: int, h: int, reward_bound: float) -> float:
    """η_h = 2/(5(H − h)R_max) (backward) or η = 2/(5H²R_max) (simultaneous) [ours, see
    the module docstring]."""
    if schedule == "backward":
        return 2.0 / (5.0 * (horizon - h) * reward_bound)
    return 2.0 / (5.0 * horizon**2 * reward_bound)


def reward_bound(mdp: FiniteHorizonMDP) -> float:
    """R_max = max |r(s, a)| (1 when every reward is 0)."""
    return float(mdp.R.abs().max()) or 1.0


# ---- options -------------------------------------------------------------------------------
@dataclass
class DynamicPGOptions:
    block_schedule: str = option("backward", f"which epochs a step trains: {BLOCK_SCHEDULES}")
    step_scale: float = option(1.0, "multiplies the theory step η_h (or η)")
    epoch_dist: str = option("uniform", f"μ_h of the backward blocks: {EPOCH_DISTS}")
    tol: float = option(1e-3, "target gap; epoch h freezes at epoch_gap ≤ tol·min μ_h / H")
    epoch_steps: int = option(0, "N_h: steps per epoch (0 = the tolerance rule)")
    max_epoch_steps: int = option(100_000, "cap on one epoch's steps (logged when hit)")

    def __post_init__(self) -> None:
        check_choice("dynamic_pg", "block_schedule", self.block_schedule, BLOCK_SCHEDULES)
        check_choice("dynamic_pg", "epoch_dist", self.epoch_dist, EPOCH_DISTS)
        for name in ("step_scale", "tol"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)}")
        if self.epoch_steps < 0 or self.max_epoch_steps < 1:
            raise ValueError(
                f"epoch_steps ≥ 0 and max_epoch_steps ≥ 1 required, got "
                f"{self.epoch_steps}, {self.max_epoch_steps}"
            )


@dataclass
class SampledDynamicPGOptions(DynamicPGOptions):
    episodes: int = option(10, "K: episodes simulated per step")
    epoch_steps: int = option(100, "N_h: steps per epoch before it freezes")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.episodes < 1 or self.epoch_steps < 1:
            raise ValueError(
                f"episodes and epoch_steps: must be ≥ 1, got {self.episodes}, {self.epoch_steps}"
            )


def epoch_dist(problem: Problem, options: DynamicPGOptions) -> torch.Tensor:
    mdp = problem.mdp
    if options.epoch_dist == "uniform":
        return torch.full((mdp.n_states,), 1.0 / mdp.n_states, dtype=DTYPE)
    return check_epoch_dist(mdp.mu, mdp.n_states, "mu (epoch_dist='mu')")


# ---- methods: init / policy / shared bookkeeping -------------------------------------------
def init_logits(problem: Problem, options: DynamicPGOptions, generator) -> State:
    """θ = log π₀ (the task's starting policy); the backward schedule starts at h = H−1."""
    if not isinstance(problem.mdp, FiniteHorizonMDP):
        raise ValueError(f"dynamic PG needs a FiniteHorizonMDP, got {type(problem.mdp).__name__}")
    epoch_dist(problem, options)  # validate μ_h before any work
    H = problem.mdp.horizon
    logits = problem.initial_policy.to(DTYPE).clamp_min(1e-300).log()
    return {
        "logits": logits,
        "epoch": H - 1,
        "epoch_steps": 0,
        "blocks": 0,
        "sweeps": 0,
        "capped": 0,
    }


def logits_policy(problem: Problem, state: State) -> torch.Tensor:
    return time_indexed_policy(state["logits"])


def next_epoch(problem: Problem, state: State) -> State:
    """Freeze the current epoch; after epoch 0, start another sweep from H−1 [ours: a
    finished schedule keeps spending budget usefully; its tolerance halves per sweep]."""
    state = dict(state, epoch=state["epoch"] - 1, epoch_steps=0, blocks=state["blocks"] + 1)
    if state["epoch"] < 0:
        state.update(epoch=problem.mdp.horizon - 1, sweeps=state["sweeps"] + 1)
    return state


def summary_metrics(problem: Problem, state: State, mu_h: torch.Tensor) -> dict[str, float]:
    mdp, logits = problem.mdp, state["logits"]
    ev = evaluate_finite(mdp, time_indexed_policy(logits))
    gaps = mu_h @ (ev.Q.max(-1).values - ev.V[:-1]).T  # [H]
    metrics = {f"epoch_gap/{h}": float(g) for h, g in enumerate(gaps)}
    metrics.update(
        {
            "epoch_gap/max": float(gaps.max()),
            "blocks_done": state["blocks"],
            "sweeps": state["sweeps"],
            "epochs_capped": state["capped"],
            "logits/max_abs": float(logits.abs().max()),
        }
    )
    return metrics


# ---- exact steps ---------------------------------------------------------------------------
def exact_step(problem: Problem, state: State, options: DynamicPGOptions, generator):
    """One exact gradient step: all epochs (simultaneous) or the current epoch (backward)."""
    mdp, logits = problem.mdp, state["logits"].clone()
    R, H, mu_h = reward_bound(mdp), mdp.horizon, epoch_dist(problem, options)
    if options.block_schedule == "simultaneous":
        grad = simultaneous_gradient(mdp, logits)
        logits += options.step_scale * step_size("simultaneous", H, 0, R) * grad
        state = dict(state, logits=logits, epoch=H - 1)
        metrics = {"grad/norm": float(grad.norm()), "cost": 1}
        return state, metrics | summary_metrics(problem, state, mu_h)
    h = state["epoch"]
    q = epoch_q(mdp, logits, h)
    target = options.tol * float(mu_h.min()) / H / 2 ** state["sweeps"]
    grad = dynamic_gradient(q, logits[h], mu_h)
    logits[h] += options.step_scale * step_size("backward", H, h, R) * grad
    state = dict(state, logits=logits, epoch_steps=state["epoch_steps"] + 1)
    if options.epoch_steps:
        done = state["epoch_steps"] >= options.epoch_steps
    else:
        done = epoch_gap(q, logits[h], mu_h) <= target
        if not done and state["epoch_steps"] >= options.max_epoch_steps:
            log.warning(
                "dynamic_pg: epoch %d froze at the cap of %d steps", h, options.max_epoch_steps
            )
            state["capped"] += 1
            done = True
    metrics = {"grad/norm": float(grad.norm()), "epoch": h, "cost": 1}
    if done:
        state = next_epoch(problem, state)
    return state, metrics | summary_metrics(problem, state, mu_h)


# ---- sampled steps -------------------------------------------------------------------------
def simulate(mdp: FiniteHorizonMDP, pi: torch.Tensor, h: int, s0: torch.Tensor, generator):
    """Episodes from epoch h at states s0 [K] under π [H, S, A] to the end: (states,
    actions, rewards), each [K, H − h]."""
    states, actions, rewards, s = [], [], [], s0
    for t in range(h, mdp.horizon):
        a = torch.multinomial(pi[t, s], 1, generator=generator).squeeze(-1)
        states.append(s)
        actions.append(a)
        rewards.append(mdp.R[s, a])
        s = torch.multinomial(mdp.P[s, a], 1, generator=generator).squeeze(-1)
    return torch.stack(states, 1), torch.stack(actions, 1), torch.stack(rewards, 1)


def reinforce_gradient(logits, epochs, states, actions, returns, n_episodes: int):
    """∇J estimate through the registered `reinforce` loss: rows = decisions (T = 1),
    L = −Σ_rows Ĝ·log π_{h}(a|s) / K, so −∇L = (1/K)·Σ_k Σ_h Ĝ_h ∇log π_h(a_h|s_h)."""
    loss_fn = policy_losses.get("reinforce")
    cfg = policy_losses.entry("reinforce").config()
    theta = logits.detach().clone().requires_grad_(True)
    logp = torch.log_softmax(theta, -1)[epochs, states, actions].reshape(-1, 1)
    mask = torch.ones_like(logp)
    loss, _ = loss_fn(logp, logp.detach(), returns.reshape(-1, 1), mask, cfg, normaliser=n_episodes)
    loss.backward()
    return -theta.grad


def sampled_step(problem: Problem, state: State, options: SampledDynamicPGOptions, generator):
    """K episodes, one REINFORCE step on all epochs (simultaneous) or on epoch h (backward)."""
    mdp, logits, K = problem.mdp, state["logits"].clone(), options.episodes
    R, H, mu_h = reward_bound(mdp), mdp.horizon, epoch_dist(problem, options)
    pi = time_indexed_policy(logits)
    h = 0 if options.block_schedule == "simultaneous" else state["epoch"]
    start = mdp.mu if options.block_schedule == "simultaneous" else mu_h
    s0 = torch.multinomial(start.expand(K, -1), 1, generator=generator).squeeze(-1)
    states, actions, rewards = simulate(mdp, pi, h, s0, generator)
    returns = rewards.flip(1).cumsum(1).flip(1)  # return-to-go Ĝ_t [K, H − h]
    if options.block_schedule == "simultaneous":
        epochs = torch.arange(H).expand(K, H)
        grad = reinforce_gradient(logits, epochs, states, actions, returns, K)
        logits += options.step_scale * step_size("simultaneous", H, 0, R) * grad
        state = dict(state, logits=logits)
    else:
        epochs = torch.full((K, 1), h)
        grad = reinforce_gradient(logits, epochs, states[:, :1], actions[:, :1], returns[:, :1], K)
        logits += options.step_scale * step_size("backward", H, h, R) * grad
        state = dict(state, logits=logits, epoch_steps=state["epoch_steps"] + 1)
        if state["epoch_steps"] >= options.epoch_steps:
            state = next_epoch(problem, state)
    metrics = {"grad/norm": float(grad.norm()), "cost": K, "transitions": K * (H - h)}
    return state, metrics | summary_metrics(problem, state, mu_h)


# ---- registry entries ----------------------------------------------------------------------
PAPER = (
    "Klein, Weissmann & Döring 2024, Beyond Stationarity: Convergence Analysis of "
    "Stochastic Softmax Policy Gradient Methods, arXiv:2310.02671"
)
SIM_FORMULA = "∂J/∂θ_h = P(s_h = s)·π_h·(Q_h − V_h);  θ ← θ + η·∇J,  η = 2/(5H²R_max)"
DYN_FORMULA = (
    "for h = H−1..0: θ_h ← θ_h + η_h·μ_h(s)·π_h·(Q_h − V_h) until done, then freeze θ_h;"
    "  η_h = 2/(5(H − h)R_max)"
)
STEP_SOURCE = "[ours] η from the (5/2)·range smoothness of a softmax bandit (Mei et al. 2020)"


def exact_defaults(schedule: str) -> dict:
    return {
        "block_schedule": S(schedule, "[paper] the two schedules the paper compares"),
        "step_scale": S(1.0, STEP_SOURCE + "; the paper's constants not retrieved"),
        "epoch_dist": S("uniform", "[ours] any full-support μ_h [paper]"),
        "tol": S(1e-3, "[ours] performance difference: gap ≤ Σ_h epoch_gap_h / min μ_h"),
        "epoch_steps": S(0, "[ours] 0 = stop each epoch by the tolerance rule"),
        "max_epoch_steps": S(100_000, "[ours] cap; logits diverge at deterministic optima"),
    }


def sampled_defaults(schedule: str) -> dict:
    return exact_defaults(schedule) | {
        "episodes": S(10, "[ours] K episodes per step"),
        "epoch_steps": S(100, "[ours] N_h, fixed: a sampled run has no exact epoch gap"),
    }


for name, schedule, formula in (
    ("simultaneous_pg", "simultaneous", SIM_FORMULA),
    ("dynamic_pg", "backward", DYN_FORMULA),
):
    title = "simultaneous" if schedule == "simultaneous" else "dynamic (backward in time)"
    add(
        TabularMethod(
            name=name,
            title=f"Softmax PG on a time-indexed policy, {title}, exact gradients",
            paper=PAPER,
            formula=formula,
            options=DynamicPGOptions,
            defaults=exact_defaults(schedule),
            init=init_logits,
            step=exact_step,
            policy=logits_policy,
            notes=("cost = 1 per exact gradient (a block gradient counts as one)",),
        )
    )
    add(
        TabularMethod(
            name=f"{name}_sampled",
            title=f"REINFORCE on a time-indexed softmax policy, {title}",
            paper=PAPER,
            formula=formula + "  (∇ estimated by `reinforce` over K episodes)",
            options=SampledDynamicPGOptions,
            defaults=sampled_defaults(schedule),
            init=init_logits,
            step=sampled_step,
            policy=logits_policy,
            notes=(
                "cost = K episodes per step; an episode from epoch h runs to H under the "
                "frozen later epochs and counts as one (`transitions` gives K·(H − h)).",
            ),
        )
    )


# ---- tasks ---------------------------------------------------------------------------------
def finite_garnet_task(
    seed: int, n_states: int = 5, n_actions: int = 3, branches: int = 3, horizon: int = 10
) -> Problem:
    """A finite-horizon Garnet (rewards U(0, 1), μ uniform) from the uniform policy; the
    value is the exact J (`evaluate_finite`), the optimum backward induction's; the budget
    is exact-gradient evaluations."""
    return _finite_problem(seed, "gradient evaluations", n_states, n_actions, branches, horizon)


def _finite_problem(seed, budget_unit, n_states, n_actions, branches, horizon) -> Problem:
    mdp = finite_garnet(n_states, n_actions, branches, horizon, seed=seed)
    V_star, pi_star = backward_induction(mdp)
    return Problem(
        mdp,
        lambda pi: float(evaluate_finite(mdp, pi).J),
        float(mdp.mu @ V_star[0]),
        mdp.uniform_policy(),
        budget_unit=budget_unit,
        extras={"optimal_policy": pi_star},
    )


def finite_garnet_sampled_task(
    seed: int, n_states: int = 5, n_actions: int = 3, branches: int = 3, horizon: int = 10
) -> Problem:
    """`finite_garnet` with the budget counted in episodes (the sampled methods)."""
    return _finite_problem(seed, "episodes", n_states, n_actions, branches, horizon)


tabular_tasks.add("finite_garnet", finite_garnet_task)
tabular_tasks.add("finite_garnet_sampled", finite_garnet_sampled_task)
