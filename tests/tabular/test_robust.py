"""Robust MDPs and DRPG (papers/seed_control_theory.md §1.5 T1.1–T1.4): the closed-form
L1 worst case against scipy's LP, the robust optimum that differs from the nominal one,
and DRPG's first steps to the digit."""

import pytest
import torch
from scipy.optimize import linprog

from policylab.tabular import TabularMDP, evaluate, value_iteration
from policylab.tabular.catalogue import build, tabular_methods
from policylab.tabular.robust import (
    L1Ball,
    l1_worst,
    parametric_kernel,
    robust_evaluate,
    robust_policy_iteration,
    robust_value_iteration,
)

D = torch.float64


def t(x):
    return torch.tensor(x, dtype=D)


def lp_worst(pbar, z, kappa):
    """max pᵀz over the L1 ball ∩ simplex ∩ support, as an LP in (p, u ≥ |p − p̄|)."""
    K = len(pbar)
    c = [-v for v in z] + [0.0] * K
    A_ub, b_ub = [], []
    for i in range(K):  # p_i − u_i ≤ p̄_i and −p_i − u_i ≤ −p̄_i
        row = [0.0] * 2 * K
        row[i], row[K + i] = 1.0, -1.0
        A_ub.append(row), b_ub.append(pbar[i])
        row = [0.0] * 2 * K
        row[i], row[K + i] = -1.0, -1.0
        A_ub.append(row), b_ub.append(-pbar[i])
    A_ub.append([0.0] * K + [1.0] * K), b_ub.append(kappa)
    bounds = [(0, None if pbar[i] > 0 else 0) for i in range(K)] + [(0, None)] * K
    res = linprog(
        c,
        A_ub=A_ub,
        b_ub=b_ub,
        A_eq=[[1.0] * K + [0.0] * K],
        b_eq=[1.0],
        bounds=bounds,
        method="highs",
    )
    return -res.fun


@pytest.mark.parametrize(
    "pbar, z, kappa, expected, value",
    [
        ([0.5, 0.3, 0.2], [1, 2, 4], 0.4, [0.3, 0.3, 0.4], 2.5),
        ([0.5, 0.3, 0.2], [1, 2, 4], 2.0, [0.0, 0.0, 1.0], 4.0),
        ([0.6, 0.0, 0.4], [1, 2, 4], 0.4, [0.4, 0.0, 0.6], 2.8),
    ],
)
def test_t1_1_l1_worst_case_matches_the_spec_and_the_lp(pbar, z, kappa, expected, value):
    p = l1_worst(t(pbar), t(z), kappa)
    assert torch.allclose(p, t(expected))
    assert (p @ t(z)).item() == pytest.approx(value)
    assert value == pytest.approx(lp_worst(pbar, z, kappa), abs=1e-9)


def test_l1_worst_case_equals_the_lp_on_random_rows():
    g = torch.Generator().manual_seed(3)
    for _ in range(40):
        pbar = torch.rand(5, generator=g, dtype=D) * (torch.rand(5, generator=g) > 0.3)
        pbar[0] += 0.1
        pbar /= pbar.sum()
        z = torch.randn(5, generator=g, dtype=D)
        kappa = 2.5 * torch.rand(1, generator=g).item()
        p = l1_worst(pbar, z, kappa)
        assert (p >= -1e-15).all() and p.sum().item() == pytest.approx(1.0)
        assert (p[pbar == 0] == 0).all()  # the branch constraint
        assert (p - pbar).abs().sum().item() <= kappa + 1e-12
        assert (p @ z).item() == pytest.approx(lp_worst(pbar.tolist(), z.tolist(), kappa), abs=1e-9)
    assert torch.allclose(l1_worst(t([0.5, 0.5]), t([1, 2]), 0.0), t([0.5, 0.5]))  # κ = 0


def t12_mdp() -> TabularMDP:
    P = [[[0.8, 0.2], [0.3, 0.7]], [[0.1, 0.9], [0.3, 0.7]]]
    return TabularMDP(P, -t([[1.0, 2.0], [4.0, 5.0]]), [0.5, 0.5], 0.9)  # costs, negated


def test_t1_2_the_robust_optimum_differs_from_the_nominal_one():
    mdp, ball = t12_mdp(), L1Ball(0.4, 2, 2)
    V, pi = robust_value_iteration(mdp, ball)
    assert torch.allclose(-V, t([33.478261, 40.0]), atol=1e-6)
    assert pi.argmax(-1).tolist() == [0, 0]
    V_pi, pi_pi = robust_policy_iteration(mdp, ball)
    assert torch.allclose(V_pi, V, atol=1e-9) and torch.equal(pi_pi, pi)
    assert (-(mdp.rho @ V)).item() == pytest.approx(36.739130, abs=1e-6)
    V_nom, pi_nom = value_iteration(mdp)
    assert pi_nom.argmax(-1).tolist() == [0, 1]
    assert torch.allclose(-V_nom, t([23.090909, 30.363636]), atol=1e-6)
    rob = robust_evaluate(mdp, pi_nom, ball)
    assert torch.allclose(-rob.V, t([36.181818, 43.454545]), atol=1e-6)
    assert (mdp.rho @ V - mdp.rho @ rob.V).item() == pytest.approx(3.079052, abs=1e-6)


def t13_problem():
    from policylab.tabular.methods import Problem

    mdp, ball = t12_mdp(), L1Ball(0.4, 2, 2)
    V, _ = robust_value_iteration(mdp, ball)
    return Problem(
        mdp,
        lambda pi: float(mdp.rho @ robust_evaluate(mdp, pi, ball).V),
        float(mdp.rho @ V),
        torch.full((2, 2), 0.5, dtype=D),
        extras={"ball": ball},
    )


