"""DISK's loss, match distribution and schedules: §15.3's verified cases (T15.1–T15.3)."""

from __future__ import annotations

import pytest
import torch

from policylab.algebra.disk import DiskLossConfig, disk_reinforce, expected_reward, schedule
from policylab.policies.keypoints import keypoint_logp, match_distribution

D1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
D2 = torch.tensor([[1.0, 0.0], [0.6, 0.8]], dtype=torch.float64)
R = torch.tensor([[1.0, -0.25], [-0.25, 1.0]], dtype=torch.float64)


def test_t15_1_match_distribution_theta_1():
    # D = [[0, √0.8], [√2, √0.4]]; P = row softmax · column softmax of −D
    assert torch.cdist(D1, D2).flatten().tolist() == pytest.approx(
        [0, 0.894427, 1.414214, 0.632456], abs=1e-6
    )
    P, logP = match_distribution(D1, D2, theta=1.0)
    assert P.flatten().tolist() == pytest.approx([0.570987, 0.126201, 0.061398, 0.387706], abs=1e-6)
    assert torch.allclose(logP.exp(), P, atol=1e-12)
    # 0.570987 + 0.387706 − 0.25·(0.126201 + 0.061398) = 0.911793
    assert float((R * P).sum()) == pytest.approx(0.911793, abs=1e-6)
    assert expected_reward(R, P, keypoints=4) == pytest.approx(0.907793, abs=1e-6)
    assert float(P.sum()) == pytest.approx(1.146291, abs=1e-6)


def test_t15_1_match_distribution_theta_15():
    P, _ = match_distribution(D1, D2, theta=15.0)
    assert P.flatten().tolist() == pytest.approx([0.999999, 0.0, 0.0, 0.980719], abs=1e-6)


def test_t15_2_keypoint_logp():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]], dtype=torch.float64)
    assert torch.softmax(logits, -1)[0].tolist() == pytest.approx(
        [0.032059, 0.087144, 0.236883, 0.643914], abs=1e-6
    )
    assert float(torch.sigmoid(logits[0, 3])) == pytest.approx(0.952574, abs=1e-6)
    three = torch.tensor([3])
    # log 0.643914 + log σ(3) = −0.440190 − 0.048587
    assert float(keypoint_logp(logits, three, torch.tensor([True]))) == pytest.approx(
        -0.488777, abs=1e-6
    )
    # rejecting adds log σ(−3) = −3.048587 instead
    assert float(keypoint_logp(logits, three, torch.tensor([False]))) == pytest.approx(
        -3.488777, abs=1e-6
    )


@pytest.mark.parametrize(
    ("epoch", "ramp", "theta"),
    [
        (0, 0.0, 15.0),
        (1, 0.1, 16.75),
        (2, 0.5, 18.5),
        (3, 0.7, 20.25),
        (5, 1.0, 23.75),
        (20, 1.0, 50.0),
    ],
)
def test_t15_3_schedules(epoch, ramp, theta):
    s = schedule(epoch)
    assert s["ramp"] == pytest.approx(ramp)
    assert s["theta"] == pytest.approx(theta)
    assert s["lm_fp"] == pytest.approx(-0.25 * ramp)
    assert s["lm_kp"] == pytest.approx(-0.001 * ramp)


def test_loss_gradient_is_the_gradient_of_the_expected_reward():
    # the matcher's part is exact: d/dθ of −Σ R P equals d/dθ of the loss with no keypoints
    # term (Σ R·sg(P)·∇log P = Σ R·∇P)
    d1 = D1.clone().requires_grad_(True)
    P, logP = match_distribution(d1, D2, theta=1.0)
    zero = torch.zeros(2, dtype=torch.float64)
    loss = disk_reinforce(R, P, logP, (zero, zero), DiskLossConfig(lm_kp=0.0))
    (g_loss,) = torch.autograd.grad(loss, d1)
    d1b = D1.clone().requires_grad_(True)
    Pb, _ = match_distribution(d1b, D2, theta=1.0)
    (g_exact,) = torch.autograd.grad(-(R * Pb).sum(), d1b)
    assert torch.allclose(g_loss, g_exact, atol=1e-12)
    assert g_exact.abs().sum() > 0


def test_loss_keypoint_terms():
    # with logP = 0, P = sg: L = −Σ R P (l1_i + l2_j) − λ_kp (Σ l1 + Σ l2)
    P = torch.tensor([[0.5, 0.0], [0.0, 0.5]], dtype=torch.float64)
    l1 = torch.tensor([-1.0, -2.0], dtype=torch.float64, requires_grad=True)
    l2 = torch.tensor([-1.0, -1.0], dtype=torch.float64)
    loss = disk_reinforce(R, P, torch.zeros(2, 2, dtype=torch.float64), (l1, l2))
    # −[1·0.5·(−2) + 1·0.5·(−3)] − (−0.001)(−5) = 2.5 − 0.005
    assert float(loss.detach()) == pytest.approx(2.495)
    (g,) = torch.autograd.grad(loss, l1)
    # ∂/∂l1_0 = −R00 P00 + 0.001 = −0.499; ∂/∂l1_1 = −R11 P11 + 0.001
    assert g.tolist() == pytest.approx([-0.499, -0.499])
