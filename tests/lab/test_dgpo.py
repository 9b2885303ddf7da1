"""lab/ring and the methods dgpo, orw_cfm_w2, flow_grpo_sde (papers/seed_generative.md G2):
the base model is built and cached, each method learns through `policylab train`, a run
resumes exactly, bad options and knobs are errors before any work."""

from __future__ import annotations

import pytest
import torch

import policylab
from policylab.lab.catalogue import build, lab_methods

KNOBS = {"base_steps": 300, "eval_samples": 256}  # a rough base model, built in < 1 s
METHODS = ("dgpo", "orw_cfm_w2", "flow_grpo_sde")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLICYLAB_CACHE", str(tmp_path / "cache"))


def test_ring_task_builds_and_caches_the_base_model(tmp_path):
    problem = build("lab/ring", 0, **KNOBS)
    files = list((tmp_path / "cache").glob("ring_flow_0_300_*.pt"))
    assert len(files) == 1
    again = build("lab/ring", 1, **KNOBS)  # from the cache: identical weights
    for a, b in zip(problem.mdp.trainable(), again.mdp.trainable(), strict=True):
        assert torch.equal(a, b)
    assert problem.optimum == 1.0 and problem.budget_unit == "generated samples"
    assert 0.0 < problem.initial < 1.0
    assert sum(p.numel() for p in problem.mdp.trainable()) == 9218  # G0.7
    metrics = problem.extras["metrics"](problem.mdp)
    assert set(metrics) >= {"div/mode_entropy", "fid/on_manifold", "reward/mean"}


def test_bad_knob_and_option_are_named():
    with pytest.raises(ValueError, match="lab/ring knob base_steps = 0"):
        build("lab/ring", 0, base_steps=0)
    with pytest.raises(ValueError, match="timesteps = 9 exceeds the trunc \\+ 1 = 7"):
        lab_methods.get("dgpo").build_options({"timesteps": 9})
    with pytest.raises(ValueError, match="noise_level = 0.0 is out of range"):
        lab_methods.get("flow_grpo_sde").build_options({"noise_level": 0.0})
    with pytest.raises(ValueError, match="beta_dpoo"):
        lab_methods.get("dgpo").build_options({"beta_dpoo": 1.0})


@pytest.mark.parametrize("algo", METHODS)
def test_one_step_moves_every_weight_and_logs_the_shared_metrics(algo):
    problem = build("lab/ring", 0, **KNOBS)
    method = lab_methods.get(algo)
    options = method.build_options({})
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, options, g)
    before = [p.detach().clone() for p in state["policy"].trainable()]
    state, metrics = method.step(problem, state, options, g)
    for b, p in zip(before, state["policy"].trainable(), strict=True):
        assert not torch.equal(b, p)
    assert metrics["cost"] == 128
    for key in ("reward/mean", "div/mode_entropy", "fid/on_manifold", "ref/drift"):
        assert key in metrics
    # the frozen reference did not move
    for r, b in zip(state["policy"].reference.parameters(), before, strict=True):
        assert torch.equal(r, b)


def test_dgpo_weights_fall_as_the_preference_is_learned():
    """w = σ(s_g) starts at ½ (θ = ref gives s_g = 0) and falls once the preferred
    samples are denoised better than under the reference (G2.1)."""
    problem = build("lab/ring", 0, **KNOBS)
    method = lab_methods.get("dgpo")
    options = method.build_options({})
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, options, g)
    state, first = method.step(problem, state, options, g)
    assert first["dgpo/w_mean"] == pytest.approx(0.5, abs=1e-6)
    for _ in range(20):
        state, last = method.step(problem, state, options, g)
    assert last["dgpo/w_mean"] < 0.3


@pytest.mark.parametrize("algo", ["dgpo", "flow_grpo_sde"])
def test_train_and_resume_is_exact(tmp_path, algo):
    common = {
        "task": "lab/ring",
        "algo": algo,
        "eval_every": 2,
        "progress": False,
        "knobs": KNOBS,
    }
    straight = policylab.train(**common, budget=128 * 8, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=128 * 4, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=128 * 8, run_dir=str(tmp_path / "b"), resume=True)
    values = [e["oracle/value"] for e in straight.evals]
    assert [e["oracle/value"] for e in resumed.evals] == values
    assert values[-1] != values[0]


def test_arena_spec_accepts_the_ring():
    from policylab.arena.runner import make_spec

    spec = make_spec("lab/ring", "dgpo,orw_cfm_w2,flow_grpo_sde", seeds=5, budget=1280)
    assert spec.budget_unit == "generated samples"


def test_dgpo_options_out_of_range_are_refused():
    from policylab.lab.dgpo import DGPOOptions

    for bad in ({"adv_clip": 0.0}, {"beta_dpo": -5.0}, {"beta_kl": -1.0}, {"lr": -1.0}):
        with pytest.raises(ValueError, match=f"dgpo.*{next(iter(bad))}"):
            DGPOOptions(**bad)


def test_an_unreadable_cached_base_is_rebuilt(tmp_path, monkeypatch):
    from policylab.lab import ring

    monkeypatch.setenv("POLICYLAB_CACHE", str(tmp_path))
    first = ring.base_ring_flow(0, steps=20)
    (cached,) = tmp_path.glob("ring_flow_*.pt")
    cached.write_bytes(b"torn")
    again = ring.base_ring_flow(0, steps=20)
    for a, b in zip(first.velocity_net.parameters(), again.velocity_net.parameters(), strict=True):
        assert torch.equal(a, b)


NAN = float("nan")


@pytest.mark.parametrize(
    "owner,bad",
    [
        ("dgpo", {"beta_dpo": NAN}),
        ("dgpo", {"lr": NAN}),
        ("orw_cfm_w2", {"beta": NAN}),
        ("orw_cfm_w2", {"beta": float("inf")}),
        ("orw_cfm_w2", {"lr": 0.0}),
        ("orw_cfm_w2", {"grad_clip": -1.0}),
        ("orw_cfm_w2", {"weight_decay": -0.1}),
        ("flow_grpo_sde", {"eps_clip": -0.2}),
        ("flow_grpo_sde", {"eps_clip": NAN}),
        ("flow_grpo_sde", {"lr": -1.0}),
        ("flow_grpo_sde", {"grad_clip": -1.0}),
        ("flow_grpo_sde", {"noise_level": float("inf")}),
    ],
)
def test_nan_inf_and_negative_options_are_refused(owner, bad):
    """Every numeric option of the three methods is checked: NaN, an infinite β or noise
    level, a negative clip or learning rate would train on garbage (clip_grad_norm_ with a
    negative max_norm flips the gradient)."""
    from policylab.lab.dgpo import DGPOOptions, FlowGRPOOptions, ORWOptions

    cls = {"dgpo": DGPOOptions, "orw_cfm_w2": ORWOptions, "flow_grpo_sde": FlowGRPOOptions}
    with pytest.raises(ValueError, match=f"{owner}.*{next(iter(bad))}"):
        cls[owner](**bad)


def test_a_trunc_beyond_the_chain_is_refused_at_init_before_any_work():
    """trunc + 1 > K (the flow's Euler steps) is known when the run starts: init refuses
    it (it was refused only inside the first step)."""
    from policylab.lab.dgpo import DGPOOptions

    problem = build("lab/ring", 0, **KNOBS)
    options = DGPOOptions(trunc=10, timesteps=2)  # K = 10: levels 0..10 do not exist
    with pytest.raises(ValueError, match="trunc = 10 needs trunc \\+ 1 <= K = 10"):
        lab_methods.get("dgpo").init(problem, options, torch.Generator().manual_seed(0))
