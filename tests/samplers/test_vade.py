"""VADE's prompt sampler (samplers.py, papers §8): the hand-computed cases T8.1–T8.3,
seeded draws, resume."""

import math

import numpy as np
import pytest

from policylab.samplers import VADESampler


def test_decays_and_evidence_by_hand_t8_1():
    vade = VADESampler(2, rho_long=0.9, rho_short=0.5, thompson=False)
    vade.sample(1)  # the first draw does not decay
    vade.alpha[0], vade.beta[0] = 3.0, 5.0
    vade.sample(1)
    vade.sample(1)  # two steps: α = 1 + 0.81·2 = 2.62, β = 1 + 0.81·4 = 4.24
    assert (vade.alpha[0], vade.beta[0]) == pytest.approx((2.62, 4.24))
    # 3 successes of 4: short decay first (1.81, 2.62), then the counts
    vade.update([0], [1.0, 1.0, 0.0, 1.0])
    assert (vade.alpha[0], vade.beta[0]) == pytest.approx((4.81, 3.62))
    assert vade.alpha[0] / (vade.alpha[0] + vade.beta[0]) == pytest.approx(481 / 843)


def test_top_n_by_variance_score_t8_2():
    vade = VADESampler(4, thompson=False)
    p = np.array([0.9, 0.45, 0.2, 0.6])  # set posterior means to these (α + β = 10)
    vade.alpha, vade.beta = 10 * p, 10 * (1 - p)
    # scores p(1 − p) = [0.09, 0.2475, 0.16, 0.24] → the top two are prompts 1 and 3
    assert vade.sample(2) == [1, 3]


def test_a_fresh_prompt_observing_four_of_four_t8_3():
    vade = VADESampler(3)
    vade.update([2], [1.0, 1.0, 1.0, 1.0])  # the short decay is a no-op at the prior
    assert (vade.alpha[2], vade.beta[2]) == (5.0, 1.0)


def test_unscored_rows_and_partial_credit():
    vade = VADESampler(2)
    vade.update([0, 1], [0.5, float("nan"), float("nan"), float("nan")])
    assert (vade.alpha[0], vade.beta[0]) == (1.5, 1.5)  # one scored row, half credit
    assert (vade.alpha[1], vade.beta[1]) == (1.0, 1.0)  # nothing scored: no evidence


def test_seeded_thompson_draws_and_resume():
    a, b = VADESampler(50, seed=3), VADESampler(50, seed=3)
    first = [a.sample(8) for _ in range(3)]
    assert first == [b.sample(8) for _ in range(3)]
    state = a.state_dict()
    a.update(first[-1], np.ones(8 * 4))
    next_a = a.sample(8)
    fresh = VADESampler(50, seed=99)
    fresh.load_state_dict(state)
    fresh.update(first[-1], np.ones(8 * 4))
    assert fresh.sample(8) == next_a
    assert len(VADESampler(3).sample(5)) == 5  # more than the pool wraps around


def test_bad_settings():
    with pytest.raises(ValueError, match="empty"):
        VADESampler(0)
    with pytest.raises(ValueError, match="ρ"):
        VADESampler(3, rho_long=1.5)
    assert math.isclose(VADESampler(1, thompson=False).scores()[0], 0.25)


def test_metrics():
    vade = VADESampler(4, thompson=False)
    assert "vade/last_batch_score_mean" not in vade.metrics()  # no batch drawn yet
    vade.update([0], [1.0, 1.0, 1.0, 1.0])  # prompt 0: Beta(5, 1), mean 5/6
    vade.sample(2)  # the first draw does not decay; top two are prompts 1, 2 (score 1/4)
    m = vade.metrics()
    # posterior means [5/6, 1/2, 1/2, 1/2]: mean 7/12, deviations 1/4 and three −1/12,
    # variance (1/16 + 3/144) / 4 = 1/48
    assert m["vade/posterior_mean_mean"] == pytest.approx(7 / 12)
    assert m["vade/posterior_mean_std"] == pytest.approx(math.sqrt(1 / 48))
    assert m["vade/seen_frac"] == 0.25
    assert m["vade/last_batch_score_mean"] == pytest.approx(0.25)


def test_checkpoint_without_seen_loads():
    vade = VADESampler(3)
    vade.update([1], [1.0, 0.0])
    state = vade.state_dict()
    del state["seen"]  # a checkpoint written before VADE tracked it
    fresh = VADESampler(3)
    fresh.load_state_dict(state)
    assert fresh.seen.tolist() == [False, True, False]
