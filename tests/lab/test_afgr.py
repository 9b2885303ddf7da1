"""AFGR on lab/multiview (policylab/lab/afgr.py; papers/seed_control_theory.md §16): the
task's scorer, the three-stage schedule, what each stage trains, option errors, a short
`policylab train`, and exact resume across a stage boundary."""

from __future__ import annotations

import pytest
import torch

import policylab
from policylab.lab.catalogue import build, lab_methods
from policylab.trainers.run import latest_checkpoint, load_state

SMALL = {"batch": 16, "stage1_objects": 32, "stage2_objects": 48}


def _setup(name: str, **options):
    problem = build("lab/multiview", 0, eval_objects=64)
    method = lab_methods.get(name)
    opts = method.build_options(options)
    g = torch.Generator().manual_seed(0)
    return problem, method, opts, g, method.init(problem, opts, g)


def _params(module_list):
    return [p.detach().clone() for m in module_list for p in m.parameters()]


def _changed(before, module_list):
    after = _params(module_list)
    return [not torch.equal(a, b) for a, b in zip(before, after, strict=True)]


def test_the_task_scores_chance_and_knows_the_ceiling():
    problem = build("lab/multiview", 0, eval_objects=64)
    assert problem.optimum == 1.0
    assert problem.initial == pytest.approx(1 / 8)  # class 0 always, balanced set
    with pytest.raises(ValueError, match="glances = 5 is out of range"):
        build("lab/multiview", 0, glances=5)
    with pytest.raises(ValueError, match="lab/multiview.*no knob .views.*its knobs: eval_objects"):
        build("lab/multiview", 0, views=8)


def test_stages_run_in_order_and_train_what_they_should():
    problem, method, opts, g, state = _setup("afgr", **SMALL)
    agent = state["agent"]
    classifier = [agent.encoder, agent.gru, agent.classifier]
    policy = [agent.actor, agent.critic]
    stages = []
    for _ in range(6):
        cls_before, pol_before = _params(classifier), _params(policy)
        state, metrics = method.step(problem, state, opts, g)
        stages.append(metrics["stage"])
        assert metrics["cost"] == 16
        cls_moved, pol_moved = (
            any(_changed(cls_before, classifier)),
            any(_changed(pol_before, policy)),
        )
        # stage 1 and 3 train the classifier only; stage 2 the actor-critic only (frozen classifier)
        assert (cls_moved, pol_moved) == ((False, True) if metrics["stage"] == 2 else (True, False))
    assert stages == [1, 1, 2, 2, 2, 3]


@pytest.mark.parametrize("name", ["random_views", "fixed_order", "oracle_views"])
def test_baselines_train_the_classifier_on_their_views(name):
    problem, method, opts, g, state = _setup(name, batch=8)
    before = _params([state["agent"].classifier])
    state, metrics = method.step(problem, state, opts, g)
    assert all(_changed(before, [state["agent"].classifier]))
    assert metrics["cost"] == 8 and "cls/loss" in metrics


def test_the_oracle_sees_the_informative_view_second():
    from policylab.lab.afgr import rollout

    problem = build("lab/multiview", 0, eval_objects=64)
    task = problem.mdp
    method = lab_methods.get("oracle_views")
    agent = method.init(problem, method.build_options({}), torch.Generator())["agent"]
    with torch.no_grad():
        _, (_, views, _) = rollout(agent, task.images, task.labels, task.first, 2, "oracle", None)
    star = task.labels // 2
    seen = (views[0] == star) | (views[1] == star)
    assert bool(seen.all())
    with torch.no_grad():
        fixed = rollout(agent, task.images, task.labels, 0 * task.first, 4, "fixed", None)[1][1]
    assert fixed[:, 0].tolist() == [0, 1, 2, 3]


def test_bad_options_name_the_field_before_any_work(tmp_path):
    with pytest.raises(
        ValueError, match=r"gamma = 2.0 is out of range; it must be >= 0.0 and <= 1.0"
    ):
        policylab.train(
            task="lab/multiview",
            algo="afgr",
            options={"gamma": 2.0},
            run_dir=str(tmp_path / "r"),
            progress=False,
        )
    assert not (tmp_path / "r").exists()
    with pytest.raises(ValueError, match="unknown option.*stage4_objects.*valid options"):
        lab_methods.get("afgr").build_options({"stage4_objects": 1})


def _train(tmp_path, name, budget, **extra):
    return policylab.train(
        task="lab/multiview",
        algo="afgr",
        knobs={"eval_objects": 64},
        options=SMALL,
        eval_every=2,
        budget=budget,
        run_dir=str(tmp_path / name),
        progress=False,
        **extra,
    )


def test_train_runs_and_scores(tmp_path):
    result = _train(tmp_path, "run", 96)
    assert result.spent == 96
    assert result.evals[0]["oracle/value"] == pytest.approx(1 / 8)  # the chance policy at step 0
    assert [e["budget/spent"] for e in result.evals] == [0, 32, 64, 96]
    assert all(0.0 <= e["oracle/value"] <= 1.0 for e in result.evals)


def test_resume_is_exact_across_a_stage_boundary(tmp_path):
    straight = _train(tmp_path, "a", 96)
    _train(tmp_path, "b", 64, save_every=1)  # stops inside stage 2, mid-PPO
    resumed = _train(tmp_path, "b", 96, resume=True)
    assert [e["oracle/value"] for e in resumed.evals] == [e["oracle/value"] for e in straight.evals]
    a = load_state(latest_checkpoint(tmp_path / "a") / "state.pt")["method"]
    b = load_state(latest_checkpoint(tmp_path / "b") / "state.pt")["method"]
    for key, tensor in a["agent"].items():
        assert torch.equal(tensor, b["agent"][key]), key
    assert a["objects"] == b["objects"] == 96


@pytest.mark.slow
def test_afgr_learns_to_look_at_the_informative_view():
    from policylab.lab.afgr import rollout

    problem, method, opts, g, state = _setup("afgr", stage1_objects=9600, stage2_objects=3200)
    for _ in range(12800 // opts.batch):
        state, _ = method.step(problem, state, opts, g)
    task = problem.mdp
    with torch.no_grad():
        _, (_, views, _) = rollout(
            state["agent"], task.images, task.labels, task.first, 2, "actor", None
        )
    star = task.labels // 2
    seen = ((views[0] == star) | (views[1] == star)).double().mean()
    assert float(seen) >= 0.95  # random distinct views see v*(c) half the time
    assert problem.value(method.policy(problem, state)) >= 0.9
