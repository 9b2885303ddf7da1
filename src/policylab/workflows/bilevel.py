"""NLL-to-PO's bilevel problem (papers/seed_generative.md G6.1): the reward r_U is the outer
variable, the policy trained by entropy-regularised PG under r_U the inner one, and the outer
objective the data log-likelihood of the inner solution,

    min_U  L_out(θ*(U)) = −mean log π_{θ*(U)}(y | x),   θ*(U) = argmin_θ L_in(θ, U).

Two solvers:
- `heuristic_reward` — U from the residual covariance C of a mean fit, U = (λ/2)·C⁻¹
  (diag: (λ/2)/diag C; iso: λn/(2 tr C)). Our reading of the paper's "heuristic" solver:
  it is U* of the Gaussian analysis with S estimated by C.
- `implicit_outer_step` — one outer step of the code's run_bilevel_optimization_implicit
  (abenechehab/nll_to_po bilevel/torchopt.py at 1232a6f), without torchopt: a fresh policy,
  `n_inner` Adam steps on L_in with gradients clamped to ±1, then the implicit-function
  hypergradient on ∇_θ L_in(θ*, U) = 0:

      dL_out/dU = −(∂²L_in/∂U∂θ)ᵀ v,   H v = ∇_θ L_out,   H = ∂²L_in/∂θ²,

  v by CG on the normal equations H²v = H∇_θL_out (`cg_maxiter` 1 [code]); H·w by
  torch.func.jvp of ∇_θ L_in, the cross term by torch.func.vjp. Then an outer Adam step on
  U's parameters with the hypergradient clamped to ±10 [code]. L_in is `pg_loss` with the
  reward transform `loo` [ours; `none` is the code's] in its ratio form (same gradient,
  unbiased Hessian [ours], algebra/nll_po.py), over M samples drawn once at θ*, so every
  derivative sees the same ŷ."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad, jvp, vjp

from policylab.algebra.nll_po import pg_loss
from policylab.algebra.options import check_choice, check_range, option
from policylab.policies.likelihood import draw

Tensor = torch.Tensor
Params = dict[str, Tensor]
SOLVERS = ("heuristic", "implicit")


@dataclass
class ImplicitOptions:
    n_inner: int = option(5, "inner Adam steps from a fresh policy per outer step")
    inner_lr: float = option(1e-3, "inner Adam learning rate")
    outer_lr: float = option(1e-3, "outer Adam learning rate on U's parameters")
    lam: float = option(0.01, "λ, entropy weight of the inner PG loss")
    samples: int = option(5, "M samples ŷ per input")
    cg_maxiter: int = option(1, "CG iterations of the normal-equation solve")
    inner_clip: float = option(1.0, "inner gradients clamped to ±inner_clip")
    outer_clip: float = option(10.0, "hypergradient clamped to ±outer_clip")
    transform: str = option("loo", "reward transform of the inner loss (none: the code's)")

    def __post_init__(self) -> None:
        for name in ("n_inner", "samples", "cg_maxiter"):
            check_range("bilevel", name, getattr(self, name), low=1)
        for name in ("inner_lr", "outer_lr", "lam"):
            check_range("bilevel", name, getattr(self, name), low=0.0, low_open=True, finite=True)
        for name in ("inner_clip", "outer_clip"):  # inf: no clamp
            check_range("bilevel", name, getattr(self, name), low=0.0, low_open=True)
        check_choice("bilevel", "transform", self.transform, ("none", "loo"))
        if self.transform == "loo":
            check_range("bilevel", "samples", self.samples, low=2)


# ---- heuristic ------------------------------------------------------------------------------
def heuristic_reward(residuals: Tensor, lam: float, kind: str = "full") -> Tensor:
    """U from residuals [N, D] of a mean fit: (λ/2)·C⁻¹, C their covariance (with 1e-6·I
    added [ours]); `diag` uses diag C, `iso` gives λD/(2 tr C)·I."""
    check_choice("bilevel", "kind", kind, ("full", "diag", "iso"))
    check_range("bilevel", "lam", lam, low=0.0, low_open=True)
    if residuals.ndim != 2 or residuals.shape[0] < 2:
        raise ValueError(f"bilevel.residuals must be [N >= 2, D], got {tuple(residuals.shape)}")
    D = residuals.shape[1]
    C = torch.cov(residuals.T, correction=0).reshape(D, D) + 1e-6 * torch.eye(D)
    if kind == "iso":
        return lam * D / (2 * torch.trace(C)) * torch.eye(D)
    if kind == "diag":
        return torch.diag(0.5 * lam / torch.diagonal(C))
    return 0.5 * lam * torch.linalg.inv(C)


# ---- implicit -------------------------------------------------------------------------------
def inner_loss_fn(
    policy: nn.Module, reward: nn.Module, lam: float, transform: str
) -> Callable[..., Tensor]:
    """L_in(θ, φ; x, y, ŷ) = pg_loss (ratio form) as a pure function."""

    def loss(params: Params, rparams: Params, x: Tensor, y: Tensor, y_hat: Tensor) -> Tensor:
        dist = functional_call(policy, params, (x,))
        rewards = functional_call(reward, rparams, (y_hat, y))
        return pg_loss(
            dist.log_prob(y_hat), rewards, dist.entropy(), lam=lam, transform=transform, ratio=True
        )

    return loss


def nll(policy: nn.Module, params: Params, x: Tensor, y: Tensor) -> Tensor:
    """L_out = −mean_b log π_θ(y_b | x_b)."""
    return -functional_call(policy, params, (x,)).log_prob(y).mean()


def train_inner(
    policy: nn.Module,
    reward: nn.Module,
    x: Tensor,
    y: Tensor,
    options: ImplicitOptions,
    generator: torch.Generator | None,
) -> list[float]:
    """`n_inner` Adam steps of the PG loss on `policy` in place, gradients clamped ±clip."""
    opt = torch.optim.Adam(policy.parameters(), lr=options.inner_lr)
    losses = []
    for _ in range(options.n_inner):
        dist = policy(x)
        y_hat = draw(dist, options.samples, generator)
        with torch.no_grad():
            rewards = reward(y_hat, y)
        logp, entropy = dist.log_prob(y_hat), dist.entropy()
        loss = pg_loss(logp, rewards, entropy, lam=options.lam, transform=options.transform)
        opt.zero_grad()
        loss.backward()
        for p in policy.parameters():
            p.grad.clamp_(-options.inner_clip, options.inner_clip)
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def _dot(a: Params, b: Params) -> Tensor:
    return sum((a[k] * b[k]).sum() for k in a)


def _axpy(alpha, a: Params, b: Params) -> Params:
    return {k: alpha * a[k] + b[k] for k in a}


def cg_normal(hvp: Callable[[Params], Params], rhs: Params, maxiter: int) -> Params:
    """Solve H v = rhs (H symmetric, possibly indefinite) by CG on H²v = H·rhs from v = 0."""
    b = hvp(rhs)
    v = {k: torch.zeros_like(t) for k, t in rhs.items()}
    r = dict(b)
    p = dict(b)
    rr = _dot(r, r)
    for _ in range(maxiter):
        Ap = hvp(hvp(p))
        pAp = _dot(p, Ap)
        if float(pAp) <= 1e-30:
            break
        alpha = rr / pAp
        v = _axpy(alpha, p, v)
        r = _axpy(-alpha, Ap, r)
        rr_new = _dot(r, r)
        p = _axpy(rr_new / rr, p, r)
        rr = rr_new
    return v


def hypergradient(
    policy: nn.Module,
    reward: nn.Module,
    x: Tensor,
    y: Tensor,
    options: ImplicitOptions,
    generator: torch.Generator | None,
) -> tuple[Params, float]:
    """dL_out/dφ at the current (trained) policy by the implicit function theorem; also
    returns L_out."""
    params = {k: p.detach() for k, p in policy.named_parameters()}
    rparams = {k: p.detach() for k, p in reward.named_parameters()}
    with torch.no_grad():
        y_hat = draw(policy(x), options.samples, generator)
    inner = inner_loss_fn(policy, reward, options.lam, options.transform)
    F = grad(inner, argnums=0)  # ∇_θ L_in(θ, φ)

    def hvp(w: Params) -> Params:
        return jvp(lambda p: F(p, rparams, x, y, y_hat), (params,), (w,))[1]

    out, g_out = torch.func.grad_and_value(lambda p: nll(policy, p, x, y))(params)[::-1]
    v = cg_normal(hvp, g_out, options.cg_maxiter)
    _, pullback = vjp(lambda rp: F(params, rp, x, y, y_hat), rparams)
    (cross,) = pullback(v)
    return {k: -t for k, t in cross.items()}, float(out)


def implicit_outer_step(
    make_policy: Callable[[], nn.Module],
    reward: nn.Module,
    x: Tensor,
    y: Tensor,
    options: ImplicitOptions,
    generator: torch.Generator | None,
    outer_lr: float | None = None,
) -> dict[str, float]:
    """One outer step: a fresh policy [code: re-initialised every outer epoch], its inner
    training, the hypergradient, then one step of a fresh Adam on the reward's parameters
    (lr `outer_lr`, default options.outer_lr) [code: the outer Adam is re-created every
    outer epoch, so each step is Adam's first, lr·g/(|g| + ε) per coordinate]."""
    policy = make_policy()
    inner_losses = train_inner(policy, reward, x, y, options, generator)
    hyper, out = hypergradient(policy, reward, x, y, options, generator)
    opt = torch.optim.Adam(reward.parameters(), lr=outer_lr or options.outer_lr)
    for name, p in reward.named_parameters():
        p.grad = hyper[name].clamp(-options.outer_clip, options.outer_clip)
    opt.step()
    reward.zero_grad(set_to_none=True)
    return {"bilevel/outer_nll": out, "bilevel/inner_loss": inner_losses[-1]}


def run_implicit(
    make_policy: Callable[[], nn.Module],
    reward: nn.Module,
    x: Tensor,
    y: Tensor,
    options: ImplicitOptions,
    outer_steps: int,
    generator: torch.Generator | None,
    patience: int = 0,
) -> list[dict[str, float]]:
    """`outer_steps` outer steps from the reward's current U; with `patience` > 0 the outer
    learning rate is multiplied by 0.75 (down to 1e-6) after `patience` steps without a
    better outer NLL [code: outer_scheduler_patience, scheduler_factor 0.75,
    scheduler_min_lr 1e-6; the code watches the validation NLL]."""
    check_range("bilevel", "outer_steps", outer_steps, low=1)
    check_range("bilevel", "patience", patience, low=0)
    lr, best, waited, history = options.outer_lr, float("inf"), 0, []
    for _ in range(outer_steps):
        metrics = implicit_outer_step(make_policy, reward, x, y, options, generator, lr)
        metrics["bilevel/outer_lr"] = lr
        history.append(metrics)
        if patience:
            lr, best, waited = plateau(metrics["bilevel/outer_nll"], lr, best, waited, patience)
    return history


def plateau(loss: float, lr: float, best: float, waited: int, patience: int):
    """The code's plateau schedule: (lr, best, waited) after one outer loss."""
    if loss < best:
        return lr, loss, 0
    waited += 1
    if waited >= patience:
        return max(lr * 0.75, 1e-6), best, 0
    return lr, best, waited
