"""Compression of DiLoCoX pseudo-gradients (papers/seed_agents.md §A10 (b); provisional: the
mechanics are our reading of the paper's abstract, arXiv 2506.21263, not its body).

Each matrix M = Δ + e (pseudo-gradient plus this worker's error-feedback residual) is
factorised at rank r by one power iteration, PowerSGD-style (Vogels et al., arXiv 1905.13727):

    P = orth(M Q),  Q ← Mᵀ P,  Ĉ(M) = P Qᵀ     (Q warm-started from the previous round)

P and Q are quantised to int8 with one symmetric scale each (`quantize_int8`), and the
residual e ← M − deq(P) deq(Q)ᵀ is carried to the next round (error feedback). Vectors
(norm weights) travel exactly, in fp32. The rank of each matrix is the smallest whose
singular-value energy reaches τ (`adaptive_rank`), clipped to [2, 32] [ours].

The payload is one uint8 buffer per worker: per matrix P (m·r B), Q (n·r B) and the two
fp32 scales (8 B); then every vector in fp32 (`payload_bytes`). Workers exchange buffers by
all_gather (int8 sums would overflow) and average after dequantisation (`decode`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

INT8_MAX = 127
RANK_LIMITS = (2, 32)  # [ours] clip of the adaptive rank
SCALE_BYTES = 4  # one fp32 scale
FP32_BYTES = 4


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Per-tensor symmetric int8: scale s = max|x| / 127, q = round(x / s) ∈ [−127, 127];
    x ≈ q·s. An all-zero tensor gets s = 0 and q = 0."""
    peak = x.abs().max().item() if x.numel() else 0.0
    if peak == 0.0:
        return torch.zeros_like(x, dtype=torch.int8), 0.0
    scale = peak / INT8_MAX
    q = torch.round(x / scale).clamp_(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


def dequantize_int8(q: torch.Tensor, scale: float) -> torch.Tensor:
    """x̂ = q·s in fp32."""
    return q.to(torch.float32) * scale


def adaptive_rank(singular_values: torch.Tensor, energy: float, limits=RANK_LIMITS) -> int:
    """The smallest r with Σ_{i≤r} σ_i² / Σ σ_i² ≥ τ (`energy`), clipped to `limits` and to
    the number of singular values. σ (4, 2, 1, 1), τ 0.9: (0.7273, 0.9091, …) → r = 2."""
    if not 0 < energy <= 1:
        raise ValueError(f"rank_energy={energy!r} is invalid; accepted: a number in (0, 1]")
    squares = singular_values.double() ** 2
    total = squares.sum()
    if total == 0:
        return min(limits[0], len(squares))
    cumulative = torch.cumsum(squares, 0) / total
    # a tolerance so that an energy reached exactly (up to rounding) counts as reached
    rank = int((cumulative < energy - 1e-12).sum().item()) + 1
    return min(max(rank, limits[0]), limits[1], len(squares))


def probe_ranks(matrices: Sequence[torch.Tensor], energy: float) -> list[int]:
    """`adaptive_rank` of each matrix from its exact singular values."""
    return [adaptive_rank(torch.linalg.svdvals(m.double()), energy) for m in matrices]


def power_iteration(matrix: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One PowerSGD step: P = orth(M Q) (reduced QR), Q = Mᵀ P; M ≈ P Qᵀ.
    matrix: [m, n], q: [n, r] → P: [m, r], Q: [n, r]."""
    p, _ = torch.linalg.qr(matrix @ q)
    return p, matrix.T @ p


def payload_bytes(shapes: Sequence[torch.Size], ranks: Sequence[int]) -> int:
    """Bytes of one worker's payload: per matrix (m + n)·r int8 + two fp32 scales; per vector
    its fp32 values. `ranks` holds one rank per matrix (2-D shape), in order."""
    matrices = [s for s in shapes if len(s) == 2]
    if len(matrices) != len(ranks):
        raise ValueError(f"{len(ranks)} ranks given for {len(matrices)} matrices")
    factors = sum((m + n) * r for (m, n), r in zip(matrices, ranks, strict=True))
    vectors = sum(s.numel() for s in shapes if len(s) != 2) * FP32_BYTES
    return factors + 2 * SCALE_BYTES * len(matrices) + vectors


class Compressor:
    """One worker's rank-r int8 compressor with error feedback (module docstring).
    `shapes`: the parameter shapes in order; 2-D ones are factorised, others sent in fp32."""

    def __init__(self, shapes: Sequence[torch.Size], seed: int = 0) -> None:
        self.shapes = [torch.Size(s) for s in shapes]
        self.matrix_ids = [i for i, s in enumerate(self.shapes) if len(s) == 2]
        self.errors = [torch.zeros(s) for s in self.shapes]
        self.qs: dict[int, torch.Tensor] = {}
        self.generator = torch.Generator().manual_seed(seed)

    def residuals(self, deltas: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """M = Δ + e of each matrix: what the rank probe measures."""
        return [deltas[i] + self.errors[i] for i in self.matrix_ids]

    def encode(self, deltas: Sequence[torch.Tensor], ranks: Sequence[int]) -> torch.Tensor:
        """The uint8 payload of `deltas` (one tensor per parameter); updates the residuals."""
        parts: list[torch.Tensor] = []
        for i, rank in zip(self.matrix_ids, ranks, strict=True):
            m = deltas[i].float() + self.errors[i]
            q = self.qs.get(i)
            if q is None or q.shape[1] != rank:
                q = torch.randn(m.shape[1], rank, generator=self.generator)
            p, q = power_iteration(m, q)
            self.qs[i] = q
            p8, p_scale = quantize_int8(p)
            q8, q_scale = quantize_int8(q)
            approx = dequantize_int8(p8, p_scale) @ dequantize_int8(q8, q_scale).T
            self.errors[i] = m - approx
            scales = torch.tensor([p_scale, q_scale], dtype=torch.float32)
            parts += [p8.flatten().view(torch.uint8), q8.flatten().view(torch.uint8)]
            parts.append(scales.view(torch.uint8))
        for i, shape in enumerate(self.shapes):
            if len(shape) != 2:
                parts.append(deltas[i].detach().float().flatten().contiguous().view(torch.uint8))
        return torch.cat(parts)

    def decode(self, payload: torch.Tensor, ranks: Sequence[int]) -> list[torch.Tensor]:
        """The fp32 tensors one payload stands for (Ĉ for matrices, exact vectors)."""
        out: list[torch.Tensor | None] = [None] * len(self.shapes)
        at = 0

        def take(count: int) -> torch.Tensor:
            nonlocal at
            chunk = payload[at : at + count]
            at += count
            return chunk

        for i, rank in zip(self.matrix_ids, ranks, strict=True):
            rows, cols = self.shapes[i]
            p8 = take(rows * rank).view(torch.int8).view(rows, rank)
            q8 = take(cols * rank).view(torch.int8).view(cols, rank)
            p_scale, q_scale = take(2 * SCALE_BYTES).clone().view(torch.float32).tolist()
            out[i] = dequantize_int8(p8, p_scale) @ dequantize_int8(q8, q_scale).T
        for i, shape in enumerate(self.shapes):
            if len(shape) != 2:
                out[i] = take(shape.numel() * FP32_BYTES).clone().view(torch.float32).view(shape)
        if at != payload.numel():
            raise ValueError(f"payload of {payload.numel()} bytes, expected {at}")
        return out  # type: ignore[return-value]
