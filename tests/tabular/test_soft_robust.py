"""Soft-robust MDPs (papers/seed_control_theory.md §2.5, T2.1–T2.5 on MDP2 to 6 decimals),
the PG theorem against central finite differences, β → 0, bad input, and the registered
methods and tasks."""

import pytest
import torch

import policylab.tabular.soft_robust  # noqa: F401  (registers its methods and tasks)
from policylab.algebra.simplex import project_simplex
from policylab.tabular import TabularMDP, garnet, mdp2, policy_iteration
from policylab.tabular.catalogue import build, tabular_methods
from policylab.tabular.soft_robust import (
    SoftRobust,
    draw_offline_data,
    empirical_counts,
    fitted_q_update,
    rfzi_policy,
    rfzi_update,
)
from policylab.tabular.solve import NotConverged

D = torch.float64


def t(x):
    return torch.tensor(x, dtype=D)


def test_t2_1_entropic_risk_equals_the_kl_penalised_minimum():
    # σ = −log((e⁰ + e⁻¹)/2) = 0.379885; p̂ ∝ [1, e⁻¹] = [0.731059, 0.268941]
    p, X, soft = t([0.5, 0.5]), t([0.0, 1.0]), SoftRobust(1.0)
    sigma, p_hat = soft.risk(p, X), soft.tilt(p, X)
    assert sigma.item() == pytest.approx(0.379885, abs=1e-6)
    assert p_hat.tolist() == pytest.approx([0.731059, 0.268941], abs=1e-6)
    kl = (p_hat * (p_hat / p).log()).sum()
    assert (p_hat @ X).item() == pytest.approx(0.268941, abs=1e-6)
    assert kl.item() == pytest.approx(0.110944, abs=1e-6)
    assert (p_hat @ X + kl).item() == pytest.approx(sigma.item(), abs=1e-12)
    assert (p @ X).item() == 0.5  # risk-neutral


def test_entropic_risk_is_below_every_penalised_alternative():
    g = torch.Generator().manual_seed(0)
    soft = SoftRobust(2.0)
    for _ in range(20):
        p = torch.softmax(torch.randn(5, generator=g, dtype=D), -1)
        q = torch.softmax(torch.randn(5, generator=g, dtype=D), -1)
        X = 3 * torch.randn(5, generator=g, dtype=D)
        bound = q @ X + (q * (q / p).log()).sum() / soft.beta
        assert soft.risk(p, X).item() <= bound.item() + 1e-12


@pytest.mark.parametrize(
    "beta, V",
    [
        (1.0, [7.508366, 8.194981]),
        (0.01, [7.771333, 8.456265]),
        (3.0, [6.968510, 7.678067]),
        (1e-9, [7.773973, 8.458904]),  # below 1e-8: the neutral operator (T0.1)
        (0.0, [7.773973, 8.458904]),
    ],
)
def test_t2_2_soft_robust_evaluation_of_the_uniform_policy(beta, V):
    m = mdp2()
    assert SoftRobust(beta).evaluate(m, m.uniform_policy()).V.tolist() == pytest.approx(V, abs=1e-6)


def test_small_beta_tends_to_the_neutral_value():
    m = mdp2()
    neutral = torch.tensor([7.773973, 8.458904], dtype=D)
    gaps = [
        (SoftRobust(b).evaluate(m, m.uniform_policy()).V - neutral).abs().max().item()
        for b in (1e-2, 1e-4, 1e-6)
    ]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-5


def test_t2_3_tilted_kernel_occupancy_and_gradient():
    m, soft = mdp2(), SoftRobust(1.0)
    pi = m.uniform_policy()
    ev = soft.evaluate(m, pi)
    expected = [[[0.947042, 0.052958], [0.331883, 0.668117]], [[0.665214, 0.334786], [0, 1]]]
    assert torch.allclose(ev.P_hat, t(expected), atol=1e-6)
    assert soft.occupancy(m, pi, ev.P_hat).tolist() == pytest.approx([0.551713, 0.448287], abs=1e-6)
    G = soft.gradient(m, pi)
    assert torch.allclose(G, t([[43.052258, 39.796965], [31.445020, 42.029099]]), atol=1e-6)


def central_differences(soft, m, pi, h=1e-6):
    G = torch.zeros_like(pi)
    for s in range(pi.shape[0]):
        for a in range(pi.shape[1]):
            up, down = pi.clone(), pi.clone()
            up[s, a] += h
            down[s, a] -= h
            J = [soft.objective(m, x, check_rows=False) for x in (up, down)]
            G[s, a] = (J[0] - J[1]) / (2 * h)
    return G


@pytest.mark.parametrize("beta", [1.0, 3.0])
def test_t2_3_gradient_equals_central_finite_differences(beta):
    m, soft = mdp2(), SoftRobust(beta)
    pi = t([[0.3, 0.7], [0.6, 0.4]])
    assert torch.allclose(soft.gradient(m, pi), central_differences(soft, m, pi), atol=1e-6)
    pi = m.uniform_policy()
    assert torch.allclose(soft.gradient(m, pi), central_differences(soft, m, pi), atol=1e-6)


