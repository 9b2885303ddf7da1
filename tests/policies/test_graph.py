"""Heterogeneous graph attention (policies/graph.py; papers/seed_control_theory.md §12.1)."""

from __future__ import annotations

import functools

import pytest
import torch

from policylab.envs.uav_coverage import AGENT, POI, SELF, UAVConfig, split_obs
from policylab.policies.graph import HeteroGraphActor, gat_attention

EYE = torch.eye(2, dtype=torch.float64)
A = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=torch.float64)
H_I = torch.tensor([[1.0, 0.0]], dtype=torch.float64)


def test_t12_1_attention_weights_and_output():
    # W = I, a = [1,0,0,1]: e_ij = h_i[0] + h_j[1] → neighbours [0,1], [2,−1]: e = [2, 0]
    # α = softmax([2, 0]) = [e²/(e²+1), 1/(e²+1)] = [0.880797, 0.119203]
    # out = 0.880797·[0,1] + 0.119203·[2,−1] = [0.238406, 0.761594]
    neigh = torch.tensor([[[0.0, 1.0], [2.0, -1.0]]], dtype=torch.float64)
    out, alpha = gat_attention(H_I, neigh, torch.ones(1, 2, dtype=torch.bool), EYE, EYE, A)
    assert alpha[0].tolist() == pytest.approx([0.880797, 0.119203], abs=1e-6)
    assert out[0].tolist() == pytest.approx([0.238406, 0.761594], abs=1e-6)


def test_leaky_slope_on_a_negative_score():
    # neighbours [0,1] and [0,−3]: e = [2, LeakyReLU(1 − 3) = 0.2·(−2) = −0.4]
    # α_1 = e²/(e² + e^−0.4) = 7.389056/(7.389056 + 0.670320) = 0.916827
    neigh = torch.tensor([[[0.0, 1.0], [0.0, -3.0]]], dtype=torch.float64)
    _, alpha = gat_attention(H_I, neigh, torch.ones(1, 2, dtype=torch.bool), EYE, EYE, A)
    assert alpha[0, 0].item() == pytest.approx(0.916827, abs=1e-6)


def test_padding_is_ignored_and_an_empty_neighbourhood_gives_zero():
    neigh = torch.tensor([[[0.0, 1.0], [2.0, -1.0], [50.0, 50.0]]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False]])
    out, alpha = gat_attention(H_I, neigh, mask, EYE, EYE, A)
    assert out[0].tolist() == pytest.approx([0.238406, 0.761594], abs=1e-6)
    assert alpha[0, 2].item() == 0.0
    out, alpha = gat_attention(H_I, neigh, torch.zeros(1, 3, dtype=torch.bool), EYE, EYE, A)
    assert out.abs().sum().item() == 0.0 and not torch.isnan(alpha).any()


def _actor(cfg: UAVConfig) -> HeteroGraphActor:
    torch.manual_seed(0)
    split = functools.partial(lambda c, o: split_obs(o, c.max_agents, c.max_pois), cfg)
    return HeteroGraphActor(split, SELF, AGENT, POI, width=8, hidden=16)


def test_actor_is_invariant_to_the_order_of_pois_and_reads_no_padding():
    cfg = UAVConfig()
    actor = _actor(cfg)
    obs = torch.zeros(1, cfg.obs_dim)
    obs[0, :SELF] = torch.tensor([0.5, 0.5, 0.8, 1.0, 0.0])
    start = SELF + (cfg.max_agents - 1) * AGENT
    obs[0, start : start + 8] = torch.tensor([0.1, 0.2, 1.0, 1.0, -0.3, 0.1, 0.5, 1.0])
    swapped = obs.clone()
    swapped[0, start : start + 4], swapped[0, start + 4 : start + 8] = (
        obs[0, start + 4 : start + 8],
        obs[0, start : start + 4],
    )
    padded_junk = obs.clone()
    padded_junk[0, start + 8 : start + 11] = 7.0  # a slot whose `present` flag is 0
    a = actor(obs)
    assert torch.allclose(a, actor(swapped), atol=1e-6)
    assert torch.allclose(a, actor(padded_junk), atol=1e-6)
    assert a.abs().max() <= 1.0
    moved = obs.clone()
    moved[0, start] = 0.4  # the actor does read PoIs
    assert not torch.allclose(a, actor(moved))


def test_the_target_term_shifts_every_score_alike_so_only_the_leaky_kink_gives_it_a_gradient():
    # aᵀ[W_t h_i ‖ W_s h_j] = a_tᵀW_t h_i + a_sᵀW_s h_j: the first term is the same for every
    # neighbour j, and softmax ignores a shared shift, unless LeakyReLU bends some scores
    # (GAT's "static attention", Brody et al. 2021, arXiv:2105.14491)
    def grad_of_w_target(neigh):
        w_t = EYE.clone().requires_grad_(True)
        out, _ = gat_attention(H_I, neigh, torch.ones(1, 2, dtype=torch.bool), w_t, EYE, A)
        out.sum().backward()
        return w_t.grad

    same_side = torch.tensor([[[0.0, 1.0], [2.0, 0.5]]], dtype=torch.float64)  # e = [2, 1.5]
    straddle = torch.tensor([[[0.0, 1.0], [0.0, -3.0]]], dtype=torch.float64)  # e = [2, −0.4]
    assert grad_of_w_target(same_side).abs().max().item() < 1e-12
    assert grad_of_w_target(straddle).abs().max().item() > 1e-3
