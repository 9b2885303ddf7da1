"""Gradient play as registered methods: the SGN-certified step contracts in ‖·‖_M every
step by at least the certificate's bound; a game without a certificate is refused."""

import pytest

from policylab.tabular.catalogue import build, tabular_methods


def run(name, problem, steps):
    method = tabular_methods.get(name)
    options = method.build_options()
    state, out = method.init(problem, options, None), []
    for _ in range(steps):
        state, metrics = method.step(problem, state, options, None)
        out.append(metrics)
    return state, out


def test_certified_play_contracts_as_promised():
    problem = build("tabular/quadratic_game", seed=0, lam=0.5)
    state, metrics = run("sgn_play", problem, 50)
    assert all(m["play/contraction"] <= m["certificate/bound"] + 1e-12 for m in metrics)
    assert metrics[0]["certificate/bound"] < 1
    assert problem.score(state["x"]) > 0  # closer to the Nash equilibrium x* = 0


def test_gradient_play_at_half_the_stability_limit_converges():
    problem = build("tabular/quadratic_game", seed=1, lam=0.5, dim=8)
    state, _ = run("gradient_play", problem, 300)
    assert problem.score(state["x"]) > 0.99


def test_a_game_without_a_certificate_is_refused_with_the_reason():
    problem = build("tabular/quadratic_game", seed=0, lam=2.5)
    with pytest.raises(ValueError, match="no SGN certificate"):
        run("sgn_play", problem, 1)
