"""DiffusionChainPolicy (policies/diffusion_chain.py): DPPO's ε-prediction DDPM over the
action, last K′ steps trained, step log-probs as the token axis (seed_generative.md G7)."""

import pytest
import torch

from policylab.policies.diffusion_chain import DiffusionChainPolicy, cosine_betas


def policy(**kwargs) -> DiffusionChainPolicy:
    torch.manual_seed(0)
    net = DiffusionChainPolicy(3, 2, low=-2.0, high=2.0, hidden=(32, 32), **kwargs)
    for p in net.eps_net.parameters():  # a non-trivial ε-net (the head starts near 0)
        p.data.normal_(0, 0.3)
    return net


def test_cosine_schedule_ends_at_the_clip():
    betas = cosine_betas(10)
    assert betas.shape == (10,) and betas[-1] == pytest.approx(0.999)
    assert bool((betas[1:] >= betas[:-1]).all()) and betas[0] > 0


def test_ratio_is_exactly_one_at_theta_old():
    net = policy()
    x = torch.randn(16, 3)
    out = net.sample(x, generator=torch.Generator().manual_seed(1))
    assert out.extras["chain"].shape == (16, 6, 2) and out.extras["chain_logp"].shape == (16, 5)
    ev = net.evaluate(x, out.actions, extras=out.extras)
    assert ev.logprobs.shape == (16, 5) and ev.values.shape == (16,)
    torch.testing.assert_close(ev.logprobs, out.extras["chain_logp"], rtol=0, atol=1e-6)
    assert torch.equal(out.logprobs, out.extras["chain_logp"].mean(-1))
    # the sample is the chain's last state, scaled from [−1, 1] to the Box [−2, 2]
    torch.testing.assert_close(out.actions, 2.0 * out.extras["chain"][:, -1])


def test_s_min_is_one_number_at_sampling_and_scoring():
    net = policy(std_min=0.2)
    assert float(net.step_std(0)) == pytest.approx(0.2)  # posterior std at t = 0 is 0
    assert float(net.step_std(9)) == pytest.approx(float(net.post_std[9]))  # above the floor
    x = torch.randn(8, 3)
    out = net.sample(x, generator=torch.Generator().manual_seed(2))
    # the step density by hand at the cleanest step, s = s_min
    chain = out.extras["chain"]
    mean = net.step_mean(chain[:, -2], 0, x)
    by_hand = -((chain[:, -1] - mean) ** 2) / (2 * 0.04) - torch.log(torch.tensor(0.2))
    by_hand = (by_hand - 0.5 * torch.log(torch.tensor(2 * torch.pi))).mean(-1).clamp(-5, 2)
    torch.testing.assert_close(out.extras["chain_logp"][:, -1], by_hand, rtol=0, atol=1e-5)


def test_only_the_fine_tuned_net_gets_gradients_and_the_frozen_one_runs_first():
    net = policy()
    x = torch.randn(4, 3)
    out = net.sample(x, generator=torch.Generator().manual_seed(3))
    net.evaluate(x, out.actions, extras=out.extras).logprobs.sum().backward()
    assert all(p.grad is not None for p in net.eps_net.parameters())
    assert all(not p.requires_grad for p in net.eps_frozen.parameters())
    # the frozen copy drives the first K − K′ steps: changing it changes the sample
    again = net.sample(x, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(again.actions, out.actions)
    for p in net.eps_frozen.parameters():
        p.data.add_(0.5)
    moved = net.sample(x, generator=torch.Generator().manual_seed(3))
    assert not torch.allclose(moved.actions, out.actions)


def test_all_steps_fine_tuned_starts_at_the_noise_and_deterministic_mode():
    net = policy(fine_tuned_steps=10)
    x = torch.randn(4, 3)
    out = net.sample(x, generator=torch.Generator().manual_seed(4))
    assert out.extras["chain"].shape == (4, 11, 2)
    a = net.sample(x, deterministic=True).actions
    torch.testing.assert_close(a, net.sample(x, deterministic=True).actions, rtol=0, atol=0)


@pytest.mark.parametrize(("field", "value"), [("fine_tuned_steps", 11), ("std_min", 0.0)])
def test_bad_settings_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        DiffusionChainPolicy(3, 1, **{field: value})


def test_behaviour_cloning_fits_a_constant_action():
    net = policy()
    x = torch.randn(256, 3)
    target = torch.full((256, 2), 1.0)  # u = 0.5 in [−1, 1]
    opt = torch.optim.Adam(net.eps_net.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(5)
    for _ in range(300):
        loss = net.bc_loss(x, target, gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.freeze_reference()
    actions = net.sample(x, deterministic=True).actions
    assert float((actions - target).abs().mean()) < 0.25
