"""Policy losses, value loss and reward shaping (spec §1.1, §1.4, §2.1, §2.4–§2.6, §6):
hand cases T1.3, T2.2, T2.7–T2.10, T2.13, T2.14, T6.1, T6.4, T6.5 with their working, recipe
defaults, option validation, and properties over random ragged batches (masked garbage never
matters, ratio-1 gradient = REINFORCE gradient, gradcheck, finite loss and metric keys)."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import (
    PROPERTY,
    Ragged,
    assert_masked_garbage_never_matters,
    close,
    fixture_p,
    grad_of,
    ragged_batches,
    tol,
)
from hypothesis import given

import policylab
from policylab.algebra.aggregate import aggregate

F64 = torch.float64
DTYPES = [torch.float32, torch.float64]


def no_ref(inputs: dict) -> dict:
    return {k: v for k, v in inputs.items() if k != "ref_logprobs"}


def metric_tol(key: str, dtype: torch.dtype) -> float:
    # fractions are counts over a total: exact to float32 precision in any input dtype
    return 1e-6 if "frac" in key else tol(dtype)


# ------------------------------------------------------------------- T1.3 ppo_clip + k3

# Fixture P, eps 0.2/0.2, r = [[1.2214, 1, 0.6065], [1, 0.7408]]:
#   L_pg = −min(r·A, clip(r, 0.8, 1.2)·A):
#     row 0 (A=1):  −min(1.2214, 1.2) = −1.2;  −1;  −min(0.6065, 0.8) = −0.6065306597
#     row 1 (A=−1): −min(−1, −1) = 1;  −min(−0.7408, −0.8) = 0.8   (clipped, constant)
#   pg (seq-mean-token-mean) = (−2.8065306597/3 + 1.8/2)/2 = −0.01775510995
#   k3 = e^x − x − 1, x = REF − LP = [[−.1, −.1, .2], [−.2, .2]]
#      = [[0.004837418036, 0.004837418036, 0.02140275816], [0.01873075307, 0.02140275816]]
#   KL (seq-mean-token-mean) = (0.03107759423/3 + 0.04013351123/2)/2 = 0.01521297685
#   loss = −0.01775510995 + 0.04·0.01521297685 = −0.01714659088
#   d/dLP = pg part + 0.04·(1 − e^x)/(B·n_i):
#     [0,0] clipped: 0 + 0.04·0.0951625820/6  = 0.0006344172131
#     [0,1]: −1/6 + 0.0006344172131           = −0.1660322495
#     [0,2]: −0.6065306597/6 + 0.04·(−0.2214027582)/6 = −0.1025644617
#     [1,0]: +1/4 + 0.04·0.1812692469/4       = 0.2518126925
#     [1,1] clipped: 0 + 0.04·(−0.2214027582)/4 = −0.002214027582
#   metrics: clipfrac_low ⟨A<0 ∧ r<0.8⟩ = 1/5; clipfrac_high ⟨A>0 ∧ r>1.2⟩ = 1/5; union 2/5;
#     approx_kl ⟨OLP − LP⟩ = (−0.2 + 0 + 0.5 + 0 + 0.3)/5 = 0.12;
#     approx_kl_k3 ⟨r − 1 − l⟩ = (0.0214027582 + 0 + 0.1065306597 + 0 + 0.0408182207)/5
#                             = 0.03375032771
#     ratio mean (4.5687516386/5) = 0.9137503277, max 1.221402758, min 0.6065306597
#     kl/ref = ⟨k3⟩ (token-mean) = 0.07121110546/5 = 0.01424222109
T1_3_GRAD = [
    [0.0006344172131, -0.1660322495, -0.1025644617],
    [0.2518126925, -0.002214027582, 0.0],
]
T1_3_METRICS = {
    "pg/clipfrac_low": 0.2,
    "pg/clipfrac_high": 0.2,
    "pg/clipfrac": 0.4,
    "pg/approx_kl": 0.12,
    "pg/approx_kl_k3": 0.03375032771,
    "pg/ratio_mean": 0.9137503277,
    "pg/ratio_max": 1.221402758,
    "pg/ratio_min": 0.6065306597,
    "pg/loss": -0.01775510995,
    "kl/ref": 0.01424222109,
    "kl/loss": 0.01521297685,
    "kl/coef": 0.04,
}
T1_3_OPTIONS = {
    "eps_low": 0.2,
    "eps_high": 0.2,
    "loss_agg_mode": "seq-mean-token-mean",
    "kl_estimator": "k3",
    "kl_coef": 0.04,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("source", ["overrides", "grpo recipe"])
def test_t1_3_ppo_clip_with_k3(source, dtype):
    loss_fn = (
        policylab.policy_loss("ppo_clip", **T1_3_OPTIONS)
        if source == "overrides"
        else policylab.policy_loss("grpo")
    )
    p = fixture_p(dtype)
    loss, metrics = loss_fn(**p)
    close(loss, -0.01714659088, atol=tol(dtype))
    close(grad_of(loss, p["logprobs"]), T1_3_GRAD, atol=tol(dtype))
    for key, value in T1_3_METRICS.items():
        close(metrics[key], value, atol=metric_tol(key, dtype))


def test_t1_3_token_mean():
    # pg = −1.0065306597/5 = −0.2013061319; KL = 0.07121110546/5 = 0.01424222109
    # loss = −0.2013061319 + 0.04·0.01424222109 = −0.2007364431
    options = {**T1_3_OPTIONS, "loss_agg_mode": "token-mean"}
    loss, metrics = policylab.policy_loss("ppo_clip", **options)(**fixture_p())
    close(loss, -0.2007364431, atol=1e-6)
    close(metrics["kl/loss"], 0.01424222109, atol=1e-6)


def test_t1_3_with_per_row_advantages():
    # advantages [B] = [1, −1] broadcast over tokens is Fixture P's ADV on the valid tokens
    p = fixture_p(F64)
    p["advantages"] = torch.tensor([1.0, -1.0], dtype=F64)
    loss, _ = policylab.policy_loss("ppo_clip", **T1_3_OPTIONS)(**p)
    close(loss, -0.01714659088, atol=1e-9)
    close(grad_of(loss, p["logprobs"]), T1_3_GRAD, atol=1e-9)


def test_grpo_recipe_needs_ref_logprobs():
    with pytest.raises(ValueError, match="ref"):
        policylab.policy_loss("grpo")(**no_ref(fixture_p()))


# -------------------------------------------------------------- T2.2 Dr. GRPO aggregation


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("source", ["overrides", "dr_grpo recipe"])
def test_t2_2_seq_mean_token_sum_norm(source, dtype):
    # Σ m·L_pg = −1.2 − 1 − 0.6065306597 + 1 + 0.8 = −1.0065306597; ÷ (B·L_max = 2·4 = 8)
    #   = −0.1258163325. Gradient −A·r/8 on unclipped tokens: [0,1] −1/8, [0,2] −0.6065306597/8
    #   = −0.07581633246, [1,0] +1/8; the clipped [0,0], [1,1] get 0.
    if source == "overrides":
        loss_fn = policylab.policy_loss(
            "ppo_clip", eps_low=0.2, eps_high=0.2, loss_agg_mode="seq-mean-token-sum-norm", L_max=4
        )
    else:
        loss_fn = policylab.policy_loss("dr_grpo", L_max=4)
    p = no_ref(fixture_p(dtype))
    loss, _ = loss_fn(**p)
    close(loss, -0.1258163325, atol=tol(dtype))
    close(
        grad_of(loss, p["logprobs"]),
        [[0.0, -0.125, -0.07581633246], [0.125, 0.0, 0.0]],
        atol=tol(dtype),
    )


def test_t2_2_seq_mean_token_sum():
    # (−2.8065306597 + 1.8)/2 = −0.5032653299
    loss, _ = policylab.policy_loss("ppo_clip", loss_agg_mode="seq-mean-token-sum")(
        **no_ref(fixture_p())
    )
    close(loss, -0.5032653299, atol=1e-6)


# ------------------------------------------------------------------------- T2.7 GSPO

GSPO_LP = [[0.0005, 0.0010, 0.0015], [-0.0003, 0.0001, 0.0]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["gspo", "gspo_token"])
def test_t2_7_gspo(name, dtype):
    # mean log-ratios: row 0 (0.0005+0.001+0.0015)/3 = 1e−3, row 1 (−0.0003+0.0001)/2 = −1e−4
    # s = [e^1e−3, e^−1e−4] = [1.0010005002, 0.9999000050]; clip range [1 − 3e−4, 1 + 4e−4]
    #   row 0, A=1: s > 1.0004 → −min(1.0010005, 1.0004) = −1.0004 (clipped, no gradient)
    #   row 1, A=−1: s inside → −min(−s, −s) = s = 0.999900005
    # loss = (−1.0004 + 0.999900005)/2 = −0.0002499975001
    # row 1 adds ½·(1/n_1)·Σ_t s = ½·s to the loss and ∂s/∂LP_t = s/n_1 = s/2,
    #   so ∂loss/∂LP_t = s/4 = 0.2499750012 (gspo_token: the same, via each token's own ratio)
    # seq ratio mean = (1.0010005002 + 0.9999000050)/2 = 1.0004502526
    p = no_ref(fixture_p(dtype))
    p["logprobs"] = torch.tensor(GSPO_LP, dtype=dtype, requires_grad=True)
    p["old_logprobs"] = torch.zeros(2, 3, dtype=dtype)
    loss, metrics = policylab.policy_loss(name)(**p)
    close(loss, -0.0002499975001, atol=tol(dtype))
    close(
        grad_of(loss, p["logprobs"]),
        [[0.0, 0.0, 0.0], [0.2499750012, 0.2499750012, 0.0]],
        atol=tol(dtype),
    )
    close(metrics["gspo/seq_clipfrac_high"], 0.5, atol=1e-6)
    close(metrics["gspo/seq_clipfrac_low"], 0.0, atol=1e-6)
    close(metrics["gspo/seq_ratio_mean"], 1.0004502526, atol=tol(dtype))


@pytest.mark.parametrize(
    ("name", "grad"),
    [
        # gspo_token: each token's ratio carries its own gradient: −A_t/3
        ("gspo_token", [[-1 / 3, 1 / 3, -2 / 3]]),
        # gspo: loss = −(ΣA/3)·s, ∂s/∂LP_t = s/3 → −(2/3)(1/3) = −2/9 on every token
        ("gspo", [[-2 / 9, -2 / 9, -2 / 9]]),
    ],
)
def test_t2_8_gspo_vs_gspo_token(name, grad):
    # LP = OLP → s = 1 (inside the clip range); L = −A = [−1, 1, −2], mean −2/3
    logprobs = torch.tensor([[-1.0, -1.0, -1.0]], requires_grad=True)
    loss, _ = policylab.policy_loss(name)(
        logprobs=logprobs,
        old_logprobs=torch.tensor([[-1.0, -1.0, -1.0]]),
        advantages=torch.tensor([[1.0, -1.0, 2.0]]),
        response_mask=torch.ones(1, 3),
    )
    close(loss, -0.6666666667, atol=1e-6)
    close(grad_of(loss, logprobs), grad, atol=1e-6)


# ------------------------------------------------------------------------ T2.9 CISPO


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "options", [{"eps_low": None, "eps_high": 0.2}, {}], ids=["explicit", "defaults"]
)
def test_t2_9_cispo_upper_clip_only(options, dtype):
    # w = sg(min(r, 1.2)) = [[1.2, 1, 0.6065306597], [1, 0.7408182207]] (no lower clip)
    # L = −w·A·LP = [[1.2, 0.5, 1.2130613194], [−0.3, −0.8889818648]]; Σ = 1.7240794546
    # loss = 1.7240794546/5 = 0.3448158909
    # d/dLP = −w·A/5 = [[−.24, −.2, −.1213061319], [.2, .1481636441]]
    # is_clipfrac ⟨w ≠ r⟩ = 1/5; weight_mean ⟨w⟩ = 4.5473488804/5 = 0.9094697761
    p = no_ref(fixture_p(dtype))
    loss, metrics = policylab.policy_loss("cispo", **options)(**p)
    close(loss, 0.3448158909, atol=tol(dtype))
    close(
        grad_of(loss, p["logprobs"]),
        [[-0.24, -0.2, -0.1213061319], [0.2, 0.1481636441, 0.0]],
        atol=tol(dtype),
    )
    close(metrics["cispo/is_clipfrac"], 0.2, atol=1e-6)
    close(metrics["cispo/weight_mean"], 0.9094697761, atol=tol(dtype))


def test_cispo_recipe_has_cispo_defaults():
    loss, _ = policylab.policy_loss("cispo")(**no_ref(fixture_p()))
    close(loss, 0.3448158909, atol=1e-6)


def test_t2_10_cispo_both_clips():
    # w = clip(r, 0.8, 1.2) = [[1.2, 1, 0.8], [1, 0.8]]
    # L = [[1.2, 0.5, 1.6], [−0.3, −0.96]]; Σ = 2.04 → loss 0.408
    # d/dLP = −w·A/5 = [[−.24, −.2, −.16], [.2, .16]]; is_clipfrac = 3/5; weight_mean 4.8/5 = .96
    p = no_ref(fixture_p())
    loss, metrics = policylab.policy_loss("cispo", eps_low=0.2, eps_high=0.2)(**p)
    close(loss, 0.408, atol=1e-6)
    close(grad_of(loss, p["logprobs"]), [[-0.24, -0.2, -0.16], [0.2, 0.16, 0.0]], atol=1e-6)
    close(metrics["cispo/is_clipfrac"], 0.6, atol=1e-6)
    close(metrics["cispo/weight_mean"], 0.96, atol=1e-6)


# ------------------------------------------------------------------ T2.13 value loss

T2_13 = {
    "values": [[0.9, 1.2, 0.9]],
    "old_values": [[0.5, 0.6, 0.0]],
    "returns": [[0.96575, 0.985, 1.0]],
    "response_mask": [[1, 1, 1]],
}


def test_t2_13_value_clip():
    # V_c = clip(V, V_old ± 0.5) = [0.9, 1.1, 0.5]
    # (V − ret)²   = [0.0043230625, 0.046225, 0.01]
    # (V_c − ret)² = [0.0043230625, 0.013225, 0.25]
    # max = [0.0043230625, 0.046225, 0.25]; loss = 0.5·0.3005480625/3 = 0.05009134375
    # clipfrac ⟨(V_c−ret)² > (V−ret)²⟩ = 1/3 (only the last token)
    values = torch.tensor(T2_13["values"], dtype=F64, requires_grad=True)
    loss, metrics = policylab.value_loss("value_clip", clip=0.5)(**{**T2_13, "values": values})
    close(loss, 0.05009134375, atol=1e-9)
    close(metrics["vf/loss"], 0.05009134375, atol=1e-9)
    close(metrics["vf/clipfrac"], 1 / 3, atol=1e-6)
    # gradient: token 0 and 1 use the unclipped branch (V − ret)/3, token 2 the clipped
    # branch whose V_c is constant → [(0.9−0.96575)/3, (1.2−0.985)/3, 0]
    #                              = [−0.0219166667, 0.0716666667, 0]
    close(grad_of(loss, values), [[-0.0219166667, 0.0716666667, 0.0]], atol=1e-9)


def test_t2_13_value_loss_unclipped():
    # 0.5·(0.0043230625 + 0.046225 + 0.01)/3 = 0.01009134375
    loss, metrics = policylab.value_loss("value_clip", clip=None)(**T2_13)
    close(loss, 0.01009134375, atol=1e-6)
    close(metrics["vf/clipfrac"], 0.0, atol=1e-6)


# ------------------------------------------------------------------- T2.14 dual clip

T2_14 = {
    "logprobs": [[0.0, 0.0, 0.0]],
    "old_logprobs": [[-1.5, -0.5, 0.5]],
    "advantages": [[-1.0, -1.0, 2.0]],
    "response_mask": [[1, 1, 1]],
}


def test_t2_14_dual_clip():
    # r = e^[1.5, 0.5, −0.5] = [4.48168907, 1.648721271, 0.6065306597]
    #   token 0 (A=−1): max(4.4817, 1.2) = 4.4817 → min(4.4817, c·|A| = 3) = 3
    #   token 1 (A=−1): max(1.6487, 1.2) = 1.6487 → min(1.6487, 3) = 1.6487
    #   token 2 (A=2):  −min(2·0.6065, 2·0.8) = −1.2130613195
    # loss = (3 + 1.648721271 − 1.213061319)/3 = 1.145219984; dualclip_frac ⟨A<0 ∧ r>3⟩ = 1/3
    loss, metrics = policylab.policy_loss(
        "ppo_clip", eps_low=0.2, eps_high=0.2, dual_clip_c=3.0, loss_agg_mode="token-mean"
    )(**T2_14)
    close(loss, 1.145219984, atol=1e-6)
    close(metrics["pg/dualclip_frac"], 1 / 3, atol=1e-6)


def test_t2_14_without_dual_clip():
    # (4.48168907 + 1.648721271 − 1.213061319)/3 = 1.639116341
    loss, _ = policylab.policy_loss("ppo_clip", eps_low=0.2, eps_high=0.2)(**T2_14)
    close(loss, 1.639116341, atol=1e-6)


def test_nested_lists_equal_tensors():
    as_lists, _ = policylab.policy_loss("ppo_clip", dual_clip_c=3.0)(**T2_14)
    as_tensors, _ = policylab.policy_loss("ppo_clip", dual_clip_c=3.0)(
        **{k: torch.tensor(v, dtype=F64) for k, v in T2_14.items()}
    )
    close(as_lists.double(), as_tensors.detach(), atol=1e-6)


# -------------------------------------------------------------- T6.1 overlong shaping


def test_t6_1_overlong_shaping():
    # L_max − L_cache = 6: ≤ 6 → 0; 7 → (6 − 7)/4 = −0.25; 8 → −0.5; 10 → −1; > 10 → −1
    out = policylab.reward_shaping("overlong", L_max=10, L_cache=4)(lengths=[5, 6, 7, 8, 10, 12])
    assert out.shape == (6,)
    close(out, [0.0, 0.0, -0.25, -0.5, -1.0, -1.0], atol=1e-7)


def test_t6_1_overlong_shaping_paper_values():
    # 20480 − 4096 = 16384: 17408 → −1024/4096 = −0.25; 18432 → −0.5; 20480 → −1
    fn = policylab.reward_shaping("overlong", L_max=20480, L_cache=4096)
    out = fn(lengths=[16000, 16384, 17408, 18432, 20480])
    close(out, [0.0, 0.0, -0.25, -0.5, -1.0], atol=1e-7)


# ------------------------------------------------------------------ T6.4 / T6.5 DAPO


@pytest.mark.parametrize("source", ["overrides", "dapo recipe"])
def test_t6_4_clip_higher(source):
    # eps_high 0.28: r = 1.2214 < 1.28 is no longer clipped:
    #   L = [[−1.221402758, −1, −0.6065306597], [1, 0.8]]; Σ = −1.0279334179 → ÷5 = −0.2055866836
    #   clipfrac_low = 1/5 (r=0.7408 < 0.8, A<0), clipfrac_high = 0.
    # The dapo recipe adds dual clip c=10, inactive here (every r < 10).
    if source == "overrides":
        loss_fn = policylab.policy_loss(
            "ppo_clip", eps_low=0.2, eps_high=0.28, loss_agg_mode="token-mean"
        )
    else:
        loss_fn = policylab.policy_loss("dapo")
    loss, metrics = loss_fn(**no_ref(fixture_p()))
    close(loss, -0.2055866836, atol=1e-6)
    close(metrics["pg/clipfrac_low"], 0.2, atol=1e-6)
    close(metrics["pg/clipfrac_high"], 0.0, atol=1e-6)


def test_t6_4_variants():
    p = no_ref(fixture_p())
    # eps_high 0.2: −1.0065306597/5 = −0.2013061319
    loss, _ = policylab.policy_loss("ppo_clip", eps_low=0.2, eps_high=0.2)(**p)
    close(loss, -0.2013061319, atol=1e-6)
    # seq-mean-token-mean: (−2.8279334179/3 + 1.8/2)/2 = (−0.9426444726 + 0.9)/2 = −0.02132223631
    loss, _ = policylab.policy_loss(
        "ppo_clip", eps_low=0.2, eps_high=0.28, loss_agg_mode="seq-mean-token-mean"
    )(**p)
    close(loss, -0.02132223631, atol=1e-6)


def test_t6_5_truncated_row_masked_out():
    # Overlong filtering zeroes row 1's mask: token-mean over row 0 only:
    #   (−1.2214027582 − 1 − 0.6065306597)/3 = −2.8279334179/3 = −0.9426444726
    p = no_ref(fixture_p())
    p["response_mask"] = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    loss, _ = policylab.policy_loss("dapo")(**p)
    close(loss, -0.9426444726, atol=1e-6)
    # row 1 gets no gradient
    assert (grad_of(loss, p["logprobs"])[1] == 0).all()


# ---------------------------------------------------------------------- validation


def test_unknown_override_names_the_field():
    with pytest.raises(ValueError) as err:
        policylab.policy_loss("ppo_clip", eps_hgih=0.3)
    assert "eps_hgih" in str(err.value)
    assert "eps_high" in str(err.value)  # lists the valid fields


@pytest.mark.parametrize(
    ("field", "value", "hint"),
    [
        ("loss_agg_mode", "token-median", "token-mean"),
        ("kl_estimator", "k9", "k3"),
        ("dual_clip_c", 0.5, "dual_clip_c"),
    ],
)
def test_bad_override_value(field, value, hint):
    with pytest.raises(ValueError) as err:
        policylab.policy_loss("ppo_clip", **{field: value})
    assert field in str(err.value)
    assert hint in str(err.value)


def test_unknown_loss_lists_choices():
    with pytest.raises((ValueError, KeyError)) as err:
        policylab.policy_loss("nope")
    for name in ("ppo_clip", "gspo", "cispo", "reinforce"):
        assert name in str(err.value)


# -------------------------------------------------------------------------- properties

# (name, overrides) covering every loss, every aggregation mode, dual clip and each KL.
LOSSES = [
    ("ppo_clip", {}),
    (
        "ppo_clip",
        {
            "eps_low": 0.1,
            "eps_high": 0.28,
            "dual_clip_c": 3.0,
            "loss_agg_mode": "seq-mean-token-mean",
            "kl_estimator": "k3",
            "kl_coef": 0.1,
        },
    ),
    (
        "ppo_clip",
        {
            "loss_agg_mode": "seq-mean-token-sum-norm",
            "L_max": 8,
            "kl_estimator": "k2",
            "kl_coef": 0.05,
        },
    ),
    ("ppo_clip", {"loss_agg_mode": "token-sum", "kl_estimator": "k3_low_var", "kl_coef": 0.05}),
    ("ppo_clip", {"loss_agg_mode": "seq-mean-token-sum", "kl_estimator": "k1", "kl_coef": 0.05}),
    ("gspo", {}),
    ("gspo_token", {}),
    ("cispo", {}),
    ("cispo", {"eps_low": 0.2, "eps_high": 0.28, "loss_agg_mode": "seq-mean-token-mean"}),
    ("reinforce", {}),
    ("reinforce", {"loss_agg_mode": "seq-mean-token-sum"}),
]
LOSS_IDS = [f"{n}-{i}" for i, (n, _) in enumerate(LOSSES)]


def _inputs(batch: Ragged, *, scale: float = 0.3, per_row_adv: bool = False) -> dict:
    """Random float64 policy-loss inputs, zero at masked positions."""
    gen = batch.gen()
    mask = batch.mask
    shape = batch.shape
    old = -torch.rand(shape, generator=gen, dtype=F64) * 3
    logp = old + scale * torch.randn(shape, generator=gen, dtype=F64)
    ref = old + 0.3 * torch.randn(shape, generator=gen, dtype=F64)
    if per_row_adv:
        adv = torch.randn(shape[0], generator=gen, dtype=F64)
    else:
        adv = torch.randn(shape, generator=gen, dtype=F64) * mask
    return {
        "logprobs": logp * mask,
        "old_logprobs": old * mask,
        "advantages": adv,
        "response_mask": mask,
        "ref_logprobs": ref * mask,
    }


def _scale_for(name: str) -> float:
    # gspo's clip range is ±3e−4: keep log-ratios small so some rows are inside it
    return 3e-4 if name.startswith("gspo") else 0.3


@pytest.mark.parametrize(("name", "overrides"), LOSSES, ids=LOSS_IDS)
@PROPERTY
@given(batch=ragged_batches())
def test_masked_garbage_never_matters(name, overrides, batch):
    loss_fn = policylab.policy_loss(name, **overrides)
    clean = _inputs(batch, scale=_scale_for(name))
    assert_masked_garbage_never_matters(loss_fn, clean, batch, nonfinite_inputs=False)


# ratio 1 (logprobs == old_logprobs): the clipped surrogates reduce to −A·r with dr/dlogp = 1,
# so their gradient is REINFORCE's −A/normaliser. gspo only with a per-row-constant A.
RATIO_ONE = [
    ("ppo_clip", {}),
    ("ppo_clip", {"eps_low": 0.1, "eps_high": 0.28, "dual_clip_c": 3.0}),
    ("ppo_clip", {"eps_low": 0.3, "eps_high": 0.3, "loss_agg_mode": "seq-mean-token-mean"}),
    ("ppo_clip", {"loss_agg_mode": "seq-mean-token-sum-norm", "L_max": 8, "dual_clip_c": 10.0}),
    ("ppo_clip", {"loss_agg_mode": "token-sum"}),
    ("ppo_clip", {"loss_agg_mode": "seq-mean-token-sum", "eps_low": 0.05, "eps_high": 0.05}),
    ("cispo", {}),
    ("cispo", {"eps_low": 0.2, "eps_high": 0.28, "loss_agg_mode": "seq-mean-token-mean"}),
    ("gspo_token", {}),
    ("gspo", {}),
]


@pytest.mark.parametrize(
    ("name", "overrides"), RATIO_ONE, ids=[f"{n}-{i}" for i, (n, _) in enumerate(RATIO_ONE)]
)
@PROPERTY
@given(batch=ragged_batches())
def test_ratio_one_gradient_equals_reinforce(name, overrides, batch):
    data = _inputs(batch, per_row_adv=(name == "gspo"))
    data["old_logprobs"] = data["logprobs"].clone()
    default_mode = "seq-mean-token-mean" if name.startswith("gspo") else "token-mean"
    rf_overrides = {"loss_agg_mode": overrides.get("loss_agg_mode", default_mode)}
    if "L_max" in overrides:
        rf_overrides["L_max"] = overrides["L_max"]

    lp = data["logprobs"].clone().requires_grad_(True)
    loss, _ = policylab.policy_loss(name, **overrides)(**{**no_ref(data), "logprobs": lp})
    lp_rf = data["logprobs"].clone().requires_grad_(True)
    loss_rf, _ = policylab.policy_loss("reinforce", **rf_overrides)(
        **{**no_ref(data), "logprobs": lp_rf}
    )
    close(grad_of(loss, lp), grad_of(loss_rf, lp_rf), atol=1e-12, rtol=1e-10)


def test_reinforce_hand_case():
    # L = −A·logp on Fixture P, token-mean: −(−1 − 0.5 − 2 + 0.3 + 1.2)/5 = 2/5 = 0.4;
    # gradient −A/5 = [[−0.2, −0.2, −0.2], [0.2, 0.2, 0]]
    p = no_ref(fixture_p())
    loss, _ = policylab.policy_loss("reinforce")(**p)
    close(loss, 0.4, atol=1e-6)
    close(grad_of(loss, p["logprobs"]), [[-0.2, -0.2, -0.2], [0.2, 0.2, 0.0]], atol=1e-6)


def _gradcheck_inputs(name: str, seed: int) -> dict:
    """Fixed float64 inputs whose ratios stay away from every kink (clip edges, dual clip c).

    Token log-ratios come from {−0.6, −0.16, 0.03, 0.14, 0.5, 1.6} ± 0.01, clear of
    ln(1 ± eps) for eps in {0.05, 0.1, 0.2, 0.28, 0.3} and of ln 3, ln 10. For gspo the
    row-mean log-ratio is either within ±5e−5 (inside [−3e−4, +4e−4]) or near ±0.05."""
    gen = torch.Generator().manual_seed(seed)
    mask = torch.tensor(
        [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [1, 0, 0, 0, 0]], dtype=F64
    )
    old = -torch.rand(4, 5, generator=gen, dtype=F64) * 3
    if name.startswith("gspo"):
        centre = torch.tensor([0.0, 0.05, 0.0, -0.05], dtype=F64)[:, None]
        spread = torch.where(centre == 0, 5e-5, 1e-2)
        log_ratio = centre + spread * (2 * torch.rand(4, 5, generator=gen, dtype=F64) - 1)
    else:
        levels = torch.tensor([-0.6, -0.16, 0.03, 0.14, 0.5, 1.6], dtype=F64)
        pick = torch.randint(0, len(levels), (4, 5), generator=gen)
        log_ratio = levels[pick] + 0.01 * (2 * torch.rand(4, 5, generator=gen, dtype=F64) - 1)
    return {
        "logprobs": (old + log_ratio) * mask,
        "old_logprobs": old * mask,
        "advantages": torch.randn(4, 5, generator=gen, dtype=F64) * mask,
        "response_mask": mask,
        "ref_logprobs": (old + 0.3 * torch.randn(4, 5, generator=gen, dtype=F64)) * mask,
    }


# Losses whose gradient is the derivative of their value: gradcheck applies. cispo and
# gspo_token are defined through stop-gradients (sg[w], sg[s_i]), so their gradient is by
# design not the derivative of the loss value; they are checked against a reference below.
DIFFERENTIABLE = [(n, o) for n, o in LOSSES if n not in ("cispo", "gspo_token")]


@pytest.mark.parametrize(
    ("name", "overrides"),
    DIFFERENTIABLE,
    ids=[f"{n}-{i}" for i, (n, _) in enumerate(DIFFERENTIABLE)],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_gradcheck(name, overrides, seed):
    loss_fn = policylab.policy_loss(name, **overrides)
    data = _gradcheck_inputs(name, seed)
    logp = data.pop("logprobs").clone().requires_grad_(True)

    def f(x):
        return loss_fn(logprobs=x, **data)[0]

    assert torch.autograd.gradcheck(f, (logp,), eps=1e-6, atol=1e-7, rtol=1e-5)
    assert grad_of(f(logp), logp).abs().sum() > 0  # not a vacuous pass


def _reference_grad(coef: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Gradient of aggregate(coef·x, m, mode) w.r.t. x: each valid token's coefficient over
    the mode's normaliser (the aggregator itself is tested in test_aggregate.py)."""
    x = torch.zeros_like(coef, requires_grad=True)
    return grad_of(aggregate(coef.detach() * x, mask, mode), x)


