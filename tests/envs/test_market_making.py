"""DRLMM's market (papers/seed_control_theory.md §13): the code's rewards, the exact DP,
the environment against its exact values, and A2C through the control trainer."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest

from policylab.config import load_control
from policylab.envs import ID_MARKET_MAKING
from policylab.envs.market_making import (
    Book,
    MarketMakingEnv,
    differential_sharpe,
    env_actions,
    evaluate,
    solve,
    trade_completion,
)

# T13.3: depths {1, 2} filled w.p. 0.6, 0.3 (A = 1.2, k = ln 2), Q = 1, T = 2, φ = 0.1,
# terminal 0.5|q|; the actions are the four (bid, ask) pairs
T133 = {
    "horizon": 2,
    "max_inventory": 1,
    "fill_a": 1.2,
    "fill_k": math.log(2),
    "inventory_penalty": 0.1,
    "terminal_penalty": 0.5,
    "actions": [(1, 1), (1, 2), (2, 1), (2, 2)],
}


def test_t13_1_trade_completion():
    assert trade_completion(0.005, 0.002) == 1.0
    assert trade_completion(0.003, 0.002) == pytest.approx(0.003)
    assert trade_completion(-0.001, 0.002) == pytest.approx(-0.001)
    assert trade_completion(-0.003, 0.002) == -1.0


def test_t13_2_differential_sharpe():
    reward, a, b = differential_sharpe(0.2, 0.1, 0.02, eta=0.01)
    assert (reward, a, b) == pytest.approx((0.01, 0.101, 0.0202))


def test_differential_sharpe_edges_pay_zero():
    assert differential_sharpe(0.0, 0.1, 0.02) == (0.0, 0.1, 0.02)  # the code's R = 0
    reward, a, b = differential_sharpe(0.5, 0.0, 0.0)  # B = A² at the start
    assert reward == 0.0 and (a, b) == pytest.approx((0.005, 0.0025))


def test_t13_3_exact_dp():
    book = Book(**T133)
    V, best = solve(book)
    assert V[0] == pytest.approx([1.2728, 1.85904, 1.2728], abs=1e-9)
    acts = book.actions
    for t in (0, 1):
        assert acts[best[t, 1]] == (2, 2)  # q = 0
        assert acts[best[t, 2]][1] == 1  # q = +1: ask at depth 1 (the bid is off)
        assert acts[best[t, 0]][0] == 1  # q = −1: bid at depth 1
    fixed = np.full((2, 3), acts.index((1, 1)))
    assert evaluate(book, fixed)[0, 1] == pytest.approx(1.79904, abs=1e-9)
    fixed = np.full((2, 3), acts.index((2, 2)))
    assert evaluate(book, fixed)[0, 1] == pytest.approx(1.78344, abs=1e-9)


def test_evaluate_of_the_optimal_policy_is_the_optimum_and_probabilities_agree():
    book = Book(horizon=6, max_inventory=2)
    V, best = solve(book)
    assert evaluate(book, best) == pytest.approx(V)
    one_hot = np.eye(len(book.actions))[best]
    assert evaluate(book, one_hot) == pytest.approx(V)
    uniform = np.full_like(one_hot, 1 / len(book.actions))
    assert (evaluate(book, uniform)[0] < V[0] - 1e-6).all()


def test_seventeen_actions_as_the_code():
    actions = env_actions()
    assert len(actions) == 17 and actions[0] == "noop" and actions[-1] == "flatten"
    assert (1, 1) not in actions and (4, 4) in actions


def test_sampled_return_matches_the_exact_value():
    """The environment's mean episode PnL under the optimal policy agrees with V*[0, q=0]
    (the mid's moves have mean zero); 2000 episodes give it to about ±0.2 (4 standard
    errors below)."""
    book = Book(horizon=10, max_inventory=3)
    V, best = solve(book)
    env = MarketMakingEnv(horizon=10, max_inventory=3)
    totals = []
    for episode in range(2000):
        obs, _ = env.reset(seed=episode)
        total, done = 0.0, False
        while not done:
            t, q = env.t, env.q
            obs, r, done, _, _ = env.step(best[t, q + 3])
            total += r
        totals.append(total)
    mean, se = np.mean(totals), np.std(totals) / np.sqrt(len(totals))
    assert abs(mean - V[0, 3]) < 4 * se


def test_bad_knobs_are_named():
    with pytest.raises(ValueError, match="reward='sharpe'"):
        MarketMakingEnv(reward="sharpe")
    with pytest.raises(ValueError, match="fill probability"):
        Book(fill_a=3.0, fill_k=0.1)
    with pytest.raises(ValueError, match="expected \\(2, 3, 4\\)"):
        evaluate(Book(**T133), np.zeros((2, 3, 5)))


def test_registered_id_and_rewards_run():
    for reward in MarketMakingEnv.REWARDS:
        env = gymnasium.make(ID_MARKET_MAKING, reward=reward, horizon=5)
        env.reset(seed=0)
        for _ in range(5):
            _, r, terminated, _, _ = env.step(env.action_space.sample())
            assert np.isfinite(r)
        assert terminated


def test_a2c_is_one_update_per_batch_under_the_users_fields():
    cfg = load_control(None, {"task": ID_MARKET_MAKING, "algo": "a2c"})
    assert (cfg.num_steps, cfg.lr, cfg.epochs, cfg.norm_adv) == (5, 7e-4, 1, False)
    assert cfg.minibatch_size == cfg.num_envs * 5
    cfg = load_control(None, {"task": ID_MARKET_MAKING, "algo": "a2c", "num_steps": 25})
    assert (cfg.epochs, cfg.minibatch_size, cfg.norm_adv) == (1, cfg.num_envs * 25, False)
    cfg = load_control(None, {"task": ID_MARKET_MAKING, "algo": "a2c", "epochs": 3})
    assert cfg.epochs == 3
    assert load_control(None, {"task": ID_MARKET_MAKING, "algo": "ppo"}).epochs == 4


def test_a2c_trains_on_the_market(tmp_path):
    import policylab

    result = policylab.train(
        task=ID_MARKET_MAKING,
        algo="a2c",
        total_steps=400,
        num_envs=2,
        num_steps=50,
        env_kwargs={"horizon": 10},
        eval_env_kwargs={"horizon": 10},
        eval_every=2,
        eval_episodes=2,
        run_dir=str(tmp_path / "run"),
        progress=False,
    )
    assert np.isfinite(result.evals[-1]["eval/return_mean"])


def test_the_collector_saves_the_market_for_an_exact_resume():
    from policylab.workflows.episodes import EpisodeCollector

    collector = EpisodeCollector(ID_MARKET_MAKING, 2, seed=0, horizon=5)
    state = collector.state_dict()
    assert state is not None  # the Book is a frozen parameter set, not running state
    collector.close()


def test_an_arena_refuses_budgets_that_train_algorithms_unequally():
    from policylab.arena.runner import make_spec

    with pytest.raises(ValueError, match="ppo for 1000 .*a2c for 1500.*multiple of 1000"):
        make_spec(ID_MARKET_MAKING, "ppo,a2c", 2, budget=1500)
    assert make_spec(ID_MARKET_MAKING, "ppo,a2c", 2, budget=2000).budget == 2000


def test_a2c_from_a_yaml_file_gets_its_whole_batch_minibatch(tmp_path):
    from policylab.routing import run_config

    path = tmp_path / "a2c.yaml"
    path.write_text("task: CartPole-v1\nalgo: a2c\nnum_envs: 4\nnum_steps: 16\n")
    cfg = run_config(str(path), {})
    assert (cfg.num_steps, cfg.minibatch_size, cfg.epochs) == (16, 64, 1)
