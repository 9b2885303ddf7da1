"""trade_sim as a text task (tasks/trade_sim.py): seeded examples with disjoint series
ranges, the exact hindsight verifier, and the multi-turn text environment."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policylab import tasks
from policylab.envs.text import check_env
from policylab.envs.trade_sim import BUY, HOLD, SELL, TEST_BASE, play, simulate_prices
from policylab.tasks.trade_sim import R_BAD


def test_examples_are_seeded_and_the_series_of_the_splits_disjoint():
    task = tasks.get("trade_sim")
    train, test = task.examples("train", 20, seed=0), task.examples("test", 20, seed=0)
    assert train == task.examples("train", 20, seed=0)
    assert [e["series"] for e in train] == list(range(20))
    assert [e["series"] for e in test] == list(range(TEST_BASE, TEST_BASE + 20))
    assert all(len(e["prompt"]) == 15 and e["prompt"].endswith("|0:") for e in train)


def test_verifier_rewards_a_best_first_action_in_hindsight():
    task = tasks.get("trade_sim")
    for example in task.examples("test", 40):
        prices = simulate_prices(example["series"])
        up = prices[7] * 0.999 / prices[6] > 1  # buying at day 6 pays after the cost
        expected = {"B": float(up), "S": float(not up), "H": float(not up)}
        for action, reward in expected.items():
            assert task.verify(f"<answer>{action}</answer>", example) == reward
        assert task.verify(example["completion"], example) == 1.0
        assert task.verify("<answer>X</answer>", example) == 0.0


def test_text_env_plays_the_series_with_log_value_rewards():
    task = tasks.get("trade_sim", days=5)
    example = task.examples("train", 1, seed=3)[0]
    env = task.env(example)
    check_env(env, example)
    first = env.reset(example, 0)
    assert first == example["prompt"]
    actions, rewards, obs = ["B;", "H;", "x;", "S;", "H;"], [], first
    for action in actions:
        step = env.step("agent", action)
        rewards.append(step.reward)
        obs = step.obs
    assert step.done and step.info["success"] == (math.exp(sum(rewards) - R_BAD) > 1)
    assert obs.endswith("|0:")
    prices = simulate_prices(example["series"], task.knobs)[6:]
    values = play(prices, [BUY, HOLD, HOLD, SELL, HOLD])
    assert sum(rewards) == pytest.approx(math.log(values[-1]) + R_BAD, abs=1e-12)
    assert np.isclose(rewards[2], math.log(values[3] / values[2]) + R_BAD)


def test_bad_knob_fails_naming_it():
    with pytest.raises(ValueError, match="trade_sim knob stay = 2"):
        tasks.get("trade_sim", stay=2)


@pytest.mark.slow
def test_train_mt_grpo_on_the_text_market_from_the_cli(tmp_path):
    from policylab.cli import main

    run = tmp_path / "run"
    args = [
        "train",
        "--algo",
        "mt_grpo",
        "--task",
        "trade_sim",
        "task_knobs={days: 5}",  # 15 + 5 × 17 characters fit the tiny model's 128
        "steps=1",
        "prompts_per_step=2",
        "samples_per_prompt=2",
        "eval_n=4",
        "max_new_tokens=2",
        "progress=false",
        "report_to=[]",
        f"run_dir={run}",
    ]
    assert main(args) == 0
    text = (run / "metrics.jsonl").read_text()
    assert '"agent/overflow_frac": 0.0' in text and '"agent/turns_mean": 5.0' in text
