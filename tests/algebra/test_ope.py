"""Tests of algebra/ope.py against the spec (seed_control_theory.md §5.5, arXiv 2106.13125).

Expectations over μ are exact: every trajectory of the two-step MDP2 problem is enumerated
with its probability, so "E[Ĥ] = oracle" is an equality to rounding, not to MC error."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch.func import grad, hessian

from policylab.algebra.ope import (
    OPEOptions,
    centred_cosine,
    effective_sample_size,
    ope_estimators,
    require_coverage,
    truncated_value,
)

D = torch.float64
GAMMA = 0.9
CFG = OPEOptions(gamma=GAMMA)
NAMES = ["doubly_robust", "stepwise_is", "taylor1", "taylor2", "vtrace"]


def t(x):
    return torch.tensor(x, dtype=D)


def mdp2():
    P = torch.zeros(2, 2, 2, dtype=D)
    P[0, 0], P[0, 1] = t([0.9, 0.1]), t([0.2, 0.8])
    P[1, 0], P[1, 1] = t([0.5, 0.5]), t([0.0, 1.0])
    return P, t([[1.0, 0.0], [0.0, 2.0]])


THETA = t([[0.5, 0.0], [0.0, -0.5]])  # parameter order θ(0,0), θ(0,1), θ(1,0), θ(1,1)
MU = torch.full((2, 2), 0.5, dtype=D)


def enumerated(P, R):
    """The 8 two-step trajectories from s₀ = 0 under μ uniform, each split by s₂ (read only
    by a bootstrap V(s₂)): states [16, 3], actions [16, 2], rewards [16, 2], probabilities."""
    rows = list(itertools.product([0, 1], repeat=4))  # a₀, s₁, a₁, s₂ (s₂ only for V)
    states = torch.tensor([[0, s1, s2] for _, s1, _, s2 in rows])
    actions = torch.tensor([[a0, a1] for a0, _, a1, _ in rows])
    prob = torch.stack(
        [0.25 * P[0, a0, s1] * P[s1, a1, s2] for a0, s1, a1, s2 in rows]
    )  # μ(a₀)μ(a₁) = 1/4
    return states, actions, R[states[:, :2], actions], prob


def expected(name, P, R, values_of_state, cfg=CFG, current=None):
    """θ ↦ E_μ[V̂(θ)] by enumeration; values_of_state [T+1, S] gives V(s_t) at step t."""
    states, actions, rewards, prob = enumerated(P, R)
    values = values_of_state[torch.arange(3), states]
    behaviour_logp = torch.log(MU)[states[:, :2], actions]
    mask = torch.ones(len(prob), 2, dtype=D)
    fn = ope_estimators.get(name)

    def f(theta):
        logp = torch.log_softmax(theta, -1)[states[:, :2], actions]
        blp = logp if current == "same_tensor" else behaviour_logp
        return (prob * fn(logp, blp, rewards, values, mask, cfg)).sum()

    return f


def oracle(P, R, horizon=2):
    return lambda theta: truncated_value(P, R, theta, 0, GAMMA, horizon)


def v_mu_infinite(P, R):
    P_mu = torch.einsum("sa,sat->st", MU, P)
    return torch.linalg.solve(torch.eye(2, dtype=D) - GAMMA * P_mu, (MU * R).sum(-1))


def no_bootstrap(V):
    """V at steps 0 and 1, and V(s_T) = 0 at T = 2 (no bootstrap)."""
    return torch.stack([V, V, torch.zeros_like(V)])


# ---- T5.1 bandit --------------------------------------------------------------------------


def test_bandit_gradient_hessian_and_stepwise_is():
    # V(θ) = π_θ·r; ∇V = π ⊙ (r − V), the spec's hand numbers.
    r, theta = t([1.0, 0.0, 0.5]), t([0.2, -0.1, 0.0])
    P = torch.ones(1, 3, 1, dtype=D)
    f = lambda th: truncated_value(P, r[None], th[None], 0, 0.9, 1)  # noqa: E731
    want_H = t([[0.038381, 0.011451, -0.049831], [0.011451, -0.067116, 0.055666]])
    want_H = torch.cat([want_H, t([[-0.049831, 0.055666, -0.005834]])])
    torch.testing.assert_close(
        grad(f)(theta), t([0.175566, -0.159371, -0.016195]), atol=1e-6, rtol=0
    )
    torch.testing.assert_close(hessian(f)(theta), want_H, atol=1e-6, rtol=0)

    # E_{a∼uniform}[∇²(π(a)/μ(a))·r(a)]: one row per arm, equal weights.
    def is_estimate(th):
        logp = torch.log_softmax(th, 0)[:, None]
        blp = torch.full((3, 1), -math.log(3.0), dtype=D)
        v = ope_estimators.get("stepwise_is")(
            logp, blp, r[:, None], torch.zeros(3, 2, dtype=D), torch.ones(3, 1, dtype=D), CFG
        )
        return v.mean()

    torch.testing.assert_close(hessian(is_estimate)(theta), hessian(f)(theta), atol=1e-12, rtol=0)


# ---- T5.2 two steps on MDP2 ---------------------------------------------------------------


def test_mdp2_two_step_oracle():
    P, R = mdp2()
    f = oracle(P, R)
    assert f(THETA).item() == pytest.approx(1.226153, abs=1e-6)
    torch.testing.assert_close(
        grad(f)(THETA).flatten(), t([0.349826, -0.349826, -0.154092, 0.154092]), atol=1e-6, rtol=0
    )
    a, b, c = 0.016093, 0.069586, 0.037740
    want = t([[-a, a, b, -b], [a, -a, -b, b], [b, -b, c, -c], [-b, b, -c, c]])
    torch.testing.assert_close(hessian(f)(THETA).reshape(4, 4), want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ["stepwise_is", "doubly_robust"])
def test_unbiased_estimators_give_the_exact_hessian_off_policy(name):
    # π ≠ μ; doubly robust is unbiased for any critic, so use a deliberately wrong one.
    P, R = mdp2()
    critic = t([[3.0, -1.0], [0.5, 2.0], [0.0, 0.0]])
    f = expected(name, P, R, critic)
    H, H_exact = hessian(f)(THETA), hessian(oracle(P, R))(THETA)
    assert (H - H_exact).abs().max().item() < 1e-10
    assert (grad(f)(THETA) - grad(oracle(P, R))(THETA)).abs().max().item() < 1e-10


def test_first_order_is_biased_and_block_diagonal():
    P, R = mdp2()
    f = expected("taylor1", P, R, no_bootstrap(v_mu_infinite(P, R)))
    g, H = grad(f)(THETA).flatten(), hessian(f)(THETA).reshape(4, 4)
    torch.testing.assert_close(g, t([0.277304, -0.277304, -0.190353, 0.190353]), atol=1e-6, rtol=0)
    a, b = 0.067917, 0.046621
    want = t([[-a, a, 0, 0], [a, -a, 0, 0], [0, 0, b, -b], [0, 0, -b, b]])
    torch.testing.assert_close(H, want, atol=1e-6, rtol=0)
    assert H[:2, 2:].abs().max().item() == 0.0  # the sg kills every cross-state term exactly
    f_exact = oracle(P, R)
    assert centred_cosine(g, grad(f_exact)(THETA)).item() == pytest.approx(0.982630, abs=1e-6)
    H_exact = hessian(f_exact)(THETA)
    assert centred_cosine(H, H_exact).item() == pytest.approx(0.324768, abs=1e-6)


def finite_horizon_v_mu(P, R):
    """Exact time-indexed V^μ_t of the two-step problem: [V₂-step, V₁-step, 0]."""
    P_mu = torch.einsum("sa,sat->st", MU, P)
    v1 = (MU * R).sum(-1)
    return torch.stack([v1 + GAMMA * P_mu @ v1, v1, torch.zeros(2, dtype=D)])


def test_second_order_recovers_cross_terms_on_policy_first_order_does_not():
    # At π = μ with the exact critic, every term the second-order expansion drops has zero
    # second derivative, so its Hessian is exact; first-order keeps no pair of ratios.
    P, R = mdp2()
    theta_mu = torch.zeros(2, 2, dtype=D)
    critic = finite_horizon_v_mu(P, R)
    H_exact = hessian(oracle(P, R))(theta_mu).reshape(4, 4)
    H2 = hessian(expected("taylor2", P, R, critic))(theta_mu).reshape(4, 4)
    H1 = hessian(expected("taylor1", P, R, critic))(theta_mu).reshape(4, 4)
    assert (H2 - H_exact).abs().max().item() < 1e-12
    assert H_exact[:2, 2:].abs().max().item() > 0.01
    assert H1[:2, 2:].abs().max().item() == 0.0
    # On-policy, both expansions give the exact gradient (policy-gradient theorem).
    g_exact = grad(oracle(P, R))(theta_mu)
    for name in ("taylor1", "taylor2"):
        g = grad(expected(name, P, R, critic))(theta_mu)
        assert (g - g_exact).abs().max().item() < 1e-12


def test_second_order_multiplier_must_not_be_stopped():
    # Removing the first-order multiplier's sg is what brings the cross terms: with an sg on
    # the multiplier the second-order Hessian would be block-diagonal like first-order's.
    P, R = mdp2()
    H2 = hessian(expected("taylor2", P, R, finite_horizon_v_mu(P, R)))(THETA).reshape(4, 4)
    assert H2[:2, 2:].abs().max().item() > 0.01


@pytest.mark.parametrize("name", NAMES)
def test_behaviour_logp_is_detached(name):
    # DiCE's magic box: passing logp itself as behaviour_logp equals passing logp.detach().
    P, R = mdp2()
    theta_mu = torch.zeros(2, 2, dtype=D)
    critic = finite_horizon_v_mu(P, R)
    f_same = expected(name, P, R, critic, current="same_tensor")
    f_data = expected(name, P, R, critic)
    torch.testing.assert_close(hessian(f_same)(theta_mu), hessian(f_data)(theta_mu))
    torch.testing.assert_close(grad(f_same)(theta_mu), grad(f_data)(theta_mu))


# ---- V-trace, masks, log space ------------------------------------------------------------


def test_vtrace_one_step_hand_case_and_untruncated_limit():
    # ρ = 2, V₀ = 1, V₁ = 3, r = 1, γ = 0.9: δ = 1 + 2.7 − 1 = 2.7;
    # V-trace (ρ̄ = 1): 1 + 2.7 = 3.7; doubly robust: 1 + 2·2.7 = 6.4.
    args = (t([[math.log(2.0)]]), t([[0.0]]), t([[1.0]]), t([[1.0, 3.0]]), t([[1.0]]))
    assert ope_estimators.get("vtrace")(*args, CFG).item() == pytest.approx(3.7)
    assert ope_estimators.get("doubly_robust")(*args, CFG).item() == pytest.approx(6.4)
    untruncated = OPEOptions(gamma=GAMMA, rho_max=math.inf, c_max=math.inf)
    assert ope_estimators.get("vtrace")(*args, untruncated).item() == pytest.approx(6.4)


@pytest.mark.parametrize("name", NAMES)
def test_padding_equals_the_short_row(name):
    g = torch.Generator().manual_seed(0)
    logp, blp = -torch.rand(1, 3, generator=g, dtype=D), -torch.rand(1, 3, generator=g, dtype=D)
    rewards, values = torch.rand(1, 3, generator=g, dtype=D), torch.rand(1, 4, generator=g, dtype=D)
    fn = ope_estimators.get(name)
    short = fn(logp[:, :2], blp[:, :2], rewards[:, :2], values[:, :3], torch.ones(1, 2), CFG)
    garbage = values.clone()
    garbage[:, 3] = 1e6  # beyond the bootstrap V(s₂): must never be read
    padded = fn(logp, blp, rewards, garbage, t([[1.0, 1.0, 0.0]]), CFG)
    torch.testing.assert_close(padded, short)


def test_log_space_ratios_survive_tiny_probabilities():
    # π = μ with probabilities e^-800 (exp underflows to 0 in float64): the ratio is still 1,
    # so the V-trace family returns the plain discounted return and the expansions their
    # zero-order term V₀ = 0.
    T = 300
    logp = torch.full((1, T), -800.0, dtype=D)
    rewards = torch.ones(1, T, dtype=D)
    ret = (1 - GAMMA**T) / (1 - GAMMA)
    for name in NAMES:
        v = ope_estimators.get(name)(
            logp, logp, rewards, torch.zeros(1, T + 1), torch.ones(1, T), CFG
        )
        want = 0.0 if name.startswith("taylor") else ret
        assert v.item() == pytest.approx(want, rel=1e-12), name


def test_zero_behaviour_probability_is_an_error():
    blp = t([[0.0, -math.inf]])
    with pytest.raises(ValueError, match=r"behaviour_logp\[0, 1\].*μ\(a\|s\) must be > 0"):
        ope_estimators.get("stepwise_is")(
            torch.zeros(1, 2, dtype=D),
            blp,
            torch.zeros(1, 2),
            torch.zeros(1, 3),
            torch.ones(1, 2),
            CFG,
        )
    with pytest.raises(ValueError, match=r"behaviour_probs\[1, 0\] = 0.0"):
        require_coverage(t([[0.5, 0.5], [0.1, 0.9]]), t([[0.5, 0.5], [0.0, 1.0]]))
    require_coverage(t([[1.0, 0.0]]), t([[0.5, 0.5]]))  # π need not cover μ


def test_bad_shapes_and_masks_are_errors():
    z = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"values must be \[B, T\+1\]"):
        ope_estimators.get("taylor1")(z, z, z, z, torch.ones(2, 3), CFG)
    with pytest.raises(ValueError, match="right-padded"):
        ope_estimators.get("taylor1")(z, z, z, torch.zeros(2, 4), t([[1, 0, 1], [1, 1, 1]]), CFG)
    with pytest.raises(ValueError, match="OPEOptions.gamma"):
        OPEOptions(gamma=1.5)


def test_effective_sample_size():
    logp = torch.zeros(4, 3, dtype=D)
    assert effective_sample_size(logp, logp, torch.ones(4, 3)).item() == pytest.approx(4.0)
    # One row has all the weight (log w = 500 vs 0): ESS ≈ 1 without overflow.
    skewed = logp.clone()
    skewed[0] = 500.0 / 3
    assert effective_sample_size(skewed, logp, torch.ones(4, 3)).item() == pytest.approx(1.0)


# ---- oracle and metric --------------------------------------------------------------------


def test_truncated_value_limits_and_errors():
    P, R = mdp2()
    uniform = torch.zeros(2, 2, dtype=D)
    # T0.1: V^uniform(0) = 7.773973; 400 sweeps approach it within γ^400·R_max/(1 − γ).
    assert truncated_value(P, R, uniform, 0, GAMMA, None).item() == pytest.approx(
        7.773973, abs=1e-6
    )
    assert truncated_value(P, R, uniform, 0, GAMMA, 400).item() == pytest.approx(7.773973, abs=1e-6)
    assert truncated_value(P, R, uniform, 1, GAMMA, 1).item() == pytest.approx(1.0)  # (0 + 2)/2
    bad = P.clone()
    bad[1, 1] = t([0.5, 0.6])
    with pytest.raises(ValueError, match="rows P"):
        truncated_value(bad, R, uniform, 0, GAMMA, 2)
    with pytest.raises(ValueError, match="must be < 1 when horizon is None"):
        truncated_value(P, R, uniform, 0, 1.0, None)
    with pytest.raises(ValueError, match="start = 2"):
        truncated_value(P, R, uniform, 2, GAMMA, 2)


def test_centred_cosine():
    # Centred: [1, 2, 3] → [−1, 0, 1], [1, 2, 4] → [−4/3, −1/3, 5/3]; cos = 3/√(2·42/9).
    assert centred_cosine(t([1.0, 2.0, 3.0]), t([3.0, 2.0, 1.0])).item() == pytest.approx(-1.0)
    assert centred_cosine(t([1.0, 2.0, 3.0]), t([1.0, 2.0, 4.0])).item() == pytest.approx(
        3 / math.sqrt(2 * 42 / 9)
    )
    assert centred_cosine(t([1.0, 2.0]), t([11.0, 12.0])).item() == pytest.approx(1.0)  # shift-free
    with pytest.raises(ValueError, match="constant"):
        centred_cosine(t([1.0, 1.0]), t([1.0, 2.0]))


def test_registry_names():
    assert ope_estimators.names() == NAMES
    with pytest.raises(ValueError, match="already registered"):
        ope_estimators.add("vtrace", lambda *a: None)
