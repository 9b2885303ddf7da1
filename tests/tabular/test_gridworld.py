"""The RepRL grid-world (papers/seed_control_theory.md §7.2–7.3): the exact MDP, its
optimum by two routes, the sampler against the exact value, and ES / RepES as registered
tabular methods."""

import io
import math

import pytest
import torch

import policylab.tabular.gridworld  # noqa: F401  (registers the task and the methods)
from policylab.tabular import evaluate_finite
from policylab.tabular.gridworld import (
    gridworld_mdp,
    reward_mean,
    sample_returns,
    stationary_values,
)
from policylab.tabular.methods import tabular_methods
from policylab.tabular.tasks import build

D = torch.float64
TINY = {"layers": 1, "hidden": 8, "trajectories": 20}
TINY_REP = {**TINY, "decision_set": 64, "history": 40, "heldout": 8, "latent_dim": 4}


def state(x, y):
    return (x - 1) * 8 + (y - 1)


def test_reward_means_by_hand():
    # μ(1,1) = 2.5 + 0.3 + 13e^{−8·98} = 2.8;  μ(2,1) = 2.5e^{−0.125} + 0.3 = 2.506242;
    # μ(8,8) = 2.5e^{−0.125·98} + 0.3 + 13 = 13.300012
    assert reward_mean(1, 1) == pytest.approx(2.8, abs=1e-9)
    assert reward_mean(2, 1) == pytest.approx(2.506242, abs=1e-6)
    assert reward_mean(8, 8) == pytest.approx(13.300012, abs=1e-6)


def test_moves_and_walls():
    mdp = gridworld_mdp()
    assert mdp.P.shape == (64, 4, 64) and mdp.horizon == 20 and mdp.mu[state(1, 1)] == 1
    assert mdp.P[state(1, 1), 0, state(2, 1)] == 1  # +x
    assert mdp.P[state(1, 1), 1, state(1, 1)] == 1  # −x into the wall stays
    assert mdp.P[state(1, 1), 2, state(1, 2)] == 1  # +y
    assert mdp.P[state(8, 8), 0, state(8, 8)] == 1


def test_staying_at_the_start_is_the_local_optimum_56():
    mdp = gridworld_mdp()
    stay = torch.zeros(64, 4, dtype=D)
    stay[:, 1] = 1.0  # −x: at (1, ·) a wall
    assert float(stationary_values(mdp, stay[None])[0]) == pytest.approx(20 * 2.8, abs=1e-9)


def test_optimum_equals_the_staircase_path_summed_by_hand_and_is_stationary():
    # The hill is radial, so the best monotone path to (8, 8) keeps |x − y| ≤ 1 (the
    # smallest distance from the start at each step); 14 moves, then 6 epochs at the goal.
    problem = build("tabular/gridworld", seed=0)
    x, y, total = 1, 1, 0.0
    for _ in range(20):
        total += reward_mean(x, y)
        if x <= y and x < 8:
            x += 1
        elif y < 8:
            y += 1
    assert problem.optimum == pytest.approx(total, abs=1e-9)
    assert problem.optimum == pytest.approx(93.848221, abs=1e-6)
    assert problem.extras["stationary_attains_optimum"]
    table = problem.extras["optimal_stationary_policy"]
    assert problem.value(table) == pytest.approx(problem.optimum, abs=1e-9)
    assert problem.budget_unit == "trajectories"
    assert problem.score(problem.initial_policy) == 0.0 and problem.score(table) == 1.0


def test_batched_values_equal_evaluate_finite():
    mdp = gridworld_mdp()
    pis = torch.softmax(
        torch.randn(3, 64, 4, generator=torch.Generator().manual_seed(0), dtype=D), -1
    )
    exact = [float(evaluate_finite(mdp, p.expand(20, -1, -1)).J) for p in pis]
    assert torch.allclose(stationary_values(mdp, pis), torch.tensor(exact, dtype=D), atol=1e-10)


def test_sampled_returns_average_to_the_exact_value():
    mdp = gridworld_mdp()
    g = torch.Generator().manual_seed(0)
    pi = torch.softmax(torch.randn(64, 4, generator=g, dtype=D), -1)
    G = sample_returns(mdp, pi.expand(2000, -1, -1), 3.0, g)
    exact = float(stationary_values(mdp, pi[None])[0])
    assert abs(float(G.mean()) - exact) < 4 * float(G.std()) / math.sqrt(2000)
    # the noise: a deterministic policy's returns have std σ√H = 3√20 = 13.42
    stay = torch.zeros(64, 4, dtype=D)
    stay[:, 1] = 1.0
    G = sample_returns(mdp, stay.expand(2000, -1, -1), 3.0, g)
    assert float(G.std()) == pytest.approx(3 * math.sqrt(20), rel=0.07)
    assert torch.allclose(sample_returns(mdp, stay[None], 0.0, g), torch.tensor([56.0], dtype=D))


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("es", TINY),
        ("rep_es", TINY_REP),
        ("rep_es", {**TINY_REP, "bandit": "oful", "representation": "random_projection"}),
    ],
)
def test_methods_step_spend_trajectories_and_checkpoint(name, overrides):
    problem = build("tabular/gridworld", seed=1)
    method = tabular_methods.get(name)
    options = method.build_options(overrides)
    g = torch.Generator().manual_seed(0)
    st = method.init(problem, options, g)
    theta0 = st["theta"].clone()
    for _ in range(3):
        st, metrics = method.step(problem, st, options, g)
    assert metrics["cost"] == 20
    assert not torch.allclose(st["theta"], theta0)
    pi = method.policy(problem, st)
    assert pi.shape == (64, 4) and torch.allclose(pi.sum(-1), torch.ones(64, dtype=D))
    if name == "rep_es":
        assert st["buf_n"] == 40 and math.isfinite(metrics["bandit/linearity_r2"])
        assert math.isfinite(metrics["bandit/optimism"])
    buffer = io.BytesIO()
    torch.save(st, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert torch.equal(loaded["theta"], st["theta"])


def test_es_with_exact_values_climbs_on_a_tiny_policy():
    # noise 0 and many pairs: the ES step is an ascent direction of the exact value.
    problem = build("tabular/gridworld", seed=2, noise=0.0)
    method = tabular_methods.get("es")
    options = method.build_options({**TINY, "trajectories": 200})
    g = torch.Generator().manual_seed(0)
    st = method.init(problem, options, g)
    v0 = problem.value(method.policy(problem, st))
    for _ in range(5):
        st, _ = method.step(problem, st, options, g)
    assert problem.value(method.policy(problem, st)) > v0


def test_bad_options_are_errors():
    with pytest.raises(ValueError, match="bandit"):
        tabular_methods.get("rep_es").build_options({"bandit": "ucb"})
    with pytest.raises(ValueError, match="trajectories"):
        tabular_methods.get("es").build_options({"trajectories": 3})
    with pytest.raises(ValueError, match="history"):
        tabular_methods.get("rep_es").build_options({"history": 10})
    with pytest.raises(ValueError, match="noise"):
        build("tabular/gridworld", seed=0, noise=-1.0)
