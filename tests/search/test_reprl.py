"""RepES pieces and the Prop. 3.2 counterexample (papers/seed_control_theory.md §7.4 T7.3)."""

import pytest
import torch

from policylab.search.reprl import (
    inner_trajectory_value,
    mlp_apply,
    mlp_init,
    mlp_sizes,
    policy_tables,
    r_squared,
)
from policylab.tabular import TabularMDP, mdp2, objective

D = torch.float64


def test_t7_3_prop_3_2_fails_on_mdp2():
    # π uniform: v = 7.773973, E_{d_π}V = 8.153969 (normalised d), 81.539688 (unnormalised),
    # while the paper's Prop. 3.2 says v/(1 − γ) = 77.739726.
    mdp = mdp2()
    pi = mdp.uniform_policy()
    v = float(objective(mdp, pi))
    assert v == pytest.approx(7.773973, abs=1e-6)
    assert float(inner_trajectory_value(mdp, pi)) == pytest.approx(8.153969, abs=1e-6)
    unnormalised = float(inner_trajectory_value(mdp, pi, normalised=False))
    assert unnormalised == pytest.approx(81.539688, abs=1e-6)
    assert v / (1 - mdp.gamma) == pytest.approx(77.739726, abs=1e-6)
    assert abs(unnormalised - v / (1 - mdp.gamma)) > 3.0


def test_t7_3_prop_3_2_holds_when_rho_is_stationary_under_pi():
    base = mdp2()
    pi = base.uniform_policy()
    P_pi = torch.einsum("sa,sat->st", pi, base.P)
    evals, evecs = torch.linalg.eig(P_pi.T)
    rho = evecs[:, evals.real.argmax()].real
    rho = rho / rho.sum()
    assert torch.allclose(rho @ P_pi, rho)  # ρᵀP_π = ρ
    mdp = TabularMDP(base.P, base.R, rho, base.gamma)
    v = float(objective(mdp, pi))
    assert float(inner_trajectory_value(mdp, pi)) == pytest.approx(v, abs=1e-9)
    unnormalised = float(inner_trajectory_value(mdp, pi, normalised=False))
    assert unnormalised == pytest.approx(v / (1 - mdp.gamma), abs=1e-9)


def test_mlp_apply_matches_torch_linear_layers():
    sizes = mlp_sizes(5, (4, 3), 2)
    flat = mlp_init(sizes, torch.Generator().manual_seed(0))
    net = torch.nn.Sequential(
        torch.nn.Linear(5, 4),
        torch.nn.Tanh(),
        torch.nn.Linear(4, 3),
        torch.nn.Tanh(),
        torch.nn.Linear(3, 2),
    ).double()
    torch.nn.utils.vector_to_parameters(flat, net.parameters())
    x = torch.randn(6, 5, dtype=D, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(mlp_apply(flat[None], sizes, x)[0], net(x))
    pis = policy_tables(torch.stack([flat, 2 * flat]), sizes)
    assert pis.shape == (2, 5, 2) and torch.allclose(pis.sum(-1), torch.ones(2, 5, dtype=D))


def test_r_squared_by_hand():
    # targets [1, 2, 3] (SS_tot = 2), predictions [1, 2, 2] (SS_res = 1): R² = 0.5
    assert r_squared(torch.tensor([1.0, 2.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])) == 0.5


@pytest.mark.parametrize("representation", ["mlp", "random_projection"])
def test_antithetic_encoding_equals_encoding_both_halves(representation):
    from types import SimpleNamespace

    from policylab.search.reprl import encode, encoder_sizes, init_representation

    options = SimpleNamespace(representation=representation, latent_dim=3, encoder_hidden=5)
    rep = init_representation(7, options, torch.Generator().manual_seed(0))
    rep["sizes"] = encoder_sizes(7, options)
    U = torch.randn(4, 7, generator=torch.Generator().manual_seed(1))
    both = encode(rep, U, antithetic=True)
    assert torch.allclose(both, encode(rep, torch.cat([U, -U])), atol=1e-6)
    assert both.shape == (8, 3)
