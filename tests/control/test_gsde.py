"""gSDE exploration (policies/gsde.py): the log-prob and entropy by hand and against SB3's
StateDependentNoiseDistribution on the same weights, the noise as z(s)·θ_ε held between
draws, the collector's resampling schedule, the config fields and the zoo preset, and a
short run that resumes step for step."""

import math

import pytest
import torch
from gymnasium import spaces

from policylab.config import ConfigError, ControlConfig, load, load_control
from policylab.policies.gsde import (
    SDE_EPS,
    GSDEActorCritic,
    gsde_log_prob,
    gsde_variance,
    make_gsde_actor_critic,
)
from policylab.trainers.control import train
from policylab.workflows.episodes import EpisodeCollector
from run_testing import assert_same_metrics


def test_variance_log_prob_and_entropy_by_hand():
    # z = [1, 2], σ = [[1], [0.5]] (one action): v = 1²·1² + 2²·0.5² + ε = 2 + 1e-6
    z = torch.tensor([[1.0, 2.0]])
    log_std = torch.tensor([[0.0], [math.log(0.5)]])
    v = gsde_variance(z, log_std)
    assert float(v) == pytest.approx(2.0 + SDE_EPS, abs=1e-7)
    # a = 1, μ = 0: log N(1; 0, v) = −1/(2v) − ½ log(2π v); H = ½ + ½ log(2π v)
    logp, entropy = gsde_log_prob(torch.zeros(1, 1), v, torch.ones(1, 1))
    vv = 2.0 + SDE_EPS
    assert float(logp) == pytest.approx(-1 / (2 * vv) - 0.5 * math.log(2 * math.pi * vv))
    assert float(entropy) == pytest.approx(0.5 + 0.5 * math.log(2 * math.pi * vv))


def test_two_actions_sum_their_terms_by_hand():
    # z = [3], σ = [[1, 2]]: v = [9·1, 9·4] = [9, 36] (+ε); a − μ = [3, 6] → z-scores 1, 1
    z, log_std = torch.tensor([[3.0]]), torch.tensor([[0.0, math.log(2.0)]])
    v = gsde_variance(z, log_std)
    logp, _ = gsde_log_prob(torch.zeros(1, 2), v, torch.tensor([[3.0, 6.0]]))
    expected = -0.5 - 0.5 * math.log(2 * math.pi * 9) - 0.5 - 0.5 * math.log(2 * math.pi * 36)
    assert float(logp) == pytest.approx(expected, abs=1e-5)


def _policy(seed=0, **kw):
    torch.manual_seed(seed)
    policy = GSDEActorCritic(3, 2, hidden=(5, 4), log_std_init=-0.5, **kw)
    with torch.no_grad():  # distinct σ per entry, and a head far from 0
        policy.log_std.add_(0.3 * torch.randn_like(policy.log_std))
        policy.actor[-1].weight.normal_()
    return policy


def test_log_prob_and_entropy_match_sb3_on_the_same_weights():
    sb3 = pytest.importorskip("stable_baselines3.common.distributions")
    policy = _policy()
    x, actions = torch.randn(6, 3), torch.randn(6, 2)
    ours = policy.evaluate(x, actions)
    # SB3's defaults for PPO's use_sde: full_std, exp (not expln), no squashing, features
    # not learnt through the noise; latent_sde = the actor's last hidden layer
    theirs = sb3.StateDependentNoiseDistribution(2)
    theirs.latent_sde_dim = 4
    z = policy.latent(x)
    theirs.proba_distribution(policy.actor[-1](z), policy.log_std, z)
    assert torch.allclose(ours.logprobs, theirs.log_prob(actions), atol=1e-5)
    assert torch.allclose(ours.entropy, theirs.entropy(), atol=1e-5)


def test_log_std_learns_and_the_features_get_no_gradient_through_the_noise():
    policy = _policy()
    x = torch.randn(6, 3)
    mean = policy.actor(x).detach()
    # a = μ: only the variance term depends on θ; it must reach log_std, not the trunk
    policy.evaluate(x, mean).logprobs.sum().backward()
    assert policy.log_std.grad.abs().sum() > 0
    trunk = policy.actor[0].weight.grad
    assert trunk is None or float(trunk.abs().sum()) == 0.0


def test_noise_is_features_times_the_held_matrix():
    policy = _policy()
    x = torch.randn(3, 3)
    policy.reset_noise(3, torch.Generator().manual_seed(1))
    first = policy.sample(x).actions
    z, mean = policy.latent(x), policy.actor(x)
    for i in range(3):  # row i uses environment i's matrix
        assert torch.allclose(first[i], mean[i] + z[i] @ policy.exploration[i], atol=1e-6)
    assert torch.equal(policy.sample(x).actions, first)  # held until the next draw
    policy.reset_noise(3, torch.Generator().manual_seed(2))
    assert not torch.equal(policy.sample(x).actions, first)
    assert torch.equal(policy.sample(x, deterministic=True).actions, mean)


