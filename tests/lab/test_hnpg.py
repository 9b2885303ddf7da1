"""HNPG and its baselines on lab/combination_lock (lab/hnpg.py, lab/fqe_greedy.py; §8)."""

from __future__ import annotations

import pytest
import torch

import policylab
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.hnpg_critic import QValue, fit, offline_targets

SMALL = {"H": 3, "offline_episodes": 500, "eval_episodes": 50}


def run(name: str, problem, updates: int, seed: int = 0, **options):
    method = lab_methods.get(name)
    opts = method.build_options({"steps_per_update": 150, **options})
    g = torch.Generator().manual_seed(seed)
    state = method.init(problem, opts, g)
    for _ in range(updates):
        state, metrics = method.step(problem, state, opts, g)
    return method, state, metrics


def test_offline_targets_are_bellman_with_gamma_one():
    r = torch.tensor([0.0, 1.0], dtype=torch.float64)
    assert torch.equal(offline_targets(r, None), r)  # last step: y = r
    nq = torch.tensor([0.5, -0.25], dtype=torch.float64)
    assert offline_targets(r, nq).tolist() == [0.5, 0.75]


def test_hybrid_fit_regresses_on_both_terms():
    torch.manual_seed(0)
    q = QValue(2, 1)
    x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    a = torch.zeros(1, 1, dtype=torch.float64)
    one = torch.ones(1, dtype=torch.float64)
    # the on-policy target 1 and the offline target 0 at the same (s, a): the fit of the
    # sum of squares heads for their mean 0.5
    fit(q, (x, a, one), (x, a, 0 * one), steps=200, lr=0.02)
    assert float(q(x, a).detach()) == pytest.approx(0.5, abs=1e-3)
    on, off = fit(q, (x, a, one), None, steps=200, lr=0.02)
    assert (
        float(q(x, a).detach()) == pytest.approx(1.0, abs=1e-3) and off != off
    )  # nan: no offline term


def test_the_task_builds_with_its_knobs_and_rejects_unknown_ones():
    problem = build("lab/combination_lock", 0, **SMALL)
    assert problem.budget_unit == "env steps" and problem.optimum == 1.0
    assert problem.extras["offline"]["obs"].shape == (500, 4, 8)  # obs dim 2^⌈log₂ 7⌉
    assert 0.0 <= problem.initial <= 0.1  # a near-uniform policy only earns the anti-reward
    with pytest.raises(ValueError, match="lab/combination_lock.*horizon"):
        build("lab/combination_lock", 0, horizon=3)


def test_trpo_never_reads_the_offline_data_and_hnpg_does():
    clean = build("lab/combination_lock", 0, **SMALL)
    corrupt = build("lab/combination_lock", 0, **SMALL, corrupted=1.0)
    params = {}
    for name in ("trpo", "hnpg"):
        for label, problem in (("clean", clean), ("corrupt", corrupt)):
            _, state, metrics = run(name, problem, updates=2)
            params[name, label] = torch.nn.utils.parameters_to_vector(state["policy"].parameters())
        assert metrics["cost"] == 150  # 50 episodes of H = 3
    assert torch.equal(params["trpo", "clean"], params["trpo", "corrupt"])
    assert not torch.equal(params["hnpg", "clean"], params["hnpg", "corrupt"])


def test_each_natural_step_stays_inside_the_kl_radius():
    problem = build("lab/combination_lock", 1, **SMALL)
    _, _, metrics = run("hnpg", problem, updates=2)
    assert 0 < metrics["policy/kl"] <= 0.01 * 1.5  # the quadratic model's δ, up to its error
    assert metrics["policy/accepted"] == 1.0


def test_bad_options_name_the_field():
    with pytest.raises(ValueError, match="hnpg.max_kl = -1"):
        lab_methods.get("hnpg").build_options({"max_kl": -1})
    with pytest.raises(ValueError, match="unknown option.*nope"):
        lab_methods.get("trpo").build_options({"nope": 1})
    with pytest.raises(ValueError, match="fqe_greedy.batch = 0"):
        lab_methods.get("fqe_greedy").build_options({"batch": 0})


@pytest.mark.parametrize("algo", ["hnpg", "fqe_greedy"])
def test_train_and_resume_are_exact(tmp_path, algo):
    common = {
        "task": "lab/combination_lock",
        "algo": algo,
        "knobs": SMALL,
        "options": {"steps_per_update": 150},
        "eval_every": 1,
        "progress": False,
    }
    straight = policylab.train(**common, budget=300, run_dir=str(tmp_path / "a"))
    assert straight.spent == 300 and len(straight.evals) == 3
    policylab.train(**common, budget=150, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=300, run_dir=str(tmp_path / "b"), resume=True)
    assert [e["oracle/value"] for e in resumed.evals] == [e["oracle/value"] for e in straight.evals]


@pytest.mark.slow
def test_hnpg_opens_a_short_lock_from_offline_data():
    # H = 3: a uniform policy reaches the end w.p. 10⁻³; with ε-greedy data HNPG's greedy
    # policy succeeds (return ≥ 0.9) within 15 updates of 1000 steps (measured: 10 updates)
    problem = build("lab/combination_lock", 0, H=3, offline_episodes=2000, eval_episodes=100)
    method, state, _ = run("hnpg", problem, updates=15, steps_per_update=1000)
    assert problem.value(method.policy(problem, state)) >= 0.9
