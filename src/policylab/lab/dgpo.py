"""DGPO and its two comparators on the lab generator tasks (papers/seed_generative.md G2,
A.3): `dgpo` (weighted denoising with the group sigmoid, ODE rollouts), `orw_cfm_w2`
(reward-weighted CFM with the W2 term, ODE rollouts), `flow_grpo_sde` (`sde_flow` rollouts,
`grpo` advantages, `ppo_clip` over the chain's steps). One step = one batch of
`groups × group_size` generated samples (the budget unit) and one optimiser step.

Each step reads top to bottom: rollouts → rewards → advantages or weights → loss →
clip-grad → AdamW → reference/EMA update → metrics (`reward/mean`, `div/mode_entropy`,
`fid/on_manifold`, `ref/drift`, the method's own)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from policylab.algebra import generative as gen
from policylab.algebra.advantages import GRPOOptions, grpo_advantages
from policylab.algebra.losses import PPOClipOptions, ppo_clip_loss
from policylab.algebra.options import check_range, option
from policylab.lab import add_method
from policylab.lab import ring as _ring  # noqa: F401  (registers lab/ring)
from policylab.lab.generator_task import GENERATOR_TASKS, generator_task
from policylab.policies.diffusion import DiffusionPolicy, chain_logprobs
from policylab.recipes.base import S
from policylab.rollouts import Rollouts
from policylab.tabular.methods import TabularMethod

DGPO_CODE = "[code Luo-Yihong/DGPO:config/dgpo.py]"
DGPO_BASE = "[code Luo-Yihong/DGPO:config/base.py]"
ORW_CODE = "[code markerthu/orw-cfm:finetune_fm.py main]"


# ---- shared state, checkpoint and helpers ---------------------------------------------------
def _fresh(problem, lr: float, weight_decay: float) -> dict:
    policy = copy.deepcopy(problem.mdp)  # the base model with its frozen reference
    opt = torch.optim.AdamW(policy.trainable(), lr=lr, weight_decay=weight_decay)
    return {"policy": policy, "opt": opt, "ema": None, "step": 0}


def checkpoint(state: dict) -> dict:
    saved = {
        "policy": state["policy"].state_dict(),
        "opt": state["opt"].state_dict(),
        "step": state["step"],
    }
    if state["ema"] is not None:
        saved["ema"] = state["ema"].state_dict()
    return saved


def _restore(problem, options, saved, lr, weight_decay, with_ema: bool) -> dict:
    state = _fresh(problem, lr, weight_decay)
    state["policy"].load_state_dict(saved["policy"])
    state["opt"].load_state_dict(saved["opt"])
    state["step"] = saved["step"]
    if with_ema:
        state["ema"] = _copy_without_reference(state["policy"])
        state["ema"].load_state_dict(saved["ema"])
    return state


def _copy_without_reference(policy: DiffusionPolicy) -> DiffusionPolicy:
    """A frozen copy of the trained weights (DGPO's EMA, ORW's π_last)."""
    reference, policy.reference = policy.reference, None
    twin = copy.deepcopy(policy).requires_grad_(False)
    policy.reference = reference
    return twin


def policy_of(problem, state) -> DiffusionPolicy:
    return state["policy"]


def _batch_metrics(problem, samples, cond, drift: float) -> dict[str, float]:
    """The task's batch metrics (ring: reward, mode entropy, on-manifold) and `ref/drift`."""
    return {**generator_task(problem).batch_metrics(samples, cond), "ref/drift": drift}


def _learn(state, loss, grad_clip) -> float:
    state["opt"].zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(state["policy"].trainable(), grad_clip)
    state["opt"].step()
    state["step"] += 1
    return float(norm)


def chain_ppo_update(state, rewards, old_logprobs, group_size: int, logprobs, options):
    """The likelihood update over stored chains (flow_grpo_sde, rlcm): each sample a row,
    its stochastic steps the token axis (G0.2), consecutive groups of `group_size`; the
    registered `grpo` advantages and `ppo_clip` (±options.eps_clip), `options.epochs`
    passes, each one `_learn` step. `logprobs()` re-scores the chains under the current
    weights [B, T]. Returns (last loss, its ppo_clip metrics, last grad norm)."""
    rows = Rollouts(
        rewards=rewards,
        response_mask=torch.ones_like(old_logprobs),
        group_ids=torch.arange(rewards.shape[0]) // group_size,
        logprobs=old_logprobs,
    )
    adv = grpo_advantages(rows, GRPOOptions())
    cfg = PPOClipOptions(eps_low=options.eps_clip, eps_high=options.eps_clip)
    for _ in range(options.epochs):
        loss, pg = ppo_clip_loss(logprobs(), rows.logprobs, adv, rows.response_mask, cfg)
        norm = _learn(state, loss, options.grad_clip)
    return loss, pg, norm


