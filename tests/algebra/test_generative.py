"""Hand-computed cases of algebra/generative.py (papers/seed_generative.md G0.9 A1–A4, G2.3
G1–G3, G3.3 F1–F2; every number computed in float64 in the spec)."""

from __future__ import annotations

import pytest
import torch

from policylab.algebra import generative as gen
from policylab.algebra.losses import PPOClipOptions, ppo_clip_loss

D = torch.float64


def t(*v):
    return torch.tensor(v, dtype=D)


def test_a1_gaussian_step_density():
    x, mu = t(0.5, -0.2), t(0.3, 0.1)
    # log N = −(x−μ)²/(2s²) − log s − ½log 2π: dim 0: −0.5 + 1.6094379 − 0.9189385
    per_dim = gen.gaussian_step_logprob(x, mu, 0.2, reduce="none")
    assert torch.allclose(per_dim, t(0.1904994, -0.4345006), atol=1e-7)
    assert gen.gaussian_step_logprob(x, mu, 0.2).item() == pytest.approx(-0.1220006, abs=1e-7)
    assert gen.gaussian_step_logprob(x, mu, 0.2, reduce="sum").item() == pytest.approx(
        -0.2440012, abs=1e-7
    )
    floored = gen.gaussian_step_logprob(x, mu, 0.05, std_min=0.1, reduce="none")
    assert torch.allclose(floored, t(-0.6163534, -3.1163534), atol=1e-7)
    clamp = gen.DPPO_LOGP_CLAMP
    mean = gen.gaussian_step_logprob(x, mu, 0.05, std_min=0.1, clamp=clamp)
    assert mean.item() == pytest.approx(-1.8663534, abs=1e-7)  # inside [−5, 2]
    far = gen.gaussian_step_logprob(t(1.0), t(0.0), 0.3, clamp=clamp)  # −5.56 + 0.28 < −5
    assert far.item() == -5.0


def test_a2_dppo_discount_and_clip_schedule():
    assert torch.allclose(gen.dppo_denoise_discount(4, 0.99), t(0.970299, 0.9801, 0.99, 1.0))
    clip = gen.dppo_clip_schedule(4, 0.001, 0.01, 3)
    assert torch.allclose(clip, t(0.001, 0.0018103, 0.0040128, 0.01), atol=1e-7)
    assert torch.allclose(gen.dppo_clip_schedule(3, 0.0, 1.0, 1), t(0.0, 0.5, 1.0))


def test_a3_chain_as_tokens_through_ppo_clip():
    logp = t(-0.10, -0.30, 0.05, -0.20).unsqueeze(0)
    old = t(-0.12, -0.30, 0.00, -0.25).unsqueeze(0)
    adv = gen.dppo_denoise_discount(4, 0.99).unsqueeze(0)
    mask = torch.ones_like(logp)
    cfg = PPOClipOptions(eps_low=0.01, eps_high=0.01)
    loss, metrics = ppo_clip_loss(logp, old, adv, mask, cfg)
    # per step max(−A·r, −A·clip(r, 0.99, 1.01)): [−0.980002, −0.9801, −0.9999, −1.01]
    assert loss.item() == pytest.approx(-0.9925005, abs=1e-7)
    assert metrics["pg/clipfrac"] == pytest.approx(0.75)  # steps 0, 2, 3 clipped


def test_a4_sde_flow_step():
    x, tau, v = t(1.0).view(1, 1), t(0.5).view(1, 1), t(0.4).view(1, 1)
    # ε̂ = 0.8, s = −1.6, σ = 0.7, μ = 1 + 0.1·(0.4 + ½·0.49·(−1.6)) = 1.0008
    mean, std = gen.sde_flow_step(x, tau, v, 0.1, 0.7)
    assert mean.item() == pytest.approx(1.0008, abs=1e-12)
    assert std.item() == pytest.approx(0.2213594, abs=1e-7)
    logp = gen.gaussian_step_logprob(t(1.1).view(1, 1), mean, std)
    assert logp.item() == pytest.approx(0.4886143, abs=1e-7)
    euler, zero = gen.sde_flow_step(x, tau, v, 0.1, 0.0)
    assert euler.item() == pytest.approx(1.04) and zero.item() == 0.0
    # the σ floor: τ = 0 is read as τ = Δτ
    assert gen.sde_flow_sigma(t(0.0), 0.1, 0.7).item() == pytest.approx(0.7 * 10**0.5)  # √(1/0.1)


