"""Combining K gradients of one parameter vector into one update (CG2A, our reading).

CG2A (Liu et al., ICCV 2023, arXiv:2308.01194) trains a visual agent on K augmentations at
once: g_k = ∇_θ L(τ_k(o)) on the same batch, then (i) a *gradient agreement solver*
balances their magnitudes and (ii) a *soft gradient surgery* partly removes conflicting
components. Only those two names come from the paper (abstract); every formula below is
our reading (papers/seed_control_theory.md §10.1), hence the `_provisional` recipe.

- `equal_norm`: ĝ_k = g_k · (mean_j ‖g_j‖) / ‖g_k‖.
- `min_norm`: MGDA's min-norm point of the convex hull (Sener & Koltun 2018,
  arXiv:1810.04650, Alg. 2, Frank–Wolfe); ĝ_k = K·w_k·g_k so that mean_k ĝ_k = Σ_k w_k g_k.
- `soft_surgery`: for i, and j ≠ i in random order, if ĝ_i·g_j < 0:
  ĝ_i ← ĝ_i − κ·(ĝ_i·g_j / ‖g_j‖²)·g_j (κ = 1 is PCGrad, Yu et al. 2020, arXiv:2001.06782,
  Alg. 1, which projects the running ĝ_i against the *unmodified* g_j).

The registered combiners (`gradient_combiners`) map grads [K, P] → (update [P], metrics):
`mean` (Σ g_k / K: the naive K-pass combination, the gradient of the mean loss),
`equal_norm`, `min_norm`, `soft_surgery` and `cg2a_provisional` (solver, then soft surgery, then the
mean). All are pure: tensors in, tensors out; the random pair order takes a generator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.registry import Registry

TINY = 1e-12  # a gradient with a smaller norm counts as zero (left as it is)


@dataclass(frozen=True)
class CombineOptions:
    """Options of the combiners (each reads the ones it needs).

    kappa: surgery strength κ ∈ [0, 1]; 0.5 [ours] — "soft" is between no surgery (0) and
      PCGrad (1); the paper's value is unknown.
    solver: the agreement solver of `cg2a`, equal_norm or min_norm; equal_norm [ours] (the
      abstract names a magnitude balance; min_norm is the MGDA variant).
    min_norm_iters: Frank–Wolfe steps of `min_norm`; 50 [ours] (MGDA's code uses 250
      with a stopping tolerance; the Gram matrices here are K ≤ 8).
    """

    kappa: float = 0.5
    solver: str = "equal_norm"
    min_norm_iters: int = 50

    def __post_init__(self) -> None:
        if not 0.0 <= self.kappa <= 1.0:
            raise ValueError(f"gradient_combine kappa={self.kappa!r}; accepted: 0 <= kappa <= 1")
        if self.solver not in SOLVERS:
            raise ValueError(
                f"gradient_combine solver={self.solver!r}; accepted: {', '.join(SOLVERS)}"
            )
        if self.min_norm_iters < 1:
            raise ValueError(
                f"gradient_combine min_norm_iters={self.min_norm_iters!r}; accepted: >= 1"
            )


def _check(grads: torch.Tensor) -> None:
    if grads.dim() != 2 or grads.shape[0] < 1:
        raise ValueError(f"gradients must be [K, P] with K >= 1, got {tuple(grads.shape)}")


def equal_norm(grads: torch.Tensor) -> torch.Tensor:
    """grads [K, P] → [K, P], each row rescaled to the mean norm: ĝ_k = g_k·mean‖g‖/‖g_k‖.

    >>> equal_norm(torch.tensor([[1.0, 0.0], [-1.0, 1.0]]))  # T10.2
    ... # norms [1, 1.414214], mean 1.207107 → [[1.207107, 0], [-0.853553, 0.853553]]
    A zero row stays zero (its direction is undefined)."""
    _check(grads)
    norms = grads.norm(dim=1, keepdim=True)
    scale = torch.where(norms > TINY, norms.mean() / norms.clamp_min(TINY), 0.0)
    return grads * scale


def min_norm_weights(grads: torch.Tensor, iters: int = 50) -> torch.Tensor:
    """grads [K, P] → w [K] on the simplex minimising ‖Σ_k w_k g_k‖² (MGDA, Sener & Koltun
    2018, Alg. 2: Frank–Wolfe from uniform w, exact line search on the Gram matrix M = GGᵀ).
    For K = 2 this is the closed form w₁ = clip((g₂ − g₁)·g₂ / ‖g₁ − g₂‖², 0, 1)."""
    _check(grads)
    k = grads.shape[0]
    gram = grads @ grads.T
    w = torch.full((k,), 1.0 / k, dtype=grads.dtype, device=grads.device)
    for _ in range(iters):
        t = int(torch.argmin(gram @ w))  # the vertex the linearised objective prefers
        # line search on w ← (1 − γ)w + γ·e_t: ‖(1−γ)v + γ g_t‖², v = Σ w g
        vv, vt, tt = w @ gram @ w, gram[t] @ w, gram[t, t]
        denom = vv - 2 * vt + tt
        if denom <= TINY:
            break
        gamma = float(((vv - vt) / denom).clamp(0.0, 1.0))
        if gamma == 0.0:
            break
        w = (1 - gamma) * w
        w[t] += gamma
    return w


def min_norm(grads: torch.Tensor, iters: int = 50) -> torch.Tensor:
    """grads [K, P] → [K, P]: ĝ_k = K·w_k·g_k with w = `min_norm_weights`, so that
    mean_k ĝ_k is MGDA's min-norm common direction."""
    return grads * (grads.shape[0] * min_norm_weights(grads, iters)).unsqueeze(1)


