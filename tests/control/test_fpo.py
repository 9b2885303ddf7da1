"""FPO (papers §16): the CFM loss by hand, the ratio is 1 at the rollout parameters and
moves the right way, Euler sampling, and a short Pendulum run that checkpoints and resumes."""

from pathlib import Path

import pytest
import torch

from policylab import recipes
from policylab.api import components
from policylab.config import ConfigError, ControlConfig, load, load_control
from policylab.policies import FlowPolicy, fpo_cfm_loss
from policylab.trainers.control import train
from policylab.trainers.run import read_metrics

WALL_CLOCK = ("perf/", "time/")  # columns that never repeat between runs

A = torch.tensor([[1.0, -1.0]])  # [B=1, D=2]
EPS = torch.tensor([[[0.5, 0.5]]])  # [B, N_mc=1, D]
TAU = torch.tensor([[[0.5]]])  # [B, N_mc, 1]


def test_cfm_loss_by_hand_t16_2():
    # x = 0.5·a + 0.5·ε = [0.75, −0.25]; u = a − ε = [0.5, −1.5]
    x = TAU * A.unsqueeze(1) + (1 - TAU) * EPS
    assert x.tolist() == [[[0.75, -0.25]]]
    zero = torch.zeros(1, 1, 2)
    # v̂ ≡ 0: squared errors [0.25, 2.25]: mean 1.25, sum 2.5
    assert fpo_cfm_loss(zero, A, EPS, TAU).item() == pytest.approx(1.25)
    assert fpo_cfm_loss(zero, A, EPS, TAU, reduce="sum").item() == pytest.approx(2.5)
    # v̂(x) = x: errors [0.0625, 1.5625]: mean 0.8125
    assert fpo_cfm_loss(x, A, EPS, TAU).item() == pytest.approx(0.8125)
    # ratio old (v̂ ≡ 0) → new (v̂ = x): exp(1.25 − 0.8125) = exp(0.4375)
    old, new = fpo_cfm_loss(zero, A, EPS, TAU), fpo_cfm_loss(x, A, EPS, TAU)
    assert torch.exp(old - new).item() == pytest.approx(1.548830, abs=1e-6)
    # w(τ) = τ² = 0.25 scales every loss: 1.25 → 0.3125; ratio exp(0.109375) = 1.115581
    old_w = fpo_cfm_loss(zero, A, EPS, TAU, weight="tau_sq")
    new_w = fpo_cfm_loss(x, A, EPS, TAU, weight="tau_sq")
    assert old_w.item() == pytest.approx(0.3125)
    assert torch.exp(old_w - new_w).item() == pytest.approx(1.115581, abs=1e-6)
    assert fpo_cfm_loss(zero, A, EPS, TAU, scale=200.0).item() == pytest.approx(250.0)


def test_policy_cfm_matches_the_formula_on_its_own_velocity():
    policy = FlowPolicy(3, 2, n_mc=1)
    obs = torch.tensor([[0.1, -0.2, 0.3]])
    x = TAU * A.unsqueeze(1) + (1 - TAU) * EPS
    v = policy.velocity(x, TAU, obs.unsqueeze(1))
    # tau_sq by default: 0.25 · mean_d (v − u)²
    expected = 0.25 * ((v - torch.tensor([0.5, -1.5])) ** 2).mean(-1)
    assert torch.allclose(policy.cfm_losses(obs, A, TAU, EPS), expected)


def _policy(**kw):
    torch.manual_seed(0)
    return FlowPolicy(3, 2, **kw)


def test_euler_integrator_t16_3():
    class Decay(FlowPolicy):
        def velocity(self, x, tau, feats):
            return -x  # exact flow x(τ) = e^{−τ}; Euler gives (1 − 1/K)^K

    feats, x0 = torch.zeros(1, 3), torch.ones(1, 1)
    for steps, expected in ((1, 0.0), (2, 0.25), (10, 0.9**10)):
        policy = Decay(3, 1, flow_steps=steps)
        assert policy.integrate(feats, x0=x0).item() == pytest.approx(expected)


def test_sampling_shapes_and_determinism_from_a_seed():
    policy = _policy(n_mc=5)
    obs = torch.randn(7, 3, generator=torch.Generator().manual_seed(1))
    a = policy.act(obs, torch.Generator().manual_seed(0))
    b = policy.act(obs, torch.Generator().manual_seed(0))
    c = policy.act(obs, torch.Generator().manual_seed(1))
    assert a.actions.shape == (7, 2) and a.logprobs.shape == (7,) and a.values.shape == (7,)
    assert a.extras["fpo_tau"].shape == (7, 5, 1)
    assert a.extras["fpo_eps"].shape == (7, 5, 2)
    assert a.extras["fpo_old_cfm"].shape == (7, 5)
    for key in a.extras:
        assert torch.equal(a.extras[key], b.extras[key])
    assert torch.equal(a.actions, b.actions) and not torch.equal(a.actions, c.actions)
    # τ on the Euler grid {0, 0.1, …, 0.9} (default tau_sampling=grid)
    grid = a.extras["fpo_tau"] * 10
    assert torch.allclose(grid, grid.round(), atol=1e-5) and a.extras["fpo_tau"].max() <= 0.9
    # the untrained head is near zero: a ≈ x_0 ~ N(0, I)
    assert 0.3 < a.actions.std() < 3.0
    mode = policy.act(obs, deterministic=True).actions
    assert torch.equal(mode, policy.act(obs, deterministic=True).actions)


