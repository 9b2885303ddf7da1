"""PG-Rainbow (papers §17): the quantile Huber loss and its targets by hand (T17.1, T17.2),
the cosine features (T17.3), the IQN critic's shapes and quantile-mean value, and a short
CartPole run that trains the IQN from replay, checkpoints and resumes."""

import math
from pathlib import Path

import pytest
import torch

from policylab import recipes
from policylab.algebra.value import huber, quantile_huber, quantile_targets
from policylab.api import components
from policylab.config import ControlConfig, load, load_control
from policylab.policies import IQNCritic, PGRainbowPolicy, cosine_features
from policylab.trainers.control import train
from policylab.trainers.run import read_metrics
from run_testing import WALL_CLOCK, assert_same_metrics

TAUS = torch.tensor([[0.25, 0.75]])
PRED = torch.tensor([[0.0, 1.0]])
TARGET = torch.tensor([[0.5, 2.0]])


def test_quantile_huber_by_hand_t17_1():
    # δ_ij = target_j − pred_i = [[0.5, 2.0], [−0.5, 1.0]]
    # κ = 1: L = [[0.125, 1.5], [0.125, 0.5]]; weights |τ_i − 1{δ<0}| = [[.25, .25], [.25, .75]]
    loss, rho = quantile_huber(PRED, TARGET, TAUS, kappa=1.0)
    assert torch.allclose(rho[0], torch.tensor([[0.03125, 0.375], [0.03125, 0.375]]))
    assert loss.item() == pytest.approx(0.8125 / 2)  # Σ_ij ρ / N'
    # κ = 0.5: L/κ = [[0.25, 3.5], [0.25, 1.5]]
    loss, rho = quantile_huber(PRED, TARGET, TAUS, kappa=0.5)
    assert torch.allclose(rho[0], torch.tensor([[0.0625, 0.4375], [0.0625, 0.5625]]))
    assert loss.item() == pytest.approx(0.5625)
    # κ = 0: pure quantile regression |τ − 1{δ<0}|·|δ| (§17.7), no division by zero
    loss, rho = quantile_huber(PRED, TARGET, TAUS.unsqueeze(-1), kappa=0.0)
    assert torch.allclose(rho[0], torch.tensor([[0.125, 0.5], [0.125, 0.75]]))
    assert loss.item() == pytest.approx(1.5 / 2)
    assert huber(torch.tensor([0.5, -3.0]), 1.0).tolist() == [0.125, 2.5]


def test_quantile_huber_batch_mean_and_gradient_sign():
    pred = torch.zeros(2, 3, requires_grad=True)
    loss, rho = quantile_huber(pred, torch.ones(2, 4), torch.full((2, 3), 0.5))
    assert rho.shape == (2, 3, 4)
    loss.backward()
    assert (pred.grad < 0).all()  # targets above: every quantile is pushed up


def test_quantile_targets_t17_2():
    nxt = torch.tensor([[0.0, 2.0]])
    r = torch.tensor([1.0])
    assert torch.allclose(
        quantile_targets(r, 0.9, torch.tensor([0.0]), nxt), torch.tensor([[1.0, 2.8]])
    )
    assert torch.allclose(
        quantile_targets(r, 0.9, torch.tensor([1.0]), nxt), torch.tensor([[1.0, 1.0]])
    )


def test_cosine_features_t17_3():
    out = cosine_features(torch.tensor([0.5, 0.25]), 3)
    assert out.tolist()[0] == pytest.approx([1.0, 0.0, -1.0], abs=1e-6)
    assert out.tolist()[1] == pytest.approx([1.0, math.sqrt(0.5), 0.0], abs=1e-6)


def test_critic_shapes_and_value_is_the_quantile_mean():
    torch.manual_seed(0)
    critic = IQNCritic(4, 2, hidden=16, n_cos=8)
    assert critic(torch.randn(5, 4), torch.rand(5, 7)).shape == (5, 7, 2)
    policy = PGRainbowPolicy(4, 2, hidden=(16, 16), pgr_quantiles=6)
    obs = torch.randn(5, 4)
    assert policy.mid_taus.tolist() == pytest.approx(
        [1 / 12, 3 / 12, 5 / 12, 7 / 12, 9 / 12, 11 / 12]
    )
    z = policy.iqn(obs, policy.mid_taus.expand(5, -1))  # [5, 6, 2]
    probs = torch.softmax(policy.actor(obs), -1)
    mixture = (z * probs.unsqueeze(1)).sum(-1)  # Σ_a π(a|s)·Z_τ̂(s, a)
    q = policy.quantile_vector(obs)
    assert q.shape == (5, 6)
    assert torch.allclose(q, mixture.sort(-1).values)
    assert torch.allclose(policy.iqn_value(obs), mixture.mean(-1))
    # before replay_min: V_ψ = V_θ; after: f_ψ([V_θ, q]), which starts at V_θ
    v_theta = policy.critic(obs).squeeze(-1)
    assert torch.equal(policy.value(obs), v_theta)
    policy.active.fill_(True)
    assert torch.allclose(policy.value(obs), v_theta, atol=1e-6)
    with torch.no_grad():
        policy.distill.weight.copy_(torch.tensor([[0.0] + [1 / 6] * 6]))
    assert torch.allclose(policy.value(obs), policy.iqn_value(obs), atol=1e-6)
    _, _, values = policy.evaluate(obs, torch.zeros(5, dtype=torch.long))
    assert torch.allclose(values, policy.iqn_value(obs), atol=1e-6)


def test_recipe_and_config_defaults_agree():
    recipe = recipes.get("pg_rainbow")
    assert recipe.policy == "pg_rainbow" and recipe.loss == "ppo_clip"
    fields = ControlConfig.model_fields
    for key in recipe.training:
        if key in fields:
            assert fields[key].default == recipe.training[key].value, key
    assert components("pg_rainbow").loss.options.eps_low == 0.2


def test_short_cartpole_run_trains_the_iqn_and_resumes(tmp_path):
    fields = dict(
        algo="pg_rainbow",
        task="CartPole-v1",
        num_envs=4,
        num_steps=32,
        minibatch_size=64,
        epochs=2,
        replay_min=128,
        iqn_steps=4,
        iqn_target_every=3,
        eval_every=2,
        eval_episodes=2,
        schedule="constant",
        progress=False,
        seed=2,
    )
    straight = load(
        ControlConfig, None, dict(fields, total_steps=4 * 128, run_dir=str(tmp_path / "a"))
    )
    result = train(straight)
    assert result.env_steps == 512
    trained = [r for r in read_metrics(straight.run_dir, drop=WALL_CLOCK) if r["kind"] == "train"]
    assert [r["iqn/replay_size"] for r in trained] == [128, 256, 384, 512]  # no truncation yet
    assert all(math.isfinite(r["iqn/loss"]) for r in trained)
    state = torch.load(Path(straight.run_dir) / "checkpoints/step_4/state.pt", weights_only=False)
    assert bool(state["policy"]["active"]) and state["iqn"]["steps"] == 16
    first = load(
        ControlConfig, None, dict(fields, total_steps=2 * 128, run_dir=str(tmp_path / "b"))
    )
    train(first)
    train(first.model_copy(update={"total_steps": 4 * 128}), resume=True)
    assert_same_metrics(straight.run_dir, first.run_dir)


def test_pg_rainbow_needs_discrete_actions(tmp_path):
    cfg = load_control(
        None,
        {"algo": "pg_rainbow", "task": "Pendulum-v1", "run_dir": str(tmp_path), "progress": False},
    )
    with pytest.raises(ValueError, match="Discrete"):
        train(cfg)