def soft_surgery(
    grads: torch.Tensor, kappa: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """grads [K, P] → [K, P]: for each i, and each j ≠ i in a random order (PCGrad's
    shuffle; `generator` draws it, None = index order), if ĝ_i·g_j < 0 then
    ĝ_i ← ĝ_i − κ·(ĝ_i·g_j/‖g_j‖²)·g_j, against the unmodified g_j (PCGrad, Alg. 1).

    >>> soft_surgery(torch.tensor([[1.0, 0.0], [-1.0, 1.0]]), 1.0)  # T10.1
    ... # dot −1: g₁' = [1,0] + ½[−1,1] = [0.5, 0.5];  g₂' = [−1,1] + [1,0] = [0, 1]
    κ = 0 returns the input; κ = 1 is PCGrad."""
    _check(grads)
    k = grads.shape[0]
    sq = (grads * grads).sum(1)
    out = grads.clone()
    for i in range(k):
        order = torch.randperm(k, generator=generator) if generator is not None else range(k)
        for j in (int(j) for j in order):
            if j == i or sq[j] <= TINY * TINY:
                continue
            dot = out[i] @ grads[j]
            if dot < 0:
                out[i] = out[i] - kappa * (dot / sq[j]) * grads[j]
    return out


SOLVERS: dict[str, Callable[..., torch.Tensor]] = {
    "equal_norm": lambda g, o: equal_norm(g),
    "min_norm": lambda g, o: min_norm(g, o.min_norm_iters),
}


def conflict_metrics(grads: torch.Tensor) -> dict[str, float]:
    """The mechanism check of §10.2 for grads [K, P]: pairwise cosines (min, mean, the
    fraction < 0) and the norm ratio max‖g‖ / min‖g‖ (1 = equal magnitudes)."""
    _check(grads)
    norms = grads.norm(dim=1)
    out = {"combine/norm_ratio": float(norms.max() / norms.min().clamp_min(TINY))}
    k = grads.shape[0]
    if k > 1:
        unit = grads / norms.clamp_min(TINY).unsqueeze(1)
        i, j = torch.triu_indices(k, k, offset=1)
        cos = (unit[i] * unit[j]).sum(1)
        out["combine/cos_min"] = float(cos.min())
        out["combine/cos_mean"] = float(cos.mean())
        out["combine/conflict_frac"] = float((cos < 0).to(grads.dtype).mean())
    return out


Combiner = Callable[[torch.Tensor, CombineOptions, "torch.Generator | None"], torch.Tensor]
gradient_combiners: Registry[Combiner] = Registry("gradient combine")


@gradient_combiners.register("mean")
def combine_mean(grads, options, generator=None):
    """Σ_k g_k / K: the naive K-pass combination (= the gradient of the mean loss)."""
    return grads.mean(0)


@gradient_combiners.register("equal_norm")
def combine_equal_norm(grads, options, generator=None):
    """mean_k of the equal-norm ĝ_k (magnitude balance only)."""
    return equal_norm(grads).mean(0)


@gradient_combiners.register("min_norm")
def combine_min_norm(grads, options, generator=None):
    """MGDA's min-norm point Σ_k w_k g_k (Sener & Koltun 2018)."""
    return min_norm(grads, options.min_norm_iters).mean(0)


@gradient_combiners.register("soft_surgery")
def combine_soft_surgery(grads, options, generator=None):
    """mean_k of the soft-surgered g_k (κ = 1: PCGrad's update)."""
    return soft_surgery(grads, options.kappa, generator).mean(0)


@gradient_combiners.register("cg2a_provisional")
def combine_cg2a(grads, options, generator=None):
    """CG2A, our reading: agreement solver (equal_norm | min_norm), then soft surgery (κ),
    then the mean over the K augmentations (§10.1)."""
    balanced = SOLVERS[options.solver](grads, options)
    return soft_surgery(balanced, options.kappa, generator).mean(0)


def combine(
    name: str,
    grads: torch.Tensor,
    options: CombineOptions | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The registered combiner `name` applied to grads [K, P] → update [P]."""
    _check(grads)
    return gradient_combiners.get(name)(grads, options or CombineOptions(), generator)
