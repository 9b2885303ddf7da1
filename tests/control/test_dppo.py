"""dppo and adpo_provisional on the control trainer (papers/seed_generative.md G7): the loss
pieces through the recipe path (O2 = A1–A3 with the hopper defaults), a Pendulum run, the
behaviour-cloned start (init_policy) and its validation."""

from pathlib import Path

import pytest
import torch

from policylab import recipes
from policylab.algebra.generative import (
    dppo_clip_schedule,
    dppo_denoise_discount,
    gaussian_step_logprob,
)
from policylab.api import components
from policylab.config import ConfigError, ControlConfig, load, load_control
from policylab.control_policy import ControlPolicy
from policylab.trainers.control import chain_policy_loss, train
from policylab.trainers.run import read_metrics

WALL_CLOCK = ("perf/", "time/")


def setting(algo, key):
    return recipes.get(algo).training[key].value


@pytest.mark.parametrize("algo", ["dppo", "adpo_provisional"])
def test_o2_a1_step_density_with_the_recipe_s_s_min(algo):
    # A1: x = [0.5, −0.2], μ = [0.3, 0.1], s = 0.05 floored to s_min = 0.1 (hopper yaml)
    s_min = setting(algo, "std_min")
    assert s_min == 0.1
    x, mu = torch.tensor([0.5, -0.2]), torch.tensor([0.3, 0.1])
    lp = gaussian_step_logprob(x, mu, 0.05, std_min=s_min, clamp=(-5.0, 2.0))
    assert float(lp) == pytest.approx(-1.8663534, abs=1e-6)


def test_o2_a2_discount_and_schedule_with_the_recipe_s_rate():
    # A2: K′ = 4, γ_d = 0.99 (hopper) → [0.970299, 0.9801, 0.99, 1]; base 0.001 → 0.01, ρ = 3
    w = dppo_denoise_discount(4, setting("dppo", "gamma_denoise"))
    torch.testing.assert_close(w, torch.tensor([0.970299, 0.9801, 0.99, 1.0], dtype=w.dtype))
    eps = dppo_clip_schedule(4, 0.001, 0.01, setting("dppo", "clip_rate"))
    expected = torch.tensor([0.001, 0.0018103, 0.0040128, 0.01], dtype=eps.dtype)
    torch.testing.assert_close(eps, expected, rtol=0, atol=1e-7)


@pytest.mark.parametrize("algo", ["dppo", "adpo_provisional"])
def test_o2_a3_chain_loss_through_the_recipe_path(algo):
    # A3: r = [1.0202013, 1, 1.0512711, 1.0512711]; A = 1 × the A2 weights; hopper ε = 0.01
    # (base 0.01 = final: a flat schedule) → per-step [−0.980002, −0.9801, −0.9999, −1.01]
    parts = components(algo)
    assert parts.loss.name == "ppo_clip" and parts.loss.options.eps_high == 0.01
    logp = torch.tensor([[-0.10, -0.30, 0.05, -0.20]], requires_grad=True)
    old = torch.tensor([[-0.12, -0.30, 0.00, -0.25]])
    loss, metrics = chain_policy_loss(
        algo, logp, old, torch.ones(1, 1), torch.ones(1, 1), parts.loss
    )
    assert float(loss.detach()) == pytest.approx(-0.9925005, abs=1e-6)
    assert metrics["pg/clipfrac"] == pytest.approx(0.75)  # steps 0, 2, 3 past 1.01
    loss.backward()  # only the unclipped step 1 carries a gradient: −A/K′ = −0.9801/4
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, -0.9801 / 4, 0.0, 0.0]]))


def test_advantage_quantile_clip_and_discount():
    from policylab.algebra.dppo import dppo_chain_advantages

    adv = torch.tensor([[-2.0], [0.0], [1.0], [5.0]])
    out = dppo_chain_advantages(adv, torch.ones(4, 1), torch.tensor([0.5, 1.0]), (0.0, 2 / 3))
    # the 2/3 quantile of [−2, 0, 1, 5] is 1 (linear interpolation): 5 → 1
    torch.testing.assert_close(out, torch.tensor([[-1.0, -2.0], [0, 0], [0.5, 1.0], [0.5, 1.0]]))


def tiny(tmp_path, name, **extra):
    fields = dict(
        task="Pendulum-v1",
        num_envs=2,
        num_steps=32,
        minibatch_size=32,
        epochs=2,
        eval_every=2,
        eval_episodes=1,
        progress=False,
        report_to=[],
        seed=1,
        total_steps=4 * 64,
        run_dir=str(tmp_path / name),
    )
    return load_control(None, {**fields, **extra})


def test_algo_defaults_are_dppo_s_and_the_users_win():
    cfg = load_control(None, {"algo": "dppo", "task": "Pendulum-v1"})
    assert (cfg.lr, cfg.epochs, cfg.target_kl, cfg.normalize_reward) == (1e-4, 5, 1.0, True)
    assert cfg.gamma == 0.9  # Pendulum's γ (the task's row) stays
    mine = {"algo": "adpo_provisional", "task": "Pendulum-v1", "lr": 3e-4}
    assert load_control(None, mine).lr == 3e-4
    assert load_control(None, {"algo": "ppo", "task": "Pendulum-v1"}).init_policy is None


