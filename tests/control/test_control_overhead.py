"""What issue 22 removed from the control loop changes no number: the actor-only `mode`
is `sample(deterministic=True)`'s action, an evaluation by it scores as the full sample,
and the learner's figures kept as tensors equal the per-minibatch floats they replace."""

import pytest
import torch

from policylab.config import ControlConfig
from policylab.policies import ActorCritic
from policylab.trainers.control import train
from policylab.trainers.run import read_metrics
from policylab.workflows.episodes import evaluate_policy


@pytest.mark.parametrize("discrete", [True, False])
def test_mode_is_the_deterministic_samples_action(discrete):
    torch.manual_seed(0)
    policy = ActorCritic(3, 2, discrete=discrete)
    x = torch.randn(7, 3)
    assert torch.equal(policy.mode(x), policy.sample(x, deterministic=True).actions)


class _SampleOnly:
    """The same policy without `mode`: evaluation falls back to the full sample."""

    def __init__(self, policy):
        self.policy = policy

    def normalize(self, obs):
        return self.policy.normalize(obs)

    def sample(self, x, **kwargs):
        return self.policy.sample(x, **kwargs)


@pytest.mark.parametrize(("task", "obs", "actions", "discrete"),
                         [("CartPole-v1", 4, 2, True), ("Pendulum-v1", 3, 1, False)])  # fmt: skip
def test_evaluation_by_mode_scores_as_by_sample(task, obs, actions, discrete):
    torch.manual_seed(1)
    policy = ActorCritic(obs, actions, discrete=discrete, normalize_obs=True)
    by_mode = evaluate_policy(policy, task, episodes=3, seed=5)
    by_sample = evaluate_policy(_SampleOnly(policy), task, episodes=3, seed=5)
    assert by_mode == by_sample


def test_learner_figures_are_the_per_minibatch_floats_averaged(tmp_path, monkeypatch):
    # 2 iterations × 2 epochs × 2 minibatches: each logged figure is the plain mean of the
    # 4 minibatches' values, which a float-per-minibatch learner would log
    cfg = ControlConfig(
        task="CartPole-v1", total_steps=128, num_envs=2, num_steps=32, minibatch_size=32,
        epochs=2, eval_every=0, eval_episodes=1, progress=False, report_to=[],
        run_dir=str(tmp_path / "r"),
    )  # fmt: skip
    seen = []
    original = torch.nn.utils.clip_grad_norm_

    def spy(params, max_norm):
        norm = original(params, max_norm)
        seen.append(float(norm))
        return norm

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    train(cfg)
    rows = [r for r in read_metrics(tmp_path / "r") if r.get("kind") != "eval"]
    assert [r["updates"] for r in rows] == [4, 4]
    for i, row in enumerate(rows):
        expected = sum(seen[4 * i : 4 * i + 4]) / 4
        assert row["grad_norm"] == expected
        assert all(isinstance(row[k], float) for k in ("loss", "entropy", "approx_kl"))