def test_g1_dgpo_weights_and_loss():
    adv, ell = t(1.5, 0.5, -0.5, -1.5), t(0.30, 0.25, 0.40, 0.35).requires_grad_()
    ref, groups = t(0.32, 0.25, 0.38, 0.30), torch.zeros(4, dtype=torch.long)
    w = gen.dgpo_group_weights(adv, ell, ref, groups, 100.0)
    # s_g = 25·(1.5·(−0.02) + 0 − 0.5·0.02 − 1.5·0.05) = −2.875
    assert torch.allclose(w, torch.full((4,), 0.0534033, dtype=D), atol=1e-7)
    loss = gen.dgpo_loss(adv, ell, w, None)
    assert loss.item() == pytest.approx(-0.0020026, abs=1e-7)
    loss.backward()
    assert torch.allclose(ell.grad, t(0.0200262, 0.0066754, -0.0066754, -0.0200262), atol=1e-7)
    # the group DPO loss −log σ(−s_g) has 100× this gradient (β_dpo·B/G with B = G)
    ell2 = ell.detach().clone().requires_grad_()
    s = 100.0 / 4 * (adv * (ell2 - ref)).sum()
    dpo = -torch.nn.functional.logsigmoid(-s)
    assert dpo.item() == pytest.approx(0.0548822, abs=1e-7)
    dpo.backward()
    assert torch.allclose(ell2.grad, 100 * ell.grad, atol=1e-9)


def test_g1_weights_are_per_group():
    adv, groups = t(1.0, -1.0, 1.0, -1.0), torch.tensor([0, 0, 1, 1])
    ell, ref = t(0.3, 0.3, 0.3, 0.3), t(0.3, 0.3, 0.2, 0.4)
    w = gen.dgpo_group_weights(adv, ell, ref, groups, 10.0)
    # group 0: s = 0 → ½; group 1: s = 5·(0.1 + 0.1) = 1 → σ(1)
    assert torch.allclose(w, t(0.5, 0.5, 0.7310586, 0.7310586), atol=1e-7)


def test_g2_trust_region():
    ell_old, ell = t(0.30, 0.30), t(0.28, 0.28)  # ratio e^{0.02} = 1.0202013 > 1.01
    keep = gen.dgpo_trust_region(t(1.0, -1.0), ell, ell_old, 0.01)
    assert keep.tolist() == [False, True]
    x = ell.clone().requires_grad_()
    gen.dgpo_loss(t(1.0, -1.0), x, t(1.0, 1.0), keep).backward()
    assert x.grad.tolist() == [0.0, -0.5]


def test_g3_advantage_clip_and_population_std():
    groups = torch.zeros(4, dtype=torch.long)
    adv = gen.dgpo_advantages(t(1, 0, 0, 0), groups)
    # population std 0.4330127; eps 1e-4
    assert torch.allclose(adv, t(1.7316509, -0.5772170, -0.5772170, -0.5772170), atol=1e-7)
    one_hit = torch.zeros(53, dtype=D)
    one_hit[0] = 1.0  # unclipped A_0 = √(n − 1) = √52 = 7.21 → clipped to 5
    big = gen.dgpo_advantages(one_hit, torch.zeros(53, dtype=torch.long))
    assert big[0].item() == 5.0 and big[1].item() == pytest.approx(-1 / 52**0.5, abs=2e-4)
    flat = gen.dgpo_advantages(t(0.5, 0.5, 1.0, 0.0), torch.tensor([0, 0, 1, 1]))
    assert flat[:2].tolist() == [0.0, 0.0] and flat[2].item() > 0
    with pytest.raises(ValueError, match="scale = 'none'"):
        gen.dgpo_advantages(t(1, 0), torch.tensor([0, 0]), scale="none")


def test_f1_orw_loss():
    w = gen.orw_weights(t(1, 0, -1), 0.5)
    assert torch.allclose(w, t(1.6487213, 1, 0.6065307), atol=1e-7)
    loss = gen.weighted_denoising_loss(w, t(0.2, 0.3, 0.4), t(0.01, 0.02, 0.03), 1.0)
    assert loss.item() == pytest.approx(0.3107855, abs=1e-7)


def test_f2_ac_flow_weights_and_special_case():
    w = gen.ac_flow_weights(t(1, 0, -1), t(0.5, 0.2, -1.5), clip=0.5, beta=0.5)
    assert torch.allclose(w.double(), t(1.2840254, 0.9048374, 1.2840254), atol=1e-6)
    loss = gen.weighted_denoising_loss(w.double(), t(0.2, 0.3, 0.4), t(0.01, 0.02, 0.03), 1.0)
    assert loss.item() == pytest.approx(0.3672888, abs=1e-6)
    orw = gen.ac_flow_weights(t(1, 0, -1), t(0, 0, 0), clip=float("inf"), beta=0.5)
    assert torch.allclose(orw.double(), gen.orw_weights(t(1, 0, -1), 0.5), atol=1e-6)


def test_ema_decay_is_capped():
    assert gen.ema_decay(0) == 0.0 and gen.ema_decay(100) == pytest.approx(0.1)
    assert gen.ema_decay(10_000) == 0.3
