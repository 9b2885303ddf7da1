"""lab/gaussian_fit, lab/po_mse, lab/digits_classify and the methods nll, nll_to_po
(papers/seed_generative.md G6.2): the tasks' numbers, PG under U* reaching the NLL optimum
Σ = S, a run resuming exactly, bad options and knobs named before any work."""

from __future__ import annotations

import pytest
import torch

import policylab
from policylab.lab.catalogue import build, lab_methods


def _run(task, algo, opts, steps, seed=0, **knobs):
    problem = build(f"lab/{task}", seed, **knobs)
    method = lab_methods.get(algo)
    options = method.build_options(opts)
    g = torch.Generator().manual_seed(seed)
    state = method.init(problem, options, g)
    for _ in range(steps):
        state, metrics = method.step(problem, state, options, g)
    return problem, method.policy(problem, state), metrics, state


def test_tasks_build_with_their_numbers():
    p = build("lab/gaussian_fit", 0)
    # optimum = −H(N(1, 0.25)) = −½ log(2πe·0.25)
    assert p.optimum == pytest.approx(
        -0.5 * float(torch.log(torch.tensor(2 * torch.pi * torch.e * 0.25)))
    )
    assert p.budget_unit == "policy updates"
    task = p.extras["likelihood"]
    assert task.y_train.shape == (256, 1) and float(task.y_train.mean()) == pytest.approx(
        1.0, abs=0.1
    )
    two = build("lab/gaussian_fit", 0, dim=2).extras["likelihood"]
    assert torch.allclose(
        torch.cov(two.y_test.T), torch.tensor([[2.0, 0.5], [0.5, 1.0]]), atol=0.15
    )
    mse = build("lab/po_mse", 3).extras["likelihood"]
    assert mse.x_train.shape == (25, 4) and bool((mse.x_train == mse.x_train[0]).all())
    assert mse.y_train.shape == (25, 2)
    digits = build("lab/digits_classify", 0)
    assert digits.optimum == 0.0 and digits.initial < -2.0  # ≈ −log 10 at the start
    assert "test/accuracy" in digits.extras["metrics"](digits.initial_policy)


def test_bad_knob_and_option_are_named():
    with pytest.raises(ValueError, match="lab/gaussian_fit.dim = 3"):
        build("lab/gaussian_fit", 0, dim=3)
    with pytest.raises(ValueError, match="lab/po_mse.n_train = 1"):
        build("lab/po_mse", 0, n_train=1)
    with pytest.raises(ValueError, match="nll_to_po.solver = 'exact'"):
        lab_methods.get("nll_to_po").build_options({"solver": "exact"})
    with pytest.raises(ValueError, match="nll_to_po.lam = 0"):
        lab_methods.get("nll_to_po").build_options({"lam": 0})
    with pytest.raises(ValueError, match="nll.lr = -1"):
        lab_methods.get("nll").build_options({"lr": -1})


def test_pg_under_u_star_reaches_the_nll_optimum_on_the_gaussian():
    """PG with U = U* of the data (the heuristic on one input) drives Σ̂ to S and μ̂ to ȳ:
    the moment errors fall from ~0.8 and ~1 to small values (G6.1 Gaussian analysis)."""
    opts = {"solver": "heuristic", "lr": 0.05, "samples": 16, "batch": 256, "transform": "loo"}
    problem, policy, _, _ = _run("gaussian_fit", "nll_to_po", opts, 400)
    m = problem.extras["metrics"](policy)
    assert m["moment/mean_err"] < 0.05 and m["moment/cov_err"] < 0.05
    # U = I, 50 × too sharp, gives the over-confident Σ* = λ/(2u) = 0.005 (G6.1)
    opts = {"solver": "fixed", "lr": 0.05, "samples": 16, "batch": 256, "transform": "loo"}
    problem, policy, _, _ = _run("gaussian_fit", "nll_to_po", opts, 400)
    var = float(policy.log_diag.detach().exp() ** 2)
    assert 0.0025 < var < 0.01  # within a factor 2 of 0.005, fifty times below S = 0.25


def test_implicit_phase_moves_u_then_trains_a_fresh_policy():
    opts = {"outer_steps": 2, "n_inner": 3}
    problem, policy, metrics, state = _run("po_mse", "nll_to_po", opts, 2)
    assert metrics["cost"] == 3 and metrics["reward/u_trace"] != pytest.approx(2.0)
    fresh = problem.extras["likelihood"].make_policy(state["policy_seed"])
    for a, b in zip(fresh.parameters(), policy.parameters(), strict=True):
        assert torch.equal(a, b)  # the PG phase starts from the initial weights
    _, policy, metrics, _ = _run("po_mse", "nll_to_po", opts, 3)
    assert metrics["cost"] == 1 and "reward/mean" in metrics


@pytest.mark.parametrize(
    "task, algo, options",
    [
        ("po_mse", "nll", {}),
        ("po_mse", "nll_to_po", {"outer_steps": 2, "n_inner": 2}),
        ("digits_classify", "nll_to_po", {"reward_kind": "diag", "outer_steps": 1, "n_inner": 2}),
    ],
)
def test_train_and_resume_is_exact(tmp_path, task, algo, options):
    common = {
        "task": f"lab/{task}",
        "algo": algo,
        "eval_every": 2,
        "progress": False,
        "options": options,
    }
    straight = policylab.train(**common, budget=12, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=6, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=12, run_dir=str(tmp_path / "b"), resume=True)
    values = {e["step"]: e["oracle/value"] for e in straight.evals}
    again = {e["step"]: e["oracle/value"] for e in resumed.evals}  # + the first run's last
    assert {step: again[step] for step in values} == values
    assert values[max(values)] != values[0]
