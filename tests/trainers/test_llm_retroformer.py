"""Retroformer end to end (papers/seed_agents.md §A4, test 3): the frozen actor's
parameters never change, only M_r has an optimiser and its state, rows are reflect
turns; the baselines run without updates; bad options fail before any model loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from policylab.config import ConfigError, TrainConfig
from policylab.models import load_model
from policylab.trainers.llm import compose, learners, train
from policylab.trainers.run import load_state, read_metrics
from policylab.workflows.retro import parameter_hash

FAST = dict(
    task="plan_path_fog",
    prompts_per_step=2,
    eval_n=4,
    eval_every=0,
    save_every=1,
    progress=False,
    lr=1e-3,
)


@pytest.mark.slow
def test_learners_hold_a_frozen_actor_outside_the_optimisers():
    cfg = TrainConfig(algo="retroformer_online", **FAST)
    policies, reference = learners(cfg, compose(cfg))
    actor = policies.actor
    assert actor is not None and reference is not None  # k1 KL to the warm-start M_r
    assert not any(p.requires_grad for p in actor.parameters())
    optimised = {
        id(p) for m in policies.members for g in m.optimiser.param_groups for p in g["params"]
    }
    assert not optimised & {id(p) for p in actor.parameters()}
    assert actor.model is not policies(0).model


@pytest.mark.slow
def test_the_actor_never_changes_and_only_retro_has_optimiser_state(tmp_path):
    torch.set_num_threads(1)
    cfg = TrainConfig(algo="retroformer_online", steps=2, run_dir=str(tmp_path / "r"), **FAST)
    result = train(cfg)
    rows = [r for r in read_metrics(result.run_dir) if r.get("kind") != "eval"]
    tiny = parameter_hash(load_model("tiny")[0])
    assert [r["retro/actor_hash"] for r in rows] == [float(int(tiny[:8], 16))] * 2
    assert all(r["retro/rows"] % 4 == 0 for r in rows)  # G = 4 reflections per failure
    state = load_state(Path(result.run_dir) / "checkpoints" / "step_2" / "state.pt")
    assert state["others"] == [] and len(state["optimizer"]["state"]) > 0
    trained = load_model(str(Path(result.run_dir) / "model"))[0]
    assert parameter_hash(trained) != tiny  # M_r was updated (from the same tiny start)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["frozen_retro", "no_reflection"])
def test_baselines_generate_but_never_update(tmp_path, algo):
    torch.set_num_threads(1)
    cfg = TrainConfig(algo=algo, steps=1, run_dir=str(tmp_path / algo), **FAST)
    result = train(cfg)
    rows = [r for r in read_metrics(result.run_dir) if r.get("kind") != "eval"]
    assert rows[-1]["budget/tokens"] > 0 and "pg/loss" not in rows[-1]
    # every generated turn is charged although none becomes a row (max_samples stops it);
    # at least one act turn of one attempt per drawn instance
    assert rows[-1]["budget/samples"] >= FAST["prompts_per_step"]
    model = load_model(str(Path(result.run_dir) / "model"))[0]
    assert parameter_hash(model) == parameter_hash(load_model("tiny")[0])


def test_bad_retroformer_options_fail_before_any_model_loads():
    with pytest.raises(ConfigError, match="agent.actor = '/no/such/actor'"):
        compose(TrainConfig(algo="retroformer_online", agent={"actor": "/no/such/actor"}, **FAST))
    with pytest.raises(ValueError, match="train_phase"):
        compose(TrainConfig(algo="retroformer_online", agent={"train_phase": "all"}, **FAST))


@pytest.mark.slow
def test_cli_trains_retroformer_on_plan_path_fog(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "policylab.cli", "train", "--algo", "retroformer_online",
         "--task", "plan_path_fog", "steps=1", "prompts_per_step=2", "eval_n=2",
         "progress=false", f"run_dir={tmp_path / 'cli'}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "cli" / "summary.md").exists()
