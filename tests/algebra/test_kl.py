"""KL estimators (spec §4): the table of values and of d k3 / d logp, the gradient of k1/k2,
the clamps of k3_low_var, and the k3 matrix of Fixture P (T1.3)."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import LP, REF, close

import policylab

# Table of §4, with x = ref − logp (= log ρ):
#   k1 = logp − ref = −x;  k2 = ½(logp − ref)²;  k3 = eˣ − x − 1;  d k3/d logp = 1 − eˣ
#   k3_low_var = clip(e^c − c − 1, −10, 10), c = clip(x, −20, 20)
# (−1.0, −1.5): x = −0.5, e^−0.5 = 0.6065306597: k3 = 0.6065306597 + 0.5 − 1 = 0.1065306597,
#               d = 1 − 0.6065306597 = 0.3934693403.
# (−1.5, −1.0): x = 0.5, e^0.5 = 1.6487212707: k3 = 1.6487212707 − 0.5 − 1 = 0.1487212707,
#               d = −0.6487212707.
# (0, −30):     x = −30: k3 = e^−30 + 30 − 1 = 29 + 9.4e−14; low_var clamps 29 → 10 (grad 0);
#               d = 1 − e^−30 ≈ 1.
# (−30, 0):     x = 30: k3 = e^30 − 31 = 1.068647458e13, d = 1 − e^30 = −1.068647458e13;
#               low_var: c = 20, e^20 − 21 = 4.85e8 → clamped to 10 (grad 0).
# (−0.7, −0.7): all zero.
#        logp   ref    k1    k2     k3                  k3_low_var     dk3/dlogp
TABLE = [
    (-1.0, -1.5, 0.5, 0.125, 0.1065306597, 0.1065306597, 0.3934693403),
    (-1.5, -1.0, -0.5, 0.125, 0.1487212707, 0.1487212707, -0.6487212707),
    (0.0, -30.0, 30.0, 450.0, 29.0, 10.0, 1.0),
    (-30.0, 0.0, -30.0, 450.0, 1.068647458e13, 10.0, -1.068647458e13),
    (-0.7, -0.7, 0.0, 0.0, 0.0, 0.0, 0.0),
]
COLUMN = {"k1": 2, "k2": 3, "k3": 4, "k3_low_var": 5}
# clamped rows of k3_low_var have zero gradient
LOW_VAR_GRAD = [0.3934693403, -0.6487212707, 0.0, 0.0, 0.0]

DTYPES = [torch.float32, torch.float64]


def _inputs(dtype):
    logp = torch.tensor([[row[0] for row in TABLE]], dtype=dtype, requires_grad=True)
    ref = torch.tensor([[row[1] for row in TABLE]], dtype=dtype)
    return logp, ref


def _tols(dtype):
    # relative part for the 1e13 entries; 10-digit spec numbers otherwise
    return {"atol": 1e-6, "rtol": 1e-6} if dtype == torch.float32 else {"atol": 1e-9, "rtol": 1e-9}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(COLUMN))
def test_table_values(name, dtype):
    logp, ref = _inputs(dtype)
    out = policylab.kl_estimator(name)(logp, ref)
    assert out.shape == logp.shape
    expected = [[row[COLUMN[name]] for row in TABLE]]
    close(out, expected, **_tols(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_k3_gradient(dtype):
    logp, ref = _inputs(dtype)
    policylab.kl_estimator("k3")(logp, ref).sum().backward()
    close(logp.grad, [[row[6] for row in TABLE]], **_tols(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_k3_low_var_gradient_is_zero_where_clamped(dtype):
    logp, ref = _inputs(dtype)
    policylab.kl_estimator("k3_low_var")(logp, ref).sum().backward()
    close(logp.grad, [LOW_VAR_GRAD], **_tols(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_k1_and_k2_gradients(dtype):
    # d k1/d logp = 1; d k2/d logp = logp − ref = [0.5, −0.5, 30, −30, 0]
    logp, ref = _inputs(dtype)
    policylab.kl_estimator("k1")(logp, ref).sum().backward()
    close(logp.grad, [[1.0] * 5], atol=0.0)
    logp, ref = _inputs(dtype)
    policylab.kl_estimator("k2")(logp, ref).sum().backward()
    close(logp.grad, [[0.5, -0.5, 30.0, -30.0, 0.0]], **_tols(dtype))


def test_ref_is_not_required_to_have_grad_and_result_is_elementwise():
    # each entry depends only on its own pair
    logp = torch.tensor([[-1.0, -1.5], [0.0, -0.7]], dtype=torch.float64)
    ref = torch.tensor([[-1.5, -1.0], [-30.0, -0.7]], dtype=torch.float64)
    out = policylab.kl_estimator("k3")(logp, ref)
    close(out, [[0.1065306597, 0.1487212707], [29.0, 0.0]], atol=1e-9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fixture_p_k3_matrix(dtype):
    # x = REF − LP = [[−0.1, −0.1, 0.2], [−0.2, 0.2, 0]]; k3 = eˣ − x − 1:
    #   e^−0.1 − 0.9 = 0.004837418036; e^0.2 − 1.2 = 0.02140275816; e^−0.2 − 0.8 = 0.01873075307
    out = policylab.kl_estimator("k3")(
        torch.tensor(LP, dtype=dtype), torch.tensor(REF, dtype=dtype)
    )
    expected = [
        [0.004837418036, 0.004837418036, 0.02140275816],
        [0.01873075307, 0.02140275816, 0.0],
    ]
    close(out, expected, atol=1e-6 if dtype == torch.float32 else 1e-11)


def test_unknown_estimator_lists_choices():
    with pytest.raises((ValueError, KeyError)) as err:
        policylab.kl_estimator("k9")
    assert "k3" in str(err.value)


@pytest.mark.parametrize("name", list(COLUMN))
def test_estimates_are_finite_for_large_gaps(name):
    # |x| = 80: e^80 = 5.5e34 still fits float32; k3_low_var stays clamped at 10.
    logp = torch.tensor([[-80.0, 0.0]])
    ref = torch.tensor([[0.0, -80.0]])
    out = policylab.kl_estimator(name)(logp, ref)
    assert torch.isfinite(out).all()
    if name == "k3_low_var":
        close(out, [[10.0, 10.0]], atol=0.0)
    if name == "k3":
        close(out[0, 1], 79.0, atol=1e-5)
        close(out[0, 0], math.exp(80.0) - 81.0, atol=0.0, rtol=1e-6)