def test_gradient_equals_finite_differences_on_a_garnet():
    m = garnet(4, 3, 2, seed=1, gamma=0.9, next_state_rewards=False)
    soft = SoftRobust(0.7)
    pi = torch.softmax(torch.randn(4, 3, generator=torch.Generator().manual_seed(2), dtype=D), -1)
    assert torch.allclose(soft.gradient(m, pi), central_differences(soft, m, pi), atol=1e-5)


def test_t2_4_risk_changes_the_optimal_action():
    m = mdp2()
    V, pi = SoftRobust(1.0).optimum(m)
    assert V.tolist() == pytest.approx([14.358169, 20], abs=1e-6)
    assert pi.argmax(-1).tolist() == [1, 1] == policy_iteration(m)[1].argmax(-1).tolist()
    soft = SoftRobust(3.0)
    V, pi = soft.optimum(m)
    assert V.tolist() == pytest.approx([10.316082, 20], abs=1e-6)
    assert pi.argmax(-1).tolist() == [0, 1]
    assert soft.q_from_v(m, V)[0].tolist() == pytest.approx([10.316082, 9.767305], abs=1e-6)
    V_vi, pi_vi = soft.value_iteration(m)  # the code's DP, an independent route
    assert torch.allclose(V, V_vi, atol=1e-9) and torch.equal(pi, pi_vi)


def test_optimum_agrees_with_value_iteration_on_a_garnet_and_bounds_every_policy():
    m = garnet(6, 3, 3, seed=4, gamma=0.9, next_state_rewards=False)
    soft = SoftRobust(0.5)
    V, pi = soft.optimum(m)
    assert torch.allclose(V, soft.value_iteration(m)[0], atol=1e-8)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        other = torch.softmax(torch.randn(6, 3, generator=g, dtype=D), -1)
        assert (soft.evaluate(m, other).V <= V + 1e-9).all()
        # the soft-robust value never exceeds the neutral one (β > 0)
        assert (soft.evaluate(m, other).V <= SoftRobust(0).evaluate(m, other).V + 1e-9).all()


def test_t2_5_rfzi_iterates_and_fixed_point():
    r = t([[1.0, 0.0], [0.0, 2.0]])
    data = {"s": [0, 0, 0, 1, 1, 1], "a": [0, 0, 1, 0, 1, 1], "s_next": [0, 1, 1, 0, 1, 1]}
    counts = empirical_counts({k: torch.tensor(v) for k, v in data.items()}, 2, 2)
    log_Z = torch.zeros(2, 2, dtype=D)  # Z₀ = 1, V₀ = max_a r = [1, 2]
    # Z₁(0,0) = (e⁻¹ + e⁻²)/2 = 0.251607;  Z₁(0,1) = e⁻² = 0.135335
    log_Z = rfzi_update(log_Z, r, counts, 1.0, 0.9)
    assert torch.allclose(log_Z.exp(), t([[0.251607, 0.135335], [0.367879, 0.135335]]), atol=1e-6)
    V1 = (r - 0.9 * log_Z).max(-1).values
    assert V1.tolist() == pytest.approx([2.241897, 3.8], abs=1e-6)
    log_Z = rfzi_update(log_Z, r, counts, 1.0, 0.9)
    assert torch.allclose(log_Z.exp(), t([[0.064314, 0.022371], [0.106257, 0.022371]]), atol=1e-6)
    for _ in range(400):
        log_Z = rfzi_update(log_Z, r, counts, 1.0, 0.9)
    Q = r - 0.9 * log_Z
    assert torch.allclose(Q, t([[17.709597, 18], [16.2, 20]]), atol=1e-6)
    # = the soft-robust DP on the empirical kernel
    P_emp = counts.to(D) / counts.sum(-1, keepdim=True)
    V, _ = SoftRobust(1.0).optimum(TabularMDP(P_emp, r, [1.0, 0.0], 0.9))
    assert V.tolist() == pytest.approx([18, 20], abs=1e-6)
    assert rfzi_policy(log_Z, r, 1.0, 0.9).argmax(-1).tolist() == [1, 1]


def test_rfzi_keeps_z_where_the_data_are_silent_and_the_code_compat_form():
    r = t([[1.0, 0.0], [0.0, 2.0]])
    data = {
        "s": torch.tensor([0, 0, 1]),
        "a": torch.tensor([0, 1, 1]),
        "s_next": torch.tensor([1, 0, 1]),
    }
    counts = empirical_counts(data, 2, 2)
    log_Z = t([[0.1, 0.2], [-0.3, 0.4]])
    new = rfzi_update(log_Z, r, counts, 1.0, 0.9)
    assert new[1, 0].item() == -0.3  # (1, 0) unseen
    # the code's form: V = max_a [r − log Z/β] = [max(0.9, −0.2), max(0.3, 1.6)] = [0.9, 1.6];
    # Z(0,0) = e^{−βγ·V(1)} = e^{−1.44}
    compat = rfzi_update(log_Z, r, counts, 1.0, 0.9, code_compat=True)
    assert compat[0, 0].item() == pytest.approx(-1.44, abs=1e-12)
    assert compat[0, 1].item() == pytest.approx(-0.81, abs=1e-12)
    # the code ranks by r − Z/β (no log): state 0 → [1 − e^0.1, 0 − e^0.2] picks a0
    assert rfzi_policy(log_Z, r, 1.0, 0.9, code_compat=True)[0].tolist() == [1.0, 0.0]


