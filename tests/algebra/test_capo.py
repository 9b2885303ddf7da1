"""CAPO (spec §14): the three hand cases (K=2, d=1), the Adam model's reads and updates, the
bounds, the edge cases, and brute-force checks of m_H and m_F against the exact surrogate
change and KL of the top-K softmax; chunking changes nothing; checkpoints round-trip."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import PROPERTY, close
from hypothesis import given
from hypothesis import strategies as st

from policylab.algebra.capo import (
    CapoOptions,
    CurvatureState,
    accept,
    capo_mask,
    capo_terms,
    predicted_changes,
    token_gradients,
    topk_policy,
)

F, T = False, True
LOG3 = math.log(3.0)  # softmax([log 3, 0]) = [0.75, 0.25]


def t(x, dtype=torch.float32) -> torch.Tensor:
    return torch.tensor(x, dtype=dtype)


def state_with(ids, M, S, steps) -> CurvatureState:
    state = CurvatureState()
    state.load_state_dict({"ids": torch.tensor(ids), "M": t(M), "S": t(S), "t": steps})
    return state


def one_token(probs, a, h, A):
    """topk_ids [[0, 1]], probs, one-hot of a, hidden [[h]], advantage [A] for capo_terms."""
    onehot = [[1.0 if j == a else 0.0 for j in range(len(probs))]]
    return torch.tensor([[0, 1]]), t([probs]), t(onehot), t([[h]]), t([A])


# ------------------------------------------------------------------ hand cases (spec §14)
def test_case_1_a_large_positive_step_is_rejected_by_both_bounds():
    # π=[0.75,0.25], a=0 → v=[0.25,−0.25]; h=2, A=1 → g=G=[[0.5],[−0.5]] (empty store), ⟨g,G⟩=0.5;
    # u=Gh=[1,−1], vᵀu=0.5, uᵀFu = 0.75·1+0.25·1 − (0.75−0.25)² = 0.75;
    # m_H = 0.1·0.5 + ½·0.01·1·(0.25 − 0.75) = 0.0475; m_F = ½·0.01·0.25 = 0.00125
    state = CurvatureState()
    result = capo_mask(
        t([[2.0]]), t([[LOG3, 0.0]]), torch.tensor([0]), t([1.0]), 0.1, state, CapoOptions()
    )
    close(result.m_H, [0.0475], atol=0.0, rtol=1e-6)
    close(result.m_F, [0.00125], atol=0.0, rtol=1e-6)
    assert result.accepted.tolist() == [F]
    assert result.metrics["capo/reject_frac_fisher"] == 1.0  # 0.00125 ≥ τ_F = 1e-4
    assert result.metrics["capo/reject_frac_hessian"] == 1.0  # 0.0475 ≥ τ_H = 1e-2
    assert state.t == 0 and len(state) == 0  # nothing accepted, nothing learnt


@pytest.mark.parametrize("model", ["adam", "sgd"])
def test_case_2_the_same_token_with_a_small_negative_step_is_accepted(model):
    # A=−1, η=0.01: g=[[−0.5],[0.5]], ⟨g,G⟩=0.5, u=[−1,1], vᵀu=−0.5;
    # m_H = 0.01·0.5 + ½·1e-4·(−1)·(0.25 − 0.75) = 0.005025; m_F = ½·1e-4·0.25 = 1.25e-5
    ids, probs, onehot, h, A = one_token([0.75, 0.25], 0, 2.0, -1.0)
    options = CapoOptions(optimizer_model=model)
    state = CurvatureState() if model == "adam" else None
    m_H, m_F = capo_terms(h, ids, probs, onehot, A, 0.01, state, options)
    close(m_H, [0.005025], atol=0.0, rtol=1e-6)
    close(m_F, [1.25e-5], atol=0.0, rtol=1e-6)
    assert accept(m_H, m_F, options).tolist() == [T]


def test_case_3_the_adam_model_shapes_the_step():
    # t=1, M=[[0.1],[−0.1]], S=[[0.01],[0.01]]; π=[0.5,0.5], a=1 → v=[−0.5,0.5];
    # h=1, A=2 → g=[[−1],[1]]
    # row 0: m' = 0.9·0.1 + 0.1·(−1) = −0.01, s' = 0.999·0.01 + 0.001·1 = 0.01099;
    # m̂ = −0.01/(1−0.9²) = −0.0526316, ŝ = 0.01099/(1−0.999²) = 5.497749, √ŝ = 2.344728
    # → G0 = −0.0224468; row 1 is the mirror image → G = [[−0.0224468],[0.0224468]]
    # ⟨g,G⟩ = 0.0448935; u = [−0.0224468, 0.0224468], vᵀu = 0.0224468,
    # uᵀFu = 0.5·2·0.0224468² − 0 = 0.000503858 = (vᵀu)² → the second-order term of m_H is 0
    # m_H = 1e-3·0.0448935 = 4.48935e-5; m_F = ½·1e-6·0.000503858 = 2.51929e-10
    state = state_with([0, 1], [[0.1], [-0.1]], [[0.01], [0.01]], steps=1)
    ids, probs, onehot, h, A = one_token([0.5, 0.5], 1, 1.0, 2.0)
    g = token_gradients(h, probs, onehot, A)
    close(g, [[[-1.0], [1.0]]])
    close(state.effective(ids, g), [[[-0.0224468], [0.0224468]]], atol=1e-7)
    options = CapoOptions()
    m_H, m_F = capo_terms(h, ids, probs, onehot, A, 1e-3, state, options)
    close(m_H, [4.48935e-5], atol=0.0, rtol=1e-5)
    close(m_F, [2.51929e-10], atol=0.0, rtol=1e-5)
    assert accept(m_H, m_F, options).tolist() == [T]
    assert state.t == 1 and torch.equal(state.M, t([[0.1], [-0.1]]))  # reading changed nothing


def test_momentum_against_the_token_gradient_gives_a_negative_m_H():
    # case 3 with M=[[0.5],[−0.5]]: m' = 0.45 − 0.1 = 0.35 for row 0, opposite to g0 = −1;
    # G0 = (0.35/0.19)/2.344728 = 0.785637, G = [[0.785637],[−0.785637]], ⟨g,G⟩ = −1.571274;
    # vᵀu = −0.785637, (vᵀu)² = uᵀFu again → m_H = −1.571274e-3, m_F = ½·1e-6·0.617226 = 3.08613e-7
    state = state_with([0, 1], [[0.5], [-0.5]], [[0.01], [0.01]], steps=1)
    ids, probs, onehot, h, A = one_token([0.5, 0.5], 1, 1.0, 2.0)
    m_H, m_F = capo_terms(h, ids, probs, onehot, A, 1e-3, state, CapoOptions())
    close(m_H, [-1.571274e-3], atol=0.0, rtol=1e-5)
    close(m_F, [3.08613e-7], atol=0.0, rtol=1e-5)
    assert accept(m_H, m_F, CapoOptions()).tolist() == [T]  # |m_H| < 1e-2
    assert accept(m_H, m_F, CapoOptions(symmetric=False)).tolist() == [F]  # needs m_H ≥ 0


# ------------------------------------------------------------------------------- bounds
def test_bounds_are_strict_and_a_zero_tau_switches_a_bound_off():
    m_H = t([0.0, -0.005, -0.01, 0.01, 0.0099, 0.0, 0.0])
    m_F = t([0.0, 0.0, 0.0, 0.0, 0.0, 1e-4, 0.5e-4])
    assert accept(m_H, m_F, CapoOptions()).tolist() == [T, T, F, F, T, F, T]
    assert accept(m_H, m_F, CapoOptions(symmetric=False)).tolist() == [T, F, F, F, T, F, T]
    assert accept(m_H, m_F, CapoOptions(tau_fisher=0.0)).tolist() == [T, T, F, F, T, T, T]
    assert accept(m_H, m_F, CapoOptions(tau_hessian=0.0)).tolist() == [T, T, T, T, T, F, T]


# ------------------------------------------------------------------------------- edges
def test_a_zero_learning_rate_accepts_everything():
    gen = torch.Generator().manual_seed(0)
    state = state_with([0, 3], [[1.0, -1.0], [2.0, 0.5]], [[1.0, 1.0], [4.0, 0.25]], steps=5)
    hidden, logits = torch.randn(6, 2, generator=gen) * 10, torch.randn(6, 5, generator=gen)
    result = capo_mask(
        hidden, logits, torch.arange(6) % 5, torch.randn(6, generator=gen) * 10, 0.0, state,
        CapoOptions(top_k=3),
    )  # fmt: skip
    assert result.accepted.all()
    assert torch.equal(result.m_H, torch.zeros(6)) and torch.equal(result.m_F, torch.zeros(6))


def test_a_zero_advantage_predicts_no_change_and_is_accepted():
    ids, probs, onehot, h, _ = one_token([0.75, 0.25], 0, 2.0, 0.0)
    for model in ("adam", "sgd"):
        m_H, m_F = capo_terms(h, ids, probs, onehot, t([0.0]), 0.1, CurvatureState(), CapoOptions())
        assert m_H.tolist() == [0.0] and m_F.tolist() == [0.0], model


def test_with_stored_momentum_a_zero_advantage_still_moves_the_policy():
    # our reading of the code: g = 0, yet G = m̂/(√ŝ+ε) ≠ 0 from M, S alone; m_H = η⟨0,G⟩ + ½η²·0 = 0
    # but m_F = ½η²(vᵀu)² > 0. State t=1, M=[[0.1],[−0.1]], S=[[0.01],[0.01]], g=0:
    # m' = ±0.09, s' = 0.00999 → G = ±(0.09/0.19)/√(0.00999/0.001999) = ±0.211891;
    # π=[0.75,0.25], a=0, h=2: u=[0.423782,−0.423782], vᵀu = 0.211891,
    # m_F = ½·0.01·0.0448978 = 2.24489e-4
    state = state_with([0, 1], [[0.1], [-0.1]], [[0.01], [0.01]], steps=1)
    ids, probs, onehot, h, _ = one_token([0.75, 0.25], 0, 2.0, 0.0)
    m_H, m_F = capo_terms(h, ids, probs, onehot, t([0.0]), 0.1, state, CapoOptions())
    assert m_H.tolist() == [0.0]
    close(m_F, [2.24489e-4], atol=0.0, rtol=1e-5)


def test_a_sampled_token_outside_the_top_k_has_v_equal_to_minus_pi_and_is_counted():
    logits = t([[3.0, 2.0, 1.0, 0.0], [3.0, 2.0, 1.0, 0.0]])
    ids, probs, onehot = topk_policy(logits, torch.tensor([1, 3]), 2)
    assert ids.tolist() == [[0, 1], [0, 1]]
    close(probs, [[1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1))]] * 2)
    assert onehot.tolist() == [[0.0, 1.0], [0.0, 0.0]]
    result = capo_mask(
        t([[1.0], [1.0]]), logits, torch.tensor([1, 3]), t([1.0, 1.0]), 1e-3, None,
        CapoOptions(top_k=2, optimizer_model="sgd"),
    )  # fmt: skip
    assert result.metrics["capo/action_outside_topk_frac"] == 0.5


def test_no_tokens_gives_an_empty_mask_and_zero_metrics():
    result = capo_mask(
        torch.zeros(0, 3), torch.zeros(0, 7), torch.zeros(0, dtype=torch.long), torch.zeros(0),
        1e-3, CurvatureState(), CapoOptions(),
    )  # fmt: skip
    assert result.accepted.shape == (0,)
    assert all(v == 0.0 for k, v in result.metrics.items() if k != "perf/capo_s")


# ------------------------------------------------------------------------- metrics, flow
def test_metrics_and_the_state_update_of_one_micro_batch():
    # three tokens with π=[0.75,0.25], a=0, h=2, η=0.1, empty store (G = g):
    # A=+1 → case 1: m_H=0.0475, m_F=0.00125 (rejected); A=−1 → m_H = 0.05 + 0.0025 = 0.0525,
    # m_F = 0.00125 (rejected); A=0 → 0, 0 (accepted). Only the A=0 token feeds the model:
    # rows {0,1} with ḡ = 0 → M = S = 0, stored; t = 1.
    state = CurvatureState()
    result = capo_mask(
        t([[2.0]] * 3), t([[LOG3, 0.0]] * 3), torch.tensor([0, 0, 0]), t([1.0, -1.0, 0.0]), 0.1,
        state, CapoOptions(),
    )  # fmt: skip
    assert result.accepted.tolist() == [F, F, T]
    metrics = dict(result.metrics)
    assert metrics.pop("perf/capo_s") >= 0.0
    expected = {
        "capo/reject_frac": 2 / 3,
        "capo/reject_frac_fisher": 2 / 3,
        "capo/reject_frac_hessian": 2 / 3,
        "capo/mH_mean": (0.0475 + 0.0525) / 3,
        "capo/mH_min": 0.0,
        "capo/mH_max": 0.0525,
        "capo/mF_mean": 0.0025 / 3,
        "capo/mF_max": 0.00125,
        "capo/accepted_tokens": 1.0,
        "capo/active_vocab_rows": 2.0,
        "capo/action_outside_topk_frac": 0.0,
    }
    assert metrics.keys() == expected.keys()
    for name, value in expected.items():
        close(metrics[name], value, atol=1e-7)
    assert state.t == 1 and state.ids.tolist() == [0, 1]
    assert state.M.tolist() == [[0.0], [0.0]] and state.S.tolist() == [[0.0], [0.0]]


def test_case_2_accepted_updates_the_empty_store():
    # g = [[−0.5],[0.5]] on rows 0, 1 → M = 0.1·g = [[−0.05],[0.05]],
    # S = 0.001·g² = [[2.5e-4],[2.5e-4]]
    state = CurvatureState()
    result = capo_mask(
        t([[2.0]]), t([[LOG3, 0.0]]), torch.tensor([0]), t([-1.0]), 0.01, state, CapoOptions()
    )
    assert result.accepted.tolist() == [T]
    assert state.t == 1 and state.ids.tolist() == [0, 1]
    close(state.M, [[-0.05], [0.05]], atol=0.0, rtol=1e-6)
    close(state.S, [[2.5e-4], [2.5e-4]], atol=0.0, rtol=1e-6)
    # the same token again, now through the warm model (t=1): row 0 m' = 0.9·(−0.05) + 0.1·(−0.5)
    # = −0.095, s' = 0.999·2.5e-4 + 0.001·0.25 = 4.9975e-4 → m̂ = −0.5, ŝ = 0.25 → G0 = −1;
    # G = [[−1],[1]] (Adam's unit-size step, twice g). ⟨g,G⟩ = 1, u = [−2,2], vᵀu = −1,
    # uᵀFu = 4 − (−1)² = 3
    # → m_H = 0.01·1 + ½·1e-4·(−1)·(1 − 3) = 0.0101 (rejected by τ_H only), m_F = ½·1e-4·1 = 5e-5
    rerun = capo_mask(
        t([[2.0]]), t([[LOG3, 0.0]]), torch.tensor([0]), t([-1.0]), 0.01, state, CapoOptions(),
        update_state=False,
    )  # fmt: skip
    close(rerun.m_H, [0.0101], atol=0.0, rtol=1e-5)
    close(rerun.m_F, [5e-5], atol=0.0, rtol=1e-5)
    assert rerun.accepted.tolist() == [F]
    assert rerun.metrics["capo/reject_frac_hessian"] == 1.0
    assert rerun.metrics["capo/reject_frac_fisher"] == 0.0
    assert state.t == 1 and rerun.metrics["capo/active_vocab_rows"] == 0.0


def test_the_sgd_model_needs_no_state_and_adam_does():
    args = (t([[2.0]]), t([[LOG3, 0.0]]), torch.tensor([0]), t([-1.0]), 0.01)
    assert capo_mask(*args, None, CapoOptions(optimizer_model="sgd")).accepted.tolist() == [T]
    with pytest.raises(ValueError, match="'adam' needs a CurvatureState"):
        capo_mask(*args, None, CapoOptions())


# --------------------------------------------------------------------------- Adam model
def test_update_averages_each_row_over_the_accepted_tokens_only():
    # tokens (d=1): ids [0,1] g [1,2]; ids [1,2] g [4,6]; ids [2,3] g [100,100] (rejected).
    # ḡ: row 0 → 1; row 1 → (2+4)/2 = 3; row 2 → 6; row 3 untouched. Stored before: row 1
    # M=10, S=100, row 7 M=1, S=1; t=3.
    # row 0: M = 0.1·1 = 0.1, S = 0.001·1 = 0.001;
    # row 1: M = 9 + 0.3 = 9.3, S = 99.9 + 0.009 = 99.909;
    # row 2: M = 0.6, S = 0.001·36 = 0.036; row 7 unchanged; t = 4
    state = state_with([1, 7], [[10.0], [1.0]], [[100.0], [1.0]], steps=3)
    ids = torch.tensor([[0, 1], [1, 2], [2, 3]])
    g = t([[[1.0], [2.0]], [[4.0], [6.0]], [[100.0], [100.0]]])
    state.update(ids, g, torch.tensor([T, T, F]))
    assert state.t == 4 and state.ids.tolist() == [0, 1, 2, 7]
    close(state.M, [[0.1], [9.3], [0.6], [1.0]], atol=1e-5)
    close(state.S, [[0.001], [99.909], [0.036], [1.0]], atol=1e-5)


def test_an_update_with_nothing_accepted_changes_nothing():
    state = state_with([1], [[10.0]], [[100.0]], steps=3)
    state.update(torch.tensor([[0, 1]]), t([[[1.0], [2.0]]]), torch.tensor([F]))
    assert state.t == 3 and state.ids.tolist() == [1] and state.M.tolist() == [[10.0]]


def test_a_row_missing_from_a_non_empty_store_reads_zero_moments():
    # t=1, only row 5 stored; rows 0, 1 read M=S=0: m' = 0.1g, s' = 0.001g²
    # → G = (0.1g/0.19) / √(0.001g²/0.001999) = sign(g)·0.744137
    state = state_with([5], [[3.0]], [[9.0]], steps=1)
    G = state.effective(torch.tensor([[0, 1]]), t([[[1.0], [-2.0]]]))
    close(G, [[[0.744137], [-0.744137]]], atol=1e-6)
    assert torch.equal(CurvatureState().effective(torch.tensor([[0, 1]]), t([[[1.0], [-2.0]]])),
                       t([[[1.0], [-2.0]]]))  # fmt: skip


def test_the_state_round_trips_through_a_checkpoint(tmp_path):
    gen = torch.Generator().manual_seed(1)
    state = CurvatureState()
    for _ in range(3):
        ids = torch.randint(0, 20, (5, 4), generator=gen)
        state.update(ids, torch.randn(5, 4, 3, generator=gen), torch.rand(5, generator=gen) > 0.3)
    torch.save(state.state_dict(), tmp_path / "capo.pt")
    restored = CurvatureState()
    restored.load_state_dict(torch.load(tmp_path / "capo.pt"))
    assert restored.t == state.t == 3
    ids, g = torch.randint(0, 25, (6, 4), generator=gen), torch.randn(6, 4, 3, generator=gen)
    assert torch.equal(restored.effective(ids, g), state.effective(ids, g))
    with pytest.raises(ValueError, match="inconsistent checkpoint shapes"):
        restored.load_state_dict({**state.state_dict(), "S": torch.zeros(1, 3)})
    with pytest.raises(ValueError, match="width d = 3, got gradients of width 2"):
        restored.effective(ids, torch.randn(6, 4, 2))


# --------------------------------------------------------------- brute force, properties
def softmax64(z):
    return torch.softmax(z.double(), -1)


@st.composite
def steps(draw):
    """Logits z [K], hidden h [d], a step direction G [K, d] (any), the sampled index a, A."""
    k, d = draw(st.integers(2, 6)), draw(st.integers(1, 4))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    z = torch.randn(k, generator=gen, dtype=torch.float64) * 2
    h = torch.randn(d, generator=gen, dtype=torch.float64)
    G = torch.randn(k, d, generator=gen, dtype=torch.float64)
    return z, h, G, draw(st.integers(0, k - 1)), draw(st.sampled_from([-1.5, -0.3, 0.7, 2.0]))


def changes(z, h, G, a, A, lr):
    probs = softmax64(z)[None]
    onehot = torch.nn.functional.one_hot(torch.tensor([a]), len(z)).double()
    g = token_gradients(h[None], probs, onehot, torch.tensor([A], dtype=torch.float64))
    return predicted_changes(g, G[None], h[None], probs, onehot, torch.tensor([A]).double(), lr)


@PROPERTY
@given(steps())
def test_m_H_is_the_second_order_change_of_the_ratio_surrogate(step):
    # the logits after the head step W_j += η·G_j are z + η·u with u = G h
    z, h, G, a, A = step
    u, pi = G @ h, softmax64(z)
    lr = 1e-4 / (1 + u.abs().max().item())  # η·|u| ≤ 1e-4: the O(η³) rest stays small
    new = softmax64(z + lr * u)
    m_H, _ = changes(z, h, G, a, A, lr)
    v = torch.nn.functional.one_hot(torch.tensor(a), len(z)) - pi
    first = A * v @ u
    # first order: the change of A·log π_a (and of A·ratio) is η·A·vᵀu = η⟨g, G⟩
    close(A * (new[a].log() - pi[a].log()) / lr, first, atol=1e-3 * (1 + abs(first)))
    # second order: A·(π_a'/π_a − 1) = η·A·vᵀu + ½η²·A[(vᵀu)² − uᵀFu] + O(η³)
    exact = A * (new[a] / pi[a] - 1)
    second = (exact - lr * first) / (0.5 * lr**2)
    predicted = (m_H[0] - lr * first) / (0.5 * lr**2)
    close(predicted, second, atol=1e-2 * (1 + abs(second)))


@PROPERTY
@given(steps())
def test_m_F_averaged_over_the_sampled_token_is_the_kl_of_the_step(step):
    # m_F uses the sampled action's v: for a fixed step u, E_{a~π}[(vᵀu)²] = uᵀFu, and
    # KL(π ‖ softmax(z+ηu)) = ½η²·uᵀFu + O(η³)
    z, h, G, _, A = step
    u, pi = G @ h, softmax64(z)
    lr = 1e-3 / (1 + u.abs().max().item())
    m_F = torch.stack([changes(z, h, G, a, A, lr)[1][0] for a in range(len(z))])
    assert (m_F >= 0).all()
    # KL = Σπ_j[log Σ_i π_i e^{ηu_i} − ηu_j], written with log1p/expm1 so that float64 keeps
    # the O(η²) difference of two O(η) terms
    kl = torch.log1p((pi * torch.expm1(lr * u)).sum()) - lr * (pi * u).sum()
    uFu = (pi * u * u).sum() - (pi * u).sum() ** 2
    close((pi * m_F).sum(), 0.5 * lr**2 * uFu, atol=0.0, rtol=1e-9)
    if uFu > 1e-8 * (u * u).max():  # a step that barely moves the policy has no ratio to test
        close((pi * m_F).sum() / kl, 1.0, atol=3e-3)


@st.composite
def batches(draw):
    n, k, d, v = (draw(st.integers(lo, hi)) for lo, hi in ((0, 12), (1, 4), (1, 4), (4, 9)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    hidden = torch.randn(n, d, generator=gen)
    logits = torch.randn(n, v, generator=gen) * 2
    actions = torch.randint(0, v, (n,), generator=gen)
    advantages = torch.randn(n, generator=gen) * (torch.rand(n, generator=gen) > 0.2)
    lr = draw(st.sampled_from([0.0, 1e-3, 0.05, 0.3]))
    chunk = draw(st.integers(1, 5))
    options = {"top_k": k, "optimizer_model": draw(st.sampled_from(["adam", "sgd"]))}
    return hidden, logits, actions, advantages, lr, chunk, options, draw(st.booleans())


def warm_state(width: int, with_rows: bool) -> CurvatureState:
    state = CurvatureState()
    if with_rows:
        gen = torch.Generator().manual_seed(7)
        ids = torch.randint(0, 9, (6, 3), generator=gen)
        state.update(ids, torch.randn(6, 3, width, generator=gen), torch.ones(6, dtype=torch.bool))
    return state


@PROPERTY
@given(batches())
def test_chunking_changes_nothing_and_m_F_is_never_negative(batch):
    hidden, logits, actions, advantages, lr, chunk, options, with_rows = batch
    width = hidden.shape[1]
    small, whole = warm_state(width, with_rows), warm_state(width, with_rows)
    by_chunk = capo_mask(
        hidden, logits, actions, advantages, lr, small, CapoOptions(chunk_tokens=chunk, **options)
    )
    at_once = capo_mask(hidden, logits, actions, advantages, lr, whole, CapoOptions(**options))
    assert (by_chunk.m_F >= 0).all()
    close(by_chunk.m_H, at_once.m_H, atol=1e-7, rtol=1e-5)
    close(by_chunk.m_F, at_once.m_F, atol=1e-9, rtol=1e-5)
    assert torch.equal(by_chunk.accepted, at_once.accepted)
    assert small.t == whole.t and torch.equal(small.ids, whole.ids)
    close(small.M, whole.M, atol=1e-6, rtol=1e-5)
    close(small.S, whole.S, atol=1e-6, rtol=1e-5)


@PROPERTY
@given(batches())
def test_capo_mask_updates_the_state_as_update_does_on_the_accepted_tokens(batch):
    hidden, logits, actions, advantages, lr, chunk, options, with_rows = batch
    options = CapoOptions(chunk_tokens=chunk, top_k=options["top_k"])
    width = hidden.shape[1]
    through_mask, by_hand = warm_state(width, with_rows), warm_state(width, with_rows)
    result = capo_mask(hidden, logits, actions, advantages, lr, through_mask, options)
    ids, probs, onehot = topk_policy(logits, actions, options.top_k)
    by_hand.update(ids, token_gradients(hidden, probs, onehot, advantages), result.accepted)
    assert through_mask.t == by_hand.t and torch.equal(through_mask.ids, by_hand.ids)
    close(through_mask.M, by_hand.M, atol=1e-6, rtol=1e-5)
    close(through_mask.S, by_hand.S, atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------------------------ options
@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"tau_fisher": -1e-4}, r"capo.tau_fisher = -0.0001 is out of range; it must be >= 0"),
        ({"tau_hessian": "0.01"}, r"capo.tau_hessian must be a number"),
        ({"symmetric": 1}, r"capo.symmetric must be True or False, got 1"),
        ({"optimizer_model": "adamw"}, r"capo.optimizer_model = 'adamw' is not valid; .*'sgd'"),
        ({"adam_beta1": 1.0}, r"capo.adam_beta1 = 1.0 is out of range; it must be < 1"),
        ({"adam_beta2": -0.1}, r"capo.adam_beta2 = -0.1 is out of range"),
        ({"adam_eps": 0.0}, r"capo.adam_eps = 0.0 is out of range; it must be > 0"),
        ({"top_k": 0}, r"capo.top_k must be an integer >= 1, got 0"),
        ({"chunk_tokens": 2.5}, r"capo.chunk_tokens must be an integer >= 1, got 2.5"),
    ],
)
def test_options_name_the_field_and_the_value(overrides, message):
    with pytest.raises(ValueError, match=message):
        CapoOptions(**overrides)
