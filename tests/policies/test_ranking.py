"""Ranking policies: Plackett–Luce (papers/seed_control_theory.md T14.1, T14.2) and TPGR's
tree (seed_llm_algorithms.md T20.1, T20.2, T20.4), with the balanced PCA clustering."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.policies.ranking import (
    FlatSoftmax,
    TreePolicy,
    balanced_tree,
    expected_dcg,
    internal_nodes,
    plackett_luce_logp,
    plackett_luce_sample,
    tree_depth,
    tree_item_probs,
)

# c = 2, d = 2: root, left node, right node; leaves 0..3 = LL, LR, RL, RR
NODE_PROBS = torch.tensor([[0.6, 0.4], [0.7, 0.3], [0.5, 0.5]], dtype=torch.float64)


def test_t14_1_plackett_luce():
    # P([2, 0]) = e²/(1+1+e²) · e¹/(e¹+e⁰) = 0.486330
    logp = plackett_luce_logp(
        torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64), torch.tensor([[2, 0]])
    )
    assert float(logp.sum()) == pytest.approx(-0.720868, abs=1e-6)
    assert math.exp(float(logp.sum())) == pytest.approx(0.486330, abs=1e-6)


def test_t14_2_expected_dcg_and_its_gradient():
    s = torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    rel = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)
    e = expected_dcg(s, rel, 2)
    assert float(e.detach()) == pytest.approx(1.064084, abs=1e-6)
    e.backward()
    assert s.grad.tolist() == pytest.approx([-0.199695, 0.118279, 0.081417], abs=1e-6)


def test_plackett_luce_sample_frequencies_match_the_formula():
    scores = torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64).expand(20000, 3)
    order = plackett_luce_sample(scores, 2, torch.Generator().manual_seed(0))
    freq = ((order[:, 0] == 2) & (order[:, 1] == 0)).double().mean()
    assert float(freq) == pytest.approx(0.486330, abs=0.01)
    assert (order[:, 0] != order[:, 1]).all()


def test_t20_1_path_probability():
    P = tree_item_probs(NODE_PROBS, c=2, d=2)
    assert P.tolist() == pytest.approx([0.42, 0.18, 0.20, 0.20], abs=1e-12)
    assert math.log(float(P[1])) == pytest.approx(-1.714798, abs=1e-6)


def test_t20_2_no_repeat_masking():
    available = torch.tensor([False, True, True, True])  # item 0 already shown
    P = tree_item_probs(NODE_PROBS, c=2, d=2, available=available)
    # masked root ∝ [0.6·1/3, 0.4·2/3] = [0.428571, 0.571429]; left node → [0, 1]
    assert float(P[0]) == 0.0
    assert float(P[1]) == pytest.approx(0.428571, abs=1e-6)
    assert float(P.sum()) == pytest.approx(1.0)


def test_t20_4_sizes():
    assert tree_depth(10**4, 10) == 4 and internal_nodes(10, 4) == 1111
    assert tree_depth(10**6, 100) == 3 and internal_nodes(100, 3) == 10101
    assert tree_depth(1000, 10) == 3 and tree_depth(1, 10) == 1


def test_balanced_tree_is_balanced_and_covers_every_item():
    vectors = torch.randn(23, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    leaves = balanced_tree(vectors, c=3)  # d = 3, 27 leaves, 4 empty
    assert len(leaves) == 27
    assert sorted(leaves[leaves >= 0].tolist()) == list(range(23))
    # each root child holds 8 or 7 items (sizes differ by at most one)
    per_child = (leaves.view(3, 9) >= 0).sum(1).tolist()
    assert sorted(per_child) == [7, 8, 8]
    # PCA: the root split separates the items along the first principal component
    x = vectors - vectors.mean(0)
    pc = torch.linalg.svd(x, full_matrices=False).Vh[0]
    proj = x @ pc
    first = leaves[:9][leaves[:9] >= 0]
    last = leaves[18:][leaves[18:] >= 0]
    assert float(proj[first].max()) <= float(proj[last].min())


def test_tree_policy_decisions_match_the_exact_item_distribution():
    leaves = torch.arange(4)
    tree = TreePolicy(leaves, c=2, features=1)
    with torch.no_grad():  # node logits from NODE_PROBS, h = 1
        tree.b.copy_(NODE_PROBS.log())
    h = torch.ones(40000, 1, dtype=torch.float64)
    available = tree.leaf_available(40000)
    available[:, 0] = False
    leaf, logp, probs = tree.decide(h, available, torch.Generator().manual_seed(1))
    freq = torch.bincount(leaf, minlength=4).double() / len(leaf)
    assert freq.tolist() == pytest.approx([0, 0.428571, 0.285714, 0.285714], abs=0.01)
    # the REINFORCE log-prob uses the raw node softmax [code log_pi]: item 1 → ln .6 + ln .3
    row = int((leaf == 1).nonzero()[0])
    assert float(logp[row].sum().detach()) == pytest.approx(-1.714798, abs=1e-6)
    assert probs.shape == (40000, 2, 2)


def test_tree_and_flat_never_repeat_an_item():
    g = torch.Generator().manual_seed(0)
    tree, flat = TreePolicy(torch.tensor([0, 1, 2, -1]), c=2, features=1), FlatSoftmax(3, 1)
    h = torch.ones(5, 1, dtype=torch.float64)
    avail_t, avail_f = tree.leaf_available(5), torch.ones(5, 3, dtype=torch.bool)
    seen_t, seen_f = [], []
    for _ in range(3):
        leaf, _, _ = tree.decide(h, avail_t, g)
        avail_t[torch.arange(5), leaf] = False
        seen_t.append(tree.leaf_items[leaf])
        item, _ = flat.decide(h, avail_f, g)
        avail_f[torch.arange(5), item] = False
        seen_f.append(item)
    for seen in (seen_t, seen_f):
        assert (torch.stack(seen, 1).sort(1).values == torch.arange(3)).all()
