"""Pure tensor pieces of masked diffusion LMs (papers/seed_generative.md G1): the masked-SFT
loss, prompt re-masking, d2's StepMerge segments and its per-segment loss accumulation.

No model and no global randomness here: uniforms come in as tensors, so every piece has a
hand-computed test (tests/algebra/test_mdm.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SFT_EPS = 1e-3  # ε_t of the noise level [code d1:SFT/sft_trainer.py:forward_process]


def noise_levels(u: torch.Tensor, eps: float = SFT_EPS) -> torch.Tensor:
    """t = (1 − ε)·u + ε per row, u ~ U(0, 1): the masking probability of masked SFT, kept
    away from 0 so that 1/t stays finite [code d1:dLLMDataCollator.forward_process]."""
    return (1 - eps) * u + eps


def masked_sft_loss(
    logits: torch.Tensor, targets: torch.Tensor, masked: torch.Tensor, t: torch.Tensor
) -> torch.Tensor:
    """Masked SFT loss (G1.1): Σ_{i,l} 1[masked_il]·CE(y_il | noisy)/t_i / (B·L).

    logits [B, L, V] at the completion positions, targets [B, L] (the demonstration padded
    with EOS to L), masked [B, L] bool, t [B] the rows' noise levels. The normaliser is the
    total number of completion tokens, masked or not [code d1:SFT/sft_trainer.py:
    dLLMTrainer.compute_loss]."""
    ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    weight = masked.flatten().to(ce.dtype) / t.repeat_interleave(targets.shape[1]).to(ce.dtype)
    return (ce * weight).sum() / targets.numel()


def prompt_mask(uniforms: torch.Tensor, p: float, valid: torch.Tensor | None = None):
    """Which prompt tokens d1's estimator replaces by M: uniforms [B, P] < p, only where
    `valid` (not padding) [code d1:diffu_grpo_trainer.py:forward_process]. D4: uniforms
    [0.10, 0.50, 0.14, 0.90], p = 0.15 → positions {0, 2}."""
    if not 0 <= p <= 1:
        raise ValueError(f"prompt_mask_p = {p}; accepted: a probability in [0, 1]")
    chosen = uniforms < p
    return chosen if valid is None else chosen & valid.bool()


def segment_starts(steps: int, segments: int) -> list[int]:
    """First decoding step of each of d2's StepMerge segments: [0] + boundaries
    b_k = ⌊k·S/N⌋, k = 1 … N − 1 [code d2:d2StepMergeTrainer.generate]; N > S is clamped to
    S (G1.9). S = 6, N = 4 → [0, 1, 3, 4]; S = 64, N = 8 → [0, 8, 16, …, 56]."""
    if steps < 1 or segments < 1:
        raise ValueError(f"segment_starts(steps={steps}, segments={segments}): both must be >= 1")
    n = min(segments, steps)
    return [k * steps // n for k in range(n)]


def segment_start_of(reveal: torch.Tensor, starts: list[int]) -> torch.Tensor:
    """For each token's reveal step ρ [B, L], the start of the segment holding ρ: the
    state a StepMerge estimator scores it from is z_start (positions with ρ < start
    revealed). D3: starts [0, 1, 3, 4], ρ = 2 → 1."""
    bounds = torch.tensor(starts, dtype=reveal.dtype)
    index = torch.searchsorted(bounds, reveal.contiguous(), right=True) - 1
    return bounds[index.clamp(min=0)]


def segment_micro_losses(
    token_loss: torch.Tensor, mask: torch.Tensor, segment: torch.Tensor, n_segments: int
) -> torch.Tensor:
    """d2's per-micro-step losses: for segment n, Σ (ℓ·m·1[seg = n])·N / Σ m [code d2:
    d2StepMergeTrainer.compute_loss]; their mean over n is the token mean Σ ℓ·m / Σ m
    (test D2: ℓ [0.2, 0.4, −0.1], segments {0, 1}, {2} → [0.4, −0.0666667], mean
    0.1666667). token_loss, mask, segment: [B, T]; returns [N]."""
    total = mask.sum().clamp(min=1)
    return torch.stack(
        [(token_loss * mask * (segment == n)).sum() * n_segments / total for n in range(n_segments)]
    )
