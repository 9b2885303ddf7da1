"""Floating-point width of the algebra: log-ratios, ratios and group statistics are formed
in float32 or wider whatever the input dtype, because exp() of a small log-ratio in bf16 or
fp16 rounds to 1 (bf16 spacing near 1 is 2⁻⁷ ≈ 0.0078, wider than GSPO's clip window
1 − 3e-4 … 1 + 4e-4) and small KL values vanish. The one home of that rule."""

from __future__ import annotations

import torch


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """`x` as float32 when it is a narrower float (bf16, fp16) or an integer/bool; float32 and
    float64 unchanged. Differentiable: the gradient flows back in `x`'s own dtype."""
    return x.to(torch.promote_types(x.dtype, torch.float32))
