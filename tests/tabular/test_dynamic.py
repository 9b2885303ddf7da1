"""Dynamic and simultaneous policy gradient (papers/seed_control_theory.md §3.4 T3.2–T3.3,
MDP2's dynamics, H = 2, μ = [0.5, 0.5]), the methods' schedules, their sampled gradients
against the exact ones, and the §3.3 edge cases (H = 1, μ_h without full support, ties)."""

import pytest
import torch

import policylab.tabular.dynamic as dyn  # registers the methods and tasks
from policylab.tabular import FiniteHorizonMDP, backward_induction, evaluate_finite, mdp2
from policylab.tabular.methods import Problem, tabular_methods
from policylab.tabular.tasks import build

D = torch.float64


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # thousands of tiny [2, 2] ops: thread hand-offs would cost more than the arithmetic
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def t(x):
    return torch.tensor(x, dtype=D)


def finite_mdp2(horizon: int = 2, mu=(0.5, 0.5)) -> FiniteHorizonMDP:
    base = mdp2()
    return FiniteHorizonMDP(base.P, [[1.0, 0.0], [0.0, 2.0]], list(mu), horizon)


def problem_of(mdp: FiniteHorizonMDP, budget_unit="gradient evaluations") -> Problem:
    V, _ = backward_induction(mdp)
    return Problem(
        mdp,
        lambda pi: float(evaluate_finite(mdp, pi).J),
        float(mdp.mu @ V[0]),
        mdp.uniform_policy(),
        budget_unit,
    )


def start(name, problem, seed=0, **overrides):
    method = tabular_methods.get(name)
    options = method.build_options(overrides)
    g = torch.Generator().manual_seed(seed)
    return method, options, g, method.init(problem, options, g)


# ---- T3.2 / T3.3 --------------------------------------------------------------------------
def test_t3_2_dynamic_gradient_at_epoch_1():
    # uniform π: Q_1 = R, V_1 = [0.5, 1]; μ_1(s)·π(a|s)·(Q − V) = 0.25·[[0.5, −0.5], [−1, 1]]
    mdp, theta = finite_mdp2(), torch.zeros(2, 2, 2, dtype=D)
    q1 = dyn.epoch_q(mdp, theta, 1)
    assert torch.allclose(q1, t([[1.0, 0.0], [0.0, 2.0]]))
    grad = dyn.dynamic_gradient(q1, theta[1], t([0.5, 0.5]))
    assert torch.allclose(grad, t([[0.125, -0.125], [-0.25, 0.25]]))
    # Q_0 = R + P·V_1 = [[1.55, 0.9], [0.75, 3]] under the uniform epoch 1
    assert torch.allclose(dyn.epoch_q(mdp, theta, 0), t([[1.55, 0.9], [0.75, 3.0]]))


def test_t3_3_simultaneous_gradient_equals_autograd():
    mdp = finite_mdp2()
    grad = dyn.simultaneous_gradient(mdp, torch.zeros(2, 2, 2, dtype=D))
    assert torch.allclose(grad[0], t([[0.08125, -0.08125], [-0.28125, 0.28125]]))
    assert torch.allclose(grad[1], t([[0.1, -0.1], [-0.3, 0.3]]))
    theta = torch.randn(2, 2, 2, dtype=D, generator=torch.Generator().manual_seed(1))
    theta.requires_grad_(True)
    evaluate_finite(mdp, torch.softmax(theta, -1)).J.backward()
    assert torch.allclose(dyn.simultaneous_gradient(mdp, theta.detach()), theta.grad)


