"""CAPO's token mask: predict each token's effect on the objective and the policy, drop outliers.

Curvature-Aware Policy Optimization (Melo, Abate, Gal, arXiv 2510.00819 §4–5; spec
papers/seed_llm_algorithms.md §14; code luckeciano/stable-pg-llm `grpo_entropy_trainer.py`,
`sparse_optim_models/sparse_adam_model.py`). Only the LM head W ∈ R^{V×d} is modelled. For a
token with final hidden state h [d], top-K vocabulary ids U, renormalised top-K softmax π [K]
and sampled-token one-hot e_a [K] (all zero when the token is outside U), v = e_a − π:

    g = A·v ⊗ h                                 token gradient on the K active head rows [K, d]
    G = Adam model of g (or g itself for sgd)   the step direction the optimiser would take
    u = G h,  u_j = G_j·h                       logit change per unit learning rate [K]
    m_H = η⟨g, G⟩ + ½η²A[(vᵀu)² − uᵀFu]        predicted change of the surrogate A·ratio
    m_F = ½η²(vᵀu)²                             predicted policy shift (sampled-action Fisher)
    uᵀFu = Σ_j π_j u_j² − (Σ_j π_j u_j)²,       F = diag(π) − ππᵀ

A token is kept iff −τ_H < m_H < τ_H and m_F < τ_F (`symmetric`), or 0 ≤ m_H < τ_H and
m_F < τ_F; a τ of 0 switches its bound off [code `_compute_*_token_mask`]. After masking,
the kept tokens' gradients feed the Adam model (`CurvatureState.update`).

Reading notes (ours). m_H is the second-order Taylor expansion, in η, of A·(π_a'/π_a − 1),
the change of the ratio surrogate, not of A·log π_a (same first order, the (vᵀu)² term comes
from the ratio). m_F is the single-sample (empirical) Fisher form of the code's `kl_term`: its
expectation over a ~ π, for a fixed step, is ½η²uᵀFu ≈ KL(π ‖ π'). With the Adam model and
a non-empty store, a token with A = 0 has g = 0 and m_H = 0 but m_F can be > 0 (the stored
momentum alone moves the logits); we keep the code's formula.

Entry point for the trainer: `capo_mask(hidden, logits, actions, advantages, lr, state,
options)`; the pieces (`topk_policy`, `token_gradients`, `predicted_changes`, `capo_terms`,
`CurvatureState`) are public for tests and other uses.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from policylab.algebra.options import check_choice, check_range, option
from policylab.algebra.precision import at_least_float32


@dataclass(frozen=True)
class CapoOptions:
    tau_fisher: float = option(
        1e-4, "τ_F: keep a token iff m_F < τ_F; 0 switches the bound off (spec §14 CAPO, code)"
    )
    tau_hessian: float = option(
        1e-2, "τ_H: keep a token iff |m_H| < τ_H (or 0 ≤ m_H < τ_H); 0 switches the bound off"
    )
    symmetric: bool = option(
        True, "two-sided bound −τ_H < m_H < τ_H (code hessian_symmetric_clipping); else 0 ≤ m_H"
    )
    optimizer_model: str = option(
        "adam", "step model: 'adam' (sparse Adam moments per vocab row) or 'sgd' (G = g)"
    )
    adam_beta1: float = option(0.9, "β1 of the Adam model (HF trainer default; ours)")
    adam_beta2: float = option(0.999, "β2 of the Adam model (HF trainer default; ours)")
    adam_eps: float = option(1e-8, "ε of the Adam model, added to √ŝ (HF trainer default; ours)")
    top_k: int = option(50, "K: vocabulary ids modelled per token (HF generation top_k default)")
    chunk_tokens: int = option(256, "tokens per chunk when forming [chunk, K, d] gradients")

    def __post_init__(self) -> None:
        owner = "capo"
        check_range(owner, "tau_fisher", self.tau_fisher, low=0.0)
        check_range(owner, "tau_hessian", self.tau_hessian, low=0.0)
        if not isinstance(self.symmetric, bool):
            raise ValueError(f"{owner}.symmetric must be True or False, got {self.symmetric!r}")
        check_choice(owner, "optimizer_model", self.optimizer_model, ("adam", "sgd"))
        for name in ("adam_beta1", "adam_beta2"):
            value = getattr(self, name)
            check_range(owner, name, value, low=0.0, high=1.0)
            if value == 1.0:
                raise ValueError(f"{owner}.{name} = 1.0 is out of range; it must be < 1")
        check_range(owner, "adam_eps", self.adam_eps, low=0.0, low_open=True)
        for name in ("top_k", "chunk_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{owner}.{name} must be an integer >= 1, got {value!r}")


class CurvatureState:
    """CAPO's sparse Adam model of the optimiser: moments M_u, S_u ∈ R^d per vocab row u, and t.

    Kept apart from the real optimiser [spec §14; code SparseAdamModel]. Rows are stored
    densely, sorted by vocab id: `ids` [R] long, `M`, `S` [R, d] fp32, so memory grows with the
    rows ever touched, not with V. Tensors follow the device of the gradients they meet.
    """

    def __init__(self, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.ids = torch.zeros(0, dtype=torch.long)
        self.M = torch.zeros(0, 0)
        self.S = torch.zeros(0, 0)
        self.t = 0

    @classmethod
    def from_options(cls, options: CapoOptions) -> CurvatureState:
        return cls(options.adam_beta1, options.adam_beta2, options.adam_eps)

    def __len__(self) -> int:
        return int(self.ids.numel())

    @torch.no_grad()
    def effective(self, ids: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Adam-shaped step G [N, K, d] for token gradients g [N, K, d] on rows ids [N, K].

        m' = β1 M_u + (1−β1) g_j, s' = β2 S_u + (1−β2) g_j², G_j = m̂ / (√ŝ + ε) with
        m̂ = m'/(1−β1^{t+1}), ŝ = s'/(1−β2^{t+1}). Empty store → G = g; a row missing from a
        non-empty store has M = S = 0 [code batch_compute_effective_token_gradients].
        Reads the state, never changes it.
        """
        if len(self) == 0:
            return g
        self._check_width(g.shape[-1])
        self._to(g.device)
        M, S = self._gather(ids.to(g.device))
        M, S = M.to(g.dtype), S.to(g.dtype)
        m = self.beta1 * M + (1.0 - self.beta1) * g
        s = self.beta2 * S + (1.0 - self.beta2) * g * g
        m_hat = m / (1.0 - self.beta1 ** (self.t + 1))
        s_hat = s / (1.0 - self.beta2 ** (self.t + 1))
        return m_hat / (s_hat.sqrt() + self.eps)

    @torch.no_grad()
    def update(self, ids: torch.Tensor, g: torch.Tensor, accepted: torch.Tensor) -> None:
        """Feed the accepted tokens' gradients into the moments (ids [N, K], g [N, K, d],
        accepted [N] bool): ḡ_u = mean of the g rows with id u, then `update_rows`."""
        d = g.shape[-1]
        rows, inverse = torch.unique(ids[accepted].reshape(-1), return_inverse=True)
        sums = g.new_zeros(rows.numel(), d).index_add_(0, inverse, g[accepted].reshape(-1, d))
        counts = torch.bincount(inverse, minlength=rows.numel()).to(g)
        self.update_rows(rows, sums / counts[:, None])

    @torch.no_grad()
    def update_rows(self, rows: torch.Tensor, g_mean: torch.Tensor) -> None:
        """M_u ← β1 M_u + (1−β1) ḡ_u, S_u ← β2 S_u + (1−β2) ḡ_u², t ← t+1, for distinct rows
        [U] long and their mean gradients g_mean [U, d] [code update_effective_gradient_moments].

        With no rows (nothing accepted) nothing changes, t included (ours; the code counts
        such a step, which shifts later bias corrections slightly).
        """
        if rows.numel() == 0:
            return
        d = g_mean.shape[-1]
        if len(self) == 0:
            self.ids = self.ids.to(rows.device)
            self.M = torch.zeros(0, d, device=rows.device)
            self.S = torch.zeros(0, d, device=rows.device)
        self._check_width(d)
        self._to(rows.device)
        merged = torch.unique(torch.cat([self.ids, rows]))  # sorted
        M = self.M.new_zeros(merged.numel(), d)
        S = self.S.new_zeros(merged.numel(), d)
        old = torch.searchsorted(merged, self.ids)
        M[old], S[old] = self.M, self.S
        new = torch.searchsorted(merged, rows)
        gm = g_mean.to(M)
        M[new] = self.beta1 * M[new] + (1.0 - self.beta1) * gm
        S[new] = self.beta2 * S[new] + (1.0 - self.beta2) * gm * gm
        self.ids, self.M, self.S = merged, M, S
        self.t += 1

    def state_dict(self) -> dict[str, Any]:
        return {"ids": self.ids.cpu(), "M": self.M.cpu(), "S": self.S.cpu(), "t": self.t}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ids, M, S = state["ids"], state["M"], state["S"]
        if not (ids.ndim == 1 and M.shape == S.shape and M.shape[:1] == ids.shape):
            raise ValueError(
                f"CurvatureState: inconsistent checkpoint shapes ids {tuple(ids.shape)}, "
                f"M {tuple(M.shape)}, S {tuple(S.shape)}; expected [R], [R, d], [R, d]"
            )
        self.ids, self.M, self.S = ids.long(), M.float(), S.float()
        self.t = int(state["t"])

    def _gather(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stored moments for ids [...]: [..., d] each, zeros where the row is not stored."""
        pos = torch.searchsorted(self.ids, ids).clamp(max=len(self) - 1)
        found = (self.ids[pos] == ids)[..., None]
        return self.M[pos] * found, self.S[pos] * found

    def _check_width(self, d: int) -> None:
        if self.M.shape[1] != d:
            raise ValueError(
                f"CurvatureState holds moments of width d = {self.M.shape[1]}, got gradients of "
                f"width {d}; one state serves one model (hidden size)"
            )

    def _to(self, device: torch.device) -> None:
        if self.ids.device != device:
            self.ids, self.M, self.S = self.ids.to(device), self.M.to(device), self.S.to(device)


@dataclass
class CapoMask:
    accepted: torch.Tensor  # [N] bool
    m_H: torch.Tensor  # [N]
    m_F: torch.Tensor  # [N]
    metrics: dict[str, float] = field(default_factory=dict)


def topk_policy(
    logits: torch.Tensor, actions: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-K ids [N, K], renormalised softmax over them [N, K] and the sampled token's one-hot
    inside them [N, K] (all zero when outside) for logits [N, V], actions [N]; K = min(k, V)
    [code _get_per_token_logps]. Pass logits already divided by the sampling temperature."""
    values, ids = logits.topk(min(k, logits.shape[-1]), dim=-1)
    probs = torch.softmax(values, dim=-1)
    onehot = (ids == actions[:, None]).to(probs.dtype)
    return ids, probs, onehot


def token_gradients(
    hidden: torch.Tensor, probs: torch.Tensor, onehot: torch.Tensor, advantages: torch.Tensor
) -> torch.Tensor:
    """g = A·(e_a − π) ⊗ h [N, K, d]: gradient of A·log π_a w.r.t. the K active head rows
    (hidden [N, d], probs, onehot [N, K], advantages [N]) [code _compute_token_level_gradients]."""
    v = onehot - probs
    return advantages[:, None, None] * v[:, :, None] * hidden[:, None, :]


def predicted_changes(
    g: torch.Tensor,
    G: torch.Tensor,
    hidden: torch.Tensor,
    probs: torch.Tensor,
    onehot: torch.Tensor,
    advantages: torch.Tensor,
    lr: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """m_H, m_F [N] of the head step Δψ = η·G (g, G [N, K, d]; hidden [N, d]; probs, onehot
    [N, K]; advantages [N]; η = lr):

        u = G h,  m_H = η⟨g, G⟩ + ½η²A[(vᵀu)² − uᵀFu],  m_F = ½η²(vᵀu)²

    [paper m_H = g̃ᵀΔψ + ½ΔψᵀH̃Δψ, m_F = ½ΔψᵀF̃Δψ; code full_update_term, kl_term].
    """
    v = onehot - probs
    u = torch.einsum("nkd,nd->nk", G, hidden)
    vu = (v * u).sum(-1)
    uFu = (probs * u * u).sum(-1) - (probs * u).sum(-1) ** 2
    gG = (g * G).sum((-2, -1))
    m_H = lr * gG + 0.5 * lr**2 * advantages * (vu * vu - uFu)
    m_F = 0.5 * lr**2 * vu * vu
    return m_H, m_F


@torch.no_grad()
def capo_terms(
    hidden: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_probs: torch.Tensor,
    action_onehot: torch.Tensor,
    advantages: torch.Tensor,
    lr: float,
    state: CurvatureState | None,
    options: CapoOptions,
) -> tuple[torch.Tensor, torch.Tensor]:
    """m_H, m_F [N] per token, chunk by chunk (`options.chunk_tokens` tokens, so [chunk, K, d]
    gradients at most). hidden [N, d]; topk_ids, topk_probs, action_onehot [N, K]; advantages
    [N]. `state` is read (Adam model), never changed; it may be None for `sgd`."""
    h, probs, onehot, A = _as_float(hidden, topk_probs, action_onehot, advantages)
    m_H, m_F = h.new_zeros(len(h)), h.new_zeros(len(h))
    for c in _chunks(len(h), options.chunk_tokens):
        g = token_gradients(h[c], probs[c], onehot[c], A[c])
        G = _step_direction(topk_ids[c], g, state, options)
        m_H[c], m_F[c] = predicted_changes(g, G, h[c], probs[c], onehot[c], A[c], lr)
    return m_H, m_F


def accept(m_H: torch.Tensor, m_F: torch.Tensor, options: CapoOptions) -> torch.Tensor:
    """Token kept [N] bool: both bounds of the module docstring (τ = 0: bound off)."""
    return _fisher_ok(m_F, options) & _hessian_ok(m_H, options)


@torch.no_grad()
def capo_mask(
    hidden: torch.Tensor,
    logits: torch.Tensor,
    actions: torch.Tensor,
    advantages: torch.Tensor,
    lr: float,
    state: CurvatureState | None,
    options: CapoOptions,
    *,
    update_state: bool = True,
) -> CapoMask:
    """CAPO's token mask on the valid tokens of one micro-batch, then the Adam-model update.

    hidden [N, d]: final hidden states (the LM head's input), detached; logits [N, V]:
    detached, already divided by the temperature; actions [N] long: sampled token ids;
    advantages [N]; lr: η, the scheduler's current learning rate. Computes in fp32 (or the
    inputs' wider float). With `update_state` and the Adam model, the accepted tokens'
    per-row mean gradients update `state` [code _capo_only_update_adam_moments].

    Metrics: `capo/reject_frac` (any bound), `capo/reject_frac_fisher`,
    `capo/reject_frac_hessian` (each bound on its own), `capo/mH_mean|min|max`,
    `capo/mF_mean|max`, `capo/accepted_tokens`, `capo/active_vocab_rows` (distinct vocab rows
    in the accepted tokens' top-K sets, i.e. rows this call's update touches; ours),
    `capo/action_outside_topk_frac`, `perf/capo_s`.
    """
    start = time.perf_counter()
    if options.optimizer_model == "adam" and state is None:
        raise ValueError("capo: optimizer_model 'adam' needs a CurvatureState, got None")
    ids, probs, onehot = topk_policy(_as_float(logits)[0], actions, options.top_k)
    m_H, m_F = capo_terms(hidden, ids, probs, onehot, advantages, lr, state, options)
    fisher_ok, hessian_ok = _fisher_ok(m_F, options), _hessian_ok(m_H, options)
    accepted = fisher_ok & hessian_ok
    rows, inverse = torch.unique(ids[accepted].reshape(-1), return_inverse=True)
    if update_state and state is not None and options.optimizer_model == "adam":
        state.update_rows(
            rows, _mean_gradients(hidden, probs, onehot, advantages, accepted, inverse)
        )
    metrics = {
        "capo/reject_frac": _frac(~accepted),
        "capo/reject_frac_fisher": _frac(~fisher_ok),
        "capo/reject_frac_hessian": _frac(~hessian_ok),
        "capo/mH_mean": _stat(m_H, torch.mean),
        "capo/mH_min": _stat(m_H, torch.min),
        "capo/mH_max": _stat(m_H, torch.max),
        "capo/mF_mean": _stat(m_F, torch.mean),
        "capo/mF_max": _stat(m_F, torch.max),
        "capo/accepted_tokens": float(accepted.sum()),
        "capo/active_vocab_rows": float(rows.numel()),
        "capo/action_outside_topk_frac": _frac(onehot.sum(-1) == 0),
    }
    metrics["perf/capo_s"] = time.perf_counter() - start
    return CapoMask(accepted=accepted, m_H=m_H, m_F=m_F, metrics=metrics)


def _mean_gradients(hidden, probs, onehot, advantages, accepted, inverse) -> torch.Tensor:
    """ḡ_u [U, d] over the accepted tokens, where `inverse` [n·K] maps each (token, j) to its
    distinct row u. Σ g_{n,j} = Σ A_n v_{n,j} h_n is one sparse [U, n] × [n, d] product, so the
    [n, K, d] gradients are never formed."""
    h, probs, onehot, A = (x[accepted] for x in _as_float(hidden, probs, onehot, advantages))
    weights = (A[:, None] * (onehot - probs)).reshape(-1)  # A_n v_{n,j}
    tokens = torch.arange(len(h), device=h.device).repeat_interleave(probs.shape[-1])
    rows = int(inverse.max()) + 1 if inverse.numel() else 0
    scatter = torch.sparse_coo_tensor(
        torch.stack([inverse, tokens]), weights, (rows, len(h)), check_invariants=False
    )
    counts = torch.bincount(inverse, minlength=rows).to(h)
    return torch.sparse.mm(scatter, h) / counts[:, None]


def _step_direction(ids, g, state, options) -> torch.Tensor:
    if options.optimizer_model == "sgd":
        return g
    return state.effective(ids, g)


def _fisher_ok(m_F: torch.Tensor, options: CapoOptions) -> torch.Tensor:
    if options.tau_fisher == 0.0:
        return torch.ones_like(m_F, dtype=torch.bool)
    return m_F < options.tau_fisher


def _hessian_ok(m_H: torch.Tensor, options: CapoOptions) -> torch.Tensor:
    tau = options.tau_hessian
    if tau == 0.0:
        return torch.ones_like(m_H, dtype=torch.bool)
    low = (m_H > -tau) if options.symmetric else (m_H >= 0.0)
    return low & (m_H < tau)


def _as_float(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """fp32, or float64 when given float64 (the tests' brute-force checks)."""
    return tuple(at_least_float32(x) for x in xs)


def _chunks(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def _frac(x: torch.Tensor) -> float:
    return float(x.float().mean()) if x.numel() else 0.0


def _stat(x: torch.Tensor, fn) -> float:
    return float(fn(x)) if x.numel() else 0.0
