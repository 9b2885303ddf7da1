"""`cost/nfe` of the ring methods equals the network evaluations each step makes, counted
with forward hooks (papers/seed_generative.md G0.8: per generated sample, sampling +
training), and DGPO's velocity passes are not repeated (one frozen-base pass per level
serves both the DPO reference and the drift term)."""

from __future__ import annotations

import pytest
import torch

from policylab.lab.catalogue import build, lab_methods

KNOBS = {"base_steps": 50, "eval_samples": 16}  # a rough base, built once per module


@pytest.fixture(autouse=True, scope="module")
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POLICYLAB_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def _count_rows(nets) -> list[int]:
    counter = [0]

    def hook(module, inputs, output):
        counter[0] += inputs[0].shape[:-1].numel()

    for net in nets:
        net.register_forward_hook(hook)
    return counter


def _step(algo, options):
    problem = build("lab/ring", 0, **KNOBS)
    method = lab_methods.get(algo)
    opts = method.build_options(options)
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, opts, g)
    policy = state["policy"]
    nets = [policy.velocity_net, policy.reference]
    if state.get("ema") is not None:
        nets.append(state["ema"].velocity_net)
    counter = _count_rows(nets)
    _, metrics = method.step(problem, state, opts, g)
    return metrics, counter[0], policy.steps


@pytest.mark.parametrize(
    ("options", "per_level"),
    [
        ({}, 3),  # θ, frozen base (reference and drift), EMA (ℓ_old for the trust region)
        ({"clip": 0.0}, 2),  # no trust region: the EMA is not read
        ({"clip": 0.0, "use_ema_ref": True}, 3),  # the EMA is the DPO reference
        ({"timesteps": 2, "use_ema_ref": True}, 3),
    ],
)
def test_dgpo_nfe_counts_every_pass(options, per_level):
    opts = {"groups": 2, "group_size": 4, **options}
    metrics, rows, K = _step("dgpo", opts)
    M = opts.get("timesteps", 4)
    assert metrics["cost/nfe"] == K + per_level * M
    assert rows == metrics["cost/nfe"] * 8  # B = 8 samples


def test_orw_nfe_counts_every_pass():
    metrics, rows, K = _step("orw_cfm_w2", {"batch": 8})
    assert metrics["cost/nfe"] == K + 2 and rows == (K + 2) * 8


@pytest.mark.parametrize("epochs", [1, 3])
def test_flow_grpo_nfe_counts_sampling_and_each_epoch(epochs):
    metrics, rows, K = _step("flow_grpo_sde", {"groups": 2, "group_size": 4, "epochs": epochs})
    assert metrics["cost/nfe"] == (1 + epochs) * K
    assert rows == metrics["cost/nfe"] * 8 + 2 * K * 8  # + the drift metric's two passes


def test_dgpo_drift_is_the_mean_squared_velocity_gap_to_the_frozen_base():
    """After one step θ ≠ θ_ref; the logged ref/drift of the next step equals mean_d
    (v̂_θ − v̂_ref)² averaged over the M levels it trained on, recomputed here."""
    problem = build("lab/ring", 0, **KNOBS)
    method = lab_methods.get("dgpo")
    opts = method.build_options({"groups": 2, "group_size": 4, "timesteps": 1, "trunc": 0})
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, opts, g)
    state, _ = method.step(problem, state, opts, g)
    policy = state["policy"]
    replay = torch.Generator().set_state(g.get_state())
    x = policy.sample("ode_euler", 8, generator=replay).sample  # before switch_ema_ref
    torch.randperm(1, generator=replay)
    eps = torch.randn(2, 2, generator=replay).repeat_interleave(4, 0)
    tau = torch.zeros(8, 1)  # trunc 0: the only level is τ = 0
    with torch.no_grad():
        xt = tau * x + (1 - tau) * eps
        gap = ((policy.velocity(xt, tau) - policy.ref_velocity(xt, tau)) ** 2).mean(-1).mean()
    _, metrics = method.step(problem, state, opts, g)
    assert metrics["ref/drift"] == pytest.approx(float(gap), rel=1e-6) and float(gap) > 0
