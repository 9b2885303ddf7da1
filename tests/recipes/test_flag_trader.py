"""FLAG-Trader's recipes (recipes/trader.py) and `policylab train --algo flag_trader
--task policylab/TradeSim-v0` end to end on the control trainer."""

from __future__ import annotations

import json

import pytest

from policylab import recipes
from policylab.cli import main
from policylab.routing import run_config


def test_recipes_name_the_lm_policy_gae_ppo_clip_and_a_clipped_value_loss():
    for name, layers in (("flag_trader", 2), ("lm_ppo_full", None)):
        recipe = recipes.get(name)
        assert (recipe.policy, recipe.advantage, recipe.loss) == ("lm_control", "gae", "ppo_clip")
        assert recipe.value_loss == "value_clip"
        assert recipe.training["trainable_layers"].value == layers
        assert recipe.value_options["clip"].value == 0.2
        assert all(s.source.startswith("[") for s in recipe.advantage_options.values())


def test_describe_says_why_the_values_are_provisional(capsys):
    assert main(["describe", "flag_trader"]) == 0
    out = capsys.readouterr().out
    assert "Provisional values" in out and "arXiv:2502.11433" in out
    assert "trainable_layers" in out


def test_trade_sim_routes_to_the_control_trainer_with_its_tuned_defaults():
    cfg = run_config(None, {"algo": "flag_trader", "task": "policylab/TradeSim-v0"})
    assert type(cfg).__name__ == "ControlConfig"
    assert (cfg.num_steps, cfg.value_clip, cfg.total_steps) == (60, 0.2, 4_800)
    assert cfg.eval_env_kwargs == {"split": "test"}  # held-out series, not training's


def test_the_trainers_evaluation_plays_the_held_out_split(monkeypatch):
    from types import SimpleNamespace

    from policylab.trainers import control

    seen = {}

    def fake_evaluate(policy, task, episodes, seed, **kwargs):
        seen.update(kwargs, task=task)
        return {"eval/return_mean": 0.0}

    monkeypatch.setattr(control, "evaluate_policy", fake_evaluate)
    cfg = run_config(None, {"algo": "flag_trader", "task": "policylab/TradeSim-v0"})
    run = SimpleNamespace(log=lambda *a, **k: None, save_best=lambda *a, **k: None)
    done = SimpleNamespace(evals=[], elapsed=0.0, solved_at=None)
    control.evaluation(SimpleNamespace(state_dict=dict), cfg, run, done, 0, 480)
    assert seen == {"task": "policylab/TradeSim-v0", "split": "test"}


@pytest.mark.slow
def test_train_flag_trader_from_the_cli_logs_the_trader_metrics(tmp_path):
    run = tmp_path / "run"
    args = [
        "train",
        "--algo",
        "flag_trader",
        "--task",
        "policylab/TradeSim-v0",
        "total_steps=240",
        "num_envs=4",
        "minibatch_size=60",
        "eval_episodes=2",
        "progress=false",
        "report_to=[]",
        f"run_dir={run}",
    ]
    assert main(args) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert len(train) == 1 and train[0]["env_steps"] == 240
    row = train[0]
    for key in ("sharpe", "cr", "mdd", "turnover"):
        assert f"rollout/trade/{key}" in row
    freq = sum(row[f"rollout/trade/freq_{a}"] for a in "BSH")
    assert freq == pytest.approx(1.0)
    assert "vf/loss" in row or any(k.startswith("vf/") for k in row)


def test_flag_trader_on_the_text_task_names_its_gymnasium_twin():
    from policylab.config import ConfigError, TrainConfig
    from policylab.trainers.llm import compose

    with pytest.raises(ConfigError, match="trade_sim's is --task policylab/TradeSim-v0"):
        compose(TrainConfig(algo="flag_trader", task="trade_sim"))


def test_flag_trader_refuses_an_environment_it_cannot_read_before_the_model_loads(monkeypatch):
    import gymnasium as gym

    from policylab.policies import kinds

    def no_model(*args, **kwargs):
        raise AssertionError("the model loaded")

    monkeypatch.setattr(kinds, "make_lm_control_policy", no_model)
    cfg = run_config(None, {"algo": "flag_trader", "task": "CartPole-v1"})
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="Discrete\\(3\\) actions .* CartPole-v1 has actions"):
        kinds.control_policies.get("lm_control")(cfg, env.observation_space, env.action_space, {})
