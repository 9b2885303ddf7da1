"""VAS's prompt sampler and its scores (samplers.py, diversity.py, papers §7): the
hand-computed cases T7.1–T7.3, self-BLEU by hand, refresh of a subset, fallback, resume."""

import math

import numpy as np
import pytest

from policylab.diversity import distinct_n, edit_sq, levenshtein, self_bleu_123
from policylab.samplers import (
    UniformSampler,
    VASSampler,
    minmax_weights,
    variance_promotion_score,
)

T71_RESPONSES = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4], [1, 2, 3, 4]]
SAME = [[1, 2, 3]] * 4  # four identical responses: distinct-3 = 1/4, self-BLEU = 1


def test_vps_with_distinct_n_t7_1():
    s = variance_promotion_score([[1, 0, 0, 0]], [T71_RESPONSES], diversity="distinct_n")
    # P = 1/4, OVS = 1/4 · 3/4 = 3/16; 8 trigrams, 3 distinct: TDS = 3/8
    # VPS = 0.8 · 3/16 + 0.2 · 3/8 = 0.15 + 0.075 = 9/40
    assert s.pass_rate[0] == 0.25
    assert s.ovs[0] == pytest.approx(3 / 16)
    assert s.tds[0] == pytest.approx(3 / 8)
    assert s.vps[0] == pytest.approx(9 / 40)


def test_edit_sq_t7_2():
    responses = [[1, 2, 3], [1, 2, 4], [5, 6, 7]]
    assert [levenshtein([1, 2, 3], [1, 2, 4]), levenshtein([1, 2, 3], [5, 6, 7])] == [1, 3]
    # d = 1/3, 1, 1 over the unordered pairs; each ordered pair twice:
    # 2 · (1/9 + 1 + 1) / (3 · 2) = 19/27
    assert edit_sq(responses) == pytest.approx(19 / 27)
    assert levenshtein([1, 2], []) == 2 and levenshtein([], []) == 0
    assert edit_sq([[], []]) == 0.0 and edit_sq([[1, 2]]) == 0.0


def test_minmax_weights_and_draw_probabilities_t7_3():
    w = minmax_weights([0.1, 0.3, 0.5, 0.2])
    assert w == pytest.approx([0, 1 / 2, 1, 1 / 4])  # (VPS − 0.1) / 0.4, 1e-8 aside
    vas = VASSampler(4, seed=0)
    vas.weights = w
    assert vas.probabilities() == pytest.approx([0, 2 / 7, 4 / 7, 1 / 7])
    # B = 8, λ = 0.5: 4 weighted draws, then 4 uniform ones = exactly one epoch of 4 prompts
    batch = vas.sample(8)
    assert sorted(batch[4:]) == [0, 1, 2, 3]
    # so a prompt's expected count per batch is 4 · Pr + 1 = [1, 15/7, 23/7, 11/7]. Over
    # 20,000 batches the mean weighted count of prompt j has standard deviation
    # sqrt(4 p (1 − p) / 20000) <= 0.0071; 0.035 is five of those.
    batches = np.array([vas.sample(8) for _ in range(20_000)])
    counts = np.stack([(batches == j).sum(1) for j in range(4)], 1).mean(0)
    assert counts == pytest.approx([1, 15 / 7, 23 / 7, 11 / 7], abs=0.035)
    assert counts[0] == 1  # weight 0: only ever reached through the uniform part