def _drift(policy, xt, tau, v, cond=None) -> torch.Tensor:
    """mean_d (v̂_θ − v̂_ref)² per row at the same (x^τ, τ, c) (the W2 / KL term, G0.5)."""
    return ((v - policy.ref_velocity(xt, tau, cond)) ** 2).mean(-1)


# ---- DGPO ----------------------------------------------------------------------------------
@dataclass
class DGPOOptions:
    groups: int = option(16, "groups per step (one condition on the ring)")
    group_size: int = option(8, "samples per group G")
    beta_dpo: float = option(100.0, "β_dpo of the group score s_g")
    beta_kl: float = option(0.02, "β_KL of the velocity-drift term")
    clip: float = option(0.01, "trust region c on exp(ℓ_old − ℓ) (0 = off)")
    timesteps: int = option(4, "M training noise levels per step, drawn without replacement")
    trunc: int = option(6, "train on the first trunc + 1 grid times (the noisy end)")
    adv_clip: float = option(5.0, "advantage clip")
    lr: float = option(3e-4, "AdamW learning rate")
    weight_decay: float = option(1e-4, "AdamW weight decay")
    grad_clip: float = option(1.0, "gradient-norm clip")
    switch_ema_ref: int = option(200, "steps after which rollouts use the EMA weights")
    use_ema_ref: bool = option(False, "the EMA (not the frozen base) is the DPO reference")

    def __post_init__(self) -> None:
        for name in ("groups", "group_size", "timesteps"):
            check_range("dgpo", name, getattr(self, name), low=1)
        check_range("dgpo", "group_size", self.group_size, low=2)
        check_range("dgpo", "trunc", self.trunc, low=0)
        if self.timesteps > self.trunc + 1:
            raise ValueError(
                f"dgpo.timesteps = {self.timesteps} exceeds the trunc + 1 = {self.trunc + 1} "
                "noise levels it draws from without replacement"
            )
        check_range("dgpo", "clip", self.clip, low=0.0)
        for name in ("beta_dpo", "lr"):  # 0 would train on nothing; inf gives inf/NaN
            check_range("dgpo", name, getattr(self, name), low=0.0, low_open=True, finite=True)
        check_range("dgpo", "adv_clip", self.adv_clip, low=0.0, low_open=True)  # inf: no clip
        for name in ("beta_kl", "weight_decay"):
            check_range("dgpo", name, getattr(self, name), low=0.0, finite=True)
        check_range("dgpo", "grad_clip", self.grad_clip, low=0.0, low_open=True)  # 0: no step


def dgpo_init(problem, options: DGPOOptions, generator):
    state = _fresh(problem, options.lr, options.weight_decay)
    if options.trunc + 1 > state["policy"].steps:  # the training levels must lie on the chain
        K = state["policy"].steps
        raise ValueError(f"dgpo.trunc = {options.trunc} needs trunc + 1 <= K = {K}")
    state["ema"] = _copy_without_reference(state["policy"])
    return state