@pytest.mark.parametrize("algo", ["dppo", "adpo_provisional"])
def test_short_pendulum_run_trains_the_fine_tuned_net_only_and_resumes(tmp_path, algo):
    straight = tiny(tmp_path, "a", algo=algo)
    result = train(straight)
    assert result.env_steps == 256
    state = torch.load(Path(straight.run_dir) / "checkpoints/step_4/state.pt", weights_only=False)
    policy = state["policy"]
    changed = [k for k in policy if k.startswith("eps_net.")]
    frozen = [k.replace("eps_net.", "eps_frozen.") for k in changed]
    assert all(not torch.equal(policy[a], policy[b]) for a, b in zip(changed, frozen, strict=True))
    rows = read_metrics(straight.run_dir, drop=WALL_CLOCK)
    trained = [r for r in rows if r["kind"] == "train"]
    assert trained[0]["pg/ratio_mean"] == pytest.approx(1.0, abs=0.05)
    assert "logp/clamped_frac" in trained[0]
    first = tiny(tmp_path, "b", algo=algo, total_steps=2 * 64)
    train(first)
    train(first.model_copy(update={"total_steps": 4 * 64}), resume=True)
    again = read_metrics(first.run_dir, drop=WALL_CLOCK)
    assert len(again) == len(rows)
    for ra, rb in zip(rows, again, strict=True):
        for key, value in ra.items():
            expected = value if isinstance(value, str) else pytest.approx(value, rel=1e-5, abs=1e-6)
            assert rb[key] == expected, (ra["step"], key)


def test_adapg_at_lambda_one_is_dppo(tmp_path):
    a = train(tiny(tmp_path, "d", algo="dppo"))
    b = train(tiny(tmp_path, "p", algo="adpo_provisional", adapg_lam=1.0))
    assert [e["eval/return_mean"] for e in a.evals] == pytest.approx(
        [e["eval/return_mean"] for e in b.evals], rel=1e-4
    )


def test_init_policy_starts_from_the_file_and_is_validated(tmp_path):
    import gymnasium as gym

    from policylab.trainers.control import policy_for_spaces

    cfg = tiny(tmp_path, "w", algo="dppo", total_steps=64, num_steps=32)
    env = gym.make("Pendulum-v1")
    net, _ = policy_for_spaces(cfg, env.observation_space, env.action_space)
    for p in net.eps_net.parameters():
        p.data.fill_(0.01)
    net.freeze_reference()
    path = ControlPolicy(net, cfg, env.observation_space, env.action_space).save(tmp_path / "bc.pt")
    warm = cfg.model_copy(update={"init_policy": str(path), "run_dir": str(tmp_path / "w2")})
    result = train(warm)
    saved = Path(result.run_dir) / "checkpoints/step_1/state.pt"
    state = torch.load(saved, weights_only=False)["policy"]
    assert all(float(v.sub(0.01).abs().max()) == 0 for k, v in state.items() if "eps_frozen" in k)
    with pytest.raises(ConfigError, match="init_policy"):
        load(ControlConfig, None, {"init_policy": str(tmp_path / "missing.pt")})
    ppo = tiny(tmp_path, "x", algo="ppo", init_policy=str(path))
    with pytest.raises(ValueError, match="policy kind 'diffusion_chain'.*'mlp'"):
        train(ppo)


def test_pretrain_command_writes_a_policy_that_a_run_starts_from(tmp_path):
    from policylab.pretrain_diffusion_policy import pretrain

    out = pretrain(
        "Pendulum-v1",
        tmp_path / "bc.pt",
        ppo_steps=64,
        transitions=200,
        bc_steps=20,
        batch=32,
        eval_episodes=1,
        ppo_overrides={"num_envs": 1, "num_steps": 64, "minibatch_size": 32, "epochs": 1},
    )
    assert out["transitions"] == 200 and out["bc_loss_last"] < out["bc_loss_first"]
    cfg = tiny(tmp_path, "ft", algo="adpo_provisional", init_policy=out["path"], total_steps=64)
    assert train(cfg).env_steps == 64


def test_a_resumed_run_keeps_its_checkpoint_and_does_not_reload_init_policy(tmp_path):
    # the checkpoint is the run's state: init_policy seeds a fresh run only, so a BC file
    # rewritten (here: by a ppo policy, which does not fit) after the run started is not read
    import gymnasium as gym

    from policylab.trainers.control import policy_for_spaces

    env = gym.make("Pendulum-v1")
    cfg = tiny(tmp_path, "r", algo="dppo", total_steps=64)
    net, _ = policy_for_spaces(cfg, env.observation_space, env.action_space)
    for p in net.eps_net.parameters():
        p.data.fill_(0.01)
    net.freeze_reference()
    path = ControlPolicy(net, cfg, env.observation_space, env.action_space).save(tmp_path / "bc.pt")
    first = cfg.model_copy(update={"init_policy": str(path)})
    train(first)
    ppo_cfg = tiny(tmp_path, "p", algo="ppo")
    other, _ = policy_for_spaces(ppo_cfg, env.observation_space, env.action_space)
    ControlPolicy(other, ppo_cfg, env.observation_space, env.action_space).save(path)
    result = train(first.model_copy(update={"total_steps": 2 * 64}), resume=True)
    assert result.env_steps == 128
    state = torch.load(Path(result.run_dir) / "checkpoints/step_2/state.pt", weights_only=False)
    frozen = [v for k, v in state["policy"].items() if "eps_frozen" in k]
    assert frozen and all(float(v.sub(0.01).abs().max()) == 0 for v in frozen)


