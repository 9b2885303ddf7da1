"""check_range refuses NaN (every comparison with NaN is false, so a range check alone lets
it through: lr = nan reached Adam and AdaPG, and nll_to_po's options) — before any work."""

import math

import pytest
import torch

from policylab.algebra.options import check_range


@pytest.mark.parametrize(
    "bounds", [{"low": 0.0}, {"low": 0.0, "low_open": True}, {"high": 1.0}, {}]
)
def test_nan_is_out_of_every_range(bounds):
    with pytest.raises(ValueError, match="owner.field"):
        check_range("owner", "field", math.nan, **bounds)


def test_inf_is_still_accepted_where_the_range_is_open():
    check_range("owner", "field", math.inf, low=0.0)  # e.g. ac_flow_provisional@clip=inf


def test_nan_options_of_the_new_methods_are_refused():
    from policylab.lab.nll_to_po import NLLToPOOptions
    from policylab.optimisers import AdaPG

    with pytest.raises(ValueError, match="lr"):
        NLLToPOOptions(lr=math.nan)
    with pytest.raises(ValueError, match="lam"):
        AdaPG([torch.zeros(1, requires_grad=True)], lam=math.nan)


def test_finite_refuses_inf_where_asked():
    with pytest.raises(ValueError, match="owner.field = inf.*finite"):
        check_range("owner", "field", math.inf, low=0.0, finite=True)
    check_range("owner", "field", 3.0, low=0.0, finite=True)


@pytest.mark.parametrize("name", ["lr", "reward_init", "lam", "inner_lr", "outer_lr"])
def test_inf_options_of_nll_to_po_are_refused(name):
    # lr = inf or reward_init = inf (U = inf·I) would make the first update NaN
    from policylab.lab.nll_to_po import NLLToPOOptions

    with pytest.raises(ValueError, match=name):
        NLLToPOOptions(**{name: math.inf})


def test_inf_lr_of_adapg_and_inf_reward_init_are_refused():
    from policylab.optimisers import AdaPG
    from policylab.rewards.parametric import MahalanobisReward

    with pytest.raises(ValueError, match="lr"):
        AdaPG([torch.zeros(1, requires_grad=True)], lr=math.inf)
    with pytest.raises(ValueError, match="init"):
        MahalanobisReward(2, "full", math.inf)