def dgpo_step(problem, state, options: DGPOOptions, generator):
    policy, ema = state["policy"], state["ema"]
    G, n_groups = options.group_size, options.groups
    B = G * n_groups
    # 1. rollouts with the deterministic ODE (the EMA weights after switch_ema_ref)
    roller = ema if state["step"] >= options.switch_ema_ref else policy
    task = generator_task(problem)
    cond = task.group_conditions(n_groups, G, generator)
    x = roller.sample("ode_euler", B, cond=cond, generator=generator).sample
    group_ids = torch.arange(n_groups).repeat_interleave(G)
    # 2. rewards and group advantages (population std, clip 5, flat groups masked)
    rewards = task.reward(x, cond)
    adv = gen.dgpo_advantages(rewards, group_ids, clip=options.adv_clip)
    # 3. M noise levels from the noisy end, one shared ε per group per level
    order = torch.randperm(options.trunc + 1, generator=generator)[: options.timesteps]
    ema_passes = bool(options.clip) or options.use_ema_ref  # ℓ_old or the EMA reference
    total, w_all, keep_all, drifts = 0.0, [], [], []
    for k in order.tolist():
        tau = torch.full((B, 1), k / policy.steps)
        eps = torch.randn(n_groups, task.dim, generator=generator).repeat_interleave(G, 0)
        ell, v, xt = policy.cfm_loss(x, tau, eps, cond)
        with torch.no_grad():  # one pass of the frozen base and one of the EMA per level
            u = x - eps
            base_v = policy.ref_velocity(xt, tau, cond)  # the drift's reference, and the DPO one
            ema_v = ema.velocity(xt, tau, cond) if ema_passes else None
            ell_old = ((ema_v - u) ** 2).mean(-1) if options.clip else None
            ref_v = ema_v if options.use_ema_ref else base_v
            ell_ref = ((ref_v - u) ** 2).mean(-1)
        w = gen.dgpo_group_weights(adv, ell, ell_ref, group_ids, options.beta_dpo)
        keep = gen.dgpo_trust_region(adv, ell, ell_old, options.clip) if options.clip else None
        drift = ((v - base_v) ** 2).mean(-1)  # _drift's formula on the pass made above
        loss = gen.dgpo_loss(adv, ell, w, keep) + options.beta_kl * drift.mean()
        total = total + loss / options.timesteps
        w_all.append(w)
        keep_all.append(keep if keep is not None else torch.ones(B, dtype=torch.bool))
        drifts.append(float(drift.detach().mean()))
    # 4. one optimiser step per epoch (all M levels accumulated), then the EMA
    norm = _learn(state, total, options.grad_clip)
    decay = gen.ema_decay(state["step"])
    with torch.no_grad():
        for e, p in zip(ema.trainable(), policy.trainable(), strict=True):
            e.mul_(decay).add_(p, alpha=1 - decay)
    w = torch.cat(w_all)
    metrics = _batch_metrics(problem, x, cond, sum(drifts) / len(drifts))
    metrics.update(
        {
            "cost": B,
            "loss": float(total.detach()),
            "grad/norm": norm,
            "dgpo/w_mean": float(w.mean()),
            "dgpo/w_sat": float(((w < 0.01) | (w > 0.99)).double().mean()),
            "dgpo/detached": 1.0 - float(torch.cat(keep_all).double().mean()),
            # per sample: K rollout steps, then per level θ, the frozen base and (when read) the EMA
            "cost/nfe": policy.steps + (2 + ema_passes) * options.timesteps,
        }
    )
    return state, metrics


def dgpo_restore(problem, options, saved):
    return _restore(problem, options, saved, options.lr, options.weight_decay, True)


add_method(
    TabularMethod(
        tasks=GENERATOR_TASKS,
        name="dgpo",
        title="DGPO — direct group preference optimisation (ODE rollouts)",
        paper="Luo, Hu, Tang, arXiv:2510.08425; code Luo-Yihong/DGPO",
        formula="loss = mean_i σ(s_g)·A_i·ℓ_i + β_KL·mean‖v̂_θ − v̂_ref‖², "
        "s_g = (β_dpo/G)·Σ_{i∈g} A_i·(ℓ_i − ℓ_i^ref)",
        options=DGPOOptions,
        defaults={
            "groups": S(16, "[ours: 128 samples per step, G2.2's 300 × 128]"),
            "group_size": S(8, "[ours G2.2: G = 8 on the ring]"),
            "beta_dpo": S(100.0, DGPO_CODE),
            "beta_kl": S(0.02, DGPO_CODE),
            "clip": S(0.01, DGPO_CODE),
            "timesteps": S(4, DGPO_CODE),
            "trunc": S(6, DGPO_CODE),
            "adv_clip": S(5.0, DGPO_BASE),
            "lr": S(3e-4, DGPO_BASE),
            "weight_decay": S(1e-4, DGPO_BASE),
            "grad_clip": S(1.0, DGPO_BASE),
            "switch_ema_ref": S(200, DGPO_BASE),
            "use_ema_ref": S(False, "[code DGPO: off by default]"),
        },
        init=dgpo_init,
        step=dgpo_step,
        policy=policy_of,
        notes=(
            "EMA decay min(0.3, 0.001·step) [code]; the zero-std mask applied [ours, G2.2]",
            "full fine-tuning of the 9k-parameter net in place of LoRA [ours]",
        ),
        checkpoint=checkpoint,
        restore=dgpo_restore,
    )
)


