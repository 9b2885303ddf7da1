"""ROCM and its policy-gradient comparator RLCM on the lab generator tasks
(papers/seed_generative.md G4; Shekhar & Zhang, arXiv:2503.06171 — abstract only, no code:
every regularised ROCM method is `_provisional`; `rocm_none`, the pathwise reward alone on
the same inferred sampler, keeps the spec's name, G4.2).

Both fine-tune the same distilled n-step consistency model (policies/consistency.py), built
from the task's base flow (problem.mdp) and cached. One step = `batch` generated samples
and one AdamW step.

- `rocm_<kind>_provisional` (pathwise, G0.5 kind 3): the sample x̂_n(θ; ε_1..ε_n) is
  differentiable in θ, so loss = −mean R(x̂_n) + β·mean Σ_j D(Δ_j, s_j) + β_last·mean
  ‖f_θ − f_ref‖²_mean(last step), D ∈ {kl, hellinger_sq, tv, js} of the Gaussian
  re-noisings (algebra/divergence.py); the reference and the regularised f_θ are evaluated
  at the θ-trajectory's states, detached [ours, G4.1]. `rocm_none`: β = β_last = 0.
  R is the task's `differentiable_reward`; a task without one is refused.
- `rlcm` (likelihood, G4.2): the n − 1 Gaussian re-noisings are the token axis of one
  Rollouts row per sample; the registered `grpo` advantages and `ppo_clip` loss, as
  `flow_grpo_sde` does over its SDE chain (lab/dgpo.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.divergence import gaussian_divergence, rocm_loss
from policylab.algebra.options import check_range, option
from policylab.lab import add_method
from policylab.lab.cache import cache_dir
from policylab.lab.dgpo import _batch_metrics, _learn, chain_ppo_update, checkpoint, policy_of
from policylab.lab.generator_task import GENERATOR_TASKS, generator_task
from policylab.policies.consistency import (
    ConsistencyPolicy,
    base_consistency,
    consistency_chain,
    consistency_logprobs,
    renoising_logprobs,
)
from policylab.recipes.base import S
from policylab.tabular.methods import TabularMethod

SPEC = "[spec G4.2]"
PAPER = "Shekhar, Zhang, arXiv:2503.06171 (abstract; no code found)"


# ---- the consistency model every run starts from -------------------------------------------
def _base(problem, steps: int, grid: int, distill_steps: int) -> ConsistencyPolicy:
    task = generator_task(problem)
    return base_consistency(
        problem.mdp,
        task.conditions,
        steps=steps,
        grid=grid,
        distill_steps=distill_steps,
        task_key=f"dim={task.dim}",
        cache=cache_dir(),
    )


def _fresh(problem, options) -> dict:
    policy = _base(problem, options.steps, options.distill_grid, options.distill_steps)
    opt = torch.optim.AdamW(policy.trainable(), lr=options.lr, weight_decay=options.weight_decay)
    return {"policy": policy, "opt": opt, "ema": None, "step": 0}


def _restore(problem, options, saved) -> dict:
    state = _fresh(problem, options)
    state["policy"].load_state_dict(saved["policy"])
    state["opt"].load_state_dict(saved["opt"])
    state["step"] = saved["step"]
    return state


def _flat(states: torch.Tensor, taus: torch.Tensor, cond):
    """[B, n, D] states and [n] times → rows [B·n, D], [B·n, 1] and conditions [B·n, C]."""
    B, n, D = states.shape
    c = None if cond is None else cond.repeat_interleave(n, 0)
    return states.reshape(B * n, D), taus.repeat(B).unsqueeze(-1), c


def clean_gap(policy: ConsistencyPolicy, states: torch.Tensor, taus, cond) -> torch.Tensor:
    """f_θ − f_ref at detached states [B, n, D] (θ's graph kept, the reference frozen)."""
    x, t, c = _flat(states.detach(), taus, cond)
    return (policy.clean(x, t, c) - policy.ref_clean(x, t, c)).view(states.shape)


def _check_common(owner: str, o) -> None:
    check_range(owner, "steps", o.steps, low=1)
    check_range(owner, "distill_grid", o.distill_grid, low=1)
    if o.distill_grid % o.steps:
        raise ValueError(
            f"{owner}.steps = {o.steps} must divide distill_grid = {o.distill_grid} (the "
            "n-step grid j/n must lie on the distillation grid)"
        )
    check_range(owner, "distill_steps", o.distill_steps, low=0)
    check_range(owner, "lr", o.lr, low=0.0, low_open=True, finite=True)
    check_range(owner, "weight_decay", o.weight_decay, low=0.0, finite=True)
    check_range(owner, "grad_clip", o.grad_clip, low=0.0, low_open=True)  # 0: no step


# ---- ROCM (pathwise) -----------------------------------------------------------------------
@dataclass
class ROCMOptions:
    batch: int = option(64, "generated samples per step")
    steps: int = option(4, "n consistency steps (grid τ_j = (j − 1)/n)")
    beta: float = option(0.1, "β of the divergence over the n − 1 re-noisings")
    beta_last: float = option(0.1, "β_last of ‖f_θ − f_ref‖²_mean at the noiseless last step")
    lr: float = option(1e-4, "AdamW learning rate")
    weight_decay: float = option(0.0, "AdamW weight decay")
    grad_clip: float = option(1.0, "gradient-norm clip")
    distill_grid: int = option(4, "the distillation's τ grid (n must divide it)")
    distill_steps: int = option(2000, "distillation steps (batch 256, Adam 1e-3), cached")

    def __post_init__(self) -> None:
        check_range("rocm", "batch", self.batch, low=1)
        _check_common("rocm", self)
        for name in ("beta", "beta_last"):
            check_range("rocm", name, getattr(self, name), low=0.0, finite=True)


def rocm_init(problem, options: ROCMOptions, generator, *, kind: str):
    if generator_task(problem).differentiable_reward is None:
        raise ValueError(
            f"rocm ({kind}) is a pathwise objective: it needs the task's differentiable_reward,"
            " and this task has none (use rlcm, a likelihood objective, instead)"
        )
    return _fresh(problem, options)


def rocm_step(problem, state, options: ROCMOptions, generator, *, kind: str):
    policy, task, B = state["policy"], generator_task(problem), options.batch
    n = policy.steps
    # 1. the reparameterised sample x̂_n(θ) from stored noises ε_1..ε_n
    cond = task.group_conditions(B, 1, generator)
    x_noise = torch.randn(B, task.dim, generator=generator)
    eps = torch.randn(B, n - 1, task.dim, generator=generator)
    out = consistency_chain(policy, x_noise, eps, cond)
    rewards = task.differentiable_reward(out.sample, cond)
    # 2. divergences of the re-noisings at the detached states x_1..x_n, and the last step
    gap = clean_gap(policy, out.chain[:, :n], out.taus, cond)  # [B, n, D]
    taus_next = out.taus[1:]
    delta = taus_next.view(1, -1, 1) * gap[:, :-1]
    div = gaussian_divergence(delta, 1 - taus_next, kind)  # [B, n − 1]
    last = (gap[:, -1] ** 2).mean(-1)
    loss = rocm_loss(rewards, div, options.beta, last, options.beta_last)
    norm = _learn(state, loss, options.grad_clip)
    # 3. metrics on the detached sample (the task's reward, as every method reports it)
    x = out.sample.detach()
    metrics = {
        **_batch_metrics(problem, x, cond, float((gap.detach() ** 2).mean())),
        "cost": B,
        "loss": float(loss.detach()),
        "grad/norm": norm,
        "rocm/divergence": float(div.detach().sum(-1).mean()),
        "rocm/last_step": float(last.detach().mean()),
        "cost/nfe": 3 * n,  # the chain, f_θ and f_ref at the detached states
    }
    return state, metrics


KINDS = {"kl": "kl", "hellinger": "hellinger_sq", "tv": "tv", "js": "js"}
ROCM_DEFAULTS = {
    "batch": S(64, SPEC + " 500 steps × 64 = 32,000 samples"),
    "steps": S(4, SPEC + " the 4-step grid; 2 is the other arm"),
    "beta": S(0.1, "[ours: sweep {0.01, 0.1, 1} on lab/ring seed 0; 1 pins the model, docs]"),
    "beta_last": S(0.1, "[ours: the same weight as β]"),
    "lr": S(1e-4, "[ours: pathwise gradients are dense; tiny sweep on lab/ring, docs]"),
    "weight_decay": S(0.0, "[ours]"),
    "grad_clip": S(1.0, "[ours: as dgpo.py's comparators]"),
    "distill_grid": S(4, SPEC),
    "distill_steps": S(2000, "[ours: ring n = 4 on-manifold 0.858 at 500, 0.902 at 2,000]"),
}


def _register_rocm(name: str, kind: str, defaults: dict, title: str) -> None:
    def init(problem, options, generator):
        return rocm_init(problem, options, generator, kind=kind)

    def step(problem, state, options, generator):
        return rocm_step(problem, state, options, generator, kind=kind)

    add_method(
        TabularMethod(
            tasks=GENERATOR_TASKS,
            own_start=True,  # the distilled consistency model, not the task's base flow
            name=name,
            title=title,
            paper=PAPER,
            formula="loss = −mean_i R(x̂_n,i(θ)) + β·mean_i Σ_j D(Δ_ij, s_j) + β_last·mean_i "
            "‖f_θ − f_ref‖²(x_n,i), Δ_j = τ_{j+1}(f_θ − f_ref)(x_j, τ_j), s_j = 1 − τ_{j+1}",
            options=ROCMOptions,
            defaults=defaults,
            init=init,
            step=step,
            policy=policy_of,
            notes=(
                "inferred from the abstract (G4.1): the transitions, the divergence set and "
                "the last-step term are ours",
                "one distilled consistency model per task, cached (policies/consistency.py)",
            ),
            checkpoint=checkpoint,
            restore=_restore,
        )
    )


for _short, _kind in KINDS.items():
    _register_rocm(
        f"rocm_{_short}_provisional",
        _kind,
        ROCM_DEFAULTS,
        f"ROCM — pathwise reward + {_kind} on the re-noisings (provisional)",
    )
_register_rocm(
    "rocm_none",
    "none",
    {
        **ROCM_DEFAULTS,
        "beta": S(0.0, "[ours: the unregularised arm]"),
        "beta_last": S(0.0, "[ours: the unregularised arm]"),
    },
    "ROCM without regularisation — the pathwise reward alone",
)


# ---- RLCM (likelihood over the re-noising chain) ------------------------------------------
@dataclass
class RLCMOptions:
    groups: int = option(8, "groups per step")
    group_size: int = option(8, "samples per group G")
    steps: int = option(4, "n consistency steps (n − 1 stochastic re-noisings)")
    eps_clip: float = option(0.2, "ppo_clip range (symmetric)")
    epochs: int = option(1, "passes over the batch per step")
    lr: float = option(1e-4, "AdamW learning rate")
    weight_decay: float = option(0.0, "AdamW weight decay")
    grad_clip: float = option(1.0, "gradient-norm clip")
    distill_grid: int = option(4, "the distillation's τ grid (n must divide it)")
    distill_steps: int = option(2000, "distillation steps, cached")

    def __post_init__(self) -> None:
        check_range("rlcm", "groups", self.groups, low=1)
        check_range("rlcm", "group_size", self.group_size, low=2)
        _check_common("rlcm", self)
        if self.steps < 2:
            raise ValueError(
                f"rlcm.steps = {self.steps}; it needs >= 2 (n = 1 has no stochastic step)"
            )
        check_range("rlcm", "eps_clip", self.eps_clip, low=0.0, low_open=True)
        check_range("rlcm", "epochs", self.epochs, low=1)


def rlcm_init(problem, options: RLCMOptions, generator):
    return _fresh(problem, options)


def rlcm_step(problem, state, options: RLCMOptions, generator):
    policy, task = state["policy"], generator_task(problem)
    G, n_groups = options.group_size, options.groups
    B = G * n_groups
    # 1. chains: each sample a row, its n − 1 re-noisings the token axis (G0.2)
    cond = task.group_conditions(n_groups, G, generator)
    with torch.no_grad():
        out = policy.sample("consistency", B, cond=cond, generator=generator)
        old = renoising_logprobs(out.chain, out.clean, out.taus)  # the sampler's f_θ
    # 2. the registered grpo advantages and ppo_clip loss, unchanged (as flow_grpo_sde)
    loss, pg, norm = chain_ppo_update(
        state,
        task.reward(out.sample, cond),
        old,
        G,
        lambda: consistency_logprobs(policy, out.chain, out.taus, cond),
        options,
    )
    with torch.no_grad():
        drift = float((clean_gap(policy, out.chain[:, : policy.steps], out.taus, cond) ** 2).mean())
    metrics = {
        **_batch_metrics(problem, out.sample, cond, drift),
        "cost": B,
        "loss": float(loss.detach()),
        "grad/norm": norm,
        "pg/clipfrac": pg["pg/clipfrac"],
        "cost/nfe": policy.steps + options.epochs * (policy.steps - 1),  # sampling, training
    }
    return state, metrics


add_method(
    TabularMethod(
        tasks=GENERATOR_TASKS,
        own_start=True,  # the distilled consistency model, not the task's base flow
        name="rlcm",
        title="RLCM-style PG: consistency chains, grpo, ppo_clip over the re-noisings",
        paper="after RLCM (Oertell et al., arXiv:2404.03673; code Owen-Oertell/rlcm, not read)",
        formula="L = token-mean_j max(−A·r_j, −A·clip(r_j, 1 ± ε)), r_j = exp(ℓp_θ − ℓp_old), "
        "ℓp_j = mean_d log N(x_{j+1}; τ_{j+1} f_θ(x_j, τ_j), (1 − τ_{j+1})²)",
        options=RLCMOptions,
        defaults={
            "groups": S(8, "[ours: 64 samples per step, as ROCM's G4.2 budget]"),
            "group_size": S(8, "[ours: as flow_grpo_sde]"),
            "steps": S(4, SPEC),
            "eps_clip": S(0.2, "[ours: as flow_grpo_sde]"),
            "epochs": S(1, "[ours: as flow_grpo_sde]"),
            "lr": S(1e-4, "[ours: as ROCM, tiny sweep on lab/ring, docs]"),
            "weight_decay": S(0.0, "[ours]"),
            "grad_clip": S(1.0, "[ours: as dgpo.py's comparators]"),
            "distill_grid": S(4, SPEC),
            "distill_steps": S(2000, "[ours: as ROCM]"),
        },
        init=rlcm_init,
        step=rlcm_step,
        policy=policy_of,
        notes=(
            "the last step x̂_n = f_θ(x_n, τ_n) is deterministic: no density, no ratio [ours]",
            "advantages: the registered grpo (Bessel std); no KL [ours]",
        ),
        checkpoint=checkpoint,
        restore=_restore,
    )
)
