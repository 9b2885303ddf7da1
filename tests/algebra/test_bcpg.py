"""BCPG-NSA loss (spec §15.3, §15.6): hand cases T15.1–T15.3 with their working, metrics,
input errors, and properties over random ragged batches (β = 1 ignores the step labels,
positive rows never get β, masked garbage never matters, equal rewards leave only the τ
term, a loop over Eq. 6 agrees, micro-batches of whole groups add up)."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import PROPERTY, Ragged, close, garbage_like, grad_of, ragged_batches
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab.algebra.aggregate import global_normaliser
from policylab.algebra.bcpg import BCPGOptions, bcpg_loss, token_weights
from policylab.algebra.catalogue import policy_losses
from policylab.rollouts import Rollouts

F64 = torch.float64
NAN = math.nan

# ------------------------------------------------------------------- fixture of §15.6
# G = 4, R = [1, 0, 0, 1] ⇒ R̄ = 0.5, R − R̄ = [0.5, −0.5, −0.5, 0.5], τ = 1e-3.
#   row0: 4 tokens logp −0.5 (ref equal, Δ = 0)
#   row1: 6 tokens logp −1.0, ref −1.1 ⇒ Δ = 6·0.1 = 0.6; steps [0,0,1,1,2,2] labelled
#         [correct, correct, wrong] ⇒ its first 4 tokens get β
#   row2: 2 tokens logp −2.0 (Δ = 0), no steps
#   row3: 4 tokens logp −0.25 (Δ = 0)
# Masked positions hold NaN: they must never be read.
LP = [
    [-0.5] * 4 + [NAN] * 2,
    [-1.0] * 6,
    [-2.0] * 2 + [NAN] * 4,
    [-0.25] * 4 + [NAN] * 2,
]
REF = [
    [-0.5] * 4 + [NAN] * 2,
    [-1.1] * 6,
    [-2.0] * 2 + [NAN] * 4,
    [-0.25] * 4 + [NAN] * 2,
]
LENGTHS = [4, 6, 2, 4]
SEG = [[-1] * 6, [0, 0, 1, 1, 2, 2], [-1] * 6, [-1] * 6]
LABELS = [[], [True, True, False], [], []]


def fixture(labels=LABELS, rewards=(1.0, 0.0, 0.0, 1.0), group_ids=(0, 0, 0, 0)):
    mask = (torch.arange(6)[None, :] < torch.tensor(LENGTHS)[:, None]).to(F64)
    rollouts = Rollouts(
        rewards=torch.tensor(rewards, dtype=F64),
        response_mask=mask,
        group_ids=torch.tensor(group_ids),
        segment_ids=torch.tensor(SEG),
        extras={"step_correct": labels},
    )
    logprobs = torch.tensor(LP, dtype=F64, requires_grad=True)
    return logprobs, torch.tensor(REF, dtype=F64), mask, rollouts


def run(beta, labels=LABELS, **overrides):
    logprobs, ref, mask, rollouts = fixture(labels)
    loss, metrics = policylab.policy_loss("bcpg", beta=beta, **overrides)(
        logprobs=logprobs,
        old_logprobs=ref,  # the offline data's logprobs (only the ratio metrics read them)
        advantages=torch.zeros(4, dtype=F64),
        response_mask=mask,
        ref_logprobs=ref,
        rollouts=rollouts,
    )
    return loss, grad_of(loss, logprobs) * mask, metrics


# Row terms of J, (1/|o_i|)[Σ_t logp·β·(R − R̄) − (τ/2)Δ²]; (τ/2)Δ² = 0.0005·0.36 = 0.00018:
#   row0 = (1/4)·4·(−0.5)(0.5) = −0.25;  row2 = (1/2)·2·(−2)(−0.5) = 1;
#   row3 = (1/4)·4·(−0.25)(0.5) = −0.125
#   row1, β = 1:    (6·(−1)(−0.5) − 0.00018)/6 = (3 − 0.00018)/6
#   row1, β = 0.5:  (4·(−1)(0.5)(−0.5) + 2·(−1)(−0.5) − 0.00018)/6 = (2 − 0.00018)/6
#   row1, β = −0.5: (4·(−1)(−0.5)(−0.5) + 1 − 0.00018)/6 = (0 − 0.00018)/6
# L = −(row0 + row1 + row2 + row3)/G, G = 4.
# ∂L/∂logp[i,t] = −(1/(G·n_i))·[β_{i,t}(R_i − R̄) − τ·Δ_i]:
#   row0, row3: −0.5/16 = −0.03125;  row2: 0.5/8 = 0.0625
#   row1: −(β_t·(−0.5) − 1e-3·0.6)/24 = (0.5·β_t + 0.0006)/24
def row1_term(pg_sum):
    return (pg_sum - 0.00018) / 6


CASES = {
    # β: (loss, spec's loss rounded, row1's first four gradients, spec's rounded)
    1.0: (-(-0.25 + row1_term(3.0) + 1 - 0.125) / 4, -0.2812425, 0.5006 / 24, 0.0208583),
    0.5: (-(-0.25 + row1_term(2.0) + 1 - 0.125) / 4, -0.2395758, 0.2506 / 24, 0.0104417),
    -0.5: (-(-0.25 + row1_term(0.0) + 1 - 0.125) / 4, -0.1562425, -0.2494 / 24, -0.0103917),
}


@pytest.mark.parametrize("beta", [1.0, 0.5, -0.5], ids=["T15.1", "T15.2", "T15.3"])
def test_t15_hand_cases(beta):
    loss, grad, _ = run(beta)
    exact, rounded, g_nsa, g_nsa_rounded = CASES[beta]
    close(loss, exact, atol=1e-12)
    close(loss, rounded, atol=5e-8)
    g_step = 0.5006 / 24  # the wrong step's tokens keep weight 1
    expected = [
        [-0.03125] * 4 + [0.0] * 2,
        [g_nsa] * 4 + [g_step] * 2,
        [0.0625] * 2 + [0.0] * 4,
        [-0.03125] * 4 + [0.0] * 2,
    ]
    close(grad, expected, atol=1e-12)
    close(grad[1, 0], g_nsa_rounded, atol=5e-8)
    close(grad[1, 5], 0.0208583, atol=5e-8)


def test_t15_3_tau_share_of_the_gradient():
    # the τ term alone: +1e-3·0.6/(4·6) = 2.5e-5 per token of row1
    loss_tau, grad_tau, _ = run(-0.5)
    _, grad_no_tau, _ = run(-0.5, tau=0.0)
    close(grad_tau[1] - grad_no_tau[1], [2.5e-5] * 6, atol=1e-12)


def test_t15_metrics():
    loss, _, m = run(0.5)
    # bc_loss = (0.00018/6)/4 = 7.5e-6 ; loss = pg_term + bc_loss
    close(m["bcpg/bc_loss"], 7.5e-6, atol=1e-12)
    close(m["bcpg/pg_term"] + m["bcpg/bc_loss"], float(loss.detach()), atol=1e-12)
    close(m["bcpg/bc_term"], 0.00018 / 4, atol=1e-12)  # mean over rows of (τ/2)Δ²
    close(m["bcpg/delta_ref_abs_mean"], 0.6 / 4, atol=1e-12)
    # negative tokens: row1 6 + row2 2 = 8, of which row1's first 4 get β
    close(m["bcpg/nsa_token_frac"], 0.5)
    # steps of negative rows: row1's three, two judged correct
    close(m["bcpg/steps_correct_frac_in_negatives"], 2 / 3)
    close(m["pg/loss"], float(loss.detach()), atol=1e-12)


def test_tensor_labels_equal_list_labels():
    as_tensor = torch.tensor([[False] * 3, [True, True, False], [False] * 3, [False] * 3])
    loss_list, grad_list, _ = run(0.5)
    loss_tensor, grad_tensor, _ = run(0.5, labels=as_tensor)
    close(loss_tensor, float(loss_list.detach()), atol=0.0)
    close(grad_tensor, grad_list, atol=0.0)


def test_token_weights_of_the_fixture():
    _, _, mask, rollouts = fixture()
    negative = torch.tensor([False, True, True, False])
    w = token_weights(rollouts.segment_ids, LABELS, negative, mask, 0.5)
    assert w.tolist() == [[1.0] * 6, [0.5] * 4 + [1.0] * 2, [1.0] * 6, [1.0] * 6]


def test_options_defaults_and_ranges():
    opts = policylab.policy_loss("bcpg").options
    assert (opts.beta, opts.tau, opts.loss_agg_mode) == (0.5, 1e-3, "seq-mean-token-mean")
    assert policy_losses.entry("bcpg").config is BCPGOptions
    with pytest.raises(ValueError, match="beta"):
        BCPGOptions(beta=1.5)
    with pytest.raises(ValueError, match="tau"):
        BCPGOptions(tau=-1.0)


def test_errors_name_the_missing_input():
    logprobs, ref, mask, rollouts = fixture()
    cfg = BCPGOptions()
    call = dict(logprobs=logprobs, old_logprobs=None, advantages=None, response_mask=mask)
    with pytest.raises(ValueError, match="ref_logprobs"):
        bcpg_loss(**call, cfg=cfg, rollouts=rollouts)
    with pytest.raises(ValueError, match="rollouts="):
        bcpg_loss(**call, cfg=cfg, ref_logprobs=ref)
    bare = rollouts.replace(extras={})
    with pytest.raises(ValueError, match="step_correct.*beta=1"):
        bcpg_loss(**call, cfg=cfg, ref_logprobs=ref, rollouts=bare)
    bcpg_loss(**call, cfg=BCPGOptions(beta=1.0), ref_logprobs=ref, rollouts=bare)  # plain BCPG
    short = rollouts.replace(extras={"step_correct": [[], [True, True], [], []]})
    with pytest.raises(ValueError, match=r"segment_ids\[1, 4\] = 2.*2 label"):
        bcpg_loss(**call, cfg=cfg, ref_logprobs=ref, rollouts=short)


# ------------------------------------------------------------------- properties
@st.composite
def bcpg_batches(draw, *, dense: bool = False):
    """A ragged batch with groups, 0/1 rewards, random step ids (−1 = no step) and labels.
    `dense`: one group with a right and a wrong row, every token in a step, so that the
    labels of both kinds of rows always reach the loss."""
    batch = draw(ragged_batches(min_rows=2, max_rows=6, max_t=6, first_row_nonempty=dense))
    B, T = batch.shape
    n_steps = draw(st.integers(1 if dense else 0, 3))
    group_ids = draw(st.lists(st.integers(0, 0 if dense else 2), min_size=B, max_size=B))
    rewards = draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=B, max_size=B))
    seg = draw(
        st.lists(st.integers(0 if dense else -1, n_steps - 1), min_size=B * T, max_size=B * T)
    )
    labels = draw(
        st.lists(
            st.lists(st.booleans(), min_size=n_steps, max_size=n_steps), min_size=B, max_size=B
        )
    )
    if dense:
        rewards[0], rewards[1] = 1.0, 0.0
        batch.mask[1] = batch.mask[0]
    return batch, group_ids, rewards, torch.tensor(seg).reshape(B, T), labels


def inputs(batch: Ragged, group_ids, rewards, seg, labels):
    g = batch.gen()
    B, T = batch.shape
    logprobs = (-2.0 * torch.rand(B, T, generator=g, dtype=F64)).requires_grad_(True)
    ref = -2.0 * torch.rand(B, T, generator=g, dtype=F64)
    rollouts = Rollouts(
        rewards=torch.tensor(rewards, dtype=F64),
        response_mask=batch.mask,
        group_ids=torch.tensor(group_ids),
        segment_ids=seg,
        extras={"step_correct": labels},
    )
    return logprobs, ref, rollouts


def loss_and_grad(logprobs, ref, rollouts, normaliser=None, **options):
    leaf = logprobs.detach().requires_grad_(True)
    loss, metrics = bcpg_loss(
        leaf,
        None,
        None,
        rollouts.response_mask,
        BCPGOptions(**options),
        ref_logprobs=ref,
        rollouts=rollouts,
        normaliser=normaliser,
    )
    return loss.detach(), grad_of(loss, leaf), metrics


def loop_reference(logprobs, ref, rollouts, beta, tau):
    """Eq. 6 row by row: (1/B')Σ_i (1/n_i)[Σ_t logp·β_t·(R_i − R̄) − (τ/2)Δ_i²], negated."""
    total, rows = (logprobs * 0.0).nansum(), 0  # 0 with a graph, for an empty batch
    for i in range(len(rollouts)):
        valid = rollouts.response_mask[i] > 0
        n = int(valid.sum())
        if n == 0:
            continue
        rows += 1
        same = rollouts.group_ids == rollouts.group_ids[i]
        centred = float(rollouts.rewards[i] - rollouts.rewards[same].mean())
        labels = rollouts.extras["step_correct"][i]
        pg, delta = logprobs.new_zeros(()), logprobs.new_zeros(())
        for t in range(logprobs.shape[1]):
            if not valid[t]:
                continue
            s = int(rollouts.segment_ids[i, t])
            w = beta if centred < 0 and s >= 0 and labels[s] else 1.0
            pg = pg + logprobs[i, t] * w * centred
            delta = delta + logprobs[i, t] - ref[i, t]
        total = total + (pg - 0.5 * tau * delta**2) / n
    return -total / max(rows, 1)


@PROPERTY
@given(
    st.booleans().flatmap(lambda dense: bcpg_batches(dense=dense)),
    st.sampled_from([1.0, 0.5, 0.0, -0.5, -1.0]),
)
def test_loop_reference_agrees(case, beta):
    logprobs, ref, rollouts = inputs(*case)
    loss, grad, _ = loss_and_grad(logprobs, ref, rollouts, beta=beta, tau=0.1)
    leaf = logprobs.detach().requires_grad_(True)
    expected = loop_reference(leaf, ref, rollouts, beta, 0.1)
    close(loss, float(expected.detach()), atol=1e-12)
    close(grad, grad_of(expected, leaf), atol=1e-12)


@PROPERTY
@given(bcpg_batches(dense=True))
def test_beta_one_ignores_the_step_labels(case):
    logprobs, ref, rollouts = inputs(*case)
    loss, grad, _ = loss_and_grad(logprobs, ref, rollouts, beta=1.0)
    flipped = [[not x for x in row] for row in rollouts.extras["step_correct"]]
    for other in (
        rollouts.replace(extras={"step_correct": flipped}),
        rollouts.replace(extras={}, segment_ids=None),
    ):
        loss2, grad2, _ = loss_and_grad(logprobs, ref, other, beta=1.0)
        close(loss2, float(loss), atol=0.0)
        close(grad2, grad, atol=0.0)


@PROPERTY
@given(bcpg_batches(dense=True))
def test_positive_rows_never_get_beta(case):
    logprobs, ref, rollouts = inputs(*case)
    loss, grad, _ = loss_and_grad(logprobs, ref, rollouts, beta=-0.5)
    # flip the labels of every row at or above its group mean: nothing may change
    centred = rollouts.rewards - torch.stack(
        [rollouts.rewards[rollouts.group_ids == g].mean() for g in rollouts.group_ids]
    )
    labels = [
        row if c < 0 else [not x for x in row]
        for row, c in zip(rollouts.extras["step_correct"], centred.tolist(), strict=True)
    ]
    flipped = rollouts.replace(extras={"step_correct": labels})
    loss2, grad2, _ = loss_and_grad(logprobs, ref, flipped, beta=-0.5)
    close(loss2, float(loss), atol=0.0)
    close(grad2, grad, atol=0.0)
    w = token_weights(rollouts.segment_ids, labels, centred < 0, rollouts.response_mask, -0.5)
    assert bool((w[centred >= 0] == 1.0).all())


@PROPERTY
@given(bcpg_batches(), st.booleans())
def test_masked_garbage_never_matters(case, nonfinite):
    batch = case[0]
    logprobs, ref, rollouts = inputs(*case)
    loss, grad, metrics = loss_and_grad(logprobs, ref, rollouts)
    g = batch.gen(1)
    mask = batch.mask
    junk_seg = torch.where(mask.bool(), rollouts.segment_ids, torch.full_like(mask, 99).long())
    loss2, grad2, metrics2 = loss_and_grad(
        garbage_like(logprobs, mask, g, nonfinite=nonfinite),
        garbage_like(ref, mask, g, nonfinite=nonfinite),
        rollouts.replace(segment_ids=junk_seg),
    )
    close(loss2, float(loss), atol=1e-12)
    close(grad2 * mask, grad * mask, atol=1e-12)
    assert metrics2.keys() == metrics.keys()
    for key, value in metrics.items():
        close(metrics2[key], value, atol=1e-12)


@PROPERTY
@given(bcpg_batches())
def test_equal_rewards_leave_only_the_tau_term(case):
    logprobs, ref, rollouts = inputs(*case)
    same = rollouts.replace(rewards=torch.ones(len(rollouts), dtype=F64))
    loss, grad, m = loss_and_grad(logprobs, ref, same, tau=0.1)
    mask = rollouts.response_mask
    n = mask.sum(-1)
    rows = float((n > 0).sum())
    delta = ((logprobs.detach() - ref) * mask).sum(-1)
    # L = (1/B')Σ_i (τ/2)Δ_i²/n_i;  ∂L/∂logp[i,t] = τ·Δ_i/(B'·n_i)
    expected = (0.05 * delta**2 / n.clamp(min=1)).sum() / max(rows, 1.0)
    close(loss, float(expected.detach()), atol=1e-12)
    close(m["bcpg/pg_term"], 0.0, atol=0.0)
    per_row = 0.1 * delta / (max(rows, 1.0) * n.clamp(min=1))
    close(grad * mask, per_row[:, None] * mask, atol=1e-12)


@PROPERTY
@given(bcpg_batches())
def test_micro_batches_of_whole_groups_add_up(case):
    logprobs, ref, rollouts = inputs(*case)
    loss, grad, _ = loss_and_grad(logprobs, ref, rollouts, tau=0.1)
    norm = global_normaliser(rollouts.response_mask, "seq-mean-token-mean")
    total, summed = 0.0, torch.zeros_like(grad)
    for g in torch.unique(rollouts.group_ids):
        rows = (rollouts.group_ids == g).nonzero(as_tuple=True)[0]
        part = rollouts.select(rows)
        part_loss, part_grad, _ = loss_and_grad(
            logprobs.detach()[rows], ref[rows], part, normaliser=norm, tau=0.1
        )
        total += float(part_loss)
        summed[rows] = part_grad
    close(total, float(loss), atol=1e-12)
    close(summed, grad, atol=1e-12)
