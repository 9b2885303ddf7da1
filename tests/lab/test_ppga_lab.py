"""PPGA on lab/noisy_point_mass: multi-reward PPO, the task's scorer, the three methods
through `policylab train` and exact resume (papers/seed_control_theory.md §9)."""

import pytest
import torch

import policylab
from policylab.envs.noisy_point_mass import NoisyPointMass, rollout
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.noisy_point_mass import reevaluate
from policylab.qd.multi_ppo import PPOSettings, gae, init_critics, ppo_iterations
from policylab.search.reprl import mlp_numel

D = torch.float64
TASK = "lab/noisy_point_mass"


def test_gae_by_hand():
    # T = 2, r = [1, 1], V = [0.5, 0.5], γ = 0.5, λ = 1:
    # δ₁ = 1 − 0.5 = 0.5 (episode ends), δ₀ = 1 + 0.5·0.5 − 0.5 = 0.75, A₀ = 0.75 + 0.5·0.5 = 1
    r = torch.ones(1, 2, 1, 1, dtype=D)
    v = torch.full((1, 2, 1, 1), 0.5, dtype=D)
    assert gae(r, v, 0.5, 1.0).flatten().tolist() == pytest.approx([1.0, 0.5])


def test_each_learner_follows_its_own_reward():
    # from a = [0.5, 0.5]: the f-learner shrinks |a|, the m₁-learner raises a₁, m₂ raises a₂
    env = NoisyPointMass()
    g = torch.Generator().manual_seed(0)
    theta = torch.zeros(mlp_numel(env.sizes), dtype=D)
    theta[-2:] = torch.atanh(torch.tensor([0.5, 0.5], dtype=D))
    actors, _, info = ppo_iterations(
        env,
        theta.expand(3, -1),
        init_critics(env, 3, g),
        torch.eye(3, dtype=D),
        4,
        PPOSettings(lr=3e-3, target_kl=None),
        g,
    )
    a = rollout(env, actors, 1, g)["rewards"][:, :, 0, 1:].mean(1)  # mean action [3, 2]
    assert float(a[0].norm()) < 0.5 * 2**0.5 - 0.05
    assert float(a[1, 0]) > 0.55 and float(a[2, 1]) > 0.55
    assert abs(float(a[1, 1]) - 0.5) < 0.05 and abs(float(a[2, 0]) - 0.5) < 0.05
    assert info["env_steps"] == 3 * 4 * 8 * 50


def test_scorer_reevaluates_and_starts_at_zero():
    problem = build(TASK, 0, sigma=0.0)
    assert problem.optimum == pytest.approx(76.0) and problem.initial == 0.0
    pi = problem.initial_policy.clone()
    pi[0, 0], pi[0, 1] = 1.0, 0.99  # claims f = 0.99, but its actor acts a = [0.6, 0]
    pi[0, -2] = float(torch.atanh(torch.tensor(0.6)))
    report = reevaluate(problem.extras["env"], 10, pi, 2, 0)
    assert report["qd_score_claimed"] == pytest.approx(0.99)
    assert report["qd_score"] == pytest.approx(0.82) and report["coverage"] == 0.01
    assert problem.value(pi) == pytest.approx(0.82)


def test_bad_knob_and_option_name_the_field():
    with pytest.raises(ValueError, match="sigma"):
        build(TASK, 0, sigma=-1.0)
    with pytest.raises(ValueError, match="nope"):
        build(TASK, 0, nope=1)
    with pytest.raises(ValueError, match="restart.*'bad'.*no_improvement"):
        lab_methods.get("ppga_provisional").build_options({"restart": "bad"})
    with pytest.raises(ValueError, match="mutation_sigma"):
        lab_methods.get("map_elites").build_options({"mutation_sigma": 0.0})


SMALL = {
    "ppga_provisional": {"n1": 1, "n2": 1, "population": 8, "episodes": 4, "epochs": 1},
    "map_elites": {"batch": 8},
    "cma_mae": {},
}


@pytest.mark.parametrize("algo", sorted(SMALL))
def test_train_fills_the_archive(algo, tmp_path):
    result = policylab.train(
        task=TASK,
        algo=algo,
        budget=4000,
        eval_every=1,
        options=SMALL[algo],
        run_dir=str(tmp_path / "run"),
        progress=False,
    )
    assert result.evals[0]["oracle/value"] == 0.0
    assert result.evals[-1]["oracle/value"] > 1.0  # several cells filled
    assert result.spent >= 4000


@pytest.mark.parametrize("algo", sorted(SMALL))
def test_resume_is_exact(algo, tmp_path):
    common = {
        "task": TASK,
        "algo": algo,
        "eval_every": 1,
        "options": SMALL[algo],
        "progress": False,
    }
    straight = policylab.train(**common, budget=6000, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=3000, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=6000, run_dir=str(tmp_path / "b"), resume=True)
    assert len(straight.evals) > 2
    assert [e["oracle/value"] for e in resumed.evals] == [e["oracle/value"] for e in straight.evals]


def test_arena_accepts_the_task():
    from policylab.arena.runner import make_spec

    spec = make_spec(TASK, "ppga_provisional,cma_mae", seeds=2, budget=1000)
    assert spec.kind == "tabular" and spec.budget_unit == "env steps"
