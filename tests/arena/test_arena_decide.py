"""What an arena can decide (arena/decide.py, arena/aggregate.py): the power line, the
rliable table with Holm p-values, intervals cut to the score's range, several tasks at
once, and seeds sized by power."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from policylab.arena import arena
from policylab.arena.aggregate import score_matrix, split_tasks, write_aggregate
from policylab.arena.decide import (
    MIN_BOOTSTRAP_SEEDS,
    holm_pvalues,
    paired_differences,
    power_sentence,
    statistics_paragraphs,
)
from policylab.arena.power import minimal_detectable_effect
from policylab.arena.stats import Interval, RunRecord, summarize
from policylab.cli import main


def runs(scores: dict[str, list[float]], start: float = 0.5) -> list[RunRecord]:
    return [
        RunRecord(algo, seed, "done", [(0.0, start), (100.0, score)], 1.0, "samples")
        for algo, values in scores.items()
        for seed, score in enumerate(values)
    ]


def test_paired_differences_and_holm():
    values = {"b": {0: 0.5, 1: 0.6, 2: 0.7}, "x": {0: 0.6, 1: 0.8, 2: 0.8}, "y": {1: 0.6}}
    diffs = paired_differences(values, "b")
    assert diffs == {"x": pytest.approx([0.1, 0.2, 0.1]), "y": pytest.approx([0.0])}
    holm = holm_pvalues(diffs)
    assert math.isnan(holm["y"])  # one pair: no test
    # one finite p in the family: Holm leaves it as it is
    # d = [.1, .2, .1]: mean 0.1333, s = 0.05774, t = 0.1333/(0.05774/√3) = 4.0, df 2 → p = 0.0572
    assert holm["x"] == pytest.approx(0.0572, abs=5e-4)


def test_power_sentence_states_the_detectable_difference():
    diffs = {"x": [0.1, 0.0, 0.05, -0.05, 0.1, 0.0], "y": [0.01, 0.0, 0.01, 0.0, 0.01, 0.0]}
    text = power_sentence(diffs)
    sd = float(np.std(diffs["x"], ddof=1))  # the noisier comparison plans
    assert (
        f"≥ {minimal_detectable_effect(sd, 6):.3g} at 80 % power" in text and "with 6 seeds" in text
    )
    assert "fewer than 2" in power_sentence({"x": [0.1]})


def test_statistics_leave_out_the_bootstrap_below_five_seeds():
    few = statistics_paragraphs(runs({"b": [0.5, 0.6, 0.7], "x": [0.6, 0.8, 0.8]}), "b", 100)
    assert any("need ≥ 5 seeds" in p for p in few)
    assert "| x | — | — |" in few[1]
    n = MIN_BOOTSTRAP_SEEDS + 1
    base = [0.5 + 0.01 * i for i in range(n)]
    many = statistics_paragraphs(runs({"b": base, "x": [v + 0.2 for v in base]}), "b", 100)
    row = next(line for line in many[1].splitlines() if line.startswith("| x |"))
    # x beats b on every seed: P(better) = 1 on the data, decided after Holm
    assert "| 1 [" in row and row.endswith("| yes |")


def test_accuracy_intervals_are_cut_to_zero_one():
    records = runs({"b": [0.0, 0.02, 0.9], "x": [0.01, 0.0, 0.95]})
    free = summarize(records, "b", None, 100)
    cut = summarize(records, "b", None, 100, score_range=(0.0, 1.0))
    assert free[0].final.low < 0 and cut[0].final.low == 0.0
    assert cut[0].final.mean == free[0].final.mean
    assert cut[1].diff_final.low >= -1.0
    assert Interval(0.5, -0.2, 1.4, 3).clipped(0, 1).high == 1.0
    with pytest.raises(ValueError, match="low"):
        Interval(0.5, 0.1, 0.9, 3).clipped(1, 0)


def _result(task: str, scores: dict[str, list[float]], kind: str = "llm"):
    spec = SimpleNamespace(
        task=task, algos=list(scores), seeds=[0, 1, 2, 3], baseline="b", kind=kind
    )
    return SimpleNamespace(spec=spec, records=runs(scores))


def test_aggregate_over_tasks(tmp_path):
    one = _result("t1", {"b": [0.1, 0.2, 0.3, 0.4], "x": [0.3, 0.4, 0.5, 0.6]})
    two = _result("t2", {"b": [0.5, 0.5, 0.6], "x": [0.7, 0.8, 0.8]})  # seed 3 missing
    scores, seeds = score_matrix([one, two])
    assert seeds == [0, 1, 2] and scores["x"].shape == (3, 2)
    np.testing.assert_allclose(scores["b"][:, 1], [0.5, 0.5, 0.6])
    path = write_aggregate(tmp_path, [one, two])
    text = path.read_text()
    assert "| x |" in text and (tmp_path / "profiles.png").stat().st_size > 0
    with pytest.raises(ValueError, match="one scale"):
        score_matrix([one, _result("CartPole-v1", {"b": [1.0], "x": [2.0]}, kind="control")])
    with pytest.raises(ValueError, match="at least two"):
        split_tasks("arithmetic")
    with pytest.raises(ValueError, match="twice"):
        split_tasks("a,a")


def test_seeds_auto_extends_a_pilot_by_power(tmp_path):
    kwargs = dict(budget=4, jobs=2, overrides={"eval_every": 2}, progress=False, pilot_seeds=2)
    with pytest.raises(ValueError, match="min-effect"):
        arena("tabular/robust_garnet", "drpg,nominal_pg", "auto", out_dir=tmp_path / "x", **kwargs)
    # an effect of 1e-6 needs far more seeds than max_seeds: the pilot of 2 grows to 3
    result = arena(
        "tabular/robust_garnet",
        "drpg,nominal_pg",
        "auto",
        min_effect=1e-6,
        max_seeds=3,
        out_dir=tmp_path / "a",
        **kwargs,
    )
    assert result.spec.seeds == [0, 1, 2]
    text = (tmp_path / "a" / "results.md").read_text()
    assert "chosen by power" in text and "capped at max_seeds=3" in text
    assert "Power: with 3 seeds" in text


def test_cli_tasks_and_claims(tmp_path, capsys):
    out = tmp_path / "m"
    code = main(
        [
            "arena",
            "--tasks",
            "tabular/garnet,tabular/robust_garnet",
            "--algos",
            "nominal_pg,nominal_pg@options={step: 0.5}",
            "--seeds",
            "2",
            "--budget",
            "4",
            "--jobs",
            "2",
            "--out",
            str(out),
            "eval_every=2",
        ]
    )
    assert code == 0, capsys.readouterr().out
    assert (out / "aggregate.md").is_file() and (out / "tabular_garnet" / "results.md").is_file()
    assert "| nominal_pg@options={step: 0.5} |" in (out / "aggregate.md").read_text()
    assert main(["report", str(out)]) == 0
    assert main(["arena", "--task", "x", "--tasks", "a,b", "--algos", "grpo"]) == 2
    claims = tmp_path / "claims.md"
    assert main(["claims", "--root", str(tmp_path / "none"), "--out", str(claims)]) == 0
    assert "not run yet" in Path(claims).read_text()


def test_power_of_old_tables_recovers_the_sd_from_a_t_interval():
    import importlib.util

    path = Path(__file__).parents[2] / "benchmarks" / "power_of_old_tables.py"
    spec = importlib.util.spec_from_file_location("power_of_old_tables", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # s = 0.1 over 3 seeds: half-width = t_{0.975,2} · 0.1 / √3 = 4.3027 · 0.05774 = 0.2484
    table = (
        "| algorithm | seeds done/failed | Δ final vs a [95% CI] |\n|---|---|---|\n"
        "| a | 3/0 | baseline |\n| b | 3/0 | +0.1 [-0.1484, +0.3484] |\n"
    )
    text, found = module.annotate(table)
    assert found and f"≥ {minimal_detectable_effect(0.1, 3):.3g}" in found[0]
    assert "s = 0.1)" in found[0] and text.count("Power (from") == 1
    assert module.annotate(text)[0] == text  # a second pass adds nothing
