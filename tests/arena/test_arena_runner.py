"""The arena runner (arena/runner.py): tiny arenas run end to end and write the table, the
plot and the report; a finished arena is reused, an interrupted run resumed, a failing run
reported while the others finish; bad settings fail before any work."""

import json

import pytest
import yaml

from policylab.arena import arena, make_spec, report
from policylab.cli import main
from policylab.config import load_control
from policylab.trainers.control import train
from policylab.trainers.run import read_metrics

# CartPole runs of 2 iterations of 4 × 32 steps, evaluated after each
CONTROL = dict(num_envs=4, num_steps=32, minibatch_size=64, epochs=2, eval_every=1)
CONTROL["eval_episodes"] = 2
BUDGET = 256


def control_arena(out, algos="ppo,pg_rainbow", **kwargs):
    return arena(
        "CartPole-v1",
        algos,
        2,
        budget=BUDGET,
        overrides=CONTROL,
        out_dir=out,
        progress=False,
        **kwargs,
    )


def test_tiny_control_arena_writes_table_plot_and_report(tmp_path):
    result = control_arena(tmp_path / "a", jobs=2)
    assert [(r.algo, r.seed, r.status) for r in result.records] == [
        ("ppo", 0, "done"),
        ("ppo", 1, "done"),
        ("pg_rainbow", 0, "done"),
        ("pg_rainbow", 1, "done"),
    ]
    for record in result.records:  # evaluated before training, then after each iteration
        assert [x for x, _ in record.curve] == [0, 128, 256]
        # the curve is the run's own evaluation rows, read back
        rows = read_metrics(record.run_dir, kind="eval")
        assert record.curve[-1][1] == rows[-1]["eval/return_mean"]
    ppo = result.summaries[0]
    finals = [r.curve[-1][1] for r in result.records if r.algo == "ppo"]
    assert ppo.final.mean == pytest.approx(sum(finals) / 2)
    md = result.report["markdown"].read_text()
    assert "| ppo | 2/0 |" in md and "pg_rainbow" in md
    assert "policylab arena --task CartPole-v1 --algos ppo,pg_rainbow --seeds 2" in md
    assert result.report["png"].stat().st_size > 1000
    assert "data:image/png;base64," in result.report["html"].read_text()
    assert sorted(result.trained) == ["pg_rainbow-s0", "pg_rainbow-s1", "ppo-s0", "ppo-s1"]


