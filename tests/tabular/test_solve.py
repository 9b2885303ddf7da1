"""Exact solvers on MDP2 (papers/seed_control_theory.md §0.9 T0.1–T0.3, §3.4 T3.1–T3.3),
checked against autograd, the LP and policy iteration, and the bad-input errors."""

import pytest
import torch

from policylab.algebra.simplex import project_simplex
from policylab.tabular import (
    FiniteHorizonMDP,
    NotConverged,
    TabularMDP,
    backward_induction,
    direct_gradient,
    evaluate,
    evaluate_finite,
    garnet,
    linear_program,
    mdp2,
    objective,
    occupancy,
    policy_iteration,
    softmax_gradient,
    value_iteration,
)

D = torch.float64


def t(x):
    return torch.tensor(x, dtype=D)


def test_t0_1_evaluation_occupancy_and_both_gradients():
    mdp = mdp2()
    pi = mdp.uniform_policy()
    ev = evaluate(mdp, pi)
    assert torch.allclose(ev.V, t([7.773973, 8.458904]), atol=1e-6)
    assert torch.allclose(ev.Q, t([[8.058219, 7.489726], [7.304795, 9.613014]]), atol=1e-6)
    assert torch.allclose(occupancy(mdp, pi), t([0.445205, 0.554795]), atol=1e-6)
    assert objective(mdp, pi).item() == pytest.approx(7.773973, abs=1e-6)
    grad = softmax_gradient(mdp, torch.zeros(2, 2, dtype=D))
    assert torch.allclose(grad, t([[0.632741, -0.632741], [-3.201468, 3.201468]]), atol=1e-6)
    direct = direct_gradient(mdp, pi)
    assert torch.allclose(direct, t([[35.875633, 33.344671], [40.526600, 53.332473]]), atol=1e-6)


def test_policy_gradient_theorem_equals_autograd_on_a_garnet():
    mdp = garnet(6, 3, 3, seed=4, gamma=0.9)
    logits = torch.randn(6, 3, dtype=D, generator=torch.Generator().manual_seed(0))
    logits.requires_grad_(True)
    objective(mdp, torch.softmax(logits, -1)).backward()
    assert torch.allclose(softmax_gradient(mdp, logits.detach()), logits.grad, atol=1e-10)
    pi = torch.softmax(logits.detach(), -1).requires_grad_(True)
    objective(mdp, pi).backward()
    assert torch.allclose(direct_gradient(mdp, pi.detach()), pi.grad, atol=1e-10)


def test_t0_2_optimum_by_three_routes():
    mdp = mdp2()
    V, pi = value_iteration(mdp)
    assert torch.allclose(V, t([17.560976, 20.0]), atol=1e-6)
    assert pi.argmax(-1).tolist() == [1, 1]
    V_pi, pi_pi = policy_iteration(mdp)
    assert torch.allclose(V_pi, V, atol=1e-8) and torch.equal(pi_pi, pi)
    full = TabularMDP(mdp.P, mdp.R, [0.5, 0.5], mdp.gamma)  # the LP needs full support
    assert torch.allclose(linear_program(full), V, atol=1e-6)


def test_policy_iteration_agrees_with_the_lp_on_garnets():
    for seed in range(3):
        mdp = garnet(8, 4, 3, seed=seed)
        V, pi = policy_iteration(mdp)
        assert torch.allclose(linear_program(mdp), V, atol=1e-6)
        assert torch.allclose(evaluate(mdp, pi).V, V, atol=1e-7)


def test_t0_3_projection():
    assert torch.allclose(project_simplex(t([0.45, 0.35])), t([0.55, 0.45]))
    assert torch.allclose(project_simplex(t([1.2, -0.3, 0.4])), t([0.9, 0.0, 0.1]))
    rows = torch.randn(50, 4, dtype=D, generator=torch.Generator().manual_seed(1))
    p = project_simplex(rows)
    assert (p >= 0).all() and torch.allclose(p.sum(-1), torch.ones(50, dtype=D))
    assert torch.allclose(project_simplex(p), p)  # a projection is idempotent


def test_solvers_say_when_they_do_not_converge():
    with pytest.raises(NotConverged, match="value_iteration"):
        value_iteration(mdp2(), max_iter=3)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"P": [[[0.9, 0.2], [0.2, 0.8]], [[0.5, 0.5], [0.0, 1.0]]]}, r"P\[0, 0, :\] sums to"),
        ({"P": [[0.5, 0.5], [0.5, 0.5]]}, "expected shape"),
        ({"R": [1.0, 2.0]}, "R: expected shape"),
        ({"gamma": 1.0}, r"gamma: must lie in \[0, 1\)"),
        ({"gamma": -0.1}, "gamma"),
        ({"rho": [0.6, 0.6]}, "rho: must be a distribution"),
        ({"R": [[1.0, float("nan")], [0.0, 2.0]]}, "finite"),
    ],
)
def test_bad_mdps_are_refused_naming_the_field(change, message):
    base = mdp2()
    fields = {"P": base.P, "R": base.R, "rho": base.rho, "gamma": base.gamma, **change}
    with pytest.raises(ValueError, match=message):
        TabularMDP(**fields)


def test_a_policy_that_is_not_a_distribution_is_refused():
    with pytest.raises(ValueError, match="pi: each row"):
        evaluate(mdp2(), torch.full((2, 2), 0.7, dtype=D))


# ---- finite horizon: MDP2's dynamics, H = 2, μ uniform (§3.4) ----------------------------
def finite_mdp2() -> FiniteHorizonMDP:
    base = mdp2()
    return FiniteHorizonMDP(base.P, [[1.0, 0.0], [0.0, 2.0]], [0.5, 0.5], 2)


def test_t3_1_backward_induction():
    V, pi = backward_induction(finite_mdp2())
    assert torch.allclose(V[0], t([2.1, 4.0]))
    assert (finite_mdp2().mu @ V[0]).item() == pytest.approx(3.05)
    assert pi[0].argmax(-1).tolist() == [0, 1] and pi[1].argmax(-1).tolist() == [0, 1]


def test_t3_2_and_t3_3_uniform_policies_and_the_simultaneous_gradient():
    mdp = finite_mdp2()
    ev = evaluate_finite(mdp, mdp.uniform_policy())
    assert torch.allclose(ev.Q[1], t([[1.0, 0.0], [0.0, 2.0]]))
    assert torch.allclose(ev.V[1], t([0.5, 1.0]))
    assert torch.allclose(ev.Q[0], t([[1.55, 0.9], [0.75, 3.0]]))
    assert torch.allclose(ev.V[0], t([1.225, 1.875]))
    assert ev.J.item() == pytest.approx(1.55)
    assert torch.allclose(ev.state_dist[1], t([0.4, 0.6]))
    theta = torch.zeros(2, 2, 2, dtype=D, requires_grad=True)
    evaluate_finite(mdp, torch.softmax(theta, -1)).J.backward()
    assert torch.allclose(theta.grad[0], t([[0.08125, -0.08125], [-0.28125, 0.28125]]))
    assert torch.allclose(theta.grad[1], t([[0.1, -0.1], [-0.3, 0.3]]))


def test_finite_horizon_bad_input():
    base = mdp2()
    with pytest.raises(ValueError, match="horizon"):
        FiniteHorizonMDP(base.P, [[1.0, 0.0], [0.0, 2.0]], [0.5, 0.5], 0)
    with pytest.raises(ValueError, match=r"one table per epoch"):
        evaluate_finite(finite_mdp2(), base.uniform_policy())