def test_self_bleu_by_hand():
    # identical responses: every p_k = 1, BP = 1 → SB = 1, TDS = 0
    assert self_bleu_123(SAME) == pytest.approx(1.0)
    assert variance_promotion_score([[1, 0, 1, 0]], [SAME]).tds[0] == pytest.approx(0.0)
    # no shared token: NLTK returns 0 before smoothing when no unigram matches
    assert self_bleu_123([[1, 2], [3, 4]]) == 0.0
    # reversed: p1 = 3/3, p2 = 0/2 → 0.1/2, p3 = 0/1 → 0.1/1, BP = 1, both ways round
    assert self_bleu_123([[1, 2, 3], [3, 2, 1]]) == pytest.approx(0.005 ** (1 / 3))
    # [1,2,3,4] vs [1,2]: p = 2/4, 1/3, 0/2 → 0.05, BP = 1 → (1/120)^(1/3)
    # [1,2] vs [1,2,3,4]: p = 1, 1, no trigram 0/1 → 0.1, BP = exp(1 − 4/2) = e^−1
    expected = ((1 / 120) ** (1 / 3) + math.exp(-1) * 0.1 ** (1 / 3)) / 2
    assert self_bleu_123([[1, 2, 3, 4], [1, 2]]) == pytest.approx(expected)
    assert self_bleu_123([[1, 2, 3]]) == 0.0  # N < 2


def test_self_bleu_closest_reference_length_ties_to_the_shorter():
    # [1,2,3]   vs {[1,2], [1,2,3,4]}: p = 1, 1, 1; r = 2 (2 and 4 tie, the shorter) → 1
    # [1,2]     vs {[1,2,3], [1,2,3,4]}: p = 1, 1, 0.1; r = 3 → BP = e^−0.5
    # [1,2,3,4] vs {[1,2,3], [1,2]}: p = 3/4, 2/3, 1/2; r = 3 → BP = 1 → (1/4)^(1/3)
    expected = (1 + math.exp(-0.5) * 0.1 ** (1 / 3) + 0.25 ** (1 / 3)) / 3
    assert self_bleu_123([[1, 2, 3], [1, 2], [1, 2, 3, 4]]) == pytest.approx(expected)


def test_self_bleu_agrees_with_nltk():
    bleu = pytest.importorskip("nltk.translate.bleu_score")
    rng = np.random.default_rng(0)
    responses = [rng.integers(0, 6, size=rng.integers(1, 12)).tolist() for _ in range(5)]
    ours = self_bleu_123(responses)
    theirs = np.mean(
        [
            bleu.sentence_bleu(
                responses[:i] + responses[i + 1 :],
                hyp,
                weights=(1 / 3, 1 / 3, 1 / 3),
                smoothing_function=bleu.SmoothingFunction().method1,
            )
            for i, hyp in enumerate(responses)
        ]
    )
    assert ours == pytest.approx(theirs)


def test_distinct_n_and_one_response():
    assert distinct_n([[1, 2], [3]]) == 0.0  # no response has 3 tokens
    assert distinct_n(SAME) == pytest.approx(1 / 4)
    s = variance_promotion_score([[1.0]], [[[1, 2, 3]]])  # N = 1: OVS ≡ 0, SB = 0 → TDS = 1
    assert (s.ovs[0], s.tds[0], s.vps[0]) == pytest.approx((0.0, 1.0, 0.2))


def test_continuous_rewards_use_the_population_variance():
    s = variance_promotion_score(np.array([[0.5, 1.0]]), [[[1], [2]]], diversity="edit_sq")
    # mean 0.75, variance ((0.25)² + (0.25)²) / 2 = 1/16; TDS: d = 1 both ways → 1
    assert (s.ovs[0], s.tds[0], s.vps[0]) == pytest.approx((1 / 16, 1.0, 0.25))


