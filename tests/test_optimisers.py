"""The control trainer's optimisers (policylab/optimisers.py): adapg, ADPO's update as we
read it (papers/seed_generative.md G7.2, test O1)."""

import pytest
import torch

from policylab.config import ConfigError, ControlConfig, load
from policylab.optimisers import AdaPG, optimisers


def one_step(opt_class, **kwargs) -> torch.Tensor:
    # O1: θ_0 = 1, g = [0.5, −0.2] (two steps with these gradients), η 0.1, β (0.9, 0.999)
    theta = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    opt = opt_class([theta], lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, **kwargs)
    for g in (0.5, -0.2):
        theta.grad = torch.tensor([g], dtype=torch.float64)
        opt.step()
    return theta.detach()


@pytest.mark.parametrize(
    ("lam", "expected"), [(1.0, 0.8654394), (0.5, 0.9089858), (0.0, 0.9525321)]
)
def test_o1_adapg_by_hand(lam, expected):
    # step 1: m̂ = 0.5, v̂ = 0.25 → d/√v̂ = 1 for every λ → θ = 0.9;
    # step 2: m = 0.025, v = 0.00029; m̂ = 0.131579, v̂ = 0.145073; λ = 1: 0.9 − 0.1·0.131579/0.380885
    assert float(one_step(AdaPG, lam=lam)) == pytest.approx(expected, abs=1e-7)


def test_o1_lambda_one_is_torch_adam():
    ours, torchs = one_step(AdaPG, lam=1.0), one_step(torch.optim.Adam)
    assert torch.allclose(ours, torchs, rtol=0, atol=1e-15)
    assert float(one_step(torch.optim.Adam)) == pytest.approx(0.8654394, abs=1e-7)


def test_lambda_zero_is_bias_corrected_rmsprop():
    # λ = 0: θ_2 = 0.9 − 0.1·g_2/√v̂_2 with g_2 = −0.2, v̂_2 = 0.00029/0.001999
    v_hat = (0.999 * 0.001 * 0.25 + 0.001 * 0.04) / (1 - 0.999**2)
    assert float(one_step(AdaPG, lam=0.0)) == pytest.approx(0.9 + 0.02 / (v_hat**0.5 + 1e-8))


def test_bad_lambda_is_refused_with_its_range():
    with pytest.raises(ValueError, match="lam"):
        AdaPG([torch.nn.Parameter(torch.ones(1))], lam=1.5)
    with pytest.raises(ConfigError, match="adapg_lam"):
        load(ControlConfig, None, {"adapg_lam": -0.1})


def test_registry_builds_the_trainer_optimisers():
    cfg = load(ControlConfig, None, {"algo": "adpo_provisional", "lr": 0.01, "adapg_lam": 0.25})
    params = [torch.nn.Parameter(torch.ones(2))]
    adam = optimisers.get("adam")(params, cfg)
    assert isinstance(adam, torch.optim.Adam) and adam.defaults["eps"] == 1e-5
    adapg = optimisers.get("adapg")(params, cfg)
    assert adapg.defaults["lam"] == 0.25 and adapg.defaults["lr"] == 0.01
    assert adapg.defaults["eps"] == 1e-5  # Adam's, so λ = 1 is dppo exactly
