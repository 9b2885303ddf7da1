"""Test-time methods as algorithms: options and their errors, `policylab train --algo
latentseek` (a run folder, nothing trained), `policylab solve`, `policylab eval --testtime`,
`policylab describe`, and the benchmark's statistics (benchmarks/testtime.py)."""

import importlib.util
import json
import math
from pathlib import Path

import pytest
import yaml

from policylab import recipes, tasks, testtime_run
from policylab.cli import main
from policylab.evaluate import evaluate
from policylab.models import load_model

BENCH = Path(__file__).parents[1] / "benchmarks" / "testtime.py"


def _bench():
    spec = importlib.util.spec_from_file_location("testtime_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recipes_name_their_method_and_defaults():
    method, options = testtime_run.resolve("latentseek")
    assert method == "latentseek"
    assert (options["rho"], options["lr"], options["steps"], options["threshold"]) == (
        0.1,
        0.03,
        10,
        -0.2,
    )
    assert (options["start"], options["reward"], options["pause"]) == (0, "oracle", 0)
    method, options = testtime_run.resolve("dmlr_text_provisional", {"sigma": 0.2})
    assert method == "latent_conf_pg"
    assert (options["K"], options["M"], options["sigma"], options["topk"]) == (4, 8, 0.2, 5)
    assert options["pause"] == 4
    assert testtime_run.is_testtime("latentseek") and not testtime_run.is_testtime("grpo")


@pytest.mark.parametrize(
    ("name", "overrides", "message"),
    [
        ("latentseek", {"bogus": 1}, r"unknown test-time option\(s\) bogus; accepted: .*rho"),
        ("latentseek", {"reward": "self"}, r"reward='self'; accepted: oracle, noisy_oracle"),
        ("latentseek", {"start": -1}, r"start=-1; accepted: 0, 1, ... or 'answer'"),
        ("dmlr_text_provisional", {"pause": 2}, r"K=4 .* pause=2: give pause ≥ K"),
        ("magic", {}, r"unknown test-time method 'magic'; accepted: greedy, best_of_n"),
        ("grpo", {}, r"grpo trains a model"),
        # values that used to pass and failed later (flip) or silently (M, sigma: nan latents)
        ("latentseek", {"flip": 2.0}, r"flip=2.0; accepted: a number in \[0.0, 1.0\]"),
        ("latentseek", {"rho": -1}, r"rho=-1; accepted: a number in \(0.0, 1.0\]"),
        ("latentseek", {"steps": "ten"}, r"steps='ten'; accepted: an integer ≥ 0"),
        ("latentseek", {"lr": "x"}, r"lr='x'; accepted: a number > 0.0"),
        ("dmlr_text_provisional", {"M": 0}, r"M=0; accepted: an integer ≥ 1"),
        ("dmlr_text_provisional", {"sigma": 0}, r"sigma=0; accepted: a number > 0.0"),
        ("dmlr_text_provisional", {"topk": 1.5}, r"topk=1.5; accepted: an integer ≥ 1"),
    ],
)
def test_bad_options_name_the_value_and_the_choices(name, overrides, message):
    with pytest.raises(ValueError, match=message):
        testtime_run.resolve(name, overrides)


def test_describe_says_why_dmlr_is_provisional(capsys):
    assert main(["describe", "dmlr_text_provisional"]) == 0
    out = capsys.readouterr().out
    assert "Provisional" in out and "every constant is ours" in out
    assert "visual injection" in out
    assert main(["describe", "latentseek"]) == 0
    out = capsys.readouterr().out
    assert "training.rho" in out and "0.1" in out and "arXiv:2505.13308" in out


def test_greedy_matches_the_library_s_held_out_evaluation():
    # our decode loop and the engine give the same greedy answers on the same 10 prompts
    model, tok = load_model("tiny")
    task = tasks.get("arithmetic")
    _, summary = testtime_run.evaluate(
        model, tok, task, "greedy", testtime_run.resolve("greedy")[1], n=10
    )
    engine = evaluate(model, tok, task, n=10, seed=0, max_new_tokens=24)
    assert summary["eval/accuracy"] == engine.greedy_accuracy
    assert summary["eval/reward_calls_mean"] == 0.0 and summary["eval/decodes_mean"] == 1.0


def test_train_runs_the_method_into_a_run_folder(tmp_path, capsys):
    run = tmp_path / "ls"
    code = main(
        [
            "train",
            "--algo",
            "latentseek",
            "--task",
            "arithmetic",
            "eval_n=3",
            f"run_dir={run}",
            "report_to=[]",
            "agent={start: answer, rho: 0.5}",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "test-time method" in out and "no weights trained" in out
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["algo"] == "latentseek"
    assert config["resolved"]["options"]["rho"] == 0.5
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["instance"] * 3 + ["eval"]
    assert rows[-1]["eval/accuracy"] == sum(r["testtime/correct"] for r in rows[:3]) / 3
    assert len((run / "samples.jsonl").read_text().splitlines()) == 3
    assert "eval/accuracy" in (run / "summary.md").read_text()


def test_train_with_a_bad_option_fails_before_any_model_loads(tmp_path, capsys, monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("policylab.models.load_model", no_model)
    argv = ["train", "--algo", "latentseek", "--task", "arithmetic"]
    assert main([*argv, f"run_dir={tmp_path / 'r'}", "agent={rh: 0.5}"]) == 2
    assert "unknown test-time option(s) rh; accepted:" in capsys.readouterr().out
    assert not (tmp_path / "r").exists()


def test_solve_one_input(capsys):
    argv = ["solve", "--testtime", "latentseek", "--prompt", "45+74=", "--answer", "119"]
    assert main([*argv, "--option", "start=answer", "--option", "rho=0.5"]) == 0
    out = capsys.readouterr().out
    assert "'<answer>129</answer>'" in out and "'<answer>119</answer>'" in out
    assert "False → True" in out
    assert main(["solve", "--testtime", "latentseek", "--prompt", "45+74="]) == 2
    assert "give --answer" in capsys.readouterr().out


def test_eval_testtime_over_a_held_out_set(capsys):
    argv = ["eval", "--testtime", "best_of_n", "--task", "arithmetic", "--n", "4"]
    assert main([*argv, "--option", "n=2"]) == 0
    out = capsys.readouterr().out
    assert "best_of_n" in out and "reward calls" in out
    assert main(["eval", "--task", "arithmetic", "--option", "n=2"]) == 2


def test_pause_rows_put_k_pauses_between_prompt_and_answer():
    rows = testtime_run.pause_rows(tasks.get("arithmetic", n_operands=3), 3, pause=4)
    assert all(r["prompt"].endswith("=~~~~") for r in rows)
    assert rows[0] == {"prompt": "49+97+53=~~~~", "answer": "199"}


def test_mcnemar_and_bootstrap_by_hand():
    from policylab.arena import stats

    # 5 prompts only a gets right, 1 only b: p = 2·P(X ≤ 1), X ~ Bin(6, ½) = 2·7/64
    a = [True] * 5 + [False] + [True, False]
    b = [False] * 5 + [True] + [True, False]
    assert stats.mcnemar_p(a, b) == pytest.approx(0.21875)
    assert stats.mcnemar_p(a, a) == 1.0
    # Δ per prompt averaged over seeds: one prompt always +1, one +½, one 0 → mean ½
    mean, low, high = stats.paired_bootstrap_ci(
        [[True, True, False], [True, False, False]], [[False] * 3, [False] * 3]
    )
    assert mean == pytest.approx(0.5) and 0.0 <= low <= mean <= high <= 1.0


def test_every_recipe_source_is_tagged():
    for name in ("latentseek", "dmlr_text_provisional"):
        recipe = recipes.get(name)
        assert all(s.startswith(("[paper", "[code", "[ours")) for s in recipe.citations.values())


def test_train_dmlr_text_runs_on_the_tiny_model(tmp_path, capsys):
    # the shipped model never saw pauses; the run still works and records its cost
    run = tmp_path / "dmlr"
    argv = ["train", "--algo", "dmlr_text_provisional", "--task", "arithmetic"]
    assert main([*argv, "eval_n=1", f"run_dir={run}", "report_to=[]", "agent={steps: 1}"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["testtime/decodes"] == 8 + 1  # M perturbations, then the final decode
    assert rows[0]["testtime/reward_calls"] == 0  # guided by confidence, not a reward
    assert math.isnan(rows[0]["testtime/initial_correct"])  # no first answer decoded
    assert math.isnan(rows[-1]["eval/initial_accuracy"])
