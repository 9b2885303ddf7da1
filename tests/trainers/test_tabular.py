"""The tabular trainer: a registered method on a seeded instance, scored by the exact
oracle; resume reproduces an uninterrupted run; bad input fails before the run folder."""

import json

import pytest

from policylab import routing
from policylab.cli import main
from policylab.config import TabularConfig
from policylab.tabular.catalogue import build, tabular_methods


def rows(run_dir, kind):
    with open(f"{run_dir}/metrics.jsonl") as f:
        return [r for r in map(json.loads, f) if r["kind"] == kind]


def config(tmp_path, **fields):
    base = {
        "task": "tabular/robust_garnet",
        "algo": "drpg",
        "budget": 12,
        "eval_every": 4,
        "run_dir": str(tmp_path / "run"),
        "progress": False,
    }
    return routing.run_config(None, {**base, **fields})


def test_a_tabular_task_routes_to_the_tabular_trainer(tmp_path):
    cfg = config(tmp_path)
    assert isinstance(cfg, TabularConfig)
    result = routing.train(cfg)
    evals = rows(result.run_dir, "eval")
    assert [e["step"] for e in evals] == [0, 4, 8, 12]
    assert evals[0]["eval/score"] == pytest.approx(0.0)  # the starting policy: gap₀
    problem = build("tabular/robust_garnet", 0)
    assert evals[0]["oracle/gap"] == pytest.approx(problem.optimum - problem.initial)
    assert evals[-1]["oracle/gap"] < evals[0]["oracle/gap"] / 10  # DRPG climbs
    assert result.spent == 12 and len(rows(result.run_dir, "train")) == 12


def test_resume_equals_an_uninterrupted_run(tmp_path):
    whole = routing.train(config(tmp_path, run_dir=str(tmp_path / "whole"), budget=10))
    part = config(tmp_path, run_dir=str(tmp_path / "part"), budget=6, save_every=3)
    routing.train(part)
    rest = config(tmp_path, run_dir=str(tmp_path / "part"), budget=10, save_every=3)
    routing.train(rest, resume=True)
    strip = ("time/elapsed_s", "time/step_s")

    def clean(rs):
        return [{k: v for k, v in r.items() if k not in strip} for r in rs]

    for kind in ("train", "eval"):
        a, b = clean(rows(whole.run_dir, kind)), clean(rows(tmp_path / "part", kind))
        if kind == "eval":  # the 6-step run scored itself at its end (step 6) too
            b = [r for r in b if r["step"] != 6 or any(x["step"] == 6 for x in a)]
        assert a == b


def test_stop_gap_ends_the_run_early(tmp_path):
    result = routing.train(config(tmp_path, budget=500, eval_every=1, stop_gap=1e-3))
    assert result.evals[-1]["oracle/gap"] <= 1e-3 and result.spent < 500


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"algo": "grpo"}, "unknown tabular method 'grpo'"),
        ({"task": "tabular/nope"}, "unknown tabular task 'tabular/nope'"),
        ({"budget": 0}, "budget"),
    ],
)
def test_bad_configs_fail_before_any_work(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        config(tmp_path, **fields)
    assert not (tmp_path / "run").exists()


def test_bad_options_and_knobs_fail_before_the_run_folder(tmp_path):
    with pytest.raises(ValueError, match="unknown option"):
        routing.train(config(tmp_path, options={"stepp": 0.1}))
    with pytest.raises(ValueError, match="must be > 0"):
        routing.train(config(tmp_path, options={"step": -1}))
    with pytest.raises(ValueError, match="n_statez"):
        routing.train(config(tmp_path, knobs={"n_statez": 3}))
    assert not (tmp_path / "run").exists()


def test_every_method_has_sourced_defaults():
    for name in tabular_methods.names():
        method = tabular_methods.get(name)
        assert method.citations
        for key, source in method.citations.items():
            assert source.startswith(("[paper", "[code", "[ours")), (name, key, source)
        method.build_options()


def test_cli_train_list_and_describe(tmp_path, capsys):
    run_dir = tmp_path / "cli"
    code = main(
        [
            "train",
            "--task",
            "tabular/garnet",
            "--algo",
            "nominal_pg",
            "budget=5",
            f"run_dir={run_dir}",
            "progress=false",
            "eval_every=5",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "exact optimum" in out and (run_dir / "summary.md").is_file()
    assert main(["describe", "drpg"]) == 0
    assert "Proj_Δ" in capsys.readouterr().out
    assert main(["list"]) == 0
    assert "tabular/robust_garnet" in capsys.readouterr().out


@pytest.mark.parametrize(
    "algo, task, knobs",
    [
        ("drpg", "tabular/robust_garnet", {}),
        ("sampled_pg", "tabular/garnet", {"sampled": True, "n_states": 4}),
    ],
)
def test_checkpoints_load_without_unpickling_code(tmp_path, algo, task, knobs):
    import torch

    from policylab.trainers.run import latest_checkpoint

    cfg = config(
        tmp_path, algo=algo, task=task, knobs=knobs, budget=2048 if knobs else 4, eval_every=2
    )
    result = routing.train(cfg)
    state = torch.load(latest_checkpoint(result.run_dir) / "state.pt", weights_only=True)
    assert state["spent"] == result.spent


@pytest.mark.parametrize("loss", ["ppo_clip", "reinforce"])
def test_sampled_pg_learns_from_the_simulator_with_registered_losses(loss):
    import torch

    problem = build("tabular/garnet", 3, n_states=5, n_actions=3, sampled=True)
    method = tabular_methods.get("sampled_pg")
    options = method.build_options({"loss": loss})
    generator = torch.Generator().manual_seed(0)
    state = method.init(problem, options, generator)
    for _ in range(30):
        state, metrics = method.step(problem, state, options, generator)
    assert metrics["cost"] == 16 * 32
    assert problem.score(method.policy(problem, state)) > 0.6
