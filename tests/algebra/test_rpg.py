"""RPG losses (spec §3; arXiv:2505.17508): exact enumeration on a 3-way categorical policy
(T3.1: every regulariser's surrogate and REINFORCE form has the gradient of its objective,
to 1e-10), the token-level hand cases T3.2 (surrogate) and T3.3 (RPG-style clip), the
KL-in-advantage placement, option validation, and properties over random ragged batches
(KL terms vanish at θ = θ_old = θ_ref, masked garbage never matters, micro-batches add up)."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import (
    PROPERTY,
    Ragged,
    assert_masked_garbage_never_matters,
    close,
    grad_of,
    ragged_batches,
)
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab.algebra.aggregate import global_normaliser
from policylab.algebra.catalogue import policy_losses
from policylab.algebra.rpg import KLS

F64 = torch.float64
EXACT = 1e-10

# ---------------------------------------------------------------- T3.1 exact enumeration
# θ = [0.2, −0.1, 0.4], π_old = softmax([0.5, 0, −0.5]), R = [1, 0, 0.5], β = 0.1.
THETA = [0.2, -0.1, 0.4]
OLD_LOGITS = [0.5, 0.0, -0.5]
REF_LOGITS = [-0.3, 0.6, 0.1]  # a frozen reference ≠ π_old (our choice of numbers)
R = [1.0, 0.0, 0.5]
BETA = 0.1
# no clip anywhere, so the loss is the estimator of spec §3.1 as written
UNCLIPPED = {"eps_low": 1.0, "eps_high": 1e9, "dual_clip_c": None}
FORMS = {
    "surrogate": {"form": "surrogate", "kl_clamp": None, **UNCLIPPED},
    "in_advantage": {"form": "surrogate", "kl_placement": "in_advantage", **UNCLIPPED},
    "reinforce": {"form": "reinforce", "reinforce_clip": "none", **UNCLIPPED},
    "reinforce_rpg_clip": {"form": "reinforce", **UNCLIPPED},  # wide clip: every token active
}


def divergence(kl: str, p_theta: torch.Tensor, p_ref: torch.Tensor) -> torch.Tensor:
    """D(π_ref, πθ) by enumeration; UKL(p‖q) = Σ p·log(p/q) + Σ (q − p) (P Def. 3.1/3.4)."""

    def ukl(p, q):
        return (p * (p / q).log()).sum() + (q - p).sum()

    return {
        "forward": lambda: (p_ref * (p_ref / p_theta).log()).sum(),
        "reverse": lambda: (p_theta * (p_theta / p_ref).log()).sum(),
        "unnorm_forward": lambda: ukl(p_ref, p_theta),
        "unnorm_reverse": lambda: ukl(p_theta, p_ref),
    }[kl]()


def objective(kl: str, reference: str):
    """J(θ) = E_πθ[R] − β·D(π_ref, πθ), its gradient, and the value, exactly."""
    theta = torch.tensor(THETA, dtype=F64, requires_grad=True)
    p_theta = theta.softmax(-1)
    p_ref = torch.tensor(OLD_LOGITS if reference == "old" else REF_LOGITS, dtype=F64).softmax(-1)
    J = (p_theta * torch.tensor(R, dtype=F64)).sum() - BETA * divergence(kl, p_theta, p_ref)
    return float(J.detach()), grad_of(J, theta)


def expected_loss(kl: str, options: dict, reference: str, baseline: float = 0.0):
    """Σ_x π_old(x)·loss(x; θ): each action is a one-token batch, weighted by its sampling
    probability; returns the value and its gradient w.r.t. θ."""
    theta = torch.tensor(THETA, dtype=F64, requires_grad=True)
    logp = theta.log_softmax(-1)
    old = torch.tensor(OLD_LOGITS, dtype=F64).log_softmax(-1)
    ref = torch.tensor(REF_LOGITS, dtype=F64).log_softmax(-1)
    loss_fn = policylab.policy_loss("rpg", kl=kl, beta=BETA, reference=reference, **options)
    total = theta.new_zeros(())
    for x in range(3):
        loss_x, _ = loss_fn(
            logprobs=logp[x].view(1, 1),
            old_logprobs=old[x].view(1, 1),
            advantages=torch.tensor([[R[x] - baseline]], dtype=F64),
            response_mask=torch.ones(1, 1, dtype=F64),
            ref_logprobs=ref[x].view(1, 1),
        )
        total = total + old[x].exp() * loss_x
    return float(total.detach()), grad_of(total, theta)


def test_t3_1_spec_numbers():
    # πθ = softmax(θ) = [0.337585, 0.250089, 0.412327]; w = πθ/π_old = [0.666530, 0.814102,
    # 2.212959]. J_FKL = ⟨πθ, R⟩ − β·KL(π_old‖πθ) = 0.543748 − 0.1·0.120636 = 0.531684
    for kl, J, grad in [
        ("forward", 0.531684, [0.170913, -0.130275, -0.040639]),
        ("unnorm_forward", 0.531684, [0.170913, -0.130275, -0.040639]),
        ("reverse", 0.529834, [0.172416, -0.127362, -0.045054]),
        ("unnorm_reverse", 0.529834, [0.172416, -0.127362, -0.045054]),
    ]:
        value, g = objective(kl, "old")
        close(value, J, atol=1e-6)
        close(g, grad, atol=1e-6)


@pytest.mark.parametrize(
    ("kl", "weights"),
    [
        # W = w·R + C_D: FKL w·R + β; UFKL w·R − β(w − 1); RKL w(R − β(log w + 1));
        # URKL w(R − β·log w); e.g. FKL x=3: 2.212959·0.5 + 0.1 = 1.206479
        ("forward", [0.766530, 0.100000, 1.206479]),
        ("unnorm_forward", [0.699877, 0.018590, 0.985183]),
        ("reverse", [0.626916, -0.064667, 0.709401]),
        ("unnorm_reverse", [0.693569, 0.016744, 0.930697]),
    ],
)
def test_t3_1_reinforce_weights(kl, weights):
    # one action per row, token-sum: ∂loss/∂logp[x] = −W(x)
    theta = torch.tensor(THETA, dtype=F64)
    lp = theta.log_softmax(-1).view(3, 1).clone().requires_grad_(True)
    loss, _ = policylab.policy_loss(
        "rpg", kl=kl, beta=BETA, loss_agg_mode="token-sum", **FORMS["reinforce"]
    )(
        logprobs=lp,
        old_logprobs=torch.tensor(OLD_LOGITS, dtype=F64).log_softmax(-1).view(3, 1),
        advantages=torch.tensor(R, dtype=F64),
        response_mask=torch.ones(3, 1, dtype=F64),
    )
    close(-grad_of(loss, lp).view(3), weights, atol=1e-6)


@pytest.mark.parametrize("reference", ["old", "ref"])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("kl", KLS)
def test_t3_1_expected_gradient_is_the_objective_gradient(kl, form, reference):
    """∇_θ Σ_x π_old(x)·loss(x) = −∇J exactly, for every regulariser and form, with the
    reference equal to π_old (the paper's) or frozen (ours, spec §3.2)."""
    _, grad_J = objective(kl, reference)
    value, grad_L = expected_loss(kl, FORMS[form], reference)
    close(grad_L, -grad_J, atol=EXACT)
    if form == "surrogate":  # E_old[k_D] = D exactly, so even the value is −J
        close(value, -objective(kl, reference)[0], atol=EXACT)


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("kl", KLS)
def test_t3_1_baseline_leaves_the_expected_gradient(kl, form):
    # R − b with b = 0.5 (P Remark F.2): E_old[w·b·∇logπ] = b·∇Σπθ = 0
    _, grad_J = objective(kl, "old")
    _, grad_L = expected_loss(kl, FORMS[form], "old", baseline=0.5)
    close(grad_L, -grad_J, atol=EXACT)


def test_t3_1_equal_expectations_differ_per_sample():
    # FKL and UFKL have the same expected gradient (normalised policies) but not the same
    # per-sample weight: −∂ℓ/∂logp is w·R + β for FKL and w·R − β(w − 1) for UFKL, so the
    # two differ by β·w at every action (the variance the paper compares)
    lp = torch.tensor(THETA, dtype=F64).log_softmax(-1).view(3, 1)
    old = torch.tensor(OLD_LOGITS, dtype=F64).log_softmax(-1).view(3, 1)
    weights = {}
    for name in ("forward", "unnorm_forward"):
        x = lp.clone().requires_grad_(True)
        loss_fn = policylab.policy_loss(
            "rpg", kl=name, beta=BETA, loss_agg_mode="token-sum", **FORMS["surrogate"]
        )
        loss, _ = loss_fn(
            logprobs=x,
            old_logprobs=old,
            advantages=torch.tensor(R, dtype=F64),
            response_mask=torch.ones(3, 1, dtype=F64),
        )
        weights[name] = -grad_of(loss, x)
    close(weights["forward"] - weights["unnorm_forward"], BETA * (lp - old).exp(), atol=1e-12)


def test_first_minibatch_w_is_one():
    # spec §3.3 edge case: w ≡ 1 → UFKL/URKL penalty gradients are 0 per sample; FKL gives
    # −β and RKL +β per token (they cancel only in expectation). A = 0, one token, token-mean.
    grads = {}
    for kl in KLS:
        lp = torch.tensor([[-1.2]], dtype=F64, requires_grad=True)
        loss, metrics = policylab.policy_loss("rpg", kl=kl, beta=0.1)(
            logprobs=lp,
            old_logprobs=torch.tensor([[-1.2]], dtype=F64),
            advantages=torch.zeros(1, dtype=F64),
            response_mask=torch.ones(1, 1, dtype=F64),
        )
        grads[kl] = float(grad_of(loss, lp))
        assert metrics["rpg/kl"] == 0.0
    assert grads == pytest.approx(
        {"forward": -0.1, "reverse": 0.1, "unnorm_forward": 0.0, "unnorm_reverse": 0.0},
        abs=1e-12,
    )


# ------------------------------------------------------------ T3.2 fully differentiable
# One row, A = [1, 1, −1, −1], log w = [0.1, ln 1.5, ln 0.7, ln 2], β = 0.1, ε = (0.2, 0.28),
# c = 10, token-mean (old_logp = −1, logp = −1 + log w).
#   ℓ_PPO = [−1.105171 (w inside), −1.28 (capped), 0.8 (floored), 2 (min(2, 10))];
#   mean 0.414829/4 = 0.103707; ∂/∂logp = [−1.105171/4, 0, 0, 2/4] = [−0.276293, 0, 0, 0.5]
#   FKL: k = −log w = [−0.1, −0.405465, 0.356675, −0.693147], mean −0.210484;
#        loss 0.103707 − 0.0210484 = 0.082659; KL grad β·(−1)/4 = −0.025 per token
T3_2 = {
    "forward": (-0.210484, 0.082659, [-0.301293, -0.025, -0.025, 0.475]),
    # RKL: k = w·log w, ∂k/∂logp = w(log w + 1): x=4 2(0.693147 + 1) → 0.1·3.386294/4 = 0.084657
    "reverse": (0.463834, 0.150091, [-0.245901, 0.052705, 0.011258, 0.584657]),
    # UFKL: ∂k/∂logp = w − 1: x=2 0.1·0.5/4 = 0.0125
    "unnorm_forward": (0.115808, 0.115288, [-0.273663, 0.0125, -0.0075, 0.525]),
    # URKL: ∂k/∂logp = w·log w: x=2 0.1·1.5·0.405465/4 = 0.015205
    "unnorm_reverse": (0.137541, 0.117461, [-0.273530, 0.015205, -0.006242, 0.534657]),
}
LOG_W_32 = [0.1, math.log(1.5), math.log(0.7), math.log(2.0)]


def _row(log_w, adv, dtype=F64):
    lp = (torch.tensor([log_w], dtype=dtype) - 1.0).requires_grad_(True)
    return {
        "logprobs": lp,
        "old_logprobs": torch.full((1, len(log_w)), -1.0, dtype=dtype),
        "advantages": torch.tensor([adv], dtype=dtype),
        "response_mask": torch.ones(1, len(log_w), dtype=dtype),
    }


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("kl", KLS)
def test_t3_2_surrogate(kl, dtype):
    kl_mean, total, grad = T3_2[kl]
    p = _row(LOG_W_32, [1.0, 1.0, -1.0, -1.0], dtype)
    loss, metrics = policylab.policy_loss("rpg", kl=kl, beta=0.1)(**p)
    close(loss, total, atol=1e-6)
    close(grad_of(loss, p["logprobs"]), [grad], atol=1e-6)
    close(metrics["rpg/pg_loss"], 0.103707, atol=1e-6)
    close(metrics["rpg/kl"], kl_mean, atol=1e-6)
    # clipped: x=2 (A>0, w=1.5>1.28) and x=3 (A<0, w=0.7<0.8); dual bound 10 not reached
    assert (metrics["rpg/clipfrac_high"], metrics["rpg/clipfrac_low"]) == (0.25, 0.25)
    assert metrics["rpg/clipfrac_dual"] == 0.0


def test_kl_clamp_zeroes_the_gradient():
    # RKL at w = e^3: k = 3e^3 = 60.26 > 10 is clamped (value 10, gradient 0); A = 0
    p = _row([3.0], [0.0])
    loss, metrics = policylab.policy_loss("rpg", kl="reverse", beta=0.1)(**p)
    close(loss, 1.0, atol=1e-12)
    close(grad_of(loss, p["logprobs"]), [[0.0]], atol=1e-12)
    assert metrics["rpg/kl_clamp_frac"] == 1.0
    # forward (−log w = −3) is not clamped in the code: gradient −β
    loss, metrics = policylab.policy_loss("rpg", kl="forward", beta=0.1)(**_row([3.0], [0.0]))
    close(loss, -0.3, atol=1e-12)
    assert metrics["rpg/kl_clamp_frac"] == 0.0


def test_kl_in_advantage_placement():
    # RKL, β = 0.1, w = 1 on both tokens: A′ = A + C/w = A − 0.1·(log 1 + 1) = A − 0.1
    #   x=1: A = 1 → A′ = 0.9, ℓ = −0.9·w: value −0.9, ∂/∂logp −0.9
    #   x=2: A = 0.05 → A′ = −0.05 (branch flips), ℓ = max(0.05·w, 0.05·clip(w)) = 0.05,
    #        ∂/∂logp 0.05
    #   token-mean: loss (−0.9 + 0.05)/2 = −0.425, gradient [−0.45, 0.025]
    p = _row([0.0, 0.0], [1.0, 0.05])
    loss, metrics = policylab.policy_loss(
        "rpg", kl="reverse", beta=0.1, kl_placement="in_advantage"
    )(**p)
    close(loss, -0.425, atol=1e-12)
    close(grad_of(loss, p["logprobs"]), [[-0.45, 0.025]], atol=1e-12)
    assert metrics["rpg/branch_disagree_frac"] == 0.5


# ------------------------------------------------------------------ T3.3 RPG-style clip
# RKL, A = [1, 1, −1, −1, −1, 0.05], log w = [0.1, ln 1.5, ln 0.7, ln 2, ln 4, ln 2], β = 0.1,
# ε = (0.2, 0.28), c = 3, token-mean; old_logp = −1 so logp = −1 + log w.
#   w̄ = [1.105171, 1.28, 0.8, 1.28, 1.28, 1.28]; C = −β·w̄(log w̄ + 1)
#     = [−0.121569, −0.159598, −0.062149, −0.159598, −0.159598, −0.159598]
#   A′ = A + C/w = [0.89, 0.893601, −1.088784, −1.079799, −1.0399, −0.029799]
#   W = w·A + C = [0.983602, 1.340402, −0.762149, −2.159598, −4.159598, −0.059598]
#   branch on A′: x=1 + active (w < 1.28); x=2 + clipped (w = 1.5); x=3 − clipped (w ≤ 0.8);
#     x=4 − active (0.8 < 2 < 3); x=5 − dual-clipped (w = 4 ≥ 3); x=6 − active (A′ < 0)
#   ∂loss/∂logp = −mask·W/6 = [−0.163934, 0, 0, 0.359933, 0, 0.009933]
#   value: active −W·logp, clipped −(A·bound + C)·logp with logp = [−0.9, −0.594535,
#     −1.356675, −0.306853, 0.386294, −0.306853]:
#     [0.885242, (1.28 − 0.159598)·0.594535 = 0.666118, −(0.8 + 0.062149)·1.356675 = −1.169655,
#      −0.662679, (3 + 0.159598)·0.386294 = 1.220534, −0.018288] → 0.921273/6 = 0.153545
#   branch on A ("reward"): x=6 is positive with w = 2 ≥ 1.28 → clipped, constant
#     −(0.05·1.28 − 0.159598)·(−0.306853) = −0.029335: loss 0.153545 − 0.011047/6 = 0.151704
#   hard clip: W = A·w̄ + C = [0.983602, 1.120402, −0.862149, −1.439598, −1.439598, −0.095598]
LOG_W_33 = [0.1, math.log(1.5), math.log(0.7), math.log(2.0), math.log(4.0), math.log(2.0)]
ADV_33 = [1.0, 1.0, -1.0, -1.0, -1.0, 0.05]
T3_3 = {
    "effective": (
        {"clip_branch": "effective"},
        0.153545,
        [-0.163934, 0.0, 0.0, 0.359933, 0.0, 0.009933],
        {"high": 1 / 6, "low": 1 / 6, "dual": 1 / 6},
    ),
    "reward": (
        {"clip_branch": "reward"},
        0.151704,
        [-0.163934, 0.0, 0.0, 0.359933, 0.0, 0.0],
        {"high": 2 / 6, "low": 1 / 6, "dual": 1 / 6},
    ),
}


@pytest.mark.parametrize("branch", list(T3_3))
def test_t3_3_rpg_style_clip(branch):
    options, value, grad, fracs = T3_3[branch]
    p = _row(LOG_W_33, ADV_33)
    loss, metrics = policylab.policy_loss(
        "rpg", kl="reverse", beta=0.1, form="reinforce", dual_clip_c=3.0, **options
    )(**p)
    close(loss, value, atol=1e-6)
    close(grad_of(loss, p["logprobs"]), [grad], atol=1e-6)
    for key, frac in fracs.items():
        close(metrics[f"rpg/clipfrac_{key}"], frac, atol=1e-12)
    close(metrics["rpg/branch_disagree_frac"], 1 / 6, atol=1e-12)  # x=6: A > 0, A′ < 0


def test_t3_3_hard_clip():
    weights = [0.983602, 1.120402, -0.862149, -1.439598, -1.439598, -0.095598]
    p = _row(LOG_W_33, ADV_33)
    loss, _ = policylab.policy_loss(
        "rpg", kl="reverse", beta=0.1, form="reinforce", reinforce_clip="hard", dual_clip_c=3.0
    )(**p)
    close(grad_of(loss, p["logprobs"]), [[-x / 6 for x in weights]], atol=1e-6)


def test_clip_ties_follow_the_paper():
    # w exactly 1 − ε_low = 0.5 (ε_low = 0.5, exact in binary) on a negative branch is clipped
    # (P Alg. 2; the code keeps it), and w exactly c = 2 is dual-clipped; β = 0
    p = _row([math.log(0.5), math.log(2.0), math.log(1.5)], [-1.0, -1.0, -1.0])
    loss, metrics = policylab.policy_loss(
        "rpg", beta=0.0, form="reinforce", eps_low=0.5, dual_clip_c=2.0
    )(**p)
    # only x=3 (0.5 < 1.5 < 2) is active: ∂/∂logp = −W/3 = −(1.5·(−1))/3 = 0.5
    close(grad_of(loss, p["logprobs"]), [[0.0, 0.0, 0.5]], atol=1e-12)
    close(metrics["rpg/clipfrac_low"], 1 / 3, atol=1e-12)
    close(metrics["rpg/clipfrac_dual"], 1 / 3, atol=1e-12)


def test_zero_advantage_still_pulls_toward_the_reference():
    # A = 0, RKL, w = 2 inside a wide clip: W = C = −β·2·(ln 2 + 1) = −0.338629 → grad +0.338629
    p = _row([math.log(2.0)], [0.0])
    loss, _ = policylab.policy_loss("rpg", kl="reverse", beta=0.1, form="reinforce", eps_high=2.0)(
        **p
    )
    close(grad_of(loss, p["logprobs"]), [[0.2 * (math.log(2.0) + 1.0)]], atol=1e-12)


# -------------------------------------------------------------------------- options
@pytest.mark.parametrize(
    ("overrides", "hint"),
    [
        ({"kl": "js"}, "unnorm_reverse"),
        ({"form": "ppo"}, "reinforce"),
        ({"beta": -0.1}, "beta"),
        ({"dual_clip_c": 1.0}, "dual_clip_c"),
        ({"kl_clamp": 0.0}, "kl_clamp"),
        ({"reference": "sft"}, "reference"),
        ({"form": "reinforce", "kl_placement": "in_advantage"}, "kl_placement"),
        ({"reinforce_clip": "hard"}, "reinforce_clip"),
        ({"form": "reinforce", "reinforce_clip": "hard", "clip_branch": "reward"}, "clip_branch"),
    ],
)
def test_bad_options_name_the_field(overrides, hint):
    with pytest.raises(ValueError, match=hint):
        policylab.policy_loss("rpg", **overrides)


def test_frozen_reference_needs_ref_logprobs():
    with pytest.raises(ValueError, match="ref_logprobs"):
        policylab.policy_loss("rpg", reference="ref")(**_row([0.1], [1.0]))


def test_registered_with_its_options():
    assert "rpg" in policy_losses
    opts = policylab.policy_loss("rpg").options
    assert (opts.kl, opts.form, opts.beta, opts.eps_low, opts.eps_high, opts.dual_clip_c) == (
        "reverse",
        "surrogate",
        1e-4,
        0.2,
        0.28,
        10.0,
    )
    assert opts.loss_agg_mode == "token-mean" and opts.kl_coef == 0.0


# -------------------------------------------------------------------------- properties
VARIANTS = [
    {"form": "surrogate"},
    {"form": "surrogate", "kl_placement": "in_advantage"},
    {"form": "reinforce"},
    {"form": "reinforce", "clip_branch": "reward", "dual_clip_c": 3.0},
    {"form": "reinforce", "reinforce_clip": "hard"},
    {"form": "reinforce", "reinforce_clip": "none"},
]
options_st = st.builds(
    lambda kl, variant, reference, mode: {
        "kl": kl,
        "beta": 0.1,
        "reference": reference,
        "loss_agg_mode": mode,
        **variant,
    },
    st.sampled_from(KLS),
    st.sampled_from(VARIANTS),
    st.sampled_from(["old", "ref"]),
    st.sampled_from(["token-mean", "seq-mean-token-mean", "token-sum"]),
)


def _inputs(batch: Ragged) -> dict:
    gen = batch.gen()
    mask = batch.mask
    old = -torch.rand(batch.shape, generator=gen, dtype=F64) * 3
    return {
        "logprobs": (old + 0.4 * torch.randn(batch.shape, generator=gen, dtype=F64)) * mask,
        "old_logprobs": old * mask,
        "advantages": torch.randn(batch.shape, generator=gen, dtype=F64) * mask,
        "response_mask": mask,
        "ref_logprobs": (old + 0.3 * torch.randn(batch.shape, generator=gen, dtype=F64)) * mask,
    }


@PROPERTY
@given(batch=ragged_batches(), kl=st.sampled_from(KLS), variant=st.sampled_from(VARIANTS))
def test_kl_terms_vanish_at_the_reference(batch, kl, variant):
    # θ = θ_old = θ_ref: w = u = 1, every k_D is 0 (FKL −log 1, RKL 1·0, UFKL 1 − 0 − 1,
    # URKL 0 − 1 + 1), with either reference placement
    data = _inputs(batch)
    data["logprobs"] = data["old_logprobs"].clone()
    data["ref_logprobs"] = data["old_logprobs"].clone()
    for reference in ("old", "ref"):
        _, metrics = policylab.policy_loss("rpg", kl=kl, reference=reference, **variant)(**data)
        assert metrics["rpg/kl"] == 0.0


@PROPERTY
@given(batch=ragged_batches(), options=options_st)
def test_masked_garbage_never_matters(batch, options):
    loss_fn = policylab.policy_loss("rpg", **options)
    clean = _inputs(batch)
    assert_masked_garbage_never_matters(loss_fn, clean, batch, nonfinite_inputs=True)


@PROPERTY
@given(batch=ragged_batches(min_rows=2), options=options_st, data=st.data())
def test_micro_batches_add_up(batch, options, data):
    loss_fn = policylab.policy_loss("rpg", **options)
    inputs = _inputs(batch)
    split = data.draw(st.integers(1, batch.shape[0] - 1))
    norm = global_normaliser(batch.mask, options["loss_agg_mode"])
    lp = inputs["logprobs"].clone().requires_grad_(True)
    full, _ = loss_fn(**{**inputs, "logprobs": lp})
    parts = 0.0
    for rows in (slice(0, split), slice(split, None)):
        part = {k: v[rows] for k, v in inputs.items()}
        part["logprobs"] = lp[rows]
        loss, _ = loss_fn(**part, normaliser=norm)
        parts = parts + loss
    close(parts.detach(), full.detach(), atol=1e-12, rtol=1e-10)
    close(grad_of(parts, lp), grad_of(full, lp), atol=1e-12, rtol=1e-10)
