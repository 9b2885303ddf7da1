"""GAE along the time axis (algebra/advantages.py `gae_over_time`): hand-computed episodes,
termination vs truncation, episode boundaries, and agreement with the token GAE."""

import pytest
import torch

from policylab.algebra.advantages import GAEOptions, gae_advantages, gae_over_time
from policylab.rollouts import Rollouts


def col(*xs):
    """[T] → [T, 1]: one environment."""
    return torch.tensor(xs, dtype=torch.float32).unsqueeze(-1)


def test_reward_on_the_last_step_terminated():
    # r = [0, 0, 1], V ≡ 0.5, γ = 0.5, λ = 1, terminated at t = 2
    # δ0 = 0 + 0.5·0.5 − 0.5 = −0.25, δ1 = −0.25, δ2 = 1 + 0 − 0.5 = 0.5 (no bootstrap)
    # Â2 = 0.5, Â1 = −0.25 + 0.5·0.5 = 0, Â0 = −0.25 + 0.5·0 = −0.25
    # ret = Â + V = [0.25, 0.5, 1.0] = the discounted returns 0.25·1, 0.5·1, 1
    adv, ret = gae_over_time(
        col(0, 0, 1), col(0.5, 0.5, 0.5), col(0.5, 0.5, 7.0), col(0, 0, 1), col(0, 0, 0), 0.5, 1.0
    )
    assert adv[:, 0].tolist() == pytest.approx([-0.25, 0.0, 0.5])
    assert ret[:, 0].tolist() == pytest.approx([0.25, 0.5, 1.0])


def test_truncation_bootstraps_the_final_observation():
    # same episode cut by a time limit at t = 2; V(final obs) = 2
    # δ2 = 1 + 0.5·2 − 0.5 = 1.5, Â1 = −0.25 + 0.5·1.5 = 0.5, Â0 = −0.25 + 0.5·0.5 = 0
    # ret = [0.5, 1.0, 2.0]: t=2 gets 1 + 0.5·2, t=1 gets 0.5·2, t=0 gets 0.25·2
    adv, ret = gae_over_time(
        col(0, 0, 1), col(0.5, 0.5, 0.5), col(0.5, 0.5, 2.0), col(0, 0, 0), col(0, 0, 1), 0.5, 1.0
    )
    assert adv[:, 0].tolist() == pytest.approx([0.0, 0.5, 1.5])
    assert ret[:, 0].tolist() == pytest.approx([0.5, 1.0, 2.0])


def test_lambda_half():
    # terminated episode of the first test with λ = 0.5: γλ = 0.25
    # Â2 = 0.5, Â1 = −0.25 + 0.25·0.5 = −0.125, Â0 = −0.25 + 0.25·(−0.125) = −0.28125
    adv, _ = gae_over_time(
        col(0, 0, 1), col(0.5, 0.5, 0.5), col(0.5, 0.5, 0.0), col(0, 0, 1), col(0, 0, 0), 0.5, 0.5
    )
    assert adv[:, 0].tolist() == pytest.approx([-0.28125, -0.125, 0.5])


def test_an_episode_boundary_cuts_the_chain_and_the_rollout_end_bootstraps():
    # r ≡ 1, V ≡ 0, γ = 0.5, λ = 1; episode 1 terminates at t = 1 (its next value 9 is
    # ignored), episode 2 runs past the rollout's end: V'(3) = 1 bootstraps it.
    # Â3 = 1 + 0.5·1 = 1.5, Â2 = 1 + 0.5·1.5 = 1.75, Â1 = 1 (cut), Â0 = 1 + 0.5·1 = 1.5
    adv, ret = gae_over_time(
        col(1, 1, 1, 1),
        col(0, 0, 0, 0),
        col(0, 9, 0, 1),
        col(0, 1, 0, 0),
        col(0, 0, 0, 0),
        0.5,
        1.0,
    )
    assert adv[:, 0].tolist() == pytest.approx([1.5, 1.0, 1.75, 1.5])
    assert ret[:, 0].tolist() == pytest.approx([1.5, 1.0, 1.75, 1.5])


def test_environments_are_independent_columns():
    torch.manual_seed(0)
    T, N = 6, 3
    r, v, nv = torch.randn(T, N), torch.randn(T, N), torch.randn(T, N)
    term = (torch.rand(T, N) < 0.3).float()
    trunc = (torch.rand(T, N) < 0.2).float() * (1 - term)
    adv, _ = gae_over_time(r, v, nv, term, trunc, 0.9, 0.8)
    for n in range(N):
        one, _ = gae_over_time(
            r[:, n : n + 1], v[:, n : n + 1], nv[:, n : n + 1], term[:, n : n + 1],
            trunc[:, n : n + 1], 0.9, 0.8,
        )  # fmt: skip
        assert torch.allclose(adv[:, n], one[:, 0])


def test_same_recursion_as_the_token_gae():
    # one episode per environment, terminated at its last step, equals the language-model
    # GAE over a row of tokens with the same rewards and values (one home for the recursion)
    torch.manual_seed(1)
    T, N = 5, 4
    r, v = torch.randn(T, N), torch.randn(T, N)
    next_v = torch.cat([v[1:], torch.zeros(1, N)])
    term = torch.zeros(T, N)
    term[-1] = 1
    adv, _ = gae_over_time(r, v, next_v, term, torch.zeros(T, N), 0.95, 0.9)
    rollouts = Rollouts(
        rewards=r.sum(0), response_mask=torch.ones(N, T), values=v.T, token_rewards=r.T
    )
    tokens = gae_advantages(rollouts, GAEOptions(gamma=0.95, lam=0.9, whiten=False))
    assert torch.allclose(adv, tokens.T, atol=1e-6)
