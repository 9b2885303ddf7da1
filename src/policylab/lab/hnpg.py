"""HNPG — hybrid on/offline natural policy gradient, and its baselines, as lab methods on
`lab/combination_lock` (papers/seed_control_theory.md §8; Zhou, Sekhari, Song & Sun,
ICLR 2024, arXiv:2311.08384; code YifeiZhou02/HNPG).

One update (`step`), read top to bottom:
  1. collect ⌈steps_per_update / H⌉ on-policy episodes with a ∼ π_h(s);
  2. Monte-Carlo returns Ĝ (γ = 1); sample as many offline transitions per step h;
  3. critics backwards, h = H−1..0: hybrid FQE (lab/hnpg_critic.py);
  4. advantages: on-policy GAE(γ = 1, λ) with V_h = mean of Q_h over 10 draws; offline rows
     get a fresh a ∼ π_h(s) and A = Q_h(s, a) − V_h(s);
  5. per h, on on-policy ∪ offline rows: surrogate −mean(A·e^{logπ − logπ_old}), the
     natural step (algebra/natural.py), backtracking line search.
`trpo` is the same loop with `hybrid=False` (no offline rows anywhere: the code's
HYBRID = False). `fqe_greedy` uses the offline data only: fitted Q iteration with greedy
targets over the one-hot actions the data's collector sends, then acts greedily."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from policylab.algebra.advantages import gae_over_time
from policylab.algebra.natural import line_search, natural
from policylab.algebra.options import check_range, option
from policylab.lab import add_method
from policylab.lab import combination_lock as _task  # noqa: F401  (registers the task)
from policylab.lab import fqe_greedy as _offline  # noqa: F401  (the offline baseline)
from policylab.lab.combination_lock import rollout
from policylab.lab.hnpg_critic import QValue, fit, offline_targets, state_value
from policylab.policies.time_indexed import TimeIndexedGaussian, gaussian_kl, gaussian_log_prob
from policylab.recipes.base import S
from policylab.tabular.methods import TabularMethod

CODE = "[code YifeiZhou02/HNPG:"


@dataclass
class HNPGOptions:
    hybrid: bool = option(
        True, help="fit critics on offline Bellman targets and update at offline states"
    )
    steps_per_update: int = option(1000, help="on-policy env steps per update")
    max_kl: float = option(0.01, help="KL radius δ of the natural step")
    cg_iters: int = option(10, help="conjugate-gradient iterations")
    damping: float = option(0.1, help="damping added to the Fisher")
    backtracks: int = option(10, help="line-search halvings")
    accept_ratio: float = option(0.1, help="line search: accept if actual/expected > this")
    lam: float = option(0.97, help="GAE λ (γ = 1, forced)")
    critic_steps: int = option(30, help="Adam steps per critic per update")
    critic_lr: float = option(3e-4, help="critic Adam learning rate")
    value_draws: int = option(10, help="actions drawn to estimate V_h(s)")

    def __post_init__(self) -> None:
        for name in ("steps_per_update", "cg_iters", "backtracks", "critic_steps", "value_draws"):
            check_range("hnpg", name, getattr(self, name), low=1)
        check_range("hnpg", "max_kl", self.max_kl, low=0, low_open=True)
        check_range("hnpg", "damping", self.damping, low=0)
        check_range("hnpg", "lam", self.lam, low=0, high=1)
        check_range("hnpg", "critic_lr", self.critic_lr, low=0, low_open=True)


def _critics(problem) -> torch.nn.ModuleList:
    lock = problem.mdp
    return torch.nn.ModuleList(QValue(lock.obs_dim, lock.actions) for _ in range(lock.horizon))


def init(problem, options, generator):
    policy = TimeIndexedGaussian(problem.mdp.obs_dim, problem.mdp.actions, problem.mdp.horizon)
    policy.load_state_dict(problem.initial_policy.state_dict())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
        q = _critics(problem)
    return {"policy": policy, "q": q}


def _offline_batch(data, h: int, n: int, g: torch.Generator):
    idx = torch.randint(data["obs"].shape[0], (n,), generator=g)
    return (
        data["obs"][idx, h],
        data["action"][idx, h],
        data["reward"][idx, h],
        data["obs"][idx, h + 1],
    )


def _natural_update(head, obs, action, adv, options) -> tuple[float, int, bool]:
    """One TRPO step of one head on rows (obs, action, adv); returns (KL, backtracks, accepted)."""
    params = list(head.parameters())
    with torch.no_grad():
        mean0, log_std0 = head(obs)
        old_logp = gaussian_log_prob(action, mean0, log_std0)

    def surrogate() -> torch.Tensor:
        mean, log_std = head(obs)
        return -(adv * torch.exp(gaussian_log_prob(action, mean, log_std) - old_logp)).mean()

    def loss_at(x: torch.Tensor) -> float:
        vector_to_parameters(x, params)
        with torch.no_grad():
            return float(surrogate())

    grad = parameters_to_vector(torch.autograd.grad(surrogate(), params))

    def fvp(v: torch.Tensor) -> torch.Tensor:
        mean, log_std = head(obs)
        kl = gaussian_kl(mean0, log_std0, mean, log_std).mean()
        g1 = parameters_to_vector(torch.autograd.grad(kl, params, create_graph=True))
        return parameters_to_vector(torch.autograd.grad(g1 @ v, params)).detach()

    step = natural(grad, fvp, options.max_kl, options.cg_iters, options.damping)
    x0 = parameters_to_vector(params).detach()
    x, k, ok = line_search(
        loss_at,
        x0,
        step.full_step,
        step.expected_improvement,
        options.backtracks,
        options.accept_ratio,
    )
    vector_to_parameters(x, params)
    with torch.no_grad():
        kl = float(gaussian_kl(mean0, log_std0, *head(obs)).mean())
    return kl, k, ok


def step(problem, state, options, generator):
    lock, data = problem.mdp, problem.extras["offline"]
    policy, q, H = state["policy"], state["q"], problem.mdp.horizon
    g = generator
    # 1. on-policy episodes
    n = math.ceil(options.steps_per_update / H)
    on = rollout(lock, lambda obs, h: policy.sample(obs, h, g), n, g)
    # 2. Monte-Carlo returns (γ = 1) and the offline rows of each step
    returns = on["reward"].flip(1).cumsum(1).flip(1)
    off = [_offline_batch(data, h, n, g) for h in range(H)] if options.hybrid else None
    # 3. critics, last step first: y reads the Q_{h+1} just refitted
    on_losses, off_losses = [], []
    for h in reversed(range(H)):
        off_rows = None
        if off is not None:
            obs, action, reward, nxt = off[h]
            next_q = None
            if h < H - 1:
                with torch.no_grad():
                    next_q = q[h + 1](nxt, policy.sample(nxt, h + 1, g))
            off_rows = (obs, action, offline_targets(reward, next_q))
        on_rows = (on["obs"][:, h], on["action"][:, h], returns[:, h])
        on_loss, off_loss = fit(q[h], on_rows, off_rows, options.critic_steps, options.critic_lr)
        on_losses.append(on_loss)
        off_losses.append(off_loss)
    # 4. advantages: GAE over the on-policy episodes, Q − V at offline states
    values = torch.stack(
        [
            state_value(q[h], policy.head(h), on["obs"][:, h], options.value_draws, g)
            for h in range(H)
        ]
    )  # [H, N]
    next_values = torch.cat([values[1:], torch.zeros(1, n, dtype=values.dtype)])
    last = torch.zeros(H, n, dtype=torch.bool)
    last[-1] = True
    adv, _ = gae_over_time(on["reward"].T, values, next_values, last, last, 1.0, options.lam)
    # 5. a natural step per epoch h on on-policy ∪ offline rows
    kls, backtracks, accepted = [], [], 0
    for h in policy.blocks():
        obs, action, a_h = on["obs"][:, h], on["action"][:, h], adv[h]
        if off is not None:
            off_obs = off[h][0]
            off_action = policy.sample(off_obs, h, g)
            with torch.no_grad():
                off_adv = q[h](off_obs, off_action) - state_value(
                    q[h], policy.head(h), off_obs, options.value_draws, g
                )
            obs = torch.cat([obs, off_obs])
            action = torch.cat([action, off_action])
            a_h = torch.cat([a_h, off_adv])
        kl, k, ok = _natural_update(policy.head(h), obs, action, a_h, options)
        kls.append(kl)
        backtracks.append(k)
        accepted += int(ok)
    metrics = {
        "cost": n * H,
        "reward/mean": float(on["reward"].sum(1).mean()),
        "max_reach": int(on["reach"].max()),
        "critic/on_loss": sum(on_losses) / H,
        "policy/kl": sum(kls) / H,
        "policy/backtracks": sum(backtracks) / H,
        "policy/accepted": accepted / H,
    }
    if off is not None:
        metrics["critic/off_loss"] = sum(off_losses) / H
    return state, metrics


def policy_of(problem, state):
    return state["policy"]


def checkpoint(state):
    return {"policy": state["policy"].state_dict(), "q": state["q"].state_dict()}


def restore(problem, options, saved):
    lock = problem.mdp
    policy = TimeIndexedGaussian(lock.obs_dim, lock.actions, lock.horizon)
    policy.load_state_dict(saved["policy"])
    q = _critics(problem)
    q.load_state_dict(saved["q"])
    return {"policy": policy, "q": q}


def _defaults(hybrid: bool, hybrid_source: str) -> dict:
    return {
        "hybrid": S(hybrid, hybrid_source),
        "steps_per_update": S(1000, CODE + "utils.py:parse_args batch_size]"),
        "max_kl": S(0.01, CODE + "utils.py:parse_args max_kl]"),
        "cg_iters": S(10, CODE + "trpo.py:trpo_step]"),
        "damping": S(0.1, CODE + "utils.py:parse_args damping]"),
        "backtracks": S(10, CODE + "trpo.py:linesearch max_backtracks]"),
        "accept_ratio": S(0.1, CODE + "trpo.py:linesearch accept_ratio]"),
        "lam": S(0.97, CODE + "utils.py:parse_args tau]"),
        "critic_steps": S(30, CODE + "trpo.py:TRPO.update_q]"),
        "critic_lr": S(3e-4, CODE + "trpo.py:TRPO.update_q]"),
        "value_draws": S(10, CODE + "models.py:QValue.get_value]"),
    }


FORMULA = (
    "critic: min mean_on(Q_h − Ĝ)² + mean_off(Q_h − r − Q_{h+1}(s', a'∼π_{h+1}))²; "
    "actor per h on on ∪ off rows: Δθ = √(2δ/sᵀFs)·s, "
    "s = CG(F + 0.1·I, ∇ mean(A·e^{logπ−logπ_old}))"
)

add_method(
    TabularMethod(
        tasks=("combination_lock",),
        name="hnpg",
        title="HNPG: hybrid on/offline natural policy gradient",
        paper="Zhou et al., ICLR 2024, arXiv:2311.08384",
        formula=FORMULA,
        options=HNPGOptions,
        defaults=_defaults(True, CODE + "trpo.py HYBRID = True]"),
        init=init,
        step=step,
        policy=policy_of,
        checkpoint=checkpoint,
        restore=restore,
    )
)
add_method(
    TabularMethod(
        tasks=("combination_lock",),
        name="trpo",
        title="TRPO with per-step critics (HNPG with the offline data off)",
        paper="Schulman et al., arXiv:1502.05477; as HNPG's code with HYBRID = False",
        formula="critic: min mean_on(Q_h − Ĝ)²; actor per h: the natural step on on-policy rows",
        options=HNPGOptions,
        defaults=_defaults(False, CODE + "trpo.py HYBRID = False]"),
        init=init,
        step=step,
        policy=policy_of,
        checkpoint=checkpoint,
        restore=restore,
    )
)
