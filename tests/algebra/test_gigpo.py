"""GiGPO (agents spec §A3): the spec's hand case T2 (mean_norm), the std form, the house
rules (singletons, NaN rewards), metrics, and properties over random turn batches
(zero-sum terms, a slow dict-based reference, masked tokens)."""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pytest
import torch
from algebra_testing import PROPERTY, close
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab import Rollouts
from policylab.algebra.catalogue import advantage_estimators
from policylab.algebra.gigpo import GiGPOOptions, gigpo_advantages, gigpo_terms

F64 = torch.float64


def t2_batch(**extras) -> Rollouts:
    """Spec §A3 T2: one instance; trajectory A has 2 rows with attempt score 1, B has 3 rows
    with score 0; step returns (0.95, 1, 0, 0, 0); rows 0 and 2 share the initial anchor."""
    return Rollouts(
        rewards=torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0], dtype=F64),
        response_mask=torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]]),
        extras={
            "step_return": torch.tensor([0.95, 1.0, 0.0, 0.0, 0.0], dtype=F64),
            "instance": torch.zeros(5, dtype=torch.long),
            "anchor": ["start", "A1", "start", "B1", "B2"],
            **extras,
        },
    )


# ------------------------------------------------------------------ spec hand cases
def test_spec_t2_mean_norm_terms():
    # episode: mean over all 5 rows = 2/5 = 0.4 → (0.6, 0.6, −0.4, −0.4, −0.4)
    # step: rows 0, 2 share "start": mean(0.95, 0) = 0.475 → ±0.475; others singletons → 0
    b = t2_batch()
    terms = gigpo_terms(
        b.rewards, b.extras["step_return"], b.extras["instance"], b.extras["anchor"], GiGPOOptions()
    )
    close(terms.episode, [0.6, 0.6, -0.4, -0.4, -0.4], atol=1e-12)
    close(terms.step, [0.475, 0.0, -0.475, 0.0, 0.0], atol=1e-12)
    assert terms.step_groups.tolist() == [0, 1, 0, 2, 3]


def test_spec_t2_advantage_broadcast_over_valid_tokens():
    # A = episode + 1·step = (1.075, 0.6, −0.875, −0.4, −0.4) on each row's valid tokens
    estimate = advantage_estimators.get("gigpo")(t2_batch(), GiGPOOptions())
    expected = [
        [1.075, 1.075, 0.0],
        [0.6, 0.0, 0.0],
        [-0.875, -0.875, -0.875],
        [-0.4, 0.0, 0.0],
        [-0.4, -0.4, 0.0],
    ]
    close(estimate.advantages, expected, atol=1e-12)
    # through the public API too
    close(policylab.advantages("component:gigpo")(t2_batch()), expected, atol=1e-12)


def test_mean_std_norm_divides_by_the_bessel_std_plus_eps():
    # episode σ = sqrt((2·0.6² + 3·0.4²)/4) = sqrt(0.3) = 0.5477225575 →
    #   0.6/(σ + 1e-6) = 1.0954431150, −0.4/(σ + 1e-6) = −0.7302954100;
    # step σ of (0.95, 0) = 0.475·√2 = 0.6717514421 → ±0.475/(σ + 1e-6) = ±0.7071057286
    cfg = GiGPOOptions(mode="mean_std_norm")
    b = t2_batch()
    terms = gigpo_terms(
        b.rewards, b.extras["step_return"], b.extras["instance"], b.extras["anchor"], cfg
    )
    e, s = 1.0954431150139836, 0.7071057285565355
    close(terms.episode, [e, e, -0.7302954100093225, -0.7302954100093225, -0.7302954100093225])
    close(terms.step, [s, 0.0, -s, 0.0, 0.0], atol=1e-12)


def test_step_weight_scales_the_step_term_only():
    # step_w 0.5: A_0 = 0.6 + 0.5·0.475 = 0.8375, A_2 = −0.4 − 0.2375 = −0.6375
    a = gigpo_advantages(t2_batch(), GiGPOOptions(step_w=0.5)).advantages[:, 0]
    close(a, [0.8375, 0.6, -0.6375, -0.4, -0.4], atol=1e-12)


def test_house_rules_singleton_instance_equal_scores_and_nan():
    # instance 0: rows 0, 1 with scores (1, 1) → equal → 0; instance 1: one row → 0 (the
    # code would keep its score 2 there); instance 2: (1, NaN, 0) → NaN left out: mean 0.5,
    # (0.5, ·, −0.5), and the NaN row's A is 0 whatever its step term
    b = Rollouts(
        rewards=torch.tensor([1.0, 1.0, 2.0, 1.0, math.nan, 0.0], dtype=F64),
        response_mask=torch.ones(6, 1),
        extras={
            "step_return": [1.0, 0.0, 3.0, 1.0, 5.0, 0.0],
            "instance": [0, 0, 1, 2, 2, 2],
            "anchor": ["s", "s", "s", "s", "s", "x"],
        },
    )
    est = gigpo_advantages(b, GiGPOOptions())
    # step groups: (0,s): (1, 0) → ±0.5; (1,s) singleton; (2,s): (1, 5) → ∓2; (2,x) singleton
    close(est.advantages[:, 0], [0.5, -0.5, 0.0, 0.5 - 2.0, 0.0, -0.5], atol=1e-12)