@pytest.mark.parametrize(
    ("eps_low", "eps_high", "mode"),
    [(None, 0.2, "token-mean"), (0.2, 0.28, "seq-mean-token-mean")],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_cispo_gradient_reference(eps_low, eps_high, mode, seed):
    # ∂L/∂logp = −w·A with w = sg[clip(r, 1 − eps_low, 1 + eps_high)] on every valid token
    data = _gradcheck_inputs("cispo", seed)
    logp = data.pop("logprobs").clone().requires_grad_(True)
    loss, _ = policylab.policy_loss(
        "cispo", eps_low=eps_low, eps_high=eps_high, loss_agg_mode=mode
    )(logprobs=logp, **data)
    r = torch.exp(logp.detach() - data["old_logprobs"])
    w = r.clamp(max=1 + eps_high) if eps_low is None else r.clamp(1 - eps_low, 1 + eps_high)
    expected = _reference_grad(-w * data["advantages"], data["response_mask"], mode)
    close(grad_of(loss, logp), expected, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_gspo_token_gradient_reference(seed):
    # s[i,t] = sg[s_i]·exp(logp − sg[logp]): each token's gradient is −A[i,t]·s_i unless its
    # min picks the clipped branch (A > 0 ∧ s_i > 1 + 4e−4, or A < 0 ∧ s_i < 1 − 3e−4).
    data = _gradcheck_inputs("gspo_token", seed)
    logp = data.pop("logprobs").clone().requires_grad_(True)
    loss, _ = policylab.policy_loss("gspo_token")(logprobs=logp, **data)
    mask, adv = data["response_mask"], data["advantages"]
    n = mask.sum(1, keepdim=True)
    s = torch.exp(((logp.detach() - data["old_logprobs"]) * mask).sum(1, keepdim=True) / n)
    clipped = ((adv > 0) & (s > 1 + 4e-4)) | ((adv < 0) & (s < 1 - 3e-4))
    coef = torch.where(clipped, 0.0, -adv * s)
    expected = _reference_grad(coef, mask, "seq-mean-token-mean")
    assert clipped[mask.bool()].any() and (~clipped)[mask.bool()].any()  # both branches seen
    close(grad_of(loss, logp), expected, atol=1e-12, rtol=1e-10)


@PROPERTY
@given(batch=ragged_batches())
def test_gspo_token_equals_gspo_for_per_row_advantages(batch):
    # spec §2.4: with a constant A_i, GSPO-token equals GSPO in value and gradient
    data = _inputs(batch, scale=3e-4, per_row_adv=True)
    out = {}
    for name in ("gspo", "gspo_token"):
        lp = data["logprobs"].clone().requires_grad_(True)
        loss, _ = policylab.policy_loss(name)(**{**no_ref(data), "logprobs": lp})
        out[name] = (loss.detach(), grad_of(loss, lp))
    close(out["gspo_token"][0], out["gspo"][0], atol=1e-12, rtol=1e-10)
    close(out["gspo_token"][1], out["gspo"][1], atol=1e-12, rtol=1e-10)


BASE_KEYS = {
    "pg/clipfrac_low",
    "pg/clipfrac_high",
    "pg/clipfrac",
    "pg/approx_kl",
    "pg/approx_kl_k3",
    "pg/ratio_mean",
    "pg/ratio_max",
    "pg/ratio_min",
    "pg/loss",
}


CLIP_KEYS = {"pg/clipfrac_low", "pg/clipfrac_high", "pg/clipfrac"}


def _expected_keys(name: str, overrides: dict) -> set[str]:
    # cispo never clips the loss (§2.5 logs cispo/is_clipfrac instead) and reinforce has no clip.
    keys = set(BASE_KEYS) if name in ("ppo_clip", "gspo", "gspo_token") else BASE_KEYS - CLIP_KEYS
    if overrides.get("kl_estimator") and overrides.get("kl_coef", 0) > 0:
        keys |= {"kl/ref", "kl/loss", "kl/coef"}
    if name == "ppo_clip" and overrides.get("dual_clip_c"):
        keys.add("pg/dualclip_frac")
    if name.startswith("gspo"):
        keys |= {"gspo/seq_clipfrac_low", "gspo/seq_clipfrac_high", "gspo/seq_ratio_mean"}
    if name == "cispo":
        keys |= {"cispo/is_clipfrac", "cispo/weight_mean"}
    return keys


@pytest.mark.parametrize(("name", "overrides"), LOSSES, ids=LOSS_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_finite_loss_and_metric_keys(name, overrides, dtype):
    data = {k: v.to(dtype) for k, v in _gradcheck_inputs(name, 0).items()}
    loss, metrics = policylab.policy_loss(name, **overrides)(**data)
    assert loss.dim() == 0 and torch.isfinite(loss)
    missing = _expected_keys(name, overrides) - metrics.keys()
    assert not missing, f"missing metrics {sorted(missing)}"
    for key, value in metrics.items():
        assert isinstance(value, float), key
        assert math.isfinite(value), key


@pytest.mark.parametrize(("name", "overrides"), LOSSES, ids=LOSS_IDS)
def test_empty_batch_gives_zero_loss_with_graph(name, overrides):
    data = _gradcheck_inputs(name, 0)
    data["response_mask"] = torch.zeros(4, 5, dtype=F64)
    logp = data.pop("logprobs").clone().requires_grad_(True)
    loss, metrics = policylab.policy_loss(name, **overrides)(logprobs=logp, **data)
    close(loss, 0.0, atol=0.0)
    assert loss.requires_grad
    close(grad_of(loss, logp), torch.zeros(4, 5, dtype=F64), atol=0.0)
    assert all(math.isfinite(v) for v in metrics.values())
