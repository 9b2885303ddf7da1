"""Parameterised rewards r_U(ŷ, y) = −(ŷ − y)ᵀU(ŷ − y) (papers/seed_generative.md G6.1): the
outer variable of NLL-to-PO's bilevel problem (workflows/bilevel.py). Benechehab et al.,
arXiv:2510.07624; code abenechehab/nll_to_po: training/reward.py (Mahalanobis,
OneHotMahalanobis), models/reward_network.py (RewardMLPMahalanobis, …Diag).

U is symmetric positive definite by construction [ours; the code zeroes off-diagonal
gradients of a free matrix with a hook]:
- `full`: U = L·Lᵀ, L lower-triangular with a softplus diagonal;
- `diag`: U = diag(softplus(θ));
- `iso`:  U = softplus(θ_u)·I [code reward_network].
Each starts at U = init·I."""

from __future__ import annotations

import math

import torch
from torch import nn

from policylab.algebra.options import check_choice, check_range

Tensor = torch.Tensor
KINDS = ("full", "diag", "iso")


def _inv_softplus(v: float) -> float:
    return v + math.log(-math.expm1(-v))


class MahalanobisReward(nn.Module):
    """r_U(ŷ [..., D], y [..., D]) -> [...]."""

    def __init__(self, dim: int, kind: str = "full", init: float = 1.0) -> None:
        super().__init__()
        check_choice("mahalanobis_reward", "kind", kind, KINDS)
        check_range("mahalanobis_reward", "dim", dim, low=1)
        check_range("mahalanobis_reward", "init", init, low=0.0, low_open=True, finite=True)
        self.dim, self.kind = dim, kind
        if kind == "full":
            self.raw_diag = nn.Parameter(torch.full((dim,), _inv_softplus(math.sqrt(init))))
            self.lower = nn.Parameter(torch.zeros(dim * (dim - 1) // 2))
        elif kind == "diag":
            self.raw_diag = nn.Parameter(torch.full((dim,), _inv_softplus(init)))
        else:
            self.raw_diag = nn.Parameter(torch.tensor(_inv_softplus(init)))

    def matrix(self) -> Tensor:
        """U: [D, D], symmetric positive definite."""
        soft = nn.functional.softplus(self.raw_diag)
        if self.kind == "iso":
            return soft * torch.eye(self.dim)
        if self.kind == "diag":
            return torch.diag(soft)
        rows, cols = torch.tril_indices(self.dim, self.dim, offset=-1)
        L = torch.diag(soft).index_put((rows, cols), self.lower)
        return L @ L.T

    def set_matrix(self, U: Tensor) -> None:
        """Set the parameters so that `matrix()` returns U (projected on the kind)."""
        with torch.no_grad():
            if self.kind == "iso":
                self.raw_diag.copy_(_inv_softplus_t(torch.diagonal(U).mean()))
            elif self.kind == "diag":
                self.raw_diag.copy_(_inv_softplus_t(torch.diagonal(U)))
            else:
                L = torch.linalg.cholesky(U)
                self.raw_diag.copy_(_inv_softplus_t(torch.diagonal(L)))
                rows, cols = torch.tril_indices(self.dim, self.dim, offset=-1)
                self.lower.copy_(L[rows, cols])

    def forward(self, y_hat: Tensor, y: Tensor) -> Tensor:
        d = y_hat - y
        return -torch.einsum("...i,ij,...j->...", d, self.matrix(), d)


def _inv_softplus_t(v: Tensor) -> Tensor:
    return v + torch.log(-torch.expm1(-v))


class OneHotMahalanobis(nn.Module):
    """Classification [code OneHotMahalanobis]: ŷ, y class indices [...], compared as one-hot
    vectors, r = −(e_ŷ − e_y)ᵀU(e_ŷ − e_y) = −(U_ŷŷ + U_yy − 2U_ŷy); 0 when ŷ = y."""

    def __init__(self, num_classes: int, kind: str = "diag", init: float = 1.0) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.inner = MahalanobisReward(num_classes, kind, init)

    def matrix(self) -> Tensor:
        return self.inner.matrix()

    def forward(self, y_hat: Tensor, y: Tensor) -> Tensor:
        U = self.matrix()
        return -(U[y_hat, y_hat] + U[y, y] - 2 * U[y_hat, y])
