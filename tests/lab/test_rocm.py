"""lab/rocm.py (papers/seed_generative.md G4): ROCM's pathwise methods and the RLCM
comparator on lab/ring — every weight moves, the divergences vanish at θ = ref, the
regulariser holds the model near the reference, a task without a differentiable reward
is refused, a run resumes exactly, bad options are errors before any work."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import policylab
from policylab.lab.catalogue import build, lab_methods

KNOBS = {"base_steps": 300, "eval_samples": 256}  # a rough base model, built in < 1 s
FAST = {"distill_steps": 20}  # a rough distillation, cached per test
PATHWISE = (
    "rocm_kl_provisional",
    "rocm_hellinger_provisional",
    "rocm_tv_provisional",
    "rocm_js_provisional",
    "rocm_none",
)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLICYLAB_CACHE", str(tmp_path / "cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny nets: more threads only contend on a shared machine
    yield
    torch.set_num_threads(threads)


def _run(algo, steps, overrides=None, problem=None):
    problem = problem or build("lab/ring", 0, **KNOBS)
    method = lab_methods.get(algo)
    options = method.build_options({**FAST, **(overrides or {})})
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, options, g)
    metrics = []
    for _ in range(steps):
        state, m = method.step(problem, state, options, g)
        metrics.append(m)
    return state, metrics


@pytest.mark.parametrize("algo", [*PATHWISE, "rlcm"])
def test_one_step_moves_every_weight_and_keeps_the_reference(algo):
    problem = build("lab/ring", 0, **KNOBS)
    method = lab_methods.get(algo)
    options = method.build_options(FAST)
    state = method.init(problem, options, torch.Generator().manual_seed(0))
    before = [p.detach().clone() for p in state["policy"].trainable()]
    state, metrics = method.step(problem, state, options, torch.Generator().manual_seed(0))
    for b, p in zip(before, state["policy"].trainable(), strict=True):
        assert not torch.equal(b, p)
    for r, b in zip(state["policy"].reference.parameters(), before, strict=True):
        assert torch.equal(r, b)  # the distilled model is the frozen reference
    assert metrics["cost"] == 64
    for key in ("reward/mean", "div/mode_entropy", "fid/on_manifold", "ref/drift"):
        assert key in metrics
    if algo != "rlcm":  # measured before the update, at θ = ref
        assert metrics["ref/drift"] == 0.0


def test_every_divergence_has_zero_gradient_at_the_reference():
    """At θ = ref every Δ_j = 0 and each divergence is flat there (KL, H², JS quadratic;
    TV's subgradient 0), so the first step of every ROCM variant equals rocm_none's."""
    first = {a: _run(a, 1, {"beta": 1.0, "beta_last": 1.0})[0]["policy"] for a in PATHWISE}
    for algo in PATHWISE[:-1]:
        for a, b in zip(first[algo].trainable(), first["rocm_none"].trainable(), strict=True):
            assert torch.equal(a, b)
    assert _run("rocm_kl_provisional", 1)[1][0]["rocm/divergence"] == 0.0


def test_the_regulariser_holds_the_model_near_the_reference():
    free = _run("rocm_none", 15, {"lr": 1e-3})[1]
    held = _run("rocm_kl_provisional", 15, {"lr": 1e-3, "beta": 50.0, "beta_last": 50.0})[1]
    assert held[-1]["ref/drift"] < 0.5 * free[-1]["ref/drift"]
    assert free[-1]["ref/drift"] > 0


def test_two_step_sampler_runs():
    state, metrics = _run("rocm_tv_provisional", 2, {"steps": 2})
    assert state["policy"].steps == 2 and metrics[-1]["cost/nfe"] == 6


def test_a_task_without_a_differentiable_reward_is_refused():
    problem = build("lab/ring", 0, **KNOBS)
    task = problem.extras["generator"]
    problem.extras["generator"] = dataclasses.replace(task, differentiable_reward=None)
    with pytest.raises(ValueError, match="needs the task's differentiable_reward"):
        _run("rocm_kl_provisional", 1, problem=problem)
    _run("rlcm", 1, problem=problem)  # the likelihood comparator needs none


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="steps = 3 must divide distill_grid = 4"):
        lab_methods.get("rocm_kl_provisional").build_options({"steps": 3})
    with pytest.raises(ValueError, match="rlcm.steps = 1; it needs >= 2"):
        lab_methods.get("rlcm").build_options({"steps": 1})
    with pytest.raises(ValueError, match="rocm.beta = -1.0 is out of range"):
        lab_methods.get("rocm_js_provisional").build_options({"beta": -1.0})
    with pytest.raises(ValueError, match="rlcm.group_size = 1 is out of range"):
        lab_methods.get("rlcm").build_options({"group_size": 1})
    with pytest.raises(ValueError, match="divergence"):
        lab_methods.get("rocm_none").build_options({"divergence": "kl"})


@pytest.mark.parametrize("algo", ["rocm_kl_provisional", "rlcm"])
def test_train_and_resume_is_exact(tmp_path, algo):
    common = {
        "task": "lab/ring",
        "algo": algo,
        "eval_every": 2,
        "progress": False,
        "knobs": KNOBS,
        "options": {**FAST, "lr": 1e-3},
    }
    straight = policylab.train(**common, budget=64 * 8, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=64 * 4, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=64 * 8, run_dir=str(tmp_path / "b"), resume=True)
    values = [e["oracle/value"] for e in straight.evals]
    assert [e["oracle/value"] for e in resumed.evals] == values
    assert values[-1] != values[1]


def test_arena_spec_accepts_the_ring():
    from policylab.arena.runner import make_spec

    spec = make_spec("lab/ring", "rocm_kl_provisional,rocm_none,rlcm", seeds=5, budget=640)
    assert spec.budget_unit == "generated samples"


@pytest.mark.parametrize("algo", [*PATHWISE, "rlcm"])
def test_describe_finds_the_step_in_its_file(algo):
    import inspect

    method = lab_methods.get(algo)
    assert inspect.getfile(method.step).endswith("lab/rocm.py")  # `policylab describe`


def test_the_generator_methods_share_one_learn_step_and_policy_reader():
    """One home (lab/dgpo.py) for the clip-grad → optimiser step → step count of every
    continuous-generator method, and for reading the policy out of the state."""
    from policylab.lab import dgpo, dpg_t2i, rocm

    assert rocm._learn is dgpo._learn and dpg_t2i._learn is dgpo._learn
    assert rocm.policy_of is dgpo.policy_of and dpg_t2i._policy is dgpo.policy_of
    # flow_grpo_sde and rlcm: one grpo + ppo_clip update over stored chains
    assert rocm.chain_ppo_update is dgpo.chain_ppo_update


INF = float("inf")


@pytest.mark.parametrize(
    "algo,bad",
    [
        ("dgpo", {"beta_dpo": INF}),
        ("dgpo", {"lr": INF}),
        ("dgpo", {"grad_clip": 0.0}),
        ("orw_cfm_w2", {"alpha": INF}),
        ("orw_cfm_w2", {"grad_clip": 0.0}),
        ("flow_grpo_sde", {"lr": INF}),
        ("flow_grpo_sde", {"grad_clip": 0.0}),
        ("ac_flow_provisional", {"beta": INF}),
        ("ac_flow_provisional", {"critic_lr": INF}),
        ("ac_flow_provisional", {"grad_clip": 0.0}),
        ("rocm_kl_provisional", {"beta": INF}),
        ("rocm_kl_provisional", {"lr": INF}),
        ("rocm_kl_provisional", {"grad_clip": 0.0}),
        ("rlcm", {"grad_clip": 0.0}),
        ("dpg_t2i", {"prior_weight": INF}),
        ("dpg_t2i", {"lr": INF}),
    ],
)
def test_an_infinite_weight_or_rate_and_a_zero_grad_clip_are_refused(algo, bad):
    """β = inf or lr = inf makes the first loss or step inf/NaN; grad_clip = 0 scales every
    gradient to zero (clip_grad_norm_ with max_norm 0), a run that never learns."""
    import policylab.lab.dpg_t2i  # noqa: F401  (registers dpg_t2i)

    with pytest.raises(ValueError, match=next(iter(bad))):
        lab_methods.get(algo).build_options(bad)


def test_a_rocm_run_scores_from_its_own_start_the_distilled_model(tmp_path):
    """ROCM starts from the distilled consistency model, not the task's base flow: the
    run's start value is measured on it, so its first score is 0 (it was not before)."""
    import json

    import yaml

    from policylab import train
    from policylab.lab.catalogue import lab_methods, lab_tasks

    method = lab_methods.get("rocm_none")
    assert method.own_start and lab_methods.get("rlcm").own_start
    assert not lab_methods.get("dgpo").own_start
    folder = tmp_path / "run"
    train(
        task="lab/ring",
        algo="rocm_none",
        budget=64,
        eval_every=1,
        knobs={"eval_samples": 64},
        options={"batch": 64},
        run_dir=str(folder),
        progress=False,
    )
    config = yaml.safe_load((folder / "config.yaml").read_text())
    base = lab_tasks.get("ring")(seed=0, eval_samples=64).initial
    start = config["resolved"]["initial_value"]
    assert start != base  # the distilled model's value, not the base flow's
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    first = next(r for r in rows if r.get("kind") == "eval")
    assert first["eval/score"] == 0.0 and first["oracle/value"] == start