def test_the_first_dynamic_step_trains_only_the_last_epoch_with_its_step_size():
    # R_max = 2, H − h = 1: η_1 = 2/(5·1·2) = 0.2; θ_1 = 0.2·T3.2's gradient, θ_0 untouched
    problem = problem_of(finite_mdp2())
    method, options, g, state = start("dynamic_pg", problem)
    theta0 = state["logits"].clone()  # log π₀ = log ½ everywhere
    state, metrics = method.step(problem, state, options, g)
    moved = state["logits"] - theta0
    assert torch.allclose(moved[1], 0.2 * t([[0.125, -0.125], [-0.25, 0.25]]))
    assert torch.equal(moved[0], torch.zeros(2, 2, dtype=D))
    assert metrics["cost"] == 1 and metrics["blocks_done"] == 0 and state["epoch"] == 1


def test_the_simultaneous_step_uses_eta_2_over_5_H2_R():
    # η = 2/(5·2²·2) = 0.05
    problem = problem_of(finite_mdp2())
    method, options, g, state = start("simultaneous_pg", problem)
    theta0 = state["logits"].clone()
    state, _ = method.step(problem, state, options, g)
    expected = 0.05 * dyn.simultaneous_gradient(problem.mdp, torch.zeros(2, 2, 2, dtype=D))
    assert torch.allclose(state["logits"] - theta0, expected)


# ---- convergence --------------------------------------------------------------------------
SMALL = {"n_states": 2, "n_actions": 2, "branches": 2, "horizon": 2}


def test_dynamic_pg_meets_its_tolerance_when_every_epoch_is_frozen():
    # performance difference: gap ≤ Σ_h epoch_gap_h / min μ_h ≤ tol once all H epochs froze
    problem = build("tabular/finite_garnet", 0, **SMALL)
    method, options, g, state = start("dynamic_pg", problem, step_scale=10.0)
    for _ in range(20_000):
        state, metrics = method.step(problem, state, options, g)
        if metrics["blocks_done"] == 2:
            break
    assert metrics["blocks_done"] == 2 and metrics["sweeps"] == 1
    assert 0 <= problem.gap(method.policy(problem, state)) <= 1e-3


def test_simultaneous_pg_reaches_gap_1e_3():
    problem = build("tabular/finite_garnet", 0, **SMALL)
    method, options, g, state = start("simultaneous_pg", problem, step_scale=10.0)
    gaps = [problem.gap(method.policy(problem, state))]
    for _ in range(20_000):
        state, _ = method.step(problem, state, options, g)
        gaps.append(problem.gap(method.policy(problem, state)))
        if gaps[-1] <= 1e-3:
            break
    assert gaps[0] > 0.05 and gaps[-1] <= 1e-3
    # ascent at a stable step: the gap never grows
    assert all(b <= a + 1e-12 for a, b in zip(gaps[:-1], gaps[1:], strict=True))


# ---- sampled gradients --------------------------------------------------------------------
def test_sampled_gradients_are_unbiased():
    mdp, K = finite_mdp2(), 40_000
    theta = torch.randn(2, 2, 2, dtype=D, generator=torch.Generator().manual_seed(2))
    g = torch.Generator().manual_seed(3)
    pi = dyn.time_indexed_policy(theta)
    s0 = torch.multinomial(mdp.mu.expand(K, -1), 1, generator=g).squeeze(-1)
    states, actions, rewards = dyn.simulate(mdp, pi, 0, s0, g)
    returns = rewards.flip(1).cumsum(1).flip(1)
    epochs = torch.arange(2).expand(K, 2)
    sampled = dyn.reinforce_gradient(theta, epochs, states, actions, returns, K)
    assert (sampled - dyn.simultaneous_gradient(mdp, theta)).abs().max() < 0.03
    # dynamic, epoch 0 with μ_0 = [0.5, 0.5]: one decision, then the later epoch
    states, actions, rewards = dyn.simulate(mdp, pi, 0, s0, g)
    one = torch.zeros(K, 1, dtype=torch.long)
    sampled = dyn.reinforce_gradient(
        theta, one, states[:, :1], actions[:, :1], rewards.sum(1, keepdim=True), K
    )
    exact = dyn.dynamic_gradient(dyn.epoch_q(mdp, theta, 0), theta[0], mdp.mu)
    assert (sampled[0] - exact).abs().max() < 0.03 and sampled[1].abs().max() == 0


