"""Co-GRPO's schedule pieces (papers/seed_generative.md G1.5, test D5), by hand."""

import math

import pytest
import torch

from policylab.algebra.mdm_schedule import (
    active_dims,
    gaussian_log_density,
    hand_schedule,
    reveal_counts,
    schedule_log_prob,
)


def test_d5_gaussian_log_densities():
    # −0.3²/(2·0.25) − ln 0.5 − ½ ln 2π = −0.18 + 0.6931472 − 0.9189385
    got = gaussian_log_density(torch.tensor(0.3), torch.tensor(0.0), torch.tensor(math.log(0.5)))
    assert float(got) == pytest.approx(-0.4057914, abs=1e-6)
    # −(ln 0.8)²/(2·0.0625) − ln 0.25 − ½ ln 2π = −0.3982476 + 1.3862944 − 0.9189385
    tau = gaussian_log_density(
        torch.tensor(math.log(0.8)), torch.tensor(0.0), torch.tensor(math.log(0.25))
    )
    assert float(tau) == pytest.approx(0.0690115, abs=1e-6)
    assert 1 / (1 + math.exp(-0.3)) == pytest.approx(0.5744425, abs=1e-7)  # q = σ(0.3)


def test_d5_joint_step_log_prob_and_ratio():
    # one step (S = 2, step 0 active in both dims): a = (ln 0.8, 0.3), μ = 0,
    # σ = (0.25, 0.5); D1's exact tokens −0.6161861 + both densities = −0.9529660
    actions = torch.tensor([[[math.log(0.8), 0.3], [0.0, 0.0]]])
    mean = torch.zeros(2, 2)
    log_std = torch.tensor([math.log(0.25), math.log(0.5)])
    step0 = schedule_log_prob(actions, mean, log_std)[0, 0]
    assert float(step0) - 0.6161861 == pytest.approx(-0.9529660, abs=1e-6)
    # moving the q-mean 0 → 0.1: ratio exp((0.3² − 0.2²)/(2·0.25)) = e^0.1 = 1.1051709
    moved = mean.clone()
    moved[0, 1] = 0.1
    ratio = torch.exp(
        schedule_log_prob(actions, moved, log_std) - schedule_log_prob(actions, mean, log_std)
    )
    assert float(ratio[0, 0]) == pytest.approx(1.1051709, abs=1e-6)


def test_last_step_q_is_not_an_action():
    assert active_dims(3).tolist() == [[True, True], [True, True], [True, False]]
    log_std = torch.zeros(2)
    a = torch.zeros(1, 3, 2)
    b = a.clone()
    b[0, 2, 1] = 5.0  # the last step's q never enters the density
    assert torch.equal(
        schedule_log_prob(a, torch.zeros(3, 2), log_std),
        schedule_log_prob(b, torch.zeros(3, 2), log_std),
    )
    # step 2 holds only log τ: −½ ln 2π = −0.9189385; steps 0, 1 twice that
    got = schedule_log_prob(a, torch.zeros(3, 2), log_std)[0]
    assert got.tolist() == pytest.approx([-1.8378771, -1.8378771, -0.9189385], abs=1e-6)


def test_hand_schedule_is_one_over_remaining_steps():
    mean = hand_schedule(3, 0.9)
    assert mean[:, 0].tolist() == pytest.approx([math.log(0.9)] * 3)
    q = torch.sigmoid(mean[:2, 1]).tolist()
    assert q == pytest.approx([1 / 3, 1 / 2])  # q_s = 1/(S − s)
    with pytest.raises(ValueError, match="temperature"):
        hand_schedule(3, 0.0)


def test_reveal_counts():
    # ⌊0.5·6 + ½⌋ = 3; ⌊0.1·6 + ½⌋ = 1; ⌊0.9·3 + ½⌋ = 3
    got = reveal_counts(torch.tensor([0.5, 0.1, 0.9]), torch.tensor([6, 6, 3]), last=False)
    assert got.tolist() == [3, 1, 3]
    # at least one, at most what is masked; nothing masked → 0; the last step reveals all
    got = reveal_counts(torch.tensor([0.0, 1.0, 0.5]), torch.tensor([4, 2, 0]), last=False)
    assert got.tolist() == [1, 2, 0]
    assert reveal_counts(torch.tensor([0.0]), torch.tensor([5]), last=True).tolist() == [5]


def test_hand_schedule_reveals_like_d1_at_s_3_l_6():
    # q = 1/3, 1/2, then all: 6 → 2, 4 → 2, 2 → 2, d1's transfer_counts(6, 3) = [2, 2, 2]
    q = torch.sigmoid(hand_schedule(3, 1.0)[:, 1])
    masked, counts = torch.tensor([6]), []
    for s in range(3):
        n = reveal_counts(q[s : s + 1], masked, last=s == 2)
        counts.append(int(n))
        masked = masked - n
    assert counts == [2, 2, 2]


def test_joint_row_layout_and_coefficient():
    from policylab.algebra.mdm_schedule import joint_row

    tok = torch.tensor([[-0.1, -0.2], [-0.3, -0.4]])
    sched = torch.tensor([[-1.0], [-2.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    logp, m, adv = joint_row(tok, sched, mask, torch.tensor([1.0, 2.0]), 0.5)
    assert logp.flatten().tolist() == pytest.approx([-0.1, -0.2, -1.0, -0.3, -0.4, -2.0])
    assert m.tolist() == [[1, 1, 1], [1, 0, 1]]
    assert adv.tolist() == [[1, 1, 0.5], [2, 2, 1]]
    _, m0, _ = joint_row(tok, sched, mask, torch.tensor([1.0, 2.0]), 0.0)
    assert m0[:, 2].tolist() == [0, 0]  # coefficient 0: schedule columns out of the mean
    with pytest.raises(ValueError, match="schedule_coef"):
        joint_row(tok, sched, mask, torch.tensor([1.0, 2.0]), -1.0)