def _ppo_clip():
    return components("fpo").loss


def test_ratio_is_exactly_one_at_the_rollout_parameters():
    policy = _policy()
    obs = torch.randn(16, 3, generator=torch.Generator().manual_seed(2))
    step = policy.act(obs, torch.Generator().manual_seed(3))
    logp, entropy, values = policy.evaluate(obs, step.actions, extras=step.extras)
    assert torch.equal(logp, step.logprobs)  # identical numerics, not merely close
    assert torch.equal(-step.extras["fpo_old_cfm"].mean(-1), step.logprobs)
    assert torch.equal(entropy, torch.zeros(16))
    mask = torch.ones(16, 1)
    _, metrics = _ppo_clip()(
        logprobs=logp.unsqueeze(-1),
        old_logprobs=step.logprobs.unsqueeze(-1),
        advantages=torch.ones(16, 1),
        response_mask=mask,
    )
    assert metrics["pg/clipfrac"] == 0.0


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_step_on_the_clipped_surrogate_moves_the_ratio_with_the_advantage(sign):
    # A > 0: the step lowers L_cfm on the action, so r = exp(L_old − L_new) rises above 1;
    # A < 0: the opposite.
    policy = _policy()
    obs = torch.randn(4, 3, generator=torch.Generator().manual_seed(4))
    step = policy.act(obs, torch.Generator().manual_seed(5))
    optimiser = torch.optim.SGD(policy.parameters(), lr=0.05)
    logp, _, _ = policy.evaluate(obs, step.actions, extras=step.extras)
    loss, _ = _ppo_clip()(
        logprobs=logp.unsqueeze(-1),
        old_logprobs=step.logprobs.unsqueeze(-1),
        advantages=torch.full((4, 1), sign),
        response_mask=torch.ones(4, 1),
    )
    loss.backward()
    optimiser.step()
    with torch.no_grad():
        new_logp, _, _ = policy.evaluate(obs, step.actions, extras=step.extras)
    ratio = torch.exp(new_logp - step.logprobs)
    new_cfm = -new_logp
    old_cfm = step.extras["fpo_old_cfm"].mean(-1)
    if sign > 0:
        assert (ratio.mean() > 1) and (new_cfm.mean() < old_cfm.mean())
    else:
        assert (ratio.mean() < 1) and (new_cfm.mean() > old_cfm.mean())


def test_config_defaults_are_the_recipe_s():
    recipe = recipes.get("fpo")
    assert recipe.policy == "flow" and recipe.loss == "ppo_clip"
    fields = ControlConfig.model_fields
    for key in ("n_mc", "flow_steps", "cfm_reduce", "cfm_weight", "tau_sampling", "cfm_scale"):
        assert fields[key].default == recipe.training[key].value, key
    assert components("fpo").loss.options.eps_low == 0.05


def test_fpo_needs_continuous_actions(tmp_path):
    cfg = load_control(
        None, {"algo": "fpo", "task": "CartPole-v1", "run_dir": str(tmp_path), "progress": False}
    )
    with pytest.raises(ValueError, match="Box"):
        train(cfg)
    with pytest.raises(ConfigError, match="cfm_reduce"):
        load(ControlConfig, None, {"cfm_reduce": "max"})


def test_short_pendulum_run_checkpoints_and_resumes(tmp_path):
    fields = dict(
        algo="fpo",
        task="Pendulum-v1",
        num_envs=2,
        num_steps=32,
        minibatch_size=32,
        epochs=2,
        n_mc=4,
        flow_steps=4,
        normalize_obs=True,
        eval_every=2,
        eval_episodes=2,
        progress=False,
        schedule="constant",
        seed=1,
    )
    straight = load(
        ControlConfig, None, dict(fields, total_steps=4 * 64, run_dir=str(tmp_path / "a"))
    )
    result = train(straight)
    assert result.env_steps == 256
    state = torch.load(Path(straight.run_dir) / "checkpoints/step_4/state.pt", weights_only=False)
    assert any(k.startswith("velocity_net.") for k in state["policy"])
    first = load(ControlConfig, None, dict(fields, total_steps=2 * 64, run_dir=str(tmp_path / "b")))
    train(first)
    train(first.model_copy(update={"total_steps": 4 * 64}), resume=True)
    a, b = (
        read_metrics(straight.run_dir, drop=WALL_CLOCK),
        read_metrics(first.run_dir, drop=WALL_CLOCK),
    )
    assert [(r["step"], r["kind"]) for r in a] == [(r["step"], r["kind"]) for r in b]
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for key, value in ra.items():
            expected = value if isinstance(value, str) else pytest.approx(value, rel=1e-5, abs=1e-6)
            assert rb[key] == expected, (ra["step"], key)
    trained = [r for r in a if r["kind"] == "train"]
    assert all(r["updates"] == 4 for r in trained)  # 2 epochs × 2 minibatches
    assert trained[0]["pg/ratio_mean"] == pytest.approx(1.0, abs=0.05)