# ---- ORW-CFM-W2 ----------------------------------------------------------------------------
@dataclass
class ORWOptions:
    batch: int = option(128, "generated samples per step")
    beta: float = option(0.5, "β of w = exp(β·R) (the code's 'temperature')")
    alpha: float = option(1.0, "α of the W2 term mean_d (v̂_θ − v̂_ref)²")
    refresh_every: int = option(1, "steps between refreshes of the sampling policy π_last")
    lr: float = option(2e-4, "Adam learning rate")
    weight_decay: float = option(0.0, "weight decay")
    grad_clip: float = option(1.0, "gradient-norm clip")

    def __post_init__(self) -> None:
        check_range("orw_cfm_w2", "batch", self.batch, low=1)
        check_range("orw_cfm_w2", "refresh_every", self.refresh_every, low=1)
        for name in ("alpha", "beta", "weight_decay"):  # beta 0: plain CFM
            check_range("orw_cfm_w2", name, getattr(self, name), low=0.0, finite=True)
        check_range("orw_cfm_w2", "lr", self.lr, low=0.0, low_open=True, finite=True)
        check_range("orw_cfm_w2", "grad_clip", self.grad_clip, low=0.0, low_open=True)


def orw_init(problem, options: ORWOptions, generator):
    state = _fresh(problem, options.lr, options.weight_decay)
    state["ema"] = _copy_without_reference(state["policy"])  # π_last
    return state


def orw_step(problem, state, options: ORWOptions, generator):
    policy = state["policy"]
    if state["step"] % options.refresh_every == 0:
        state["ema"].velocity_net.load_state_dict(policy.velocity_net.state_dict())
    task = generator_task(problem)
    cond = task.group_conditions(options.batch, 1, generator)
    x = state["ema"].sample("ode_euler", options.batch, cond=cond, generator=generator).sample
    rewards = task.reward(x, cond)
    w = gen.orw_weights(rewards, options.beta)
    tau = torch.rand(options.batch, 1, generator=generator)
    eps = torch.randn(options.batch, task.dim, generator=generator)
    ell, v, xt = policy.cfm_loss(x, tau, eps, cond)
    drift = _drift(policy, xt, tau, v, cond)
    loss = gen.weighted_denoising_loss(w, ell, drift, options.alpha)
    norm = _learn(state, loss, options.grad_clip)
    metrics = _batch_metrics(problem, x, cond, float(drift.detach().mean()))
    metrics.update(
        {
            "cost": options.batch,
            "loss": float(loss.detach()),
            "grad/norm": norm,
            "orw/w_mean": float(w.mean()),
            "cost/nfe": policy.steps + 2,
        }
    )
    return state, metrics


def orw_restore(problem, options, saved):
    return _restore(problem, options, saved, options.lr, options.weight_decay, True)


add_method(
    TabularMethod(
        tasks=GENERATOR_TASKS,
        name="orw_cfm_w2",
        title="ORW-CFM-W2 — online reward-weighted CFM with a W2 bound",
        paper="Fan et al., ICLR 2025; code markerthu/orw-cfm",
        formula="loss = mean_i [exp(β·R_i)·ℓ_θ(x_i; τ_i, ε_i) + α·mean_d (v̂_θ − v̂_ref)²]",
        options=ORWOptions,
        defaults={
            "batch": S(128, ORW_CODE),
            "beta": S(0.5, ORW_CODE),
            "alpha": S(1.0, ORW_CODE),
            "refresh_every": S(1, "[ours: the code's 10⁴ exceeds our whole run]"),
            "lr": S(2e-4, ORW_CODE),
            "weight_decay": S(0.0, "[code: Adam, none]"),
            "grad_clip": S(1.0, ORW_CODE),
        },
        init=orw_init,
        step=orw_step,
        policy=policy_of,
        notes=("the code's 5,000-step linear warm-up is dropped: our runs are 300 steps",),
        checkpoint=checkpoint,
        restore=orw_restore,
    )
)


