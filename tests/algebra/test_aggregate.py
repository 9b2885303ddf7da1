"""The shared aggregator (spec §0 "Aggregation", §1.4 edge cases): hand cases for every mode,
empty rows, the empty batch, and the micro-batching contract of `global_normaliser`."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import (
    AGG_MODES,
    PROPERTY,
    close,
    fixture_p,
    garbage_like,
    grad_of,
    ragged_batches,
)
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab.algebra.aggregate import AGG_MODES as LIB_AGG_MODES
from policylab.algebra.aggregate import aggregate, global_normaliser

NORM = "seq-mean-token-sum-norm"

# An easy loss matrix on Fixture P's mask M = [[1,1,1],[1,1,0]]; 99 sits on the padded token.
EASY = [[1.0, 2.0, 3.0], [4.0, 5.0, 99.0]]
MASK_P = [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]


def kw(mode: str, l_max: int | None) -> dict:
    return {"L_max": l_max} if mode == NORM else {}


def test_agg_modes_constant():
    assert tuple(LIB_AGG_MODES) == AGG_MODES


# Working, row sums s = [1+2+3, 4+5] = [6, 9], lengths n = [3, 2], B = 2, L_max = 4:
#   token-mean              (6+9)/5 = 3                       grad 1/5 per valid token
#   token-sum               6+9 = 15                           grad 1
#   seq-mean-token-mean     (6/3 + 9/2)/2 = (2+4.5)/2 = 3.25   grad row0 1/(2·3), row1 1/(2·2)
#   seq-mean-token-sum      (6+9)/2 = 7.5                      grad 1/2
#   seq-mean-token-sum-norm 15/(B·L_max) = 15/8 = 1.875        grad 1/8
EASY_CASES = {
    "token-mean": (3.0, [[0.2, 0.2, 0.2], [0.2, 0.2, 0.0]]),
    "token-sum": (15.0, [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]),
    "seq-mean-token-mean": (3.25, [[1 / 6, 1 / 6, 1 / 6], [0.25, 0.25, 0.0]]),
    "seq-mean-token-sum": (7.5, [[0.5, 0.5, 0.5], [0.5, 0.5, 0.0]]),
    NORM: (1.875, [[0.125, 0.125, 0.125], [0.125, 0.125, 0.0]]),
}


@pytest.mark.parametrize("mode", AGG_MODES)
def test_easy_numbers_every_mode(mode):
    value, grad = EASY_CASES[mode]
    loss_matrix = torch.tensor(EASY, requires_grad=True)
    out = aggregate(loss_matrix, torch.tensor(MASK_P), mode, **kw(mode, 4))
    assert out.dim() == 0
    close(out, value, atol=1e-6)
    close(grad_of(out, loss_matrix), grad, atol=1e-6)


# The ppo_clip token loss of Fixture P (eps 0.2/0.2, spec T1.3):
#   L = [[-1.2, -1, -0.6065306597], [1, 0.8, ·]], row sums [-2.8065306597, 1.8], Σ = -1.0065306597.
#   token-mean  -1.0065306597/5 = -0.2013061319        (T6.4 "with eps_high=0.2")
#   token-sum   -1.0065306597                          (T2.2 "Σ m·L")
#   seq-mean-token-mean (-2.8065306597/3 + 1.8/2)/2 = (-0.9355102199 + 0.9)/2 = -0.01775510995
#                       (T1.3 pg part)
#   seq-mean-token-sum  (-2.8065306597 + 1.8)/2 = -0.5032653299                               (T2.2)
#   seq-mean-token-sum-norm, L_max=4: -1.0065306597/8 = -0.1258163325                       (T2.2)
FIXTURE_P_PG = [[-1.2, -1.0, -0.6065306597126334], [1.0, 0.8, 0.0]]
FIXTURE_P_VALUES = {
    "token-mean": -0.2013061319,
    "token-sum": -1.006530660,
    "seq-mean-token-mean": -0.01775510995,
    "seq-mean-token-sum": -0.5032653299,
    NORM: -0.1258163325,
}


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fixture_p_pg_matrix_every_mode(mode, dtype):
    out = aggregate(
        torch.tensor(FIXTURE_P_PG, dtype=dtype),
        torch.tensor(MASK_P, dtype=dtype),
        mode,
        **kw(mode, 4),
    )
    close(out, FIXTURE_P_VALUES[mode], atol=1e-6 if dtype == torch.float32 else 1e-9)


# EASY with an empty row inserted in the middle: the empty row adds no token and, by the
# contract, is left out of every seq-mean denominator (B_eff = 2), so the values are those
# of EASY_CASES: 3, 15, 3.25, 7.5. The empty row gets zero gradient.
EASY_WITH_EMPTY = [[1.0, 2.0, 3.0], [7.0, 7.0, 7.0], [4.0, 5.0, 99.0]]
MASK_WITH_EMPTY = [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]


@pytest.mark.parametrize("mode", [m for m in AGG_MODES if m != NORM])
def test_empty_row_is_excluded(mode):
    value, grad = EASY_CASES[mode]
    loss_matrix = torch.tensor(EASY_WITH_EMPTY, requires_grad=True)
    out = aggregate(loss_matrix, torch.tensor(MASK_WITH_EMPTY), mode)
    close(out, value, atol=1e-6)
    close(grad_of(out, loss_matrix), [grad[0], [0.0, 0.0, 0.0], grad[1]], atol=1e-6)


def test_empty_row_is_excluded_seq_mean_token_sum_norm():
    # Contract: "Rows with no valid token are excluded from seq-mean denominators", read as
    # applying to seq-mean-token-sum-norm too: 15/(B_eff·L_max) = 15/(2·4) = 1.875.
    # (verl/Dr. GRPO would count the padded row in B: 15/(3·4) = 1.25.)
    loss_matrix = torch.tensor(EASY_WITH_EMPTY, requires_grad=True)
    out = aggregate(loss_matrix, torch.tensor(MASK_WITH_EMPTY), NORM, L_max=4)
    close(out, 1.875, atol=1e-6)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_empty_batch_is_zero_and_keeps_graph(mode):
    # Σm = 0: the result is 0, still attached to the graph, with a zero (finite) gradient.
    loss_matrix = torch.tensor([[math.nan, 3.0], [math.inf, -2.0]], requires_grad=True)
    out = aggregate(loss_matrix, torch.zeros(2, 2), mode, **kw(mode, 4))
    close(out, 0.0, atol=0.0)
    assert out.requires_grad
    out.backward()
    close(loss_matrix.grad, torch.zeros(2, 2), atol=0.0)


def test_empty_batch_with_no_rows():
    loss_matrix = torch.zeros(0, 3, requires_grad=True)
    out = aggregate(loss_matrix, torch.zeros(0, 3), "token-mean")
    close(out, 0.0, atol=0.0)
    assert out.requires_grad


@pytest.mark.parametrize("mode", AGG_MODES)
def test_nan_and_inf_at_masked_positions_are_ignored(mode):
    # Same as EASY_CASES with the padded 99 replaced by NaN (and an inf in an empty row).
    value, grad = EASY_CASES[mode]
    loss_matrix = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, math.nan]], requires_grad=True)
    out = aggregate(loss_matrix, torch.tensor(MASK_P), mode, **kw(mode, 4))
    close(out, value, atol=1e-6)
    g = grad_of(out, loss_matrix)
    assert torch.isfinite(g).all()
    close(g, grad, atol=1e-6)


# Global normalisers of Fixture P's mask (n = [3, 2], B = 2, L_max = 4):
#   token-mean Σm = 5; token-sum has no denominator: 1; seq-mean-* count rows: 2;
#   seq-mean-token-sum-norm B·L_max = 8.
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 5.0),
        ("token-sum", 1.0),
        ("seq-mean-token-mean", 2.0),
        ("seq-mean-token-sum", 2.0),
        (NORM, 8.0),
    ],
)
def test_global_normaliser_of_fixture_p(mode, expected):
    n = global_normaliser(torch.tensor(MASK_P), mode, **kw(mode, 4))
    assert isinstance(n, float)
    close(n, expected, atol=1e-12)


def test_global_normaliser_skips_empty_rows():
    # MASK_WITH_EMPTY has 3 rows, one empty: token count 5, non-empty rows 2.
    mask = torch.tensor(MASK_WITH_EMPTY)
    close(global_normaliser(mask, "token-mean"), 5.0, atol=1e-12)
    close(global_normaliser(mask, "seq-mean-token-mean"), 2.0, atol=1e-12)
    close(global_normaliser(mask, "seq-mean-token-sum"), 2.0, atol=1e-12)


# An explicit normaliser replaces the batch's own denominator:
#   token-mean Σ/10 = 15/10 = 1.5; seq-mean-token-mean (2 + 4.5)/4 = 1.625;
#   seq-mean-token-sum 15/4 = 3.75; norm 15/16 = 0.9375.
@pytest.mark.parametrize(
    ("mode", "normaliser", "expected"),
    [
        ("token-mean", 10.0, 1.5),
        ("seq-mean-token-mean", 4.0, 1.625),
        ("seq-mean-token-sum", 4.0, 3.75),
        (NORM, 16.0, 0.9375),
    ],
)
def test_explicit_normaliser(mode, normaliser, expected):
    out = aggregate(
        torch.tensor(EASY), torch.tensor(MASK_P), mode, normaliser=normaliser, **kw(mode, 4)
    )
    close(out, expected, atol=1e-6)


def test_norm_mode_requires_l_max():
    with pytest.raises(ValueError, match="L_max"):
        aggregate(torch.tensor(EASY), torch.tensor(MASK_P), NORM)
    with pytest.raises(ValueError, match="L_max"):
        global_normaliser(torch.tensor(MASK_P), NORM)


def test_unknown_mode_lists_choices():
    with pytest.raises(ValueError) as err:
        aggregate(torch.tensor(EASY), torch.tensor(MASK_P), "token-median")
    assert "token-mean" in str(err.value)
    with pytest.raises(ValueError):
        global_normaliser(torch.tensor(MASK_P), "token-median")


# ------------------------------------------------------------------- micro-batching


def _split_and_sum(loss_matrix, mask, mode, l_max, bounds):
    """Σ_k aggregate(L_k, m_k, mode, normaliser=global_normaliser(full mask))."""
    n = global_normaliser(mask, mode, **kw(mode, l_max))
    total = 0.0
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        total = total + aggregate(
            loss_matrix[lo:hi], mask[lo:hi], mode, normaliser=n, **kw(mode, l_max)
        )
    return total


def _check_micro_batches(mask, values, mode, l_max, bounds):
    full_leaf = values.clone().requires_grad_(True)
    full = aggregate(full_leaf, mask, mode, **kw(mode, l_max))
    parts_leaf = values.clone().requires_grad_(True)
    parts = _split_and_sum(parts_leaf, mask, mode, l_max, bounds)
    close(parts, full.detach(), atol=1e-10, rtol=1e-10)
    close(grad_of(parts, parts_leaf), grad_of(full, full_leaf), atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_eight_rows_equal_eight_single_row_micro_batches(mode):
    # 8 ragged rows (lengths 5,1,0,3,2,5,4,1, one empty), float64, fixed seed.
    lengths = torch.tensor([5, 1, 0, 3, 2, 5, 4, 1])
    mask = (torch.arange(5)[None, :] < lengths[:, None]).double()
    values = torch.randn(8, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    _check_micro_batches(mask, values, mode, 7, list(range(9)))


@pytest.mark.parametrize("mode", AGG_MODES)
@PROPERTY
@given(
    batch=ragged_batches(rows=8, first_row_nonempty=True),
    cuts=st.lists(st.integers(1, 7), max_size=4, unique=True),
    extra=st.integers(0, 3),
)
def test_micro_batches_add_up_property(mode, batch, cuts, extra):
    values = torch.randn(batch.shape, generator=batch.gen(), dtype=torch.float64) * 3
    l_max = batch.shape[1] + extra
    # one row per micro-batch, and a random split into a few micro-batches
    _check_micro_batches(batch.mask, values, mode, l_max, list(range(9)))
    _check_micro_batches(batch.mask, values, mode, l_max, [0, *sorted(cuts), 8])


@pytest.mark.parametrize("mode", AGG_MODES)
@PROPERTY
@given(batch=ragged_batches())
def test_masked_values_never_matter_property(mode, batch):
    gen = batch.gen()
    clean = torch.randn(batch.shape, generator=gen, dtype=torch.float64) * torch.where(
        batch.mask.bool(), 1.0, 0.0
    )
    dirty = garbage_like(clean, batch.mask, gen, nonfinite=True)
    clean.requires_grad_(True)
    dirty.requires_grad_(True)
    l_max = batch.shape[1]
    a = aggregate(clean, batch.mask, mode, **kw(mode, l_max))
    b = aggregate(dirty, batch.mask, mode, **kw(mode, l_max))
    close(b, a.detach(), atol=1e-12, rtol=1e-12)
    g = grad_of(b, dirty)
    assert torch.isfinite(g).all()
    close(g, grad_of(a, clean), atol=1e-12, rtol=1e-12)
    assert (g[batch.mask == 0] == 0).all()


# ------------------------------------------- micro-batching through policy_loss(normaliser=)


def _random_policy_batch(seed: int):
    """8 ragged rows (one empty) of float64 policy-loss inputs."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([4, 1, 0, 3, 2, 4, 4, 1])
    mask = (torch.arange(4)[None, :] < lengths[:, None]).double()
    old = -torch.rand(8, 4, generator=gen, dtype=torch.float64) * 3
    logp = old + 0.3 * torch.randn(8, 4, generator=gen, dtype=torch.float64)
    ref = old + 0.3 * torch.randn(8, 4, generator=gen, dtype=torch.float64)
    adv = torch.randn(8, 4, generator=gen, dtype=torch.float64)
    return {
        "logprobs": logp,
        "old_logprobs": old,
        "advantages": adv,
        "response_mask": mask,
        "ref_logprobs": ref,
    }