def test_adapg_lam_on_an_algorithm_without_the_adapg_optimiser_is_refused():
    # adapg_lam would be silently ignored by dppo's (or ppo's) Adam
    for algo in ("dppo", "ppo"):
        with pytest.raises(ConfigError, match="adapg_lam"):
            load_control(None, {"algo": algo, "task": "Pendulum-v1", "adapg_lam": 0.3})
    ok = load_control(None, {"algo": "adpo_provisional", "task": "Pendulum-v1", "adapg_lam": 0.3})
    assert ok.adapg_lam == 0.3


def test_init_policy_of_another_policy_kind_is_refused_before_the_run_folder(tmp_path):
    import gymnasium as gym

    from policylab.trainers.control import policy_for_spaces

    env = gym.make("Pendulum-v1")
    ppo_cfg = tiny(tmp_path, "p", algo="ppo")
    net, _ = policy_for_spaces(ppo_cfg, env.observation_space, env.action_space)
    path = ControlPolicy(net, ppo_cfg, env.observation_space, env.action_space).save(
        tmp_path / "ppo.pt"
    )
    cfg = tiny(tmp_path, "d", algo="dppo", init_policy=str(path))
    with pytest.raises(ValueError, match="policy kind 'mlp'.*'diffusion_chain'"):
        train(cfg)
    assert not Path(cfg.run_dir).exists()


def test_warm_start_names_a_file_of_the_same_kind_that_does_not_fit(tmp_path):
    from policylab.policies.diffusion_chain import DiffusionChainPolicy
    from policylab.trainers.control import warm_start

    torch.save({"policy": DiffusionChainPolicy(3, 1, hidden=(8,)).state_dict()}, tmp_path / "a.pt")
    with pytest.raises(ValueError, match="does not fit"):
        warm_start(DiffusionChainPolicy(3, 1, hidden=(16,)), str(tmp_path / "a.pt"))


def test_a_run_resumes_after_its_init_policy_file_is_gone(tmp_path):
    # e.g. the BC file was under /tmp: the checkpoint holds the run, so resuming needs no file
    import gymnasium as gym

    from policylab.trainers.control import policy_for_spaces

    env = gym.make("Pendulum-v1")
    cfg = tiny(tmp_path, "g", algo="dppo", total_steps=64)
    net, _ = policy_for_spaces(cfg, env.observation_space, env.action_space)
    path = ControlPolicy(net, cfg, env.observation_space, env.action_space).save(tmp_path / "bc.pt")
    first = cfg.model_copy(update={"init_policy": str(path)})
    train(first)
    path.unlink()
    again = load(ControlConfig, None, {**first.model_dump(), "total_steps": 2 * 64})
    assert train(again, resume=True).env_steps == 128
    with pytest.raises(ConfigError, match="init_policy"):  # a fresh run still needs it
        load(ControlConfig, None, {**first.model_dump(), "run_dir": str(tmp_path / "new")})


def test_a_saved_policy_of_an_init_policy_run_loads_without_the_bc_file(tmp_path):
    # inference reads the weights; the run's start file (gone: /tmp, another machine) and
    # its run folder are not needed
    import shutil

    import gymnasium as gym

    from policylab.control_policy import load_policy
    from policylab.trainers.control import policy_for_spaces

    env = gym.make("Pendulum-v1")
    cfg = tiny(tmp_path, "s", algo="dppo", total_steps=64)
    net, _ = policy_for_spaces(cfg, env.observation_space, env.action_space)
    path = ControlPolicy(net, cfg, env.observation_space, env.action_space).save(tmp_path / "bc.pt")
    run = train(cfg.model_copy(update={"init_policy": str(path)}))
    saved = load_policy(run.run_dir).save(tmp_path / "trained.pt")
    path.unlink()
    shutil.rmtree(run.run_dir)
    policy = ControlPolicy.load(saved)
    action, _ = policy.predict(env.reset(seed=0)[0])
    assert action.shape == (1,)


def test_ent_coef_on_the_diffusion_chain_is_refused():
    # the chain's entropy is 0 by definition (DPPO has no entropy term): a bonus would be
    # silently ignored
    for algo in ("dppo", "adpo_provisional"):
        with pytest.raises(ConfigError, match="ent_coef"):
            load_control(None, {"algo": algo, "task": "Pendulum-v1", "ent_coef": 0.01})
    assert load_control(None, {"algo": "ppo", "task": "Pendulum-v1", "ent_coef": 0.01})