def test_a_finished_arena_is_read_not_trained_again(tmp_path):
    first = control_arena(tmp_path / "a", algos="ppo")
    metrics = [read_metrics(r.run_dir) for r in first.records]
    again = control_arena(tmp_path / "a", algos="ppo")
    assert again.trained == []
    assert [read_metrics(r.run_dir) for r in again.records] == metrics
    # `policylab report` rewrites the report from the folders alone
    (tmp_path / "a" / "results.md").unlink()
    assert main(["report", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "results.md").is_file()


def test_an_interrupted_run_is_resumed(tmp_path):
    out = tmp_path / "a"
    spec_dir = out / "runs" / "ppo-s0"
    # a run stopped after 1 of its 2 iterations (its checkpoint is on disk)
    cfg = load_control(
        None,
        {**CONTROL, "algo": "ppo", "task": "CartPole-v1", "seed": 0, "total_steps": 128},
    )
    train(cfg.model_copy(update={"run_dir": str(spec_dir), "progress": False}))
    result = control_arena(out, algos="ppo")
    log = (out / "logs" / "ppo-s0.log").read_text()
    assert "--resume" in log
    assert [x for x, _ in result.records[0].curve] == [0, 128, 256]
    assert result.records[0].status == "done"


def test_a_failing_run_is_reported_and_the_others_finish(tmp_path, capsys):
    # fpo needs continuous actions: its runs fail inside the trainer, ppo's finish
    code = main(
        ["arena", "--task", "CartPole-v1", "--algos", "ppo,fpo", "--seeds", "1"]
        + ["--budget", str(BUDGET), "--out", str(tmp_path / "a")]
        + [f"{k}={v}" for k, v in CONTROL.items()]
    )
    assert code == 1
    out = capsys.readouterr().out
    assert "failed:" in out and "fpo seed 0" in out and "Box" in out
    result = report(tmp_path / "a")
    assert [r.status for r in result.records] == ["done", "failed"]
    assert "fpo" in result.report["markdown"].read_text()


def test_tiny_language_model_arena(tmp_path):
    fields = dict(
        prompts_per_step=2, samples_per_prompt=2, max_new_tokens=8, eval_n=4, eval_every=1
    )
    result = arena(
        "arithmetic",
        ["grpo", "dr_grpo"],
        2,
        budget=8,  # 2 steps of 2 prompts × 2 samples
        jobs=2,
        overrides=fields,
        out_dir=tmp_path / "a",
        progress=False,
    )
    assert all(r.status == "done" for r in result.records), [r.error for r in result.records]
    assert [x for x, _ in result.records[0].curve] == [0, 4, 8]  # generated samples
    md = result.report["markdown"].read_text()
    assert "generated samples" in md and "generated tokens" in md
    spec = json.loads((tmp_path / "a" / "arena.json").read_text())
    assert spec["budget_field"] == "steps" and spec["budget_value"] == 2
    # a run that redraws groups (dynamic sampling) is stopped at the same sample budget;
    # each run trains from its config object, written beside the runs
    config = yaml.safe_load((tmp_path / "a" / "configs" / "grpo-s0.yaml").read_text())
    assert config["max_samples"] == 8 and config["steps"] == 2 and config["seed"] == 0
    log = (tmp_path / "a" / "logs" / "grpo-s0.log").read_text()
    assert "train --config" in log and "configs/grpo-s0.yaml" in log


def test_bad_settings_fail_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        make_spec("CartPole-v1", "ppo,nope")
    with pytest.raises(ValueError, match="not a whole number of steps"):
        make_spec("arithmetic", "grpo", budget=100)  # 16 × 8 = 128 samples per step
    with pytest.raises(ValueError, match="--budget"):
        make_spec("CartPole-v1", "ppo", overrides={"total_steps": 10})
    with pytest.raises(ValueError, match="baseline"):
        make_spec("CartPole-v1", "ppo", baseline="grpo")
    control_arena(tmp_path / "a", algos="ppo")
    with pytest.raises(ValueError, match="different budget"):
        arena("CartPole-v1", "ppo", 2, budget=512, overrides=CONTROL, out_dir=tmp_path / "a")
    # the refused arena left the saved settings as they were
    assert json.loads((tmp_path / "a" / "arena.json").read_text())["budget"] == BUDGET


def test_variants_of_one_algorithm_compete_under_their_labels(tmp_path):
    variant = "ppo@clip_schedule=linear@ent_coef=0.01"
    result = control_arena(tmp_path / "a", algos=f"ppo,{variant}")
    assert [r.algo for r in result.summaries] == ["ppo", variant]
    config = yaml.safe_load((tmp_path / "a" / "configs" / f"{variant}-s0.yaml").read_text())
    assert (config["algo"], config["clip_schedule"], config["ent_coef"]) == ("ppo", "linear", 0.01)
    clips = [row["clip"] for row in read_metrics(result.records[2].run_dir, kind="train")]
    assert clips == pytest.approx([0.2, 0.1])  # annealed over the 2 iterations
    with pytest.raises(ValueError, match="expected name@key=value"):
        make_spec("CartPole-v1", "ppo@linear")
    with pytest.raises(ValueError, match="--budget"):
        make_spec("CartPole-v1", "ppo@total_steps=5")


def test_agent_arenas_compare_at_equal_generated_tokens(tmp_path):
    from policylab.arena.runner import AGENT_STEP_CAP, make_spec, run_config_of

    spec = make_spec("plan_path_moves", ["mt_grpo", "at_grpo"], 2, budget=5000)
    assert (spec.kind, spec.budget_unit, spec.budget_value) == (
        "agent",
        "generated tokens",
        AGENT_STEP_CAP,
    )
    cfg = run_config_of(tmp_path, spec, "at_grpo", 1)
    assert (cfg.max_tokens, cfg.max_samples, cfg.steps) == (5000, 0, AGENT_STEP_CAP)
    with pytest.raises(ValueError, match="needs --budget"):
        make_spec("plan_path_moves", ["at_grpo"], 2)
    with pytest.raises(ValueError, match="constant schedule"):
        make_spec("plan_path_moves", ["at_grpo"], 2, budget=10, overrides={"schedule": "cosine"})


def test_a_tabular_arena_scores_instances_against_the_exact_optimum(tmp_path):
    spec = make_spec("tabular/robust_garnet", "drpg,nominal_pg", 2, budget=6)
    assert (spec.kind, spec.budget_unit, spec.budget_field) == (
        "tabular",
        "gradient evaluations",
        "budget",
    )
    with pytest.raises(ValueError, match="unknown tabular method 'grpo'"):
        make_spec("tabular/robust_garnet", "drpg,grpo", 2)
    result = arena(
        "tabular/robust_garnet",
        "drpg,nominal_pg",
        2,
        budget=6,
        jobs=2,
        overrides={"eval_every": 3},
        out_dir=tmp_path / "t",
        progress=False,
    )
    records = {(r.algo, r.seed): r for r in result.records}
    assert all(r.status == "done" for r in records.values())
    # x = gradient evaluations spent; score 0 at the start (gap₀), > 0 once DRPG has moved
    assert [x for x, _ in records[("drpg", 0)].curve] == [0.0, 3.0, 6.0]
    assert records[("drpg", 0)].curve[0][1] == pytest.approx(0.0)
    assert records[("drpg", 0)].curve[-1][1] > 0.5
    assert "gradient evaluations" in (tmp_path / "t" / "results.md").read_text()


def test_a_tabular_or_lab_variant_key_that_is_no_run_field_is_a_method_option(tmp_path):
    from policylab.arena.runner import method_options_of, run_config_of

    assert method_options_of({"eval_every": 2}) == {"eval_every": 2}
    assert method_options_of({"step": 0.5, "eval_every": 2, "options": {"inner_tol": 1e-3}}) == {
        "eval_every": 2,
        "options": {"inner_tol": 1e-3, "step": 0.5},
    }
    spec = make_spec("tabular/garnet", ["nominal_pg", "nominal_pg@step=0.5"], seeds=1, budget=4)
    cfg = run_config_of(tmp_path, spec, "nominal_pg@step=0.5", 0)
    assert cfg.options == {"step": 0.5} and cfg.algo == "nominal_pg"
    bad = run_config_of(tmp_path, spec, "nominal_pg@no_such_option=1", 0)
    assert bad.options == {"no_such_option": 1}  # the method refuses it when it builds
