"""Log-probs of chosen tokens without the full-vocabulary float32 log-softmax.

A [B, T, V] float32 log-softmax over a 152k vocabulary at 128 × 512 tokens is ~40 GB;
`selective_logprobs` forms it a chunk of positions at a time, in the forward pass and
again in the backward pass, holding only the logits themselves between the two."""

from __future__ import annotations

import torch

# float32 elements of logits one chunk of `selective_logprobs` holds (128 MB); a small
# model's whole batch fits in one chunk, a 152k vocabulary takes 220 positions at a time
CHUNK_ELEMENTS = 1 << 25


def selective_logprobs(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    *,
    chunk_elements: int = CHUNK_ELEMENTS,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log softmax(logits / τ)[token] [B, T] (float32, with gradient) and optionally the
    entropy −Σ_v p_v log p_v [B, T] (float32, no gradient) of `logits` [B, T, V] (any float
    dtype, any strides with a contiguous last dim) at `tokens` [B, T], τ = `temperature`.

    The full-vocabulary float32 log-softmax is never held: it is formed a chunk of
    positions at a time (at most `chunk_elements` floats), in the forward pass and again in
    the backward pass, which keeps only `logits` themselves (TRL's selective_log_softmax
    does the forward a row at a time; the backward recomputation is ours). The gradient,
    ∂/∂z_v = g (1[v = token] − p_v) / τ, is autograd's own on each recomputed chunk."""
    logp, entropy = _SelectedLogprob.apply(
        logits, tokens, float(temperature), bool(with_entropy), int(chunk_elements)
    )
    return logp, entropy if with_entropy else None


def _chunks(B: int, T: int, V: int, budget: int):
    """(row slice, position slice) pieces of a [B, T, V] tensor, each ≤ `budget` elements
    (or one position when a single position exceeds it)."""
    if T * V <= budget:
        rows = max(1, budget // max(T * V, 1))
        for b in range(0, B, rows):
            yield slice(b, b + rows), slice(None)
        return
    width = max(1, budget // V)
    for b in range(B):
        for t in range(0, T, width):
            yield slice(b, b + 1), slice(t, t + width)


class _SelectedLogprob(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, tokens, temperature, with_entropy, chunk_elements):
        B, T, V = logits.shape
        logp = torch.empty((B, T), dtype=torch.float32, device=logits.device)
        entropy = torch.zeros((B, T) if with_entropy else (0,), device=logits.device)
        for rows, cols in _chunks(B, T, V, chunk_elements):
            lp = torch.log_softmax(logits[rows, cols].float() / temperature, dim=-1)
            logp[rows, cols] = lp.gather(-1, tokens[rows, cols].unsqueeze(-1)).squeeze(-1)
            if with_entropy:
                entropy[rows, cols] = -(lp.exp() * lp).sum(-1)
        ctx.save_for_backward(logits, tokens)
        ctx.temperature, ctx.chunk_elements = temperature, chunk_elements
        ctx.mark_non_differentiable(entropy)
        return logp, entropy

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        logits, tokens = ctx.saved_tensors
        B, T, V = logits.shape
        grad = torch.empty_like(logits)
        for rows, cols in _chunks(B, T, V, ctx.chunk_elements):
            # the chunk's forward again, differentiated by autograd: the same kernels as
            # the plain full log_softmax, so float32 gradients equal its own to the bit
            with torch.enable_grad():
                z = logits[rows, cols].detach().requires_grad_()
                lp = torch.log_softmax(z.float() / ctx.temperature, dim=-1)
                picked = lp.gather(-1, tokens[rows, cols].unsqueeze(-1)).squeeze(-1)
                (grad[rows, cols],) = torch.autograd.grad(picked, z, grad_logp[rows, cols])
        return grad, None, None, None, None
