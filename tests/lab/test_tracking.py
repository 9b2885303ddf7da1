"""lab/tracking and the §11 arms (papers/seed_control_theory.md §11): the real unicycle, the
kinematic model, the spline, the embedded controller, the model-derivative estimator wired
to them, the CLI route and exact resume."""

from __future__ import annotations

import math

import pytest
import torch

import policylab
from policylab.dynamics import unicycle
from policylab.envs.tracking import TrackingTask, figure_eight, real_step
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.mbpg import exact_real_gradient, model_derivative_estimate
from policylab.lab.tracking import Plan, Tracking
from policylab.policies.structured import catmull_rom_basis

SHORT = {"seconds": 2.0}  # 40 steps: the tests' horizon


def test_model_jacobians_equal_autograd():
    x = torch.tensor([[0.3, -0.2, 0.7], [1.0, 2.0, -2.5]], dtype=torch.float64)
    u = torch.tensor([[1.5, 0.4], [-0.5, 2.0]], dtype=torch.float64)
    A, B = unicycle.jacobians(x, u, 0.05)  # noqa: N806
    for t in range(2):
        ja, jb = torch.autograd.functional.jacobian(
            lambda a, b: unicycle.step(a, b, 0.05), (x[t], u[t])
        )
        torch.testing.assert_close(A[t], ja)
        torch.testing.assert_close(B[t], jb)


def test_real_step_by_hand():
    # θ = 0, v = 1, ω = 2, drift 0.1 → slip 0.2; dt = 0.05, τ = 0.2: v' = 1 + 0.25·(3 − 1) = 1.5
    task = TrackingTask(lag=0.2, drift=0.1)
    x = torch.tensor([0.0, 0.0, 0.0, 1.0, 2.0], dtype=torch.float64)
    nxt = real_step(x, torch.tensor([3.0, 0.0], dtype=torch.float64), task)
    torch.testing.assert_close(nxt, torch.tensor([0.05, 0.01, 0.1, 1.5, 1.5], dtype=torch.float64))


def test_spline_interpolates_the_knots_and_its_derivative_is_the_slope():
    knots, period = 8, 4.0
    w = figure_eight(torch.arange(knots, dtype=torch.float64) * period / knots, TrackingTask())
    at_knots = catmull_rom_basis(
        torch.arange(knots, dtype=torch.float64) * period / knots, knots, period
    )
    torch.testing.assert_close(at_knots[0] @ w, w)  # Catmull-Rom passes through its points
    t = torch.tensor([1.23], dtype=torch.float64)
    h = 1e-6
    fd = (
        catmull_rom_basis(t + h, knots, period)[0] - catmull_rom_basis(t - h, knots, period)[0]
    ) / (2 * h)
    torch.testing.assert_close(catmull_rom_basis(t, knots, period)[1], fd, atol=1e-6, rtol=1e-6)


class ModelIsReal(Tracking):
    """An instance whose "real" system is the kinematic model itself (v, ω columns = u)."""

    def real_episode(self, plan):
        u = self.controller(plan.offsets, plan.feedback)
        xs, us = [self.task_start()], []
        for t in range(self.task.steps):
            us.append(u(t, xs[-1]))
            xs.append(torch.cat((unicycle.step(xs[-1][:3], us[-1], self.task.dt), us[-1])))
        return torch.stack(xs), torch.stack(us)

    def task_start(self):
        return torch.tensor([0.0, 0.0, math.pi / 4, 0.0, 0.0], dtype=torch.float64)


@pytest.mark.parametrize("feedback", [True, False])
def test_the_estimator_is_exact_when_the_model_is_the_real_system(feedback):
    inst = build("lab/tracking", 0, **SHORT).mdp
    exactly = ModelIsReal(**{f: getattr(inst, f) for f in inst.__dataclass_fields__})
    g = torch.Generator().manual_seed(1)
    plan = Plan(0.05 * torch.randn(2 * 16 + 3, generator=g, dtype=torch.float64), feedback)
    est, mse = model_derivative_estimate(exactly, plan)
    exact, real_mse = exact_real_gradient(exactly, plan)
    torch.testing.assert_close(est.grad, exact)
    torch.testing.assert_close(mse, real_mse)


def test_open_loop_controls_ignore_the_state_and_the_gains():
    inst = build("lab/tracking", 0, **SHORT).mdp
    z = torch.zeros(35, dtype=torch.float64)
    z[-3:] = 1.0  # gain offsets: unused open loop
    u = inst.controller(z, False)
    here = torch.tensor([0.0, 0.0, 0.0], dtype=torch.float64)
    there = torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64)
    torch.testing.assert_close(u(3, here), u(3, there))
    assert not torch.allclose(inst.controller(z, True)(3, here), inst.controller(z, True)(3, there))


def test_bad_knobs_and_options_name_the_field():
    with pytest.raises(ValueError, match="tracking knob lag = -1.0"):
        build("lab/tracking", 0, lag=-1.0)
    with pytest.raises(ValueError, match="knots = 2"):
        build("lab/tracking", 0, knots=2)
    with pytest.raises(ValueError, match="unknown option.*bogus"):
        lab_methods.get("mbpg_tracking_provisional").build_options({"bogus": 1})
    with pytest.raises(ValueError, match="lr"):
        lab_methods.get("ppo_tracking").build_options({"lr": 0.0})


ARMS = [
    "mbpg_tracking_provisional",
    "mbpg_open_loop_provisional",
    "model_only",
    "tracking_oracle",
    "ppo_tracking",
]


@pytest.mark.parametrize(
    "algo", [ARMS[0]] + [pytest.param(a, marks=pytest.mark.slow) for a in ARMS[1:]]
)
def test_train_runs_and_changes_the_policy(tmp_path, algo):
    result = policylab.train(
        task="lab/tracking",
        algo=algo,
        budget=2,
        eval_every=1,
        knobs=SHORT,
        run_dir=str(tmp_path / "run"),
        progress=False,
    )
    values = [e["oracle/value"] for e in result.evals]
    assert result.spent == 2 and values[-1] != values[0]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["mbpg_tracking_provisional", "ppo_tracking"])
def test_resume_is_exact(tmp_path, algo):
    common = {
        "task": "lab/tracking",
        "algo": algo,
        "eval_every": 1,
        "knobs": SHORT,
        "progress": False,
    }
    straight = policylab.train(**common, budget=4, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=2, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=4, run_dir=str(tmp_path / "b"), resume=True)
    assert [e["oracle/value"] for e in resumed.evals] == [e["oracle/value"] for e in straight.evals]
