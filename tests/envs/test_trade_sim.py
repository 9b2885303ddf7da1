"""trade_sim (envs/trade_sim.py): seed_agents.md §A5's hand-computed trades and metrics,
the no-op rules, the state text, the seeded splits, bad input, and the gymnasium env."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from policylab.envs import ID_TRADE_SIM
from policylab.envs.trade_sim import (
    BUY,
    HOLD,
    SELL,
    MarketKnobs,
    TradeSimEnv,
    buckets,
    check_prices,
    evaluate_trader,
    momentum,
    observation_text,
    play,
    series_seed,
    simulate_prices,
    state_text,
    trade_metrics,
)

PRICES = (100, 102, 101, 104, 103)
ACTIONS = (BUY, HOLD, SELL, HOLD)


def test_values_and_rewards_of_the_spec_example():
    # B at 100 with cost 0.001: 0.999/100 shares; marked at 102 → 1.01898; at 101 →
    # 1.00899; S at 101 → 1.00899·0.999 = 1.00798101 in cash, unchanged after
    values = play(PRICES, ACTIONS, cost=0.001)
    np.testing.assert_allclose(values, [1, 1.01898, 1.00899, 1.00798101, 1.00798101], atol=1e-12)
    rewards = np.log(values[1:] / values[:-1])
    expected = [0.0188021270, -0.0098522964, -0.0010005003, 0.0]
    np.testing.assert_allclose(rewards, expected, atol=1e-10)
    assert rewards[2] == pytest.approx(math.log(0.999), abs=1e-15)  # the sale's cost exactly


def test_trade_metrics_of_the_spec_example():
    # daily returns (0.01898, −0.00980392, −0.001, 0); Bessel std ×√252
    m = trade_metrics(play(PRICES, ACTIONS, cost=0.001), trades=2)
    assert m["trade/cr"] == pytest.approx(0.00798101, abs=1e-12)
    assert m["trade/sharpe"] == pytest.approx(2.6773271, abs=1e-7)
    assert m["trade/av"] == pytest.approx(0.1923907, abs=1e-7)
    assert m["trade/mdd"] == pytest.approx(0.0107941, abs=1e-7)  # 1.01898 → 1.00798101
    assert m["trade/turnover"] == 0.5  # 2 trades in 4 decisions


def test_buy_while_holding_and_sell_while_flat_are_free_no_ops():
    assert list(play(PRICES, (SELL, SELL, HOLD, SELL))) == [1.0] * 5
    twice = play(PRICES, (BUY, BUY, BUY, BUY), cost=0.001)
    once = play(PRICES, (BUY, HOLD, HOLD, HOLD), cost=0.001)
    np.testing.assert_array_equal(twice, once)
    assert twice[-1] == pytest.approx(0.999 * 1.03)


def test_constant_values_have_zero_sharpe_and_drawdown():
    m = trade_metrics([1.0, 1.0, 1.0])
    assert (m["trade/sharpe"], m["trade/mdd"], m["trade/cr"]) == (0.0, 0.0, 0.0)


def test_state_text_buckets_and_observation_agree():
    # log-moves of +1.5 %, −0.5 %, +0.2 %, −60 %: round(200·x) → 3, −1, 0, −9 (clipped)
    moves = np.log([1.0, np.exp(0.015), np.exp(-0.005), np.exp(0.002), np.exp(-0.6)])
    prices = 100 * np.exp(np.cumsum(moves))
    assert buckets(prices, 4, 4) == [3, -1, 0, -9]
    assert state_text([3, -1, 2, 0, 4, -2], True) == "+3-1+2+0+4-2|1:"
    assert len(state_text([0] * 6, False)) == 15
    assert observation_text(np.array([3, -1, 2, 0, 4, -2, 1.0])) == "+3-1+2+0+4-2|1:"


def test_series_are_seeded_and_the_splits_disjoint():
    a, b = simulate_prices(7), simulate_prices(7)
    np.testing.assert_array_equal(a, b)
    assert len(a) == 6 + 60 + 1 and a[0] == 100.0
    assert not np.array_equal(simulate_prices(8), a)
    train = {series_seed("train", s) for s in range(0, 3_000_000, 997)}
    test = {series_seed("test", s) for s in range(0, 3_000_000, 997)}
    assert not train & test


def test_regimes_persist_so_momentum_beats_buy_and_hold_on_held_out_series():
    # the testbed's premise (§A5): persistent regimes make the shown moves informative
    knobs = MarketKnobs(sigma=0.0, stay=1.0)  # one regime, no noise: the moves reveal it
    up = simulate_prices(0, knobs)
    assert np.allclose(np.diff(np.log(up)), np.diff(np.log(up))[0])
    mom = evaluate_trader(momentum, n=30)
    hold = evaluate_trader(lambda obs: np.full(len(obs), BUY), n=30)
    assert mom["trade/sharpe"] > hold["trade/sharpe"]


@pytest.mark.parametrize(
    ("prices", "words"),
    [
        ([100, float("nan"), 101], "price[1] = nan"),
        ([100, 101, -5.0], "price[2] = -5.0"),
        ([100, float("inf"), 101], "price[1] = inf"),
        ([[100, 101]], "shape (1, 2)"),
    ],
)
def test_bad_prices_are_refused_naming_the_entry(prices, words):
    with pytest.raises(ValueError, match="trade_sim price series") as err:
        check_prices(prices)
    assert words in str(err.value)
    with pytest.raises(ValueError, match="trade_sim price series"):
        play(prices, [HOLD])


def test_a_series_too_short_for_the_window_is_refused():
    with pytest.raises(ValueError, match="at least window \\+ 2 = 8 prices"):
        TradeSimEnv(prices=[100.0] * 7)


@pytest.mark.parametrize(
    ("knob", "value"), [("days", 0), ("stay", 1.5), ("cost", 1.0), ("sigma", -0.1)]
)
def test_bad_knobs_name_the_knob_and_what_is_accepted(knob, value):
    with pytest.raises(ValueError, match=f"trade_sim knob {knob} = .*; accepted"):
        MarketKnobs(**{knob: value})


def test_bad_split_is_refused():
    with pytest.raises(ValueError, match="split 'valid'; choices: train, test"):
        TradeSimEnv(split="valid")


def test_gym_episode_matches_play_and_reports_metrics():
    env = gym.make(ID_TRADE_SIM)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (7,) and obs[-1] == 0.0
    prices = env.unwrapped.prices
    rng = np.random.default_rng(0)
    actions, rewards, steps = [], [], 0
    done, info = False, {}
    while not done:
        a = int(rng.integers(3))
        obs, r, term, trunc, info = env.step(a)
        assert not trunc
        actions.append(a)
        rewards.append(r)
        steps += 1
        done = term
    assert steps == 60
    values = play(prices[6:], actions, cost=0.001)
    assert sum(rewards) == pytest.approx(math.log(values[-1]), abs=1e-12)
    expected = trade_metrics(values)
    for key in ("trade/cr", "trade/sharpe", "trade/mdd"):
        assert info[key] == pytest.approx(expected[key], abs=1e-12)
    freq = [info[f"trade/freq_{a}"] for a in "BSH"]
    assert freq == [actions.count(k) / 60 for k in (BUY, SELL, HOLD)]


def test_observation_holding_flag_follows_the_position():
    env = TradeSimEnv()
    env.reset(seed=1)
    assert env.step(BUY)[0][-1] == 1.0
    assert env.step(BUY)[0][-1] == 1.0
    assert env.step(SELL)[0][-1] == 0.0
