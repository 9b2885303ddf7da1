"""The SB3-style policy API (control_policy.py): load_policy, predict, one-file save/load,
evaluate_policy; and the progress bar's return (trainers/control.py)."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import user_env_module

import policylab
from policylab.config import ControlConfig, load
from policylab.control_policy import ControlPolicy, evaluate_policy, load_policy
from policylab.policies.mlp import make_actor_critic
from policylab.trainers import control
from policylab.trainers.control import train
from policylab.trainers.run import read_metrics

FAST = dict(num_envs=4, num_steps=32, minibatch_size=64, epochs=4, progress=False, report_to=[])


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cartpole") / "r"
    cfg = load(
        ControlConfig, None, dict(FAST, task="CartPole-v1", total_steps=512, run_dir=str(run_dir))
    )
    return train(cfg)


def test_predict_one_observation_or_a_batch(cartpole_run):
    policy = policylab.load_policy(cartpole_run.run_dir)
    network = control.load_policy(cartpole_run.run_dir)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    expected = network.mode(network.normalize(torch.as_tensor(obs))).numpy()
    actions, state = policy.predict(obs, deterministic=True)
    assert state is None and actions.shape == (5,) and actions.dtype == np.int64
    assert actions.tolist() == expected.tolist()
    one, _ = policy.predict(obs[2], deterministic=True)
    assert one.shape == () and int(one) == expected[2]
    sampled, _ = policy.predict(obs)  # SB3's default samples
    assert sampled.shape == (5,) and set(sampled.tolist()) <= {0, 1}


def test_evaluate_policy_agrees_with_the_trainers_evaluation(cartpole_run):
    # the trainer evaluates 10 episodes, env i reset with seed 10000 + i, the policy's mode;
    # evaluate_policy plays the same episodes one after another in one environment
    policy = load_policy(cartpole_run.run_dir)
    last = cartpole_run.evals[-1]
    for env in ("CartPole-v1", gym.make("CartPole-v1"), lambda: gym.make("CartPole-v1")):
        mean, std = evaluate_policy(policy, env, 10, seed=10_000)
        assert mean == pytest.approx(last["eval/return_mean"])
        assert std == pytest.approx(last["eval/return_std"])


def test_evaluate_policy_hand_computed():
    class Always:  # any object with SB3's predict
        def __init__(self, action):
            self.action = action

        def predict(self, obs, deterministic=True):
            return self.action, None

    env = user_env_module.Countdown()
    # seeds 0, 1, 2 give episodes of 1, 2, 3 steps, reward 1 per step for action 1:
    # returns 1, 2, 3; mean 2, population std √((1 + 0 + 1)/3) = 0.8165
    mean, std = evaluate_policy(Always(1), env, n_eval_episodes=3, seed=0)
    assert mean == 2.0 and std == pytest.approx(math.sqrt(2 / 3))
    returns, lengths = evaluate_policy(Always(0), env, 3, seed=0, return_episode_rewards=True)
    assert returns == [0.0, 0.0, 0.0] and lengths == [1, 2, 3]
    with pytest.raises(ValueError, match="n_eval_episodes=0"):
        evaluate_policy(Always(1), env, 0)
    with pytest.raises(ValueError, match="plays one environment"):
        evaluate_policy(Always(1), gym.vector.SyncVectorEnv([lambda: env]))


def test_one_file_save_and_load_round_trip(tmp_path):
    cfg = load(
        ControlConfig,
        None,
        dict(
            FAST,
            task="Pendulum-v1",
            total_steps=256,
            normalize_obs=True,
            run_dir=str(tmp_path / "r"),
        ),
    )
    train(cfg)
    policy = load_policy(tmp_path / "r")
    path = policy.save(tmp_path / "out" / "pendulum.pt")
    assert sorted(p.name for p in path.parent.iterdir()) == ["pendulum.pt"]  # no temporary left
    again = ControlPolicy.load(path)
    assert isinstance(load_policy(path), ControlPolicy)
    for key, value in policy.network.state_dict().items():
        assert torch.equal(value, again.network.state_dict()[key]), key
    assert float(again.network.obs_norm.count) == pytest.approx(256, abs=1)
    assert again.config == policy.config and again.action_space == policy.action_space
    obs = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
    assert np.array_equal(
        policy.predict(obs, deterministic=True)[0], again.predict(obs, deterministic=True)[0]
    )


def test_predict_clips_to_the_box_action_space():
    env = gym.make("Pendulum-v1")  # actions in [−2, 2]
    network = make_actor_critic(env.observation_space, env.action_space)
    torch.nn.init.zeros_(network.actor[-1].weight)
    torch.nn.init.constant_(network.actor[-1].bias, 5.0)  # the mean action is 5
    policy = ControlPolicy(
        network, ControlConfig(task="Pendulum-v1"), env.observation_space, env.action_space
    )
    action, _ = policy.predict(np.zeros(3, np.float32), deterministic=True)
    assert action.shape == (1,) and action.tolist() == [2.0]


def test_load_policy_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="run folder or a file"):
        load_policy(tmp_path / "missing")
    torch.save({"weights": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a policy file"):
        load_policy(tmp_path / "other.pt")


def test_a_checkpoint_without_spaces_still_loads(cartpole_run, tmp_path):
    # checkpoints written before the spaces were saved: the environment is built instead
    import shutil

    from policylab.trainers.run import latest_checkpoint

    copy = tmp_path / "old"
    shutil.copytree(cartpole_run.run_dir, copy)
    state_file = latest_checkpoint(copy) / "state.pt"
    state = torch.load(state_file, weights_only=False)
    del state["spaces"]
    torch.save(state, state_file)
    policy = load_policy(copy)
    assert policy.observation_space == gym.make("CartPole-v1").observation_space


def test_progress_bar_shows_the_last_finished_episodes_return(tmp_path, monkeypatch):
    # Pendulum episodes last 200 steps; one env × 64 steps per iteration ends an episode in
    # iterations 4 (steps 193–256), 7 and 10 only: before the fix the bar said "nan" in the
    # others. Now iterations 1–3 show "-", 4–6 the first episode's return, 7–9 the second's.
    shown = []

    class Bar:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def add_task(self, *args, **fields):
            return 0

        def update(self, job, **fields):
            shown.append(fields["ret"])

    monkeypatch.setattr(control, "progress_bar", lambda *args, **kwargs: Bar())
    fields = dict(num_envs=1, num_steps=64, minibatch_size=64, epochs=1, report_to=[])
    cfg = load(
        ControlConfig,
        None,
        dict(fields, task="Pendulum-v1", total_steps=640, run_dir=str(tmp_path)),
    )
    train(cfg)
    rows = read_metrics(tmp_path, kind="train")
    ended = {
        r["step"]: f"{r['rollout/episode_return']:.1f}"
        for r in rows
        if "rollout/episode_return" in r
    }
    assert sorted(ended) == [4, 7, 10]
    assert shown == ["-"] * 3 + [ended[4]] * 3 + [ended[7]] * 3 + [ended[10]]