MICRO_LOSSES = [
    *[
        (
            "ppo_clip",
            {
                "loss_agg_mode": mode,
                "kl_estimator": "k3",
                "kl_coef": 0.1,
                **({"L_max": 6} if mode == NORM else {}),
            },
        )
        for mode in AGG_MODES
    ],
    ("gspo", {}),
    ("gspo_token", {}),
    ("cispo", {}),
]


@pytest.mark.parametrize(("name", "overrides"), MICRO_LOSSES)
def test_policy_loss_micro_batches_equal_full_batch(name, overrides):
    loss_fn = policylab.policy_loss(name, **overrides)
    data = _random_policy_batch(seed=1)
    # gspo's tiny clip range leaves nearly every row clipped at these ratios; shrink the
    # log-ratios so that some rows are inside the range and carry a gradient.
    if name.startswith("gspo"):
        data["logprobs"] = data["old_logprobs"] + 1e-3 * (data["logprobs"] - data["old_logprobs"])
    mode = overrides.get("loss_agg_mode", "seq-mean-token-mean" if "gspo" in name else "token-mean")
    n = global_normaliser(data["response_mask"], mode, **kw(mode, overrides.get("L_max")))

    full_lp = data["logprobs"].clone().requires_grad_(True)
    full, _ = loss_fn(**{**data, "logprobs": full_lp})

    parts_lp = data["logprobs"].clone().requires_grad_(True)
    total = 0.0
    for k in range(8):
        row = {key: v[k : k + 1] for key, v in data.items()}
        part, _ = loss_fn(**{**row, "logprobs": parts_lp[k : k + 1]}, normaliser=n)
        total = total + part
    close(total, full.detach(), atol=1e-10, rtol=1e-10)
    g_full = grad_of(full, full_lp)
    assert g_full.abs().sum() > 0  # the check must be able to fail
    close(grad_of(total, parts_lp), g_full, atol=1e-12, rtol=1e-10)


def test_fixture_p_through_aggregate_matches_policy_loss():
    # The aggregator and the loss agree on T1.3's pg part (kl off): -0.01775510995.
    loss, _ = policylab.policy_loss("ppo_clip", loss_agg_mode="seq-mean-token-mean")(
        **{k: v for k, v in fixture_p().items() if k != "ref_logprobs"}
    )
    close(loss, FIXTURE_P_VALUES["seq-mean-token-mean"], atol=1e-6)
