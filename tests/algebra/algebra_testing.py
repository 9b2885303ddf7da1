"""Shared inputs and helpers for the algebra tests.

- Fixture P of the spec (seed_llm_algorithms.md §1.0), re-used by every policy-loss hand case.
- `close`: torch.testing.assert_close with explicit tolerances, for tensors and metric floats.
- `PROPERTY`: the hypothesis settings of the suite (fixed seed, no deadline).
- `ragged_batches`: a hypothesis strategy for random ragged batches (right-padded rows,
  rows with holes such as masked tool tokens, and empty rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import settings
from hypothesis import strategies as st

# 50 examples per property, no per-example deadline (torch warm-up), and a fixed seed so a
# run is reproducible (STYLE.md: "seeds fixed").
PROPERTY = settings(max_examples=50, deadline=None, derandomize=True)

AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)

# ---------------------------------------------------------------- Fixture P (spec §1.0)
LP = [[-1.0, -0.5, -2.0], [-0.3, -1.2, 0.0]]
OLP = [[-1.2, -0.5, -1.5], [-0.3, -0.9, 0.0]]
REF = [[-1.1, -0.6, -1.8], [-0.5, -1.0, 0.0]]
M = [[1, 1, 1], [1, 1, 0]]
ADV = [[1.0, 1.0, 1.0], [-1.0, -1.0, 0.0]]
# log-ratio l = LP - OLP = [[0.2, 0, -0.5], [0, -0.3, ·]]
# token ratios r = exp(l) = [[1.2214027582, 1, 0.6065306597], [1, 0.7408182207, ·]]


def fixture_p(dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Fixture P as keyword tensors for a policy loss; `logprobs` is a fresh leaf with grad."""
    return {
        "logprobs": torch.tensor(LP, dtype=dtype, requires_grad=True),
        "old_logprobs": torch.tensor(OLP, dtype=dtype),
        "advantages": torch.tensor(ADV, dtype=dtype),
        "response_mask": torch.tensor(M, dtype=dtype),
        "ref_logprobs": torch.tensor(REF, dtype=dtype),
    }


def tol(dtype: torch.dtype) -> float:
    """Absolute tolerance for a hand case computed in `dtype` (spec numbers have 10 digits)."""
    return 1e-9 if dtype == torch.float64 else 1e-6


def close(actual, expected, *, atol: float = 1e-6, rtol: float = 0.0) -> None:
    """assert_close with explicit tolerances; `actual` is a tensor or a metric float."""
    if isinstance(actual, torch.Tensor):
        actual = actual.detach()
        expected = torch.as_tensor(expected, dtype=actual.dtype)
    else:
        assert isinstance(actual, float), f"expected a float, got {type(actual).__name__}"
        expected = float(expected)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)


def grad_of(loss: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """d loss / d x (zeros when x does not influence the loss)."""
    (g,) = torch.autograd.grad(loss, x, allow_unused=True)
    return torch.zeros_like(x) if g is None else g


# ---------------------------------------------------------------- random ragged batches
@dataclass
class Ragged:
    """A random batch: mask [B,T] (float64 0/1) and a seed for the values that go with it."""

    mask: torch.Tensor
    seed: int

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.mask.shape)

    def gen(self, offset: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed + offset)


@st.composite
def ragged_batches(
    draw,
    *,
    min_rows: int = 1,
    max_rows: int = 6,
    max_t: int = 6,
    first_row_nonempty: bool = False,
    rows: int | None = None,
) -> Ragged:
    """Masks of shape [B,T]: either right-padded with random lengths (0..T) or with random
    holes (0/1 per token). Rows may be empty; `first_row_nonempty` forces one valid token."""
    b = rows if rows is not None else draw(st.integers(min_rows, max_rows))
    t = draw(st.integers(1, max_t))
    if draw(st.booleans()):
        lengths = draw(st.lists(st.integers(0, t), min_size=b, max_size=b))
        mask = (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]).double()
    else:
        bits = draw(st.lists(st.integers(0, 1), min_size=b * t, max_size=b * t))
        mask = torch.tensor(bits, dtype=torch.float64).reshape(b, t)
    if first_row_nonempty and mask[0].sum() == 0:
        mask[0, 0] = 1.0
    seed = draw(st.integers(0, 2**31 - 1))
    return Ragged(mask=mask, seed=seed)


def garbage_like(x: torch.Tensor, mask: torch.Tensor, gen: torch.Generator, *, nonfinite: bool):
    """x with its masked positions (mask == 0) replaced by garbage: NaN/±inf/huge values when
    `nonfinite`, otherwise large finite values in [-50, 50]."""
    if nonfinite:
        pool = torch.tensor([math.nan, math.inf, -math.inf, 1e4, -1e4], dtype=x.dtype)
        junk = pool[torch.randint(0, len(pool), x.shape, generator=gen)]
    else:
        junk = (torch.rand(x.shape, generator=gen, dtype=x.dtype) - 0.5) * 100.0
    return torch.where(mask.bool(), x.detach(), junk)


def assert_masked_garbage_never_matters(loss_fn, clean: dict, batch, *, nonfinite_inputs: bool):
    """A policy loss gives the same value, gradient and metrics when every masked position
    of its inputs holds garbage (NaN/inf in logprobs; in the other inputs too when
    `nonfinite_inputs`), and no gradient reaches a masked position."""
    gen = batch.gen(7)
    dirty = dict(clean)
    dirty["logprobs"] = garbage_like(clean["logprobs"], batch.mask, gen, nonfinite=True)
    for key in ("old_logprobs", "ref_logprobs", "advantages"):
        dirty[key] = garbage_like(clean[key], batch.mask, gen, nonfinite=nonfinite_inputs)
    clean = {**clean, "logprobs": clean["logprobs"].clone().requires_grad_(True)}
    dirty["logprobs"] = dirty["logprobs"].clone().requires_grad_(True)
    loss_c, metrics_c = loss_fn(**clean)
    loss_d, metrics_d = loss_fn(**dirty)
    assert torch.isfinite(loss_d)
    close(loss_d, loss_c.detach(), atol=1e-12, rtol=1e-10)
    g_d = grad_of(loss_d, dirty["logprobs"])
    assert torch.isfinite(g_d).all()
    assert (g_d[batch.mask == 0] == 0).all()
    close(g_d, grad_of(loss_c, clean["logprobs"]), atol=1e-12, rtol=1e-10)
    assert metrics_d.keys() == metrics_c.keys()
    for key in metrics_c:
        close(metrics_d[key], metrics_c[key], atol=1e-12, rtol=1e-10)
