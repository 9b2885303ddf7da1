"""Heterogeneous graph attention (papers/seed_control_theory.md §12.1): one GAT layer per
edge type (target type τ_t ← source type τ_s), outputs of the types concatenated, and the
deterministic actor HGAM builds from it over an agent's local graph.

GAT: Veličković et al. 2018, arXiv:1710.10903, eq. 1–4 (one head). The type split and the
ego-centred graph (the acting agent is the one target node) are ours: the HGAM paper
(arXiv 2501.14488) gives its architecture only in words."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def gat_attention(
    h_target: torch.Tensor,
    h_neigh: torch.Tensor,
    mask: torch.Tensor,
    w_target: torch.Tensor,
    w_source: torch.Tensor,
    a: torch.Tensor,
    slope: float = 0.2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One edge type's attention, before the nonlinearity:
      e_ij = LeakyReLU_slope(aᵀ[W_t h_i ‖ W_s h_j]),  α_ij = softmax_j e_ij over the
      neighbours present (mask), out_i = Σ_j α_ij W_s h_j.
    h_target: [B, d_t]; h_neigh: [B, K, d_s]; mask: [B, K] (bool); w_target: [d, d_t];
    w_source: [d, d_s]; a: [2d]. Returns (out [B, d], α [B, K]); a row with no neighbour
    gets out = 0 and α = 0. With W_t = W_s the layer is GAT's (arXiv:1710.10903 eq. 3)."""
    wh_i = h_target @ w_target.T  # [B, d]
    wh_j = h_neigh @ w_source.T  # [B, K, d]
    d = wh_i.shape[-1]
    e = F.leaky_relu((wh_i @ a[:d]).unsqueeze(-1) + wh_j @ a[d:], slope)  # [B, K]
    e = e.masked_fill(~mask, float("-inf"))
    any_ = mask.any(-1, keepdim=True)
    alpha = torch.softmax(e.masked_fill(~any_, 0.0), -1) * any_ * mask
    return (alpha.unsqueeze(-1) * wh_j).sum(-2), alpha


class TypedAttention(nn.Module):
    """One edge type's parameters (W_t, W_s, a) and σ = ELU on its output (GAT eq. 4)."""

    def __init__(self, d_target: int, d_source: int, width: int) -> None:
        super().__init__()
        self.w_target = nn.Parameter(nn.init.xavier_uniform_(torch.empty(width, d_target)))
        self.w_source = nn.Parameter(nn.init.xavier_uniform_(torch.empty(width, d_source)))
        self.a = nn.Parameter(nn.init.normal_(torch.empty(2 * width), std=0.1))

    def forward(self, h_target, h_neigh, mask):
        out, _ = gat_attention(h_target, h_neigh, mask, self.w_target, self.w_source, self.a)
        return F.elu(out)


class HeteroGraphActor(nn.Module):
    """μ(o) for an agent whose observation is its local heterogeneous graph: the ego node,
    the other agents (mission or charger) and the PoIs, each present or padding
    (`split` maps a flat observation to (ego [B, d_e], agents [B, K_a, d_a], PoIs
    [B, K_p, d_p]); the last agent feature columns are (is_mission, is_charger, present),
    the last PoI column is present). Three edge types into the ego node — mission →
    ego, charger → ego, PoI → ego — each a TypedAttention over its neighbours, then
    [embed(ego) ‖ out_mission ‖ out_charger ‖ out_poi] → MLP → tanh·scale. The weights do
    not depend on how many neighbours there are, so the actor runs unchanged on other
    counts."""

    def __init__(self, split, d_ego: int, d_agent: int, d_poi: int, width: int, hidden: int):
        super().__init__()
        self.split = split
        self.ego = nn.Linear(d_ego, width)
        self.mission = TypedAttention(width, d_agent, width)
        self.charger = TypedAttention(width, d_agent, width)
        self.poi = TypedAttention(width, d_poi, width)
        self.head = nn.Sequential(nn.Linear(4 * width, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        ego, agents, pois = self.split(obs)
        h = F.relu(self.ego(ego))
        present = agents[..., -1] > 0
        parts = [
            h,
            self.mission(h, agents, present & (agents[..., -3] > 0)),
            self.charger(h, agents, present & (agents[..., -2] > 0)),
            self.poi(h, pois, pois[..., -1] > 0),
        ]
        return torch.tanh(self.head(torch.cat(parts, -1)))

    @torch.no_grad()
    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        return self(obs)
