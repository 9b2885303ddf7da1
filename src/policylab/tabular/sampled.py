"""Sampled tabular policy gradient over the registered algebra (papers/seed_control_theory.md
§0.2, "sampled" mode): the exact P stays behind a simulator, the policy learns from
sampled transitions only, and the solver supplies the oracle score.

One step: `episodes` parallel chains of `horizon` steps from ρ (each step a row, T = 1,
as the control trainer's rows) → GAE along time with the registered estimator's time-axis
form (`algebra.advantages.gae_over_time`, bootstrapped at the truncation) → `epochs` full
passes: the registered policy loss (`ppo_clip`, `reinforce`, ... via
`policylab.api.policy_loss`) on the softmax table + ½·(V − ret)² on a value table
(`value_clip`, unclipped) → Adam. Nothing here is tabular-specific algebra: the same
registered functions train language models and control policies."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.advantages import gae_over_time, masked_whiten
from policylab.algebra.catalogue import policy_losses, value_losses
from policylab.algebra.options import build_options, option
from policylab.recipes.base import S
from policylab.recipes.compose import PolicyLoss, ValueLoss
from policylab.tabular.methods import Problem, State, TabularMethod, add


@dataclass
class SampledPGOptions:
    loss: str = option("ppo_clip", "registered policy loss (ppo_clip, reinforce, cispo, ...)")
    episodes: int = option(16, "parallel chains per step")
    horizon: int = option(32, "steps per chain (bootstrapped by V at the end)")
    epochs: int = option(4, "full-batch passes per step")
    lr: float = option(0.05, "Adam learning rate of the logits and the value table")
    lam: float = option(0.95, "GAE λ (γ is the MDP's)")

    def __post_init__(self) -> None:
        if self.loss not in policy_losses:
            raise ValueError(
                f"loss: unknown policy loss {self.loss!r}; choices: "
                f"{', '.join(policy_losses.names())}"
            )
        for name in ("episodes", "horizon", "epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be ≥ 1, got {getattr(self, name)}")
        if not self.lr > 0 or not 0 <= self.lam <= 1:
            raise ValueError(f"lr must be > 0 and lam in [0, 1]; got {self.lr}, {self.lam}")


def init_sampled(problem: Problem, options: SampledPGOptions, generator) -> State:
    logits = problem.initial_policy.clamp_min(1e-12).log()
    params = [
        logits.clone().requires_grad_(True),
        torch.zeros(problem.mdp.n_states, dtype=logits.dtype),
    ]
    params[1].requires_grad_(True)
    optimiser = torch.optim.Adam(params, lr=options.lr)
    return {
        "logits": params[0].detach(),
        "values": params[1].detach(),
        "adam": optimiser.state_dict(),
    }


def simulate(mdp, logits: torch.Tensor, episodes: int, horizon: int, generator):
    """(states, actions, rewards, next_states), each [horizon, episodes], from ρ."""
    s = torch.multinomial(mdp.rho, episodes, replacement=True, generator=generator)
    pi = torch.softmax(logits, -1)
    S_, A_, R_, N_ = [], [], [], []
    for _ in range(horizon):
        a = torch.multinomial(pi[s], 1, generator=generator).squeeze(-1)
        nxt = torch.multinomial(mdp.P[s, a], 1, generator=generator).squeeze(-1)
        S_.append(s), A_.append(a), R_.append(mdp.R[s, a, nxt]), N_.append(nxt)
        s = nxt
    return tuple(map(torch.stack, (S_, A_, R_, N_)))


def sampled_step(problem: Problem, state: State, options: SampledPGOptions, generator):
    mdp = problem.mdp
    logits = state["logits"].clone().requires_grad_(True)
    values = state["values"].clone().requires_grad_(True)
    optimiser = torch.optim.Adam([logits, values], lr=options.lr)
    optimiser.load_state_dict(state["adam"])
    # 1. rollouts: episodes × horizon transitions from the simulator
    s, a, r, nxt = simulate(mdp, logits.detach(), options.episodes, options.horizon, generator)
    # 2. GAE along time, bootstrapped at the truncation (never terminated: the MDP continues)
    with torch.no_grad():
        V = values[s]
        truncated = torch.zeros_like(r, dtype=torch.bool)
        truncated[-1] = True
        adv, returns = gae_over_time(
            r, V, values[nxt], torch.zeros_like(truncated), truncated, mdp.gamma, options.lam
        )
    old_logp = torch.log_softmax(logits.detach(), -1)[s, a].reshape(-1, 1)
    ones = torch.ones_like(old_logp)
    A = masked_whiten(adv.reshape(-1, 1), ones, unbiased=True)
    pg_fn, v_fn = bound_losses(options.loss)
    # 3. learn: epochs of full-batch steps on the table and the value table
    for _ in range(options.epochs):
        logp = torch.log_softmax(logits, -1)[s, a].reshape(-1, 1)
        pg, metrics = pg_fn(logprobs=logp, old_logprobs=old_logp, advantages=A, response_mask=ones)
        vl, _ = v_fn(values[s].reshape(-1, 1), V.reshape(-1, 1), returns.reshape(-1, 1), ones)
        optimiser.zero_grad(set_to_none=True)
        (pg + 0.5 * vl).backward()
        optimiser.step()
    out = {"logits": logits.detach(), "values": values.detach(), "adam": optimiser.state_dict()}
    return out, {
        "rollout/reward_mean": float(r.mean()),
        "loss/policy": float(pg.detach()),
        "loss/value": float(vl.detach()),
        "cost": options.episodes * options.horizon,
    }


def bound_losses(name: str) -> tuple[PolicyLoss, ValueLoss]:
    """The registered policy loss `name` with its own defaults, and the unclipped
    value_clip loss ½·(V − ret)² — the same callables `policylab.policy_loss` returns."""
    pg = policy_losses.entry(name)
    pg_options = build_options(pg.config, {}, where=f"policy loss {name!r}")
    v = value_losses.entry("value_clip")
    v_options = build_options(v.config, {"clip": None}, where="value loss 'value_clip'")
    return PolicyLoss(name, pg, pg_options), ValueLoss("value_clip", v, v_options)


def sampled_policy(problem: Problem, state: State) -> torch.Tensor:
    return torch.softmax(state["logits"], -1)


add(
    TabularMethod(
        name="sampled_pg",
        title="Sampled tabular PG: registered GAE + a registered policy loss (PPO by default)",
        paper="Schulman et al. 2017, Proximal Policy Optimization, arXiv:1707.06347 (the "
        "default loss); the sampled mode of papers/seed_control_theory.md §0.2",
        formula=(
            "rows = sampled (s, a, r, s'), T = 1;  Â = GAE(γ_MDP, λ) along time, whitened\n"
            "L = loss(logπ(a|s), old, Â) + ½·(V(s) − ret)²,  π = softmax(θ[s]), V a table"
        ),
        options=SampledPGOptions,
        defaults={
            "loss": S("ppo_clip", "[paper arXiv:1707.06347 eq. 7] the clipped surrogate"),
            "episodes": S(16, "[ours] 16 × 32 = 512 transitions per step"),
            "horizon": S(32, "[ours] chains bootstrapped by V after 32 steps"),
            "epochs": S(4, "[ours] full-batch passes (PPO's K epochs)"),
            "lr": S(0.05, "[ours] Adam on a table of logits"),
            "lam": S(0.95, "[paper arXiv:1506.02438] GAE λ = 0.95, as our PPO"),
        },
        init=init_sampled,
        step=sampled_step,
        policy=sampled_policy,
        notes=(
            "Run it on a task whose budget unit is environment steps: "
            "tabular/garnet with sampled=true.",
        ),
    )
)