def test_the_noise_has_the_variance_the_log_prob_assumes():
    # over many draws of θ_ε the noise z·θ_ε at a fixed state is N(0, v − ε)
    policy = _policy()
    x = torch.randn(1, 3)
    n = 20_000
    policy.reset_noise(n, torch.Generator().manual_seed(0))
    z = policy.latent(x).detach()
    noise = torch.einsum("f,nfa->na", z[0], policy.exploration)
    v = gsde_variance(z, policy.log_std.detach())[0] - SDE_EPS
    assert torch.allclose(noise.var(0), v, rtol=0.05)


@pytest.mark.parametrize(("freq", "due"), [(-1, [0]), (0, [0]), (4, [0, 4, 8])])
def test_collector_draws_matrices_at_the_rollout_start_and_every_freq_steps(freq, due):
    policy = make_gsde_actor_critic(
        spaces.Box(-1, 1, (3,)), spaces.Box(-2, 2, (1,)), sde_sample_freq=freq
    )
    steps, draw = [], policy.reset_noise

    def counted(n, generator=None):
        steps.append(n)
        draw(n, generator)

    policy.reset_noise = counted
    collector = EpisodeCollector("Pendulum-v1", 2, seed=0)
    collector.collect(policy, 10, torch.Generator().manual_seed(0))
    collector.close()
    assert steps == [2] * len(due)  # one matrix per environment, each time due
    assert [t for t in range(10) if policy.noise_due(t)] == due


def test_discrete_actions_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="use_sde=true needs continuous"):
        make_gsde_actor_critic(spaces.Box(-1, 1, (4,)), spaces.Discrete(2))


def test_config_fields_and_their_errors():
    with pytest.raises(ConfigError, match="sde_sample_freq=4 acts only with use_sde=true"):
        load(ControlConfig, None, {"task": "Pendulum-v1", "sde_sample_freq": 4})
    with pytest.raises(ConfigError, match="use_sde=true needs the mlp policy; algo='fpo'"):
        load(ControlConfig, None, {"task": "Pendulum-v1", "algo": "fpo", "use_sde": True})
    cfg = load(ControlConfig, None, {})
    assert (cfg.use_sde, cfg.sde_sample_freq, cfg.log_std_init) == (False, -1, 0.0)


def test_use_sde_on_pendulum_brings_the_zoo_setting_under_the_users_fields():
    plain = load_control(None, {"task": "Pendulum-v1"})
    assert (plain.use_sde, plain.normalize_obs, plain.sde_sample_freq) == (False, True, -1)
    zoo = load_control(None, {"task": "Pendulum-v1", "use_sde": True})
    assert (zoo.sde_sample_freq, zoo.normalize_obs, zoo.log_std_init) == (4, False, 0.0)
    assert (zoo.num_envs, zoo.num_steps, zoo.epochs, zoo.gamma, zoo.lr) == (4, 1024, 10, 0.9, 1e-3)
    mine = load_control(None, {"task": "Pendulum-v1", "use_sde": "true", "sde_sample_freq": 8})
    assert (mine.sde_sample_freq, mine.normalize_obs) == (8, False)


def test_a_short_gsde_run_trains_and_resumes_step_for_step(tmp_path):
    fields = dict(
        task="Pendulum-v1",
        use_sde=True,
        sde_sample_freq=4,
        num_envs=2,
        num_steps=64,
        minibatch_size=64,
        epochs=2,
        eval_every=2,
        eval_episodes=2,
        progress=False,
        report_to=[],
        schedule="constant",
    )
    straight = load(
        ControlConfig, None, dict(fields, total_steps=4 * 128, run_dir=str(tmp_path / "a"))
    )
    train(straight)
    first = load(
        ControlConfig, None, dict(fields, total_steps=2 * 128, run_dir=str(tmp_path / "b"))
    )
    train(first)
    train(first.model_copy(update={"total_steps": 4 * 128}), resume=True)
    rows = assert_same_metrics(straight.run_dir, first.run_dir)
    assert len([r for r in rows if r["kind"] == "train"]) == 4
    state = torch.load(tmp_path / "a" / "checkpoints" / "step_4" / "state.pt", weights_only=False)
    assert state["policy"]["log_std"].shape == (64, 1)  # one σ per (feature, action)
    assert not torch.equal(state["policy"]["log_std"], torch.zeros(64, 1))  # it learnt