def test_sampled_dynamic_counts_episodes_and_freezes_after_n_h_steps():
    problem = problem_of(finite_mdp2(horizon=3), "episodes")
    method, options, g, state = start("dynamic_pg_sampled", problem, episodes=4, epoch_steps=2)
    seen = []
    for _ in range(4):
        before = state["logits"].clone()
        state, metrics = method.step(problem, state, options, g)
        changed = [h for h in range(3) if not torch.equal(before[h], state["logits"][h])]
        seen.append((changed, metrics["cost"], metrics["transitions"]))
    # epoch 2 twice (1 transition per episode), then epoch 1 (2 per episode)
    assert [c for _, c, _ in seen] == [4, 4, 4, 4]
    assert [tr for *_, tr in seen] == [4, 4, 8, 8]
    assert all(changed in ([], [2]) for changed, *_ in seen[:2])
    assert all(changed in ([], [1]) for changed, *_ in seen[2:])
    assert metrics["blocks_done"] == 2 and state["epoch"] == 0


# ---- edge cases (§3.3) ---------------------------------------------------------------------
@pytest.mark.parametrize("suffix", ["", "_sampled"])
def test_horizon_one_makes_the_two_schedules_identical(suffix):
    problem = build("tabular/finite_garnet", 3, horizon=1)
    runs = []
    for name in ("simultaneous_pg", "dynamic_pg"):
        method, options, g, state = start(name + suffix, problem, seed=5, epoch_steps=50)
        for _ in range(30):
            state, _ = method.step(problem, state, options, g)
        runs.append(state["logits"])
    assert runs[0].abs().max() > 0.01 and torch.allclose(runs[0], runs[1], atol=1e-12)


def test_an_epoch_distribution_without_full_support_is_refused():
    problem = problem_of(finite_mdp2(mu=(1.0, 0.0)))
    with pytest.raises(ValueError, match="full support"):
        start("dynamic_pg", problem, epoch_dist="mu")
    with pytest.raises(ValueError, match="full support"):
        dyn.check_epoch_dist([0.5, 0.5, 0.0], 3)
    with pytest.raises(ValueError, match="block_schedule"):
        start("dynamic_pg", problem, block_schedule="forward")


def test_tied_actions_keep_equal_logits_and_share_the_optimal_mass():
    # action 2 duplicates action 1 (same rewards and transitions): a tie in every Q_h;
    # in state 1 the tied pair is optimal at both epochs
    base = mdp2()
    P = torch.cat([base.P, base.P[:, 1:]], 1)
    mdp = FiniteHorizonMDP(P, [[1.0, 0.0, 0.0], [0.0, 2.0, 2.0]], [0.5, 0.5], 2)
    problem = problem_of(mdp)
    method, options, g, state = start("dynamic_pg", problem, step_scale=10.0, epoch_steps=200)
    for _ in range(400):
        state, metrics = method.step(problem, state, options, g)
    pi = method.policy(problem, state)
    assert torch.allclose(state["logits"][..., 1], state["logits"][..., 2])
    assert metrics["blocks_done"] == 2 and (pi[:, 1, 1:].sum(-1) > 0.95).all()
    assert problem.gap(pi) < 0.1 * (problem.optimum - problem.initial)


def test_the_tasks():
    exact, sampled = build("tabular/finite_garnet", 0), build("tabular/finite_garnet_sampled", 0)
    assert isinstance(exact.mdp, FiniteHorizonMDP) and exact.mdp.horizon == 10
    assert (exact.mdp.n_states, exact.mdp.n_actions) == (5, 3)
    assert exact.budget_unit != "episodes" and sampled.budget_unit == "episodes"
    assert exact.optimum == pytest.approx(sampled.optimum) and exact.optimum > exact.initial
    assert build("tabular/finite_garnet", 1).optimum != pytest.approx(exact.optimum)