def test_t1_3_the_first_drpg_steps_to_the_digit():
    problem = t13_problem()
    mdp, ball = problem.mdp, problem.extras["ball"]
    rob = robust_evaluate(mdp, problem.initial_policy, ball)
    assert torch.allclose(-rob.V, t([39.041096, 43.150685]), atol=1e-6)
    worst = t([[[0.6, 0.4], [0.1, 0.9]], [[0.0, 1.0], [0.1, 0.9]]])
    assert torch.allclose(rob.P, worst)
    assert torch.allclose(-rob.Q, t([[37.616438, 40.465753], [42.835616, 43.465753]]), atol=1e-6)
    method = tabular_methods.get("drpg")
    for step, pi1 in [
        (0.05, [[0.592700, 0.407300], [0.637033, 0.362967]]),
        (0.005, [[0.509270, 0.490730], [0.513703, 0.486297]]),
    ]:
        options = method.build_options({"step": step})
        state, metrics = method.step(problem, method.init(problem, options, None), options, None)
        assert torch.allclose(state["pi"], t(pi1), atol=1e-6)
    options = method.build_options({"step": 0.05})
    state, costs, first = method.init(problem, options, None), [], None
    for k in range(10):
        costs.append(-problem.value(state["pi"]))
        if first is None and problem.gap(state["pi"]) <= 1e-6:
            first = k
        state, _ = method.step(problem, state, options, None)
    expected = [41.095890, 40.014970, 38.994010, 37.279851, 36.739130]
    assert [costs[k] for k in (0, 1, 2, 4, 9)] == pytest.approx(expected, abs=1e-6)
    assert first == 6
    assert state["pi"].argmax(-1).tolist() == [0, 0]


def test_t1_4_parametric_kernel():
    p = parametric_kernel(t([0.5, 0.5]), t([0.0, 1.0]), 1.0)
    assert torch.allclose(p, t([0.268941, 0.731059]), atol=1e-6)


def test_drpg_reaches_the_robust_optimum_and_nominal_pg_does_not():
    problem = build("tabular/robust_garnet", seed=1)
    gaps = {}
    for name in ("drpg", "nominal_pg"):
        method = tabular_methods.get(name)
        options = method.build_options()
        state = method.init(problem, options, None)
        for _ in range(200):
            state, _ = method.step(problem, state, options, None)
        gaps[name] = problem.gap(state["pi"])
    assert gaps["drpg"] <= 1e-6
    if problem.extras["nominal_optimum_differs"]:
        assert gaps["nominal_pg"] > 1e-3


def test_bad_uncertainty_sets_are_refused():
    with pytest.raises(ValueError, match="kappa must be finite and ≥ 0"):
        L1Ball(-0.1, 2, 2)
    with pytest.raises(ValueError, match="one radius per"):
        robust_evaluate(t12_mdp(), torch.full((2, 2), 0.5, dtype=D), L1Ball([0.1, 0.2]))


def test_a_robust_value_never_exceeds_the_nominal_one():
    problem = build("tabular/robust_garnet", seed=2)
    pi = problem.initial_policy
    nominal = evaluate(problem.mdp, pi).V
    robust = robust_evaluate(problem.mdp, pi, problem.extras["ball"]).V
    assert (robust <= nominal + 1e-12).all()


def test_the_l1_simplex_projection_is_feasible_optimal_and_idempotent():
    from scipy.optimize import minimize

    from policylab.tabular.robust import project_l1_simplex

    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        pbar = torch.rand(5, generator=g, dtype=D) * (torch.rand(5, generator=g) > 0.3)
        pbar[0] += 0.1
        pbar /= pbar.sum()
        y = pbar + 0.5 * torch.randn(5, generator=g, dtype=D)
        kappa = 1.5 * torch.rand(1, generator=g).item()
        p = project_l1_simplex(y[None], pbar[None], kappa)[0]
        assert p.sum().item() == pytest.approx(1.0) and (p >= 0).all()
        assert (p[pbar == 0] == 0).all() and (p - pbar).abs().sum().item() <= kappa + 1e-9
        assert torch.allclose(project_l1_simplex(p[None], pbar[None], kappa)[0], p, atol=1e-9)
        on = (pbar > 0).numpy()
        ys, pb = y.numpy()[on], pbar.numpy()[on]
        reference = minimize(  # an independent route: SLSQP on the support
            lambda q, ys=ys: 0.5 * ((q - ys) ** 2).sum(),
            pb,
            bounds=[(0, 1)] * len(pb),
            constraints=[
                {"type": "eq", "fun": lambda q: q.sum() - 1},
                {"type": "ineq", "fun": lambda q, k=kappa, pb=pb: k - abs(q - pb).sum()},
            ],
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 500},
        )
        ours = 0.5 * ((p.numpy()[on] - ys) ** 2).sum()
        assert ours <= reference.fun + 1e-7


def test_drpg_with_the_gradient_inner_solver_reaches_the_robust_optimum():
    problem = t13_problem()
    method = tabular_methods.get("drpg_pgd")
    options = method.build_options()
    state = method.init(problem, options, None)
    for _ in range(40):
        state, metrics = method.step(problem, state, options, None)
    assert problem.gap(state["pi"]) <= 1e-3  # the spec's check for pgd_kernel
    assert state["pi"].argmax(-1).tolist() == [0, 0]
    assert metrics["inner/iterations"] >= 1
