"""AC-Flow on the lab generator tasks (papers/seed_generative.md G3; Fan, Cheng, Shen, Zhou,
Liu, arXiv:2510.18072 — abstract and project page only, no code): reward-weighted flow
matching whose weights come from a learned critic. Inferred, hence `ac_flow_provisional`.

One step = `groups × group_size` ODE samples (the budget unit), one actor and one critic
update, read top to bottom:

1. rollouts: `ode_euler` from the current weights (ORW-CFM-W2's π_last refreshed every step),
   keeping the chain x_0 … x_K;
2. shaping: R̃ = (R − mean)/std over each group (`shaping=group`, Bessel std), over the whole
   batch (`batch`), or R̃ = R (`none`); std = 0 gives R̃ = 0 (the registered `grpo` with
   eps 0);
3. actor batch: fresh (τ, ε) per sample, x^τ = τ·x + (1 − τ)·ε, ℓ_θ = mean_d (v̂_θ − u)²;
4. advantage from the critic *before* it sees this batch: A = clip(R̃ − V_φ(x^τ, τ, c), ±c_A),
   w = f(β·A) (`algebra.generative.ac_flow_weights`, exp in float32 after the clip); during
   the first `warmup` steps the actor uses ORW's w = exp(β·R̃) instead;
5. actor loss = mean_i [w_i·ℓ_i + α·mean_d (v̂_θ − v̂_ref)²] (ORW's W2 term), clip-grad, Adam;
6. critic: one Adam step on mean (V_φ − R̃)² over the actor's interpolants and every chain
   state x_k at τ_k = k/K, k = 0 … K (τ = 1 is the sample itself, so V is anchored there).

With V ≡ 0, no clip, `shaping=none` and f = exp the weights are ORW-CFM-W2's (test F2 and
tests/lab/test_ac_flow.py, which compares one step against `orw_cfm_w2` weight for weight)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from policylab.algebra import generative as gen
from policylab.algebra.advantages import GRPOOptions, grpo_advantages
from policylab.algebra.options import check_choice, check_range, option
from policylab.lab import add_method
from policylab.lab.dgpo import ORW_CODE, _batch_metrics, _drift, _fresh, _learn, _restore, policy_of
from policylab.lab.dgpo import checkpoint as _policy_checkpoint
from policylab.lab.generator_task import GENERATOR_TASKS, generator_task
from policylab.policies.flow_critic import ValueHead, chain_points, critic_loss
from policylab.recipes.base import S
from policylab.rollouts import Rollouts
from policylab.tabular.methods import TabularMethod

WEIGHTS = ("exp", "softplus", "relu1")  # f of w = f(β·A), algebra.generative.ac_flow_weights
SHAPINGS = ("group", "batch", "none")
CRITIC_SEED_OFFSET = 4_242  # the critic's initialisation: run seed + this [ours]


@dataclass
class ACFlowOptions:
    groups: int = option(16, "groups per step (one condition per group)")
    group_size: int = option(8, "samples per group G")
    shaping: str = option("group", "R̃ standardised per group, over the batch, or none (R̃ = R)")
    beta: float = option(0.5, "β of w = f(β·A) (and of ORW's exp(β·R̃) in the warm-up)")
    alpha: float = option(1.0, "α of the W2 term mean_d (v̂_θ − v̂_ref)²")
    clip: float = option(2.0, "advantage clip c_A (inf, 'inf' or null: no clip)")
    weight: str = option("exp", "f of w = f(β·A): exp, softplus or relu1 (= relu + 1)")
    warmup: int = option(30, "steps in which the actor uses ORW weights while the critic trains")
    critic_lr: float = option(1e-3, "Adam learning rate of the critic V_φ")
    lr: float = option(2e-4, "Adam learning rate of the velocity net")
    weight_decay: float = option(0.0, "weight decay of the velocity net")
    grad_clip: float = option(1.0, "gradient-norm clip of the velocity net")

    def __post_init__(self) -> None:
        name = "ac_flow_provisional"
        # no clip: a config refuses a float inf, so `clip: inf` (read as a string) or null
        if self.clip is None or (
            isinstance(self.clip, str) and self.clip.strip().lower() in ("inf", ".inf")
        ):
            self.clip = math.inf
        check_range(name, "groups", self.groups, low=1)
        check_range(name, "group_size", self.group_size, low=1)
        check_choice(name, "shaping", self.shaping, SHAPINGS)
        if self.shaping == "group" and self.group_size < 2:
            raise ValueError(
                f"{name}.group_size = {self.group_size} with shaping = 'group': a group of one "
                "has no std (R̃ ≡ 0); use group_size >= 2 or shaping = 'batch' / 'none'"
            )
        check_choice(name, "weight", self.weight, WEIGHTS)
        if isinstance(self.clip, (int, float)) and not self.clip > 0:  # NaN and <= 0
            raise ValueError(f"{name}.clip = {self.clip!r}; it must be > 0 (inf: no clip)")
        for field in ("beta", "lr"):  # beta 0 gives w ≡ 1: plain CFM, not this method
            check_range(name, field, getattr(self, field), low=0.0, low_open=True, finite=True)
        check_range(name, "clip", self.clip, low=0.0, low_open=True)  # inf: no clip
        # critic_lr = 0 freezes the zero-initialised critic: V ≡ 0 (the ORW special case)
        for field in ("alpha", "critic_lr", "weight_decay"):
            check_range(name, field, getattr(self, field), low=0.0, finite=True)
        check_range(name, "grad_clip", self.grad_clip, low=0.0, low_open=True)  # 0: no step
        if not isinstance(self.warmup, int) or isinstance(self.warmup, bool) or self.warmup < 0:
            raise ValueError(f"{name}.warmup = {self.warmup!r}; it must be a whole number >= 0")


def shaped_rewards(rewards: torch.Tensor, group_ids: torch.Tensor, shaping: str) -> torch.Tensor:
    """R̃ (step 2 of the module docstring): the registered `grpo` with eps 0 over the groups
    (`group`) or over one group holding the batch (`batch`); `none` returns R. [B] → [B]."""
    if shaping == "none":
        return rewards
    ids = group_ids if shaping == "group" else torch.zeros_like(group_ids)
    ones = torch.ones(rewards.shape[0], 1, dtype=rewards.dtype)
    rows = Rollouts(rewards=rewards, response_mask=ones, group_ids=ids)
    return grpo_advantages(rows, GRPOOptions(eps=0.0))[:, 0].to(rewards.dtype)


def _critic(policy, seed: int, critic_lr: float):
    with torch.random.fork_rng(devices=[]):  # its initialisation, no global effect
        torch.manual_seed(seed)
        critic = ValueHead(policy.dim, cond_dim=policy.cond_dim)
    return critic, torch.optim.Adam(critic.parameters(), lr=critic_lr)


def acflow_init(problem, options: ACFlowOptions, generator):
    state = _fresh(problem, options.lr, options.weight_decay)
    seed = generator.initial_seed() + CRITIC_SEED_OFFSET
    state["critic"], state["critic_opt"] = _critic(state["policy"], seed, options.critic_lr)
    return state


def acflow_step(problem, state, options: ACFlowOptions, generator):
    policy, critic = state["policy"], state["critic"]
    G, n_groups = options.group_size, options.groups
    B = G * n_groups
    task = generator_task(problem)
    # 1. ODE rollouts from the current weights, the chain kept for the critic
    cond = task.group_conditions(n_groups, G, generator)
    out = policy.sample("ode_euler", B, cond=cond, generator=generator)
    x = out.sample
    # 2. shaped reward R̃
    rewards = task.reward(x, cond)
    shaped = shaped_rewards(rewards, torch.arange(n_groups).repeat_interleave(G), options.shaping)
    # 3. the actor batch: fresh (τ, ε) per sample
    tau = torch.rand(B, 1, generator=generator)
    eps = torch.randn(B, task.dim, generator=generator)
    ell, v, xt = policy.cfm_loss(x, tau, eps, cond)
    # 4. weights: ORW's exp(β·R̃) in the warm-up, then f(β·clip(R̃ − V, ±c_A))
    with torch.no_grad():
        values = critic(xt, tau, cond)
    warm = state["step"] < options.warmup
    if warm:
        w = gen.orw_weights(shaped, options.beta)
    else:
        w = gen.ac_flow_weights(
            shaped, values, clip=options.clip, beta=options.beta, f=options.weight
        )
    # 5. actor loss with ORW's W2 term, one step
    drift = _drift(policy, xt, tau, v, cond)
    loss = gen.weighted_denoising_loss(w, ell, drift, options.alpha)
    norm = _learn(state, loss, options.grad_clip)
    # 6. critic regression on the interpolants and every chain state (τ = 0 … 1)
    cx, ctau, cc = chain_points(out.chain, cond)
    n_states = out.chain.shape[1]
    points = torch.cat([xt.detach(), cx])
    taus = torch.cat([tau, ctau])
    conds = None if cond is None else torch.cat([cond, cc])
    targets = torch.cat([shaped, shaped.repeat_interleave(n_states)])
    c_loss = critic_loss(critic(points, taus, conds), targets)
    state["critic_opt"].zero_grad()
    c_loss.backward()
    state["critic_opt"].step()

    gap = shaped - values
    var = float(shaped.var()) if B > 1 else 0.0
    metrics = _batch_metrics(problem, x, cond, float(drift.detach().mean()))
    metrics.update(
        {
            "cost": B,
            "loss": float(loss.detach()),
            "grad/norm": norm,
            "acflow/w_mean": float(w.mean()),
            "acflow/w_max": float(w.max()),
            "acflow/warmup": float(warm),
            "acflow/clipped": float((gap.abs() > options.clip).double().mean()),
            "critic/loss": float(c_loss.detach()),
            # explained variance of R̃ by V on the actor batch, before the critic's update
            "critic/ev": 1.0 - float(gap.var()) / var if var > 0 else 0.0,
            "cost/nfe": policy.steps + 2,  # generator passes per sample; the critic is apart
        }
    )
    return state, metrics


def acflow_checkpoint(state: dict) -> dict:
    return {
        **_policy_checkpoint(state),
        "critic": state["critic"].state_dict(),
        "critic_opt": state["critic_opt"].state_dict(),
    }


def acflow_restore(problem, options: ACFlowOptions, saved):
    state = _restore(problem, options, saved, options.lr, options.weight_decay, False)
    state["critic"], state["critic_opt"] = _critic(state["policy"], 0, options.critic_lr)
    state["critic"].load_state_dict(saved["critic"])
    state["critic_opt"].load_state_dict(saved["critic_opt"])
    return state


OURS = "[ours G3.1]"
add_method(
    TabularMethod(
        tasks=GENERATOR_TASKS,
        name="ac_flow_provisional",
        title="AC-Flow — critic-weighted flow matching with shaping, clip and warm-up (inferred)",
        paper="Fan, Cheng, Shen, Zhou, Liu, arXiv:2510.18072 (abstract); base ORW-CFM-W2 code",
        formula="loss = mean_i [f(β·clip(R̃_i − V_φ(x^τ_i, τ_i, c_i), ±c_A))·ℓ_θ(x_i; τ_i, ε_i) "
        "+ α·mean_d (v̂_θ − v̂_ref)²]; loss_V = mean (V_φ − R̃)² on interpolants and chain states",
        options=ACFlowOptions,
        defaults={
            "groups": S(16, "[ours: 128 samples per step, as orw_cfm_w2's batch]"),
            "group_size": S(8, "[ours: G = 8, as dgpo on the ring (G2.2)]"),
            "shaping": S("group", "[ours G3.1: 'over the group of samples of one condition']"),
            "beta": S(0.5, ORW_CODE + " (via G3.1)"),
            "alpha": S(1.0, ORW_CODE + " (via G3.1)"),
            "clip": S(2.0, OURS),
            "weight": S("exp", OURS),
            "warmup": S(30, "[ours G3.1: N_w = 10 % of the 300 steps of G3.2's arena budget]"),
            "critic_lr": S(1e-3, OURS),
            "lr": S(2e-4, ORW_CODE),
            "weight_decay": S(0.0, "[code orw-cfm: Adam, none]"),
            "grad_clip": S(1.0, ORW_CODE),
        },
        init=acflow_init,
        step=acflow_step,
        policy=policy_of,
        notes=(
            "inferred from the abstract: critic inputs, shaping, clip and warm-up rule [ours]",
            "the advantage uses the critic before its update on the same batch [ours]",
            "critic V_φ: MLP 2 × 128 SiLU on [c, x^τ, time_embedding(τ)], head at zero, "
            "one Adam step per step [ours]",
        ),
        checkpoint=acflow_checkpoint,
        restore=acflow_restore,
    )
)
