"""Ranking policies (papers/seed_control_theory.md §0.6, §14; seed_llm_algorithms.md §20).

- `PlackettLuce`: a list of K items drawn without replacement from M candidates, rank by
  rank; a row is one list and the "tokens" are its ranks:
  logp[i,k] = s_{o_k} − log Σ_{j ∉ o_<k} e^{s_j}, with scores s = MLP(context, item).
- `TreePolicy` (TPGR, Chen et al. AAAI 2019, arXiv 1811.05869; code chenhaokun/TPGR
  src/tpgr.py): a walk down a balanced c-ary tree of the items; each internal node has its
  own softmax over its c children, π(a|s) = Π_l π_{n_l}(c_l|s). `balanced_tree` builds the
  tree by recursive balanced PCA clustering.
- `FlatSoftmax`: the baseline, one softmax over all items from the same features.

Both item policies sample without repeats through an availability mask [E, n_leaves]."""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn


# ---- Plackett–Luce ------------------------------------------------------------------------
def plackett_luce_logp(scores: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """logp[i,k] = s[i, o_k] − logsumexp_{j ∉ o_<k} s[i, j]. scores [B, M], order [B, K]
    (distinct candidate indices) → [B, K]."""
    out = []
    removed = torch.zeros_like(scores, dtype=torch.bool)
    for k in range(order.shape[1]):
        pick = order[:, k : k + 1]
        masked = scores.masked_fill(removed, float("-inf"))
        out.append(scores.gather(1, pick)[:, 0] - torch.logsumexp(masked, dim=1))
        removed = removed.scatter(1, pick, True)
    return torch.stack(out, dim=1)


def plackett_luce_sample(
    scores: torch.Tensor, k: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A list of k candidates per row drawn from PL(scores) by the Gumbel-top-k trick
    (top-k of s + Gumbel noise is an exact PL sample). scores [B, M] → order [B, k]."""
    u = torch.rand(scores.shape, generator=generator, dtype=scores.dtype).clamp(1e-20, 1.0)
    return (scores.detach() - torch.log(-torch.log(u))).topk(k, dim=1).indices


def expected_dcg(scores: torch.Tensor, relevance: torch.Tensor, k: int) -> torch.Tensor:
    """Exact E_PL[DCG@k] = Σ_{ordered k-tuples o} P(o)·Σ_r rel[o_r]·d_r, d_r = 1/log2(r+1), by
    enumeration (differentiable; for small M only). scores, relevance [M] → scalar."""
    m = scores.shape[0]
    d = 1.0 / torch.log2(torch.arange(2, k + 2, dtype=scores.dtype))
    tuples = torch.tensor(list(itertools.permutations(range(m), k)), dtype=torch.long)
    logp = plackett_luce_logp(scores.expand(len(tuples), m), tuples).sum(1)
    return (logp.exp() * (relevance[tuples] * d).sum(1)).sum()


class PlackettLuce(nn.Module):
    """Scores s = MLP([context, item]) for each candidate; lists from PL(s)."""

    def __init__(self, context_dim: int, item_dim: int, hidden: int = 32) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(context_dim + item_dim, hidden, dtype=torch.float64),
            nn.Tanh(),
            nn.Linear(hidden, 1, dtype=torch.float64),
        )

    def scores(self, context: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """context [B, dc], candidates [B, M, di] → scores [B, M]."""
        ctx = context[:, None, :].expand(-1, candidates.shape[1], -1)
        return self.mlp(torch.cat([ctx, candidates], dim=-1))[..., 0]


# ---- the tree ------------------------------------------------------------------------------
def tree_depth(n_items: int, c: int) -> int:
    """d = ⌈log_c |I|⌉ (at least 1), by integer arithmetic [code Tree]."""
    if c < 2 or n_items < 1:
        raise ValueError(f"tree needs c ≥ 2 and at least one item (got c={c}, items={n_items})")
    d, leaves = 1, c
    while leaves < n_items:
        d, leaves = d + 1, leaves * c
    return d


def internal_nodes(c: int, d: int) -> int:
    """(c^d − 1)/(c − 1) internal nodes [code node_num_before_depth_i]."""
    return (c**d - 1) // (c - 1)


def _balanced_chunks(order: list[int], c: int) -> list[list[int]]:
    """Cut into c consecutive chunks whose sizes differ by at most one (larger first)."""
    base, extra = divmod(len(order), c)
    out, start = [], 0
    for j in range(c):
        size = base + (1 if j < extra else 0)
        out.append(order[start : start + size])
        start += size
    return out


def balanced_tree(
    vectors: torch.Tensor, c: int, method: str = "pca", *, seed: int = 0
) -> torch.Tensor:
    """Leaf → item map [c^d] (−1 = empty leaf) of a balanced c-ary clustering tree
    [code pca_clustering / random_clustering]: at a node holding items S, project S on its
    first principal component (or shuffle, method="random"), sort, cut into c chunks of
    sizes ⌈|S|/c⌉ or one less, recurse until single items. vectors [I, k]."""
    if method not in ("pca", "random"):
        raise ValueError(
            f"balanced_tree: method = {method!r} is not valid; choices: 'pca', 'random'"
        )
    n = vectors.shape[0]
    d = tree_depth(n, c)
    leaves = torch.full((c**d,), -1, dtype=torch.long)
    g = torch.Generator().manual_seed(seed)

    def split(items: list[int], level: int, first_leaf: int) -> None:
        if level == d:
            if items:
                leaves[first_leaf] = items[0]
            return
        if len(items) > 1 and method == "pca":
            x = vectors[items] - vectors[items].mean(0)
            v = torch.linalg.svd(x, full_matrices=False).Vh[0]
            items = [items[j] for j in torch.argsort(x @ v, stable=True).tolist()]
        elif len(items) > 1:
            items = [items[j] for j in torch.randperm(len(items), generator=g).tolist()]
        width = c ** (d - level - 1)
        for j, chunk in enumerate(_balanced_chunks(items, c)):
            split(chunk, level + 1, first_leaf + j * width)

    split(list(range(n)), 0, 0)
    return leaves


def tree_item_probs(
    node_probs: torch.Tensor, c: int, d: int, available: torch.Tensor | None = None
) -> torch.Tensor:
    """π(leaf) = Π_l π̃_{n_l}(c_l) for every leaf [c^d], where π̃ weights each child by
    (available leaves under it)/(available under the node) and renormalises [code
    make_graph aval_prob/mix_prob]; `available=None` uses the raw node softmax.
    node_probs [internal_nodes(c, d), c] (level by level, left to right)."""
    avail = (
        torch.ones(c**d, dtype=node_probs.dtype)
        if available is None
        else available.to(node_probs.dtype)
    )
    probs = torch.ones(1, dtype=node_probs.dtype)
    for level in range(d):
        first = internal_nodes(c, level)
        pn = node_probs[first : first + c**level]  # [c^l, c]
        counts = avail.view(c**level, c, -1).sum(-1)
        w = pn * counts
        w = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
        probs = (probs[:, None] * w).reshape(-1)
    return probs


class TreePolicy(nn.Module):
    """Per-node softmax heads π_n(·|h) = softmax(W_n h + b_n) over c children, gathered by
    node index (no hidden layers: the released config's) [code W_list/b_list]. Zero init
    (the uniform policy) [ours]."""

    def __init__(self, leaf_items: torch.Tensor, c: int, features: int) -> None:
        super().__init__()
        self.c = c
        self.d = round(math.log(len(leaf_items), c))
        if c**self.d != len(leaf_items):
            raise ValueError(f"TreePolicy: {len(leaf_items)} leaves is not a power of c={c}")
        self.register_buffer("leaf_items", leaf_items.clone())
        n = internal_nodes(c, self.d)
        self.W = nn.Parameter(torch.zeros(n, c, features, dtype=torch.float64))
        self.b = nn.Parameter(torch.zeros(n, c, dtype=torch.float64))

    def leaf_available(self, n_rows: int) -> torch.Tensor:
        """The starting availability [E, c^d]: every leaf that holds an item."""
        return (self.leaf_items >= 0).expand(n_rows, -1).clone()

    def decide(
        self,
        h: torch.Tensor,
        available: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        greedy: bool = False,
        logp_uses_mask: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One decision per row: descend the tree with availability-weighted node policies
        [code make_graph]. h [E, features], available [E, c^d] bool →
        (leaf [E], logp [E, d] per level — raw node softmax unless `logp_uses_mask`
        [code log_pi], node probs [E, d, c] for the uniformity regulariser)."""
        c, d, rows = self.c, self.d, torch.arange(h.shape[0])
        pos = torch.zeros(h.shape[0], dtype=torch.long)
        logps, all_probs = [], []
        for level in range(d):
            node = internal_nodes(c, level) + pos
            logits = torch.einsum("ecf,ef->ec", self.W[node], h) + self.b[node]
            probs = torch.softmax(logits, dim=-1)
            counts = available.view(h.shape[0], c**level, c, -1)[rows, pos].sum(-1)
            mixed = probs * counts
            mixed = mixed / mixed.sum(-1, keepdim=True)
            with torch.no_grad():
                choice = (
                    mixed.argmax(-1)
                    if greedy
                    else torch.multinomial(mixed, 1, generator=generator)[:, 0]
                )
            chosen = (mixed if logp_uses_mask else probs).gather(1, choice[:, None])[:, 0]
            logps.append(torch.log(chosen))
            all_probs.append(probs)
            pos = pos * c + choice
        return pos, torch.stack(logps, 1), torch.stack(all_probs, 1)


class FlatSoftmax(nn.Module):
    """The flat baseline: π(·|h) = softmax(W h + b) over all items, unavailable items
    masked out. Zero init [ours]."""

    def __init__(self, n_items: int, features: int) -> None:
        super().__init__()
        self.head = nn.Linear(features, n_items, dtype=torch.float64)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def decide(
        self,
        h: torch.Tensor,
        available: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        greedy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(item [E], logp [E, 1]) over the available items [E, I]."""
        logits = self.head(h).masked_fill(~available, float("-inf"))
        logp_all = torch.log_softmax(logits, dim=-1)
        with torch.no_grad():
            choice = (
                logits.argmax(-1)
                if greedy
                else torch.multinomial(logp_all.exp(), 1, generator=generator)[:, 0]
            )
        return choice, logp_all.gather(1, choice[:, None])