def test_fitted_q_is_the_neutral_bellman_backup_on_the_data():
    r = t([[1.0, 0.0], [0.0, 2.0]])
    data = {
        "s": torch.tensor([0, 0, 1]),
        "a": torch.tensor([0, 0, 1]),
        "s_next": torch.tensor([0, 1, 1]),
    }
    Q = t([[1.0, 0.0], [3.0, 2.0]])  # max_a Q = [1, 3]
    new = fitted_q_update(Q, r, empirical_counts(data, 2, 2), 0.5)
    # (0,0): 1 + 0.5·(1 + 3)/2 = 2; (1,1): 2 + 0.5·3 = 3.5; unseen keep Q
    assert new.tolist() == [[2.0, 0.0], [3.0, 3.5]]


def test_offline_data_are_seeded_and_cover_every_pair():
    m = mdp2()
    a = draw_offline_data(m, 7, torch.Generator().manual_seed(3))
    b = draw_offline_data(m, 7, torch.Generator().manual_seed(3))
    assert all(torch.equal(a[k], b[k]) for k in a)
    counts = empirical_counts(a, 2, 2)
    assert (counts.sum(-1) == 7).all() and counts[1, 1, 0] == 0  # P[1,1] = [0, 1]
    assert torch.equal(a["r"], m.R[a["s"], a["a"], 0])


@pytest.mark.parametrize("beta", [-1.0, float("nan"), float("inf"), "3"])
def test_bad_beta_is_refused(beta):
    with pytest.raises(ValueError, match="beta"):
        SoftRobust(beta)


def test_bad_models_and_the_iteration_limit():
    m = mdp2()
    R = torch.zeros(2, 2, 2, dtype=D)
    R[0, 0, 1] = 1.0
    with pytest.raises(ValueError, match="constant in s'"):
        SoftRobust(1.0).evaluate(TabularMDP(m.P, R, m.rho, 0.9), m.uniform_policy())
    with pytest.raises(ValueError, match="pi"):
        SoftRobust(1.0).evaluate(m, t([[0.5, 0.6], [0.5, 0.5]]))
    with pytest.raises(NotConverged, match="Newton"):
        SoftRobust(3.0).evaluate(m, m.uniform_policy(), max_iter=1)


def test_large_beta_stays_finite_and_tends_to_the_worst_next_state():
    m = mdp2()
    ev = SoftRobust(1e4).evaluate(m, m.uniform_policy())
    assert torch.isfinite(ev.V).all() and torch.isfinite(ev.Q).all()
    assert torch.allclose(ev.P_hat.sum(-1), torch.ones(2, 2, dtype=D))
    assert ev.P_hat[0, 1, 0].item() == pytest.approx(1.0)  # all mass on the lower-valued state


def test_soft_robust_pg_first_step_by_hand_and_ascent():
    problem = build("tabular/soft_robust_ring", 0)
    assert torch.equal(problem.initial_policy, problem.mdp.uniform_policy())  # the code's start
    assert not torch.equal(
        build("tabular/soft_robust_ring", 1).initial_policy, problem.initial_policy
    )
    method = tabular_methods.get("soft_robust_pg")
    options = method.build_options()
    state = method.init(problem, options, torch.Generator())
    soft = problem.extras["soft_robust"]
    G = soft.gradient(problem.mdp, state["pi"])
    values = [problem.value(state["pi"])]
    for _ in range(5):
        state, metrics = method.step(problem, state, options, torch.Generator())
        values.append(problem.value(state["pi"]))
        if len(values) == 2:
            assert torch.allclose(
                state["pi"], project_simplex(problem.mdp.uniform_policy() + 0.1 * G)
            )
    assert (
        all(b > a for a, b in zip(values, values[1:], strict=False))
        and values[-1] <= problem.optimum
    )
    assert metrics["cost"] == 1 and problem.extras["neutral_optimum_differs"]


def test_rfzi_and_fitted_q_share_the_data_and_rfzi_reaches_the_optimum_with_ample_data():
    problem = build("tabular/soft_robust_garnet", 4, n_states=5, n_actions=3, beta=1.0)
    assert problem.extras["neutral_optimum_differs"]  # so the neutral fit cannot pass for RFZI
    rfzi, fqi = tabular_methods.get("rfzi"), tabular_methods.get("fitted_q")
    options = rfzi.build_options({"samples_per_pair": 500})
    a = rfzi.init(problem, options, torch.Generator().manual_seed(5))
    b = fqi.init(problem, options, torch.Generator().manual_seed(5))
    assert torch.equal(a["s_next"], b["s_next"])
    for _ in range(300):
        a, _ = rfzi.step(problem, a, options, None)
        b, _ = fqi.step(problem, b, options, None)
    assert problem.gap(rfzi.policy(problem, a)) < 1e-6
    assert problem.gap(fqi.policy(problem, b)) > 1e-3