def test_metrics_and_reflect_rows():
    est = gigpo_advantages(t2_batch(phase=["act", "act", "act", "reflect", "act"]), GiGPOOptions())
    m = est.metrics
    assert m["gigpo/step_groups"] == 4.0
    close(m["gigpo/step_group_size_mean"], 1.25, atol=1e-12)  # 5 rows / 4 groups
    close(m["gigpo/step_singleton_frac"], 0.6, atol=1e-12)  # rows 1, 3, 4
    close(m["gigpo/episode_abs_mean"], 0.48, atol=1e-12)  # (0.6·2 + 0.4·3)/5
    close(m["gigpo/step_abs_mean"], 0.19, atol=1e-12)  # 0.95/5
    assert m["gigpo/reflect_rows"] == 1.0
    assert "gigpo/reflect_rows" not in gigpo_advantages(t2_batch(), GiGPOOptions()).metrics


def test_missing_columns_and_bad_options_are_named():
    b = Rollouts(
        rewards=torch.zeros(2), response_mask=torch.ones(2, 1), extras={"instance": [0, 0]}
    )
    with pytest.raises(ValueError, match="'step_return', 'anchor'"):
        gigpo_advantages(b, GiGPOOptions())
    with pytest.raises(ValueError, match="mode"):
        GiGPOOptions(mode="std")
    with pytest.raises(ValueError, match="eps"):
        GiGPOOptions(eps=-1.0)
    assert GiGPOOptions.reads == ("step_return", "instance", "anchor")


# ------------------------------------------------------------------------ properties
@st.composite
def turn_batches(draw):
    """Rows of 1–3 instances, rewards on a coarse grid (ties happen), anchors from a small
    alphabet (shared anchors happen), random valid-token masks."""
    rng = random.Random(draw(st.integers(0, 2**31 - 1)))
    B = draw(st.integers(1, 12))
    rewards = [rng.choice([0.0, 0.5, 1.0, 2.0]) for _ in range(B)]
    returns = [round(rng.uniform(-1, 1), 2) for _ in range(B)]
    instance = [rng.randrange(3) for _ in range(B)]
    anchor = [rng.choice("abc") for _ in range(B)]
    mask = torch.tensor([[rng.randrange(2) for _ in range(4)] for _ in range(B)])
    return Rollouts(
        rewards=torch.tensor(rewards, dtype=F64),
        response_mask=mask,
        extras={
            "step_return": torch.tensor(returns, dtype=F64),
            "instance": instance,
            "anchor": anchor,
        },
    )


def reference_terms(batch: Rollouts, std: bool, eps: float = 1e-6):
    """verl-agent's dict-of-lists loop, with the house rule for singletons."""

    def relative(values, keys):
        groups = defaultdict(list)
        for v, k in zip(values, keys, strict=True):
            groups[k].append(v)
        out = []
        for v, k in zip(values, keys, strict=True):
            g = torch.tensor(groups[k], dtype=F64)
            if len(g) < 2 or float(g.std()) <= 1e-8:
                out.append(0.0)
            else:
                out.append((v - float(g.mean())) / ((float(g.std()) + eps) if std else 1.0))
        return out

    x = batch.extras
    episode = relative(batch.rewards.tolist(), x["instance"])
    step = relative(x["step_return"].tolist(), list(zip(x["instance"], x["anchor"], strict=True)))
    return episode, step


@PROPERTY
@given(batch=turn_batches(), std=st.booleans())
def test_matches_the_dict_reference_and_respects_the_mask(batch, std):
    cfg = GiGPOOptions(mode="mean_std_norm" if std else "mean_norm", step_w=0.7)
    episode, step = reference_terms(batch, std)
    row = torch.tensor(episode, dtype=F64) + 0.7 * torch.tensor(step, dtype=F64)
    A = gigpo_advantages(batch, cfg).advantages
    close(A, row[:, None] * batch.response_mask, atol=1e-9)


@PROPERTY
@given(batch=turn_batches(), std=st.booleans())
def test_each_term_sums_to_zero_over_its_groups(batch, std):
    # every row counts once in its instance (and in its step group), so the centred terms
    # sum to 0 per group; the std form divides a group by one constant
    x = batch.extras
    cfg = GiGPOOptions(mode="mean_std_norm" if std else "mean_norm")
    terms = gigpo_terms(batch.rewards, x["step_return"], x["instance"], x["anchor"], cfg)
    for g in terms.instances.unique():
        close(float(terms.episode[terms.instances == g].sum()), 0.0, atol=1e-9)
    for g in terms.step_groups.unique():
        close(float(terms.step[terms.step_groups == g].sum()), 0.0, atol=1e-9)


@PROPERTY
@given(batch=turn_batches())
def test_equal_scores_and_equal_returns_give_zero(batch):
    flat = batch.replace(
        rewards=torch.full_like(batch.rewards, 0.3),
        extras={**batch.extras, "step_return": torch.full((len(batch),), -0.2, dtype=F64)},
    )
    assert torch.equal(
        gigpo_advantages(flat, GiGPOOptions()).advantages, torch.zeros(len(batch), 4, dtype=F64)
    )
