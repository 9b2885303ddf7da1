"""Optimisers by name for the control trainer: `adam` (the trainer's Adam, unchanged) and
`adapg` (ADPO's update, our provisional reading, papers/seed_generative.md G7.2).

Each entry is `build(params, cfg) -> torch.optim.Optimizer`; a recipe names one in its
`training["optimiser"]` (default adam)."""

from __future__ import annotations

import torch

from policylab.algebra.options import check_range
from policylab.registry import Registry

optimisers: Registry = Registry("optimiser")


class AdaPG(torch.optim.Optimizer):
    """ADPO's optimiser, provisional (G7.2; Jiang & Yang, arXiv:2505.08376 — the update is
    our reading of "interpolates between Adam and RMSProp through λ"):

        m_i = β1·m_{i−1} + (1 − β1)·g_i,  v_i = β2·v_{i−1} + (1 − β2)·g_i²
        d_i = λ·m̂_i + (1 − λ)·g_i,  θ_i = θ_{i−1} − η·(d_i/(√v̂_i + ε) + wd·θ_{i−1})

    with bias corrections m̂_i = m_i/(1 − β1^i), v̂_i = v_i/(1 − β2^i). λ = 1 is Adam(W),
    λ = 0 bias-corrected RMSProp (test O1)."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        lam: float = 0.5,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        check_range("adapg", "lam", lam, low=0.0, high=1.0)
        check_range("adapg", "lr", lr, low=0.0, finite=True)
        defaults = {"lr": lr, "lam": lam, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g, state = p.grad, self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["step"] += 1
                i = state["step"]
                state["m"].mul_(beta1).add_(g, alpha=1 - beta1)
                state["v"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                m_hat = state["m"] / (1 - beta1**i)
                v_hat = state["v"] / (1 - beta2**i)
                direction = group["lam"] * m_hat + (1 - group["lam"]) * g
                update = direction / (v_hat.sqrt() + group["eps"]) + group["weight_decay"] * p
                p.add_(update, alpha=-group["lr"])
        return loss


@optimisers.register("adam")
def adam(params, cfg) -> torch.optim.Optimizer:
    """The control trainer's Adam: lr = cfg.lr, ε = 1e-5 [code cleanrl ppo_continuous_action]."""
    return torch.optim.Adam(params, lr=cfg.lr, eps=1e-5, foreach=True)


@optimisers.register("adapg")
def adapg(params, cfg) -> torch.optim.Optimizer:
    """AdaPG with λ = cfg.adapg_lam and the trainer Adam's ε = 1e-5 (so λ = 1 is `adam`)."""
    return AdaPG(params, lr=cfg.lr, lam=cfg.adapg_lam, eps=1e-5)


def optimiser_of(algo: str) -> str:
    """The optimiser a recipe names in its training table (`optimiser`; default adam)."""
    from policylab import recipes

    training = recipes.get(algo).training
    return training["optimiser"].value if "optimiser" in training else "adam"
