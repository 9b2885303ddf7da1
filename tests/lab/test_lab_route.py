"""The lab route: `lab/<task>` runs a registered lab method in the tabular trainer's loop,
with its own checkpoint and restore (policylab/lab)."""

from __future__ import annotations

import pytest
from tests.lab import toy

import policylab
from policylab.config import LabConfig, TabularConfig
from policylab.routing import run_config


@pytest.fixture(autouse=True)
def _registered():
    toy.register()


def test_lab_task_routes_to_a_lab_config():
    cfg = run_config(None, {"task": "lab/toy_bandit", "algo": "toy_reinforce"})
    assert type(cfg) is LabConfig
    tab = run_config(None, {"task": "tabular/robust_garnet", "algo": "drpg"})
    assert type(tab) is TabularConfig


def test_unknown_lab_method_and_task_name_the_choices():
    with pytest.raises(ValueError, match="unknown lab method 'nope'.*toy_reinforce"):
        run_config(None, {"task": "lab/toy_bandit", "algo": "nope"})
    with pytest.raises(ValueError, match="unknown lab task 'lab/nope'.*lab/toy_bandit"):
        run_config(None, {"task": "lab/nope", "algo": "toy_reinforce"})
    with pytest.raises(ValueError, match="unknown lab method 'drpg'"):  # a tabular method
        run_config(None, {"task": "lab/toy_bandit", "algo": "drpg"})


def test_lab_run_learns_and_scores(tmp_path):
    result = policylab.train(
        task="lab/toy_bandit",
        algo="toy_reinforce",
        budget=400,
        eval_every=10,
        run_dir=str(tmp_path / "run"),
        progress=False,
    )
    assert result.evals[0]["eval/score"] == pytest.approx(0.0)
    assert result.evals[-1]["eval/score"] > 0.5  # the best arm's probability rose
    assert (tmp_path / "run" / "config.yaml").is_file()


def test_lab_resume_is_exact_through_checkpoint_and_restore(tmp_path):
    common = {"task": "lab/toy_bandit", "algo": "toy_reinforce", "eval_every": 5, "progress": False}
    straight = policylab.train(**common, budget=160, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=80, save_every=5, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=160, run_dir=str(tmp_path / "b"), resume=True)
    assert [e["oracle/value"] for e in resumed.evals] == [e["oracle/value"] for e in straight.evals]


def test_arena_accepts_a_lab_task():
    from policylab.arena.runner import make_spec

    spec = make_spec("lab/toy_bandit", "toy_reinforce", seeds=2, budget=40)
    assert spec.kind == "tabular" and spec.budget_unit == "pulls"


def test_the_catalogue_registers_every_seed_lab_system():
    """Each module's import line in lab/catalogue.py registers its methods (a lost line
    silently drops a system from `policylab list` and `--task lab/...`)."""
    from policylab.lab.catalogue import lab_methods, lab_tasks

    expected_methods = {
        "hnpg",
        "trpo",
        "fqe_greedy",  # §8
        "ppga_provisional",
        "map_elites",
        "cma_mae",  # §9
        "mbpg_tracking_provisional",
        "mbpg_open_loop_provisional",
        "model_only",  # §11
        "tracking_oracle",
        "ppo_tracking",
        "tpgr",
        "flat_softmax",
        "rank_grpo",
        "grpo_list_dcg",  # §14
        "afgr",
        "random_views",
        "fixed_order",
        "oracle_views",  # §16
    }
    assert expected_methods <= set(lab_methods.names())
    expected_tasks = {"combination_lock", "noisy_point_mass", "tracking", "recsys", "uav_coverage"}
    expected_tasks |= {"image_pairs", "ring"}
    assert expected_tasks | {"recsys_lists", "multiview"} <= set(lab_tasks.names())


def test_an_unknown_knob_names_the_accepted_ones():
    from policylab.lab import build

    with pytest.raises(ValueError, match="no knob 'arm'; its knobs: arms"):
        build("lab/toy_bandit", 0, arm=3)


def test_a_method_on_another_lab_task_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="'tpgr' runs on lab/recsys, not lab/multiview.*afgr"):
        run_config(None, {"task": "lab/multiview", "algo": "tpgr", "run_dir": str(tmp_path / "r")})
    assert not (tmp_path / "r").exists()


def test_a_resumed_lab_run_keeps_its_knobs(tmp_path):
    common = {"task": "lab/toy_bandit", "algo": "toy_reinforce", "progress": False}
    run = str(tmp_path / "run")
    policylab.train(**common, budget=16, save_every=1, run_dir=run)
    with pytest.raises(ValueError, match="knobs"):
        policylab.train(**common, budget=32, knobs={"arms": 2}, run_dir=run, resume=True)


def test_a_lab_summary_names_the_best_value_known(tmp_path):
    policylab.train(
        task="lab/toy_bandit",
        algo="toy_reinforce",
        budget=16,
        run_dir=str(tmp_path / "r"),
        progress=False,
    )
    text = (tmp_path / "r" / "summary.md").read_text()
    assert "gap to the best value known" in text and "exact optimum" not in text


def test_an_offline_file_opens_only_its_own_lock(tmp_path):
    import torch

    from policylab.envs.combination_lock import CombinationLock, collect_offline
    from policylab.lab.catalogue import build

    data = collect_offline(CombinationLock(3, 0), 20, 1)
    data["meta"] = {"H": 3, "seed": 0, "corrupted": 0.0}
    torch.save(data, tmp_path / "lock.pt")
    build("lab/combination_lock", 0, H=3, offline_file=str(tmp_path / "lock.pt"), eval_episodes=2)
    with pytest.raises(ValueError, match="collected on the lock of H = 3, seed 0"):
        build("lab/combination_lock", 1, H=3, offline_file=str(tmp_path / "lock.pt"))
    with pytest.raises(ValueError, match="offline_file holds its own episodes"):
        build("lab/combination_lock", 0, H=3, offline_file=str(tmp_path / "lock.pt"), corrupted=0.5)