# ---- Flow-GRPO-style policy gradient over SDE chains --------------------------------------
@dataclass
class FlowGRPOOptions:
    groups: int = option(16, "groups per step")
    group_size: int = option(8, "samples per group G")
    noise_level: float = option(0.7, "a of the sde_flow sampler")
    eps_clip: float = option(0.2, "ppo_clip range (symmetric)")
    epochs: int = option(1, "passes over the batch per step")
    lr: float = option(3e-4, "AdamW learning rate")
    weight_decay: float = option(1e-4, "AdamW weight decay")
    grad_clip: float = option(1.0, "gradient-norm clip")

    def __post_init__(self) -> None:
        check_range("flow_grpo_sde", "group_size", self.group_size, low=2)
        check_range("flow_grpo_sde", "groups", self.groups, low=1)
        check_range(
            "flow_grpo_sde", "noise_level", self.noise_level, low=0.0, low_open=True, finite=True
        )
        check_range("flow_grpo_sde", "epochs", self.epochs, low=1)
        check_range("flow_grpo_sde", "eps_clip", self.eps_clip, low=0.0, low_open=True)
        check_range("flow_grpo_sde", "lr", self.lr, low=0.0, low_open=True, finite=True)
        check_range("flow_grpo_sde", "weight_decay", self.weight_decay, low=0.0, finite=True)
        check_range("flow_grpo_sde", "grad_clip", self.grad_clip, low=0.0, low_open=True)


def fgrpo_init(problem, options: FlowGRPOOptions, generator):
    return _fresh(problem, options.lr, options.weight_decay)


def fgrpo_step(problem, state, options: FlowGRPOOptions, generator):
    policy = state["policy"]
    G, n_groups = options.group_size, options.groups
    B = G * n_groups
    # 1. SDE rollouts: each chain is a row, its K steps the token axis (G0.2)
    task = generator_task(problem)
    cond = task.group_conditions(n_groups, G, generator)
    out = policy.sample("sde_flow", B, cond=cond, generator=generator, a=options.noise_level)
    # 2. the registered grpo advantages and ppo_clip loss, unchanged
    loss, pg, norm = chain_ppo_update(
        state,
        task.reward(out.sample, cond),
        out.logprobs,
        G,
        lambda: chain_logprobs(policy, out.chain, out.taus, cond, a=options.noise_level),
        options,
    )
    with torch.no_grad():
        K = out.taus.shape[0]
        xt, tau = out.chain[:, :-1].reshape(-1, task.dim), out.taus.repeat(B).unsqueeze(-1)
        c = None if cond is None else cond.repeat_interleave(K, 0)
        drift = float(_drift(policy, xt, tau, policy.velocity(xt, tau, c), c).mean())
    metrics = _batch_metrics(problem, out.sample, cond, drift)
    metrics.update(
        {
            "cost": B,
            "loss": float(loss.detach()),
            "grad/norm": norm,
            "pg/clipfrac": pg["pg/clipfrac"],
            # per sample: K sampling steps, K chain re-evaluations per epoch (the drift
            # metric's passes above are logging, not the method's cost)
            "cost/nfe": (1 + options.epochs) * policy.steps,
        }
    )
    return state, metrics


def fgrpo_restore(problem, options, saved):
    return _restore(problem, options, saved, options.lr, options.weight_decay, False)


add_method(
    TabularMethod(
        tasks=GENERATOR_TASKS,
        name="flow_grpo_sde",
        title="Flow-GRPO-style PG: sde_flow rollouts, grpo, ppo_clip over chain steps",
        paper="after Flow-GRPO (Liu et al., arXiv:2505.05470); comparator of DGPO (G2.2)",
        formula="L = token-mean_k max(−A·r_k, −A·clip(r_k, 1 ± ε)), r_k = exp(ℓp_θ − ℓp_old)",
        options=FlowGRPOOptions,
        defaults={
            "groups": S(16, "[ours: 128 samples per step, as dgpo]"),
            "group_size": S(8, "[ours G2.2]"),
            "noise_level": S(0.7, DGPO_BASE + " sample.noise_level (Flow-GRPO's)"),
            "eps_clip": S(0.2, "[ours: Flow-GRPO's 1e-4 is for mean-over-pixels densities]"),
            "epochs": S(1, "[code Flow-GRPO: num_inner_epochs = 1]"),
            "lr": S(3e-4, DGPO_BASE),
            "weight_decay": S(1e-4, DGPO_BASE),
            "grad_clip": S(1.0, DGPO_BASE),
        },
        init=fgrpo_init,
        step=fgrpo_step,
        policy=policy_of,
        notes=("no KL term [ours]; advantages: the registered grpo (Bessel std) [ours]",),
        checkpoint=checkpoint,
        restore=fgrpo_restore,
    )
)
