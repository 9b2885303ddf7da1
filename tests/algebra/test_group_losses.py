"""Losses that read the whole group (spec §5 Reg-GRPO, §10 PACS, §11 P3O): hand cases T5.1–T5.2,
T10.1–T10.3, T11.1–T11.3 with their working, PACS's gradient identity, P3O's invariance to a
per-prompt reward constant, pairs only inside groups, groups of one, masked garbage and
micro-batching of whole groups."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import PROPERTY, close, garbage_like, grad_of, ragged_batches
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab.algebra.aggregate import global_normaliser
from policylab.rollouts import Rollouts

F64 = torch.float64


def one_token_rows(delta, rewards, group_ids=None, **options):
    """Rows of one token with logp = Δ, old = 0, so ∂L/∂logp is ∂L/∂Δ; GRPO advantages with
    ε_A = 1e-4 (spec §5.1). Returns (loss, grad [B], metrics)."""
    lp = torch.tensor(delta, dtype=F64).unsqueeze(-1).requires_grad_(True)
    mask = torch.ones_like(lp)
    gid = torch.zeros(len(rewards), dtype=torch.long) if group_ids is None else group_ids
    batch = Rollouts(rewards=torch.tensor(rewards, dtype=F64), response_mask=mask, group_ids=gid)
    name = options.pop("loss")
    adv = policylab.advantages("grpo", eps=1e-4)(batch)
    loss, metrics = policylab.policy_loss(f"component:{name}", **options)(
        lp, torch.zeros_like(lp), adv, mask, rollouts=batch
    )
    return loss, grad_of(loss, lp).squeeze(-1), metrics


# ------------------------------------------------------------------------------- Reg-GRPO §5
# R = [1, 0, 0, 1]: μ = 0.5, σ = sqrt(1/3) = 0.577350 → Â = 0.5/(0.577350 + 1e-4) = ±0.865875.
# ρ = [0.1, −0.2, 0, 0.3]: μ_ρ = 0.05, var = (0.0025 + 0.0625 + 0.0025 + 0.0625)/3 = 0.043333,
#   σ_ρ = 0.208167 → Â_θ = [0.240192, −1.200961, −0.240192, 1.200961].
# loss = mean (Â − Â_θ)² = (0.391479 + 0.112283 + 0.391479 + 0.112283)/4 = 0.251881.
# Second target R = [2, 1, 0, 1]: σ = sqrt(2/3) = 0.816497, Â = [1.224595, 0, −1.224595, 0].
@pytest.mark.parametrize(
    ("rewards", "loss_value", "grad"),
    [
        ([1, 0, 0, 1], 0.251881, [-1.599819, -0.319964, 1.599819, 0.319964]),
        ([2, 1, 0, 1], 1.205678, [-2.828251, -0.565651, 2.828251, 0.565651]),
    ],
)
def test_t5_1_reg_grpo_loss_and_gradient(rewards, loss_value, grad):
    loss, g, metrics = one_token_rows([0.1, -0.2, 0.0, 0.3], rewards, loss="reg_grpo")
    close(loss, loss_value, atol=1e-6)
    close(g, grad, atol=1e-6)
    close(float(g.sum()), 0.0, atol=1e-9)  # the standardised prediction ignores a shift of ρ
    close(metrics["reg_grpo/sigma_rho_mean"], 0.208167, atol=1e-6)


def test_t5_2_on_policy_and_uniform_rewards():
    # ρ = 0: Â_θ = 0, loss = mean Â² = 0.865875² = 0.749740; σ_ρ = sqrt(1e-8) = 1e-4 so
    # ∂/∂ρ_k = −(2/G)(Â_k − mean Â)/1e-4 = ∓0.5·0.865875·1e4 = ∓4329.377 (finite, no NaN)
    loss, g, _ = one_token_rows([0.0] * 4, [1, 0, 0, 1], loss="reg_grpo")
    close(loss, 0.749740, atol=1e-6)
    close(g, [-4329.377, 4329.377, 4329.377, -4329.377], atol=1e-3)
    # equal rewards: Â = 0, Σ Â_θ² = G − 1 = 3 → loss ≈ 3/4, gradient ≈ 0
    loss, g, metrics = one_token_rows([0.1, -0.2, 0.0, 0.3], [1, 1, 1, 1], loss="reg_grpo")
    close(loss, 0.75, atol=1e-6)
    close(g, torch.zeros(4, dtype=F64), atol=1e-6)
    close(metrics["reg_grpo/vanishing_adv_frac"], 1.0, atol=0.0)


def test_reg_grpo_kl_term_is_added_not_subtracted():
    # +β·KL in a minimised loss (spec §5.1): the k3 term raises the loss
    lp = torch.tensor([[0.1], [-0.2], [0.0], [0.3]], dtype=F64)
    batch = Rollouts(rewards=torch.tensor([1.0, 0, 0, 1]), response_mask=torch.ones(4, 1))
    batch = batch.replace(group_ids=torch.zeros(4, dtype=torch.long))
    adv = policylab.advantages("grpo", eps=1e-4)(batch)
    args = (lp, torch.zeros_like(lp), adv, torch.ones_like(lp))
    plain, _ = policylab.policy_loss("component:reg_grpo")(*args, rollouts=batch)
    with_kl, m = policylab.policy_loss("component:reg_grpo", kl_estimator="k3", kl_coef=0.1)(
        *args, rollouts=batch, ref_logprobs=lp - 0.5
    )
    close(with_kl, float(plain) + 0.1 * m["kl/loss"], atol=1e-12)
    assert m["kl/loss"] > 0


# ----------------------------------------------------------------------------------- PACS §10
# β = 1, Δ = [0.2, −0.1, 0, 0.3]: mean 0.1, ψ = (4/3)(Δ − 0.1) = [0.133333, −0.266667, −0.133333,
# 0.266667]. T10.1 y = [1,0,0,1], cw = 1: loss = mean softplus(−ψ) for y=1, softplus(ψ) for y=0
#   = (0.626953 + 0.570455 + 0.626953 + 0.570455)/4 = 0.598689.
# T10.2 y = [1,0,0,0]: cw = 4/(2·1) = 2 for the positive, 4/(2·3) = 2/3 for the negatives.
D = [0.2, -0.1, 0.0, 0.3]


@pytest.mark.parametrize(
    ("delta", "labels", "options", "loss_value", "grad"),
    [
        (D, [1, 0, 0, 1], {}, 0.598689, [-0.155572, 0.144575, 0.155572, -0.144575]),
        (D, [1, 0, 0, 0], {}, 0.653137, [-0.314842, 0.092685, 0.100016, 0.122141]),
        (
            D,
            [1, 0, 0, 0],
            {"class_weight": "none"},
            0.665355,
            [-0.238905, 0.061242, 0.072239, 0.105425],
        ),
        (D, [1, 0, 0, 0], {"beta": 2.0}, 0.621881, [-0.593028, 0.149601, 0.178039, 0.265388]),
        # T10.3 on policy: ψ = 0, loss = ln 2; ∂/∂Δ = (1/4)[e_k − mean_{i≠k} e_i],
        # e = cw·(½ − y) = [−1, 1/3, 1/3, 1/3] → [−1/3, 1/9, 1/9, 1/9]
        ([0.0] * 4, [1, 0, 0, 0], {}, math.log(2), [-1 / 3, 1 / 9, 1 / 9, 1 / 9]),
        ([0.0] * 4, [0, 0, 0, 0], {}, math.log(2), [0.0, 0.0, 0.0, 0.0]),
        (D, [0, 0, 0, 0], {}, 0.698689, [0.011095, -0.022091, -0.011095, 0.022091]),
    ],
)
def test_t10_pacs_hand_cases(delta, labels, options, loss_value, grad):
    loss, g, _ = one_token_rows(delta, labels, loss="pacs", **options)
    close(loss, loss_value, atol=1e-6)
    close(g, grad, atol=1e-6)


def test_t10_1_metrics():
    # σ(ψ) for y=1: σ(0.133333), σ(0.266667) → mean 0.549779; every sign right → pred_acc 1
    _, _, m = one_token_rows(D, [1, 0, 0, 1], loss="pacs")
    close(m["pacs/p_success_pos"], 0.549779, atol=1e-6)
    close(m["pacs/p_success_neg"], 1 - 0.549779, atol=1e-6)
    close(m["pacs/pred_acc"], 1.0, atol=0.0)
    close(m["pacs/score_abs_mean"], 0.2, atol=1e-12)
    close(m["pacs/pos_weight"], 1.0, atol=0.0)
    _, _, m = one_token_rows(D, [1, 0, 0, 0], loss="pacs")
    close(m["pacs/pos_weight"], 2.0, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("class_weight", ["question", "none", "only_positive"])
def test_pacs_gradient_is_a_policy_gradient_with_label_minus_prediction(seed, class_weight):
    # ∂L/∂Δ_k = (β/N)·[e_k − (1/(|g|−1))·Σ_{i≠k} e_i], e_i = cw_i·(σ(ψ_i) − y_i) (spec §10.1)
    gen = torch.Generator().manual_seed(seed)
    group_ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    B, T, beta = len(group_ids), 5, 1.7
    mask = (torch.rand(B, T, generator=gen) < 0.7).double()
    mask[:, 0] = 1.0
    old = -torch.rand(B, T, generator=gen, dtype=F64) * 2
    lp = (old + 0.3 * torch.randn(B, T, generator=gen, dtype=F64)).requires_grad_(True)
    labels = torch.tensor([1.0, 0, 0, 1, 1, 0, 1, 0, 0])
    batch = Rollouts(rewards=labels, response_mask=mask, group_ids=group_ids)
    fn = policylab.policy_loss("component:pacs", beta=beta, class_weight=class_weight)
    loss, _ = fn(lp, old, torch.zeros(B), mask, rollouts=batch)
    g = grad_of(loss, lp)
    with torch.no_grad():
        delta = ((lp - old) * mask).sum(-1)
        n = torch.tensor([3, 3, 3, 2, 2, 4, 4, 4, 4], dtype=F64)
        total = torch.zeros(3, dtype=F64).index_add(0, group_ids, beta * delta)[group_ids]
        psi = beta * delta - (total - beta * delta) / (n - 1)
        # question: y = [1,0,0] → 3/(2·1), 3/(2·2); [1,1] uniform → 1; [0,1,0,0] → 4/(2·3), 4/(2·1)
        cw = {
            "question": torch.tensor([1.5, 0.75, 0.75, 1, 1, 2 / 3, 2, 2 / 3, 2 / 3], dtype=F64),
            "none": torch.ones(B, dtype=F64),
            "only_positive": labels.double(),
        }[class_weight]
        e = cw * (torch.sigmoid(psi) - labels.double())
        e_total = torch.zeros(3, dtype=F64).index_add(0, group_ids, e)[group_ids]
        expected = beta / B * (e - (e_total - e) / (n - 1))
    close(g, expected.unsqueeze(-1) * mask, atol=1e-12)


def test_pacs_rejects_labels_outside_0_1():
    with pytest.raises(ValueError, match=r"pacs.*\[0, 1\].*2\.0"):
        one_token_rows(D, [2, 0, 0, 1], loss="pacs")


# ------------------------------------------------------------------------------------ P3O §11
# T11.3, ε = 0.2, rewards [1, 0] → δ = 0.5, the loss is −J of the single pair.
# separate: ∂J/∂logπ(y1) = sg(ρ2)·ρ1·δ unless clipped (ρ1 > 1.2), ∂J/∂logπ(y2) = −ρ1·ρ2·δ unless
#   clipped (ρ2 < 0.8): (1.5, 0.9) → [0, −0.675]; (1.1, 0.9) → [0.495, −0.495];
#   (0.7, 1.3) → [0.455, −0.455].
# joint: ρ_rel = ρ1/ρ2, ∂J = δ·ρ_rel·[1, −1] unless ρ_rel > 1.2: 1.666667 and 1.222222 → 0;
#   0.538462 → [0.269231, −0.269231].
@pytest.mark.parametrize(
    ("ratios", "separate", "joint"),
    [
        ((1.5, 0.9), [0.0, -0.675], [0.0, 0.0]),
        ((1.1, 0.9), [0.495, -0.495], [0.0, 0.0]),
        ((0.7, 1.3), [0.455, -0.455], [0.269231, -0.269231]),
    ],
)
def test_t11_3_clipping(ratios, separate, joint):
    delta = [math.log(r) for r in ratios]
    for clip, dJ in (("separate", separate), ("joint", joint)):
        _, g, _ = one_token_rows(delta, [1, 0], loss="p3o", clip=clip)
        close(-g, dJ, atol=1e-6)


def test_t11_3_joint_clip_value_and_metrics():
    # (1.5, 0.9): ρ_rel = 1.666667 clipped to 1.2 → J = 0.5·1.2 = 0.6, loss −0.6, pair clipped
    loss, _, m = one_token_rows([math.log(1.5), math.log(0.9)], [1, 0], loss="p3o")
    close(loss, -0.6, atol=1e-12)
    close(m["p3o/clipfrac"], 1.0, atol=0.0)
    close(m["p3o/pairs"], 1.0, atol=0.0)
    close(m["p3o/gap_abs_mean"], 0.5, atol=0.0)


def test_t11_1_a_per_prompt_constant_changes_nothing():
    # rewards [1, 0] and [6, 5]: δ = 0.5 both; on policy the pair gives −∇L = [0.5, −0.5]
    for rewards in ([1, 0], [6, 5]):
        loss, g, _ = one_token_rows([0.0, 0.0], rewards, loss="p3o")
        close(loss, -0.5, atol=1e-12)
        close(-g, [0.5, -0.5], atol=1e-12)


def test_t11_2_pairwise_gradient_is_the_policy_gradient():
    # θ = [0.3, −0.2, 0.1], R = [1, 0, 0.5]: Σ_{a,b} π_a π_b ∇J(a, b) over the 9 ordered pairs
    # equals ∇E_π[R] = [0.172716, −0.145331, −0.027385], unchanged after adding 7 to R
    for shift in (0.0, 7.0):
        theta = torch.tensor([0.3, -0.2, 0.1], dtype=F64, requires_grad=True)
        R = torch.tensor([1.0, 0.0, 0.5], dtype=F64) + shift
        log_pi = torch.log_softmax(theta, 0)
        pi = log_pi.exp().detach()
        total = torch.zeros((), dtype=F64)
        for a in range(3):
            for b in range(3):
                lp = log_pi[[a, b]].unsqueeze(-1)
                batch = Rollouts(rewards=R[[a, b]], response_mask=torch.ones(2, 1))
                batch = batch.replace(group_ids=torch.zeros(2, dtype=torch.long))
                loss, _ = policylab.policy_loss("component:p3o")(
                    lp, lp.detach(), torch.zeros(2), torch.ones(2, 1), rollouts=batch
                )
                total = total - pi[a] * pi[b] * loss
        close(grad_of(total, theta), [0.172716, -0.145331, -0.027385], atol=1e-6)


P3O_VARIANTS = [
    {"clip": c, "pairing": p} for c in ("joint", "separate") for p in ("all", "disjoint")
]


@pytest.mark.parametrize("options", P3O_VARIANTS, ids=lambda o: f"{o['clip']}-{o['pairing']}")
@PROPERTY
@given(
    batch=ragged_batches(min_rows=2, max_rows=8),
    data=st.data(),
)
def test_p3o_is_invariant_to_a_per_prompt_reward_constant(options, batch, data):
    B = batch.shape[0]
    group_ids = torch.tensor(data.draw(st.lists(st.integers(0, 2), min_size=B, max_size=B)))
    rewards = torch.tensor(
        data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, -1.0, 2.0]), min_size=B, max_size=B)),
        dtype=F64,
    )
    shift = torch.tensor(data.draw(st.lists(st.floats(-100, 100), min_size=3, max_size=3)))
    inputs = random_inputs(batch)
    results = []
    for r in (rewards, rewards + shift.to(F64)[group_ids]):
        rollouts = Rollouts(rewards=r, response_mask=batch.mask, group_ids=group_ids)
        lp = inputs["logprobs"].clone().requires_grad_(True)
        loss, _ = policylab.policy_loss("component:p3o", **options)(
            lp, inputs["old_logprobs"], inputs["advantages"], batch.mask, rollouts=rollouts
        )
        results.append((loss, grad_of(loss, lp)))
    close(results[1][0], results[0][0], atol=1e-9)
    close(results[1][1], results[0][1], atol=1e-9)


def test_p3o_gap_from_dr_grpo_advantages_equals_the_reward_gap():
    # dr_grpo A = R − mean_g R, so ½(A_i − A_j) = ½(R_i − R_j) and the losses agree
    group_ids = torch.tensor([0, 0, 0, 1, 1])
    rewards = torch.tensor([1.0, 0.0, 0.25, 3.0, -1.0], dtype=F64)
    batch = Rollouts(rewards=rewards, response_mask=torch.ones(5, 1), group_ids=group_ids)
    lp = torch.tensor([[0.1], [-0.3], [0.2], [0.05], [0.4]], dtype=F64, requires_grad=True)
    old, mask = torch.zeros(5, 1, dtype=F64), torch.ones(5, 1, dtype=F64)
    adv = policylab.advantages("dr_grpo")(batch)
    out = [
        policylab.policy_loss("component:p3o", gap=gap)(lp, old, adv, mask, rollouts=batch)[0]
        for gap in ("rewards", "advantages")
    ]
    close(out[1], out[0], atol=1e-12)
    close(grad_of(out[1], lp), grad_of(out[0], lp), atol=1e-12)


def test_p3o_pairs_only_within_groups():
    # interleaved groups [0, 1, 0, 1] with all pairs: the pairs are (0, 2) and (1, 3);
    # the loss is the mean of the two pair losses, and group 1's rewards never touch group 0
    delta = [0.1, -0.3, -0.2, 0.4]
    ids = torch.tensor([0, 1, 0, 1])
    loss, g, m = one_token_rows(delta, [1, 5, 0, 2], group_ids=ids, loss="p3o")
    pair0, g0, _ = one_token_rows([0.1, -0.2], [1, 0], loss="p3o")
    pair1, g1, _ = one_token_rows([-0.3, 0.4], [5, 2], loss="p3o")
    close(m["p3o/pairs"], 2.0, atol=0.0)
    close(loss, (float(pair0.detach()) + float(pair1.detach())) / 2, atol=1e-12)
    close(g[[0, 2]], g0 / 2, atol=1e-12)
    close(g[[1, 3]], g1 / 2, atol=1e-12)
    _, g_other, _ = one_token_rows(delta, [1, -7, 0, 9], group_ids=ids, loss="p3o")
    close(g_other[[0, 2]], g[[0, 2]], atol=0.0)


def test_p3o_disjoint_pairs_and_odd_leftover():
    # group of 5 rows, disjoint: pairs (0,1), (2,3); row 4 has no partner and no gradient.
    # all pairs: each row is in 4 pairs and gets 1/4 of each → loss = mean over the 10 pairs.
    delta, rewards = [0.05, -0.05, 0.2, 0.0, 0.1], [1, 0, 0, 1, 1]
    _, g, m = one_token_rows(delta, rewards, loss="p3o", pairing="disjoint")
    close(m["p3o/pairs"], 2.0, atol=0.0)
    assert g[4] == 0 and (g[:4] != 0).all()
    loss, _, m = one_token_rows(delta, rewards, loss="p3o", pairing="all")
    close(m["p3o/pairs"], 10.0, atol=0.0)
    pair_losses = [
        float(
            one_token_rows([delta[i], delta[j]], [rewards[i], rewards[j]], loss="p3o")[0].detach()
        )
        for i in range(5)
        for j in range(i + 1, 5)
    ]
    close(loss, sum(pair_losses) / 10, atol=1e-12)


# ------------------------------------------------------------------------------ all three
GROUP_LOSSES = [
    ("reg_grpo", {}),
    ("reg_grpo", {"kl_estimator": "k3", "kl_coef": 0.1}),
    ("pacs", {}),
    ("pacs", {"centring": "grpo", "score": "mean_logprob", "loss_agg_mode": "token-mean"}),
    ("pacs", {"centring": "none", "class_weight": "only_negative"}),
    ("p3o", {}),
    ("p3o", {"clip": "separate", "pairing": "disjoint"}),
    ("p3o", {"gap": "advantages", "loss_agg_mode": "token-mean"}),
]
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(GROUP_LOSSES)]


def random_inputs(batch, *, labels: bool = False) -> dict:
    gen = batch.gen()
    B, T = batch.shape
    old = -torch.rand(B, T, generator=gen, dtype=F64) * 2
    return {
        "logprobs": (old + 0.3 * torch.randn(B, T, generator=gen, dtype=F64)) * batch.mask,
        "old_logprobs": old * batch.mask,
        "advantages": torch.randn(B, generator=gen, dtype=F64),
        "ref_logprobs": (old + 0.2 * torch.randn(B, T, generator=gen, dtype=F64)) * batch.mask,
        "rewards": torch.randint(0, 2, (B,), generator=gen).to(F64),
    }


def run_loss(name, options, inputs, mask, group_ids, normaliser=None):
    lp = inputs["logprobs"].clone().requires_grad_(True)
    batch = Rollouts(rewards=inputs["rewards"], response_mask=mask, group_ids=group_ids)
    loss, metrics = policylab.policy_loss(f"component:{name}", **options)(
        lp,
        inputs["old_logprobs"],
        inputs["advantages"],
        mask,
        ref_logprobs=inputs["ref_logprobs"],
        rollouts=batch,
        normaliser=normaliser,
    )
    return loss, grad_of(loss, lp), metrics


@pytest.mark.parametrize(("name", "options"), GROUP_LOSSES, ids=IDS)
@PROPERTY
@given(batch=ragged_batches(min_rows=2, max_rows=7), nonfinite=st.booleans(), data=st.data())
def test_masked_garbage_never_matters(name, options, batch, nonfinite, data):
    B = batch.shape[0]
    group_ids = torch.tensor(data.draw(st.lists(st.integers(0, 2), min_size=B, max_size=B)))
    clean = random_inputs(batch)
    dirty = dict(clean)
    for offset, key in enumerate(("logprobs", "old_logprobs", "ref_logprobs")):
        dirty[key] = garbage_like(
            clean[key], batch.mask, batch.gen(offset + 1), nonfinite=nonfinite
        )
    loss, g, metrics = run_loss(name, options, clean, batch.mask, group_ids)
    loss_d, g_d, metrics_d = run_loss(name, options, dirty, batch.mask, group_ids)
    close(loss_d, loss, atol=1e-12)
    close(g_d, g, atol=1e-12)
    assert (g_d[batch.mask == 0] == 0).all()
    assert metrics_d.keys() == metrics.keys()
    assert all(math.isfinite(v) for v in metrics_d.values())


@pytest.mark.parametrize(("name", "options"), GROUP_LOSSES, ids=IDS)
@PROPERTY
@given(batch=ragged_batches(rows=6), split=st.integers(1, 2))
def test_micro_batches_of_whole_groups_add_up(name, options, batch, split):
    # groups {0,1}, {2,3}, {4,5}; micro-batches of whole groups with the global normaliser
    group_ids = torch.tensor([0, 0, 1, 1, 2, 2])
    inputs = random_inputs(batch)
    mode = policylab.policy_loss(f"component:{name}", **options).options.loss_agg_mode
    norm = global_normaliser(batch.mask, mode)
    full, g_full, _ = run_loss(name, options, inputs, batch.mask, group_ids, norm)
    rows = torch.arange(6)
    total, grads = 0.0, torch.zeros_like(g_full)
    for part in (rows[: 2 * split], rows[2 * split :]):
        sub = {k: v[part] for k, v in inputs.items()}
        loss, g, _ = run_loss(name, options, sub, batch.mask[part], group_ids[part], norm)
        total += float(loss.detach())
        grads[part] = g
    close(total, float(full.detach()), atol=1e-12)
    close(grads, g_full, atol=1e-12)


@pytest.mark.parametrize(("name", "options"), GROUP_LOSSES, ids=IDS)
def test_a_group_of_one_contributes_nothing(name, options):
    # rows 0–3 one group, row 4 alone: row 4 gets no gradient, and its only effect is to
    # count in the normaliser (seq-mean: loss scaled by 4/5; token-mean: by 4/5 tokens here)
    options = {k: v for k, v in options.items() if not k.startswith("kl_")}
    mask = torch.ones(5, 2, dtype=F64)
    gen = torch.Generator().manual_seed(3)
    old = -torch.rand(5, 2, generator=gen, dtype=F64)
    inputs = {
        "logprobs": old + 0.3 * torch.randn(5, 2, generator=gen, dtype=F64),
        "old_logprobs": old,
        "advantages": torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0], dtype=F64),
        "ref_logprobs": old,
        "rewards": torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0], dtype=F64),
    }
    ids = torch.tensor([0, 0, 0, 0, 1])
    loss, g, _ = run_loss(name, options, inputs, mask, ids)
    four = {k: v[:4] for k, v in inputs.items()}
    loss4, g4, _ = run_loss(name, options, four, mask[:4], ids[:4])
    close(g[4], torch.zeros(2, dtype=F64), atol=0.0)
    close(loss, float(loss4.detach()) * 4 / 5, atol=1e-12)
    close(g[:4], g4 * 4 / 5, atol=1e-12)


@pytest.mark.parametrize("name", ["reg_grpo", "pacs", "p3o"])
def test_rollouts_are_required_and_must_match(name):
    lp = torch.zeros(4, 2)
    fn = policylab.policy_loss(f"component:{name}")
    with pytest.raises(ValueError, match=f"{name}.*rollouts=.*group_ids"):
        fn(lp, lp, torch.zeros(4), torch.ones(4, 2))
    three = Rollouts(rewards=torch.zeros(3), response_mask=torch.ones(3, 2))
    with pytest.raises(ValueError, match="3 rows but logprobs has 4"):
        fn(lp, lp, torch.zeros(4), torch.ones(4, 2), rollouts=three)


@pytest.mark.parametrize(
    ("name", "field", "value", "hint"),
    [
        ("reg_grpo", "eps_rho", 0.0, "eps_rho = 0.0 is out of range"),
        ("pacs", "beta", -1.0, "beta = -1.0 is out of range"),
        ("pacs", "centring", "loo", "centring = 'loo' is not valid; choices: 'rloo'"),
        ("pacs", "class_weight", "balanced", "class_weight = 'balanced'.*'question'"),
        ("p3o", "clip", "v2", "clip = 'v2' is not valid; choices: 'joint', 'separate'"),
        ("p3o", "pairing", "random", "pairing = 'random'.*'disjoint'"),
        ("p3o", "eps_low", 1.5, "eps_low = 1.5 is out of range"),
        ("p3o", "gap", "reward", "gap = 'reward'.*'advantages'"),
    ],
)
def test_bad_options_name_field_value_and_choices(name, field, value, hint):
    with pytest.raises(ValueError, match=hint):
        policylab.policy_loss(f"component:{name}", **{field: value})


@pytest.mark.parametrize("name", ["reg_grpo", "pacs", "p3o"])
def test_empty_batch_gives_zero_loss_with_graph(name):
    lp = torch.zeros(4, 3, dtype=F64, requires_grad=True)
    mask = torch.zeros(4, 3, dtype=F64)
    batch = Rollouts(rewards=torch.ones(4, dtype=F64), response_mask=mask)
    batch = batch.replace(group_ids=torch.zeros(4, dtype=torch.long))
    loss, metrics = policylab.policy_loss(f"component:{name}")(
        lp, lp.detach(), torch.zeros(4), mask, rollouts=batch
    )
    close(loss, 0.0, atol=0.0)
    close(grad_of(loss, lp), torch.zeros(4, 3, dtype=F64), atol=0.0)
    assert all(math.isfinite(v) for v in metrics.values())