def test_refresh_a_subset_weights_and_metrics():
    vas = VASSampler(3, diversity="distinct_n")
    assert vas.metrics() == {} and vas.needs_refresh(0) and vas.needs_refresh(7)
    vas.refresh([0, 1], [[1, 0, 0, 0], [1, 1, 1, 1]], [T71_RESPONSES, SAME])
    # prompt 0: VPS = 9/40 (T7.1); prompt 1: OVS 0, TDS 1/4 → VPS 1/20; prompt 2 unscored
    assert vas.vps[:2] == pytest.approx([9 / 40, 1 / 20]) and np.isnan(vas.vps[2])
    assert vas.weights == pytest.approx([1, 0, 0])
    assert vas.metrics() == pytest.approx(
        {
            "vas/w_mean": 0.5,
            "vas/w_std": 0.5,
            "vas/w_min": 0.0,
            "vas/w_max": 1.0,
            "vas/ovs_mean": 3 / 32,
            "vas/tds_mean": 5 / 16,
            "vas/frac_pass0": 0.0,
            "vas/frac_pass1": 0.5,
            "vas/frac_w_zero": 0.5,
        }
    )
    # scoring prompt 2 alone (VPS 1/20) leaves prompts 0 and 1 as they were
    vas.refresh([2], [[0, 0, 0, 0]], [SAME])
    assert vas.vps == pytest.approx([9 / 40, 1 / 20, 1 / 20])
    assert vas.weights == pytest.approx([1, 0, 0])
    assert vas.sample(4)[:2] == [0, 0]  # the weighted half can only pick prompt 0
    assert vas.metrics()["vas/frac_pass0"] == pytest.approx(1 / 3)
    assert not vas.needs_refresh(1) and vas.needs_refresh(35) and vas.needs_refresh(70)


def test_momentum_and_unnormalised_weights():
    vas = VASSampler(2, momentum=0.5, normalize="none", diversity="distinct_n")
    vas.refresh([0, 1], [[1, 0, 0, 0], [1, 1, 1, 1]], [T71_RESPONSES, SAME])
    assert vas.weights == pytest.approx([9 / 40, 1 / 20])  # the first refresh is taken whole
    vas.refresh([0, 1], [[1, 1, 1, 1], [1, 0, 0, 0]], [SAME, T71_RESPONSES])
    assert vas.weights == pytest.approx([(9 / 40 + 1 / 20) / 2] * 2)


def test_equal_scores_fall_back_to_uniform():
    vas = VASSampler(5, seed=4)
    vas.refresh(range(5), np.ones((5, 4)), [SAME] * 5)  # every VPS equal → min-max all 0
    assert vas.probabilities() is None
    uniform = UniformSampler(5, seed=4)
    assert [vas.sample(3) for _ in range(4)] == [uniform.sample(3) for _ in range(4)]
    assert VASSampler(5, seed=4).sample(7) == UniformSampler(5, seed=4).sample(7)


def test_resume_draws_the_same_prompts():
    rng = np.random.default_rng(0)
    correct = rng.integers(0, 2, size=(20, 4))
    responses = [[rng.integers(0, 5, size=6).tolist() for _ in range(4)] for _ in range(20)]
    a = VASSampler(20, seed=3, fraction=0.3)
    a.sample(7)
    a.refresh(range(20), correct, responses)
    a.sample(10)
    state = a.state_dict()
    expected = [a.sample(10) for _ in range(5)]
    b = VASSampler(20, seed=99, fraction=0.3)
    b.load_state_dict(state)
    assert [b.sample(10) for _ in range(5)] == expected
    assert a.metrics() == b.metrics()


@pytest.mark.parametrize(
    "option, match",
    [
        ({"fraction": 1.5}, "fraction = 1.5"),
        ({"every": 0}, "every = 0"),
        ({"n_score": 0}, "n_score"),
        ({"alpha": -0.1}, "alpha"),
        ({"beta": -1}, "beta"),
        ({"momentum": 2.0}, "momentum"),
        ({"diversity": "bleu"}, "inv_self_bleu"),
        ({"normalize": "softmax"}, "minmax"),
    ],
)
def test_bad_settings(option, match):
    with pytest.raises(ValueError, match=match):
        VASSampler(4, **option)


def test_bad_refresh():
    vas = VASSampler(3)
    with pytest.raises(ValueError, match="outside"):
        vas.refresh([3], [[1, 0]], [[[1], [2]]])
    with pytest.raises(ValueError, match="2 indices for 1 prompts"):
        vas.refresh([0, 1], [[1, 0]], [[[1], [2]]])
    with pytest.raises(ValueError, match="N = 2"):
        vas.refresh([0], [[1, 0]], [[[1]]])
    assert vas.refreshes == 0
