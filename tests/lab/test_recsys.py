"""Lab tasks lab/recsys (tpgr, flat_softmax) and lab/recsys_lists (rank_grpo,
grpo_list_dcg): the exact scorers, training through `policylab.train`, exact resume and
errors that name the field (papers/seed_control_theory.md §14)."""

from __future__ import annotations

import pytest
import torch

import policylab
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.recsys_lists import ndcg_per_rank
from policylab.lab.recsys_tpgr import episodes


def _run(problem, name, steps, **options):
    method = lab_methods.get(name)
    opts = method.build_options(options)
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, opts, g)
    for _ in range(steps):
        state, metrics = method.step(problem, state, opts, g)
    return method, state, metrics


def test_recsys_optimum_is_the_exact_ceiling_and_the_oracle_list_attains_it():
    problem = build("lab/recsys", 0, items=50, length=5, eval_users=4)
    inst = problem.mdp
    best = inst.eval_p.topk(5, dim=1).indices
    assert problem.value(lambda users: best) == pytest.approx(problem.optimum, abs=1e-12)
    assert problem.initial < problem.optimum


@pytest.mark.parametrize("name", ["tpgr", "flat_softmax"])
def test_recsys_episodes_never_repeat_and_learning_raises_precision(name):
    problem = build("lab/recsys", 0, items=100, length=10, eval_users=16)
    method, state, metrics = (
        _run(problem, name, 40, c=10) if name == "tpgr" else _run(problem, name, 40)
    )
    out = episodes(problem.mdp, state["policy"], problem.mdp.eval_users, None, greedy=True)
    assert (out["items"].sort(1).values.diff(dim=1) > 0).all()  # no repeats
    value = problem.value(method.policy(problem, state))
    assert value > problem.initial + 0.1  # a random list is ≈ 0.5
    assert metrics["cost"] == 32 and metrics["time/s_per_1e4_decisions"] > 0


def test_recsys_lists_scorer_is_exact():
    problem = build("lab/recsys_lists", 0, candidates=10, eval_users=3)
    inst = problem.mdp
    ideal = inst.eval_p.topk(5, dim=1).indices
    ndcg, per_rank = ndcg_per_rank(inst, lambda users, cands: ideal)
    assert float(ndcg) == pytest.approx(1.0)
    assert per_rank.tolist() == pytest.approx(inst.eval_p.topk(5, dim=1).values.mean(0).tolist())
    worst = inst.eval_p.topk(5, dim=1, largest=False).indices
    assert problem.value(lambda users, cands: worst) < problem.initial


def test_rank_grpo_learns_per_rank_and_beats_its_start():
    problem = build("lab/recsys_lists", 0, eval_users=50)
    method, state, metrics = _run(problem, "rank_grpo", 60)
    assert metrics["cost"] == 32 and set(metrics) >= {f"rewards/pos_{k}" for k in range(1, 6)}
    assert problem.value(method.policy(problem, state)) > problem.initial + 0.05


def test_bad_options_and_knobs_name_the_field():
    with pytest.raises(ValueError, match="reward = 'dcg'.*exp_inf"):
        lab_methods.get("rank_grpo").build_options({"reward": "dcg"})
    with pytest.raises(ValueError, match="clustering"):
        lab_methods.get("tpgr").build_options({"clustering": "kmeans"})
    with pytest.raises(ValueError, match="length"):
        build("lab/recsys_lists", 0, length=80)
    with pytest.raises(ValueError, match="nope"):
        build("lab/recsys", 0, nope=1)


@pytest.mark.parametrize(
    ("task", "algo", "knobs", "budget"),
    [
        ("lab/recsys", "tpgr", {"items": 100, "length": 8, "eval_users": 8}, 128),
        ("lab/recsys_lists", "rank_grpo", {"eval_users": 20}, 128),
        ("lab/recsys_lists", "grpo_list_dcg", {"eval_users": 20}, 128),
    ],
)
def test_train_and_exact_resume(tmp_path, task, algo, knobs, budget):
    common = {"task": task, "algo": algo, "knobs": knobs, "eval_every": 1, "progress": False}
    straight = policylab.train(**common, budget=budget, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=budget // 2, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=budget, run_dir=str(tmp_path / "b"), resume=True)
    values = [e["oracle/value"] for e in straight.evals]
    assert [e["oracle/value"] for e in resumed.evals] == values
    assert len(set(values)) > 1  # the policy moved
