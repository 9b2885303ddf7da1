"""The language-model trainer with a selection: DAPO's dynamic sampling trains only on
groups whose answers disagree and charges every generated sample; `selection=` puts it
under any algorithm; `max_samples` ends a run at a sample budget; resume stays exact."""

import pytest
import torch

from policylab.config import ConfigError, TrainConfig, load
from policylab.models import load_model
from policylab.trainers.llm import train
from policylab.trainers.run import read_metrics
from policylab.workflows.rounds import RoundsExhausted
from run_testing import FAST_LLM, assert_same_metrics

N, G = 4, 4  # prompts per step, samples per prompt
FAST = dict(FAST_LLM, prompts_per_step=N, samples_per_prompt=G)

# Prompts with an even character sum: every sample right (an all-correct group, dropped).
# The others: samples alternate 0, 1 by row, so each of their groups (G even) is mixed.
HALF = """
def half(prompts, completions, **kw):
    return [1.0 if sum(map(ord, p)) % 2 == 0 else float(i % 2) for i, p in enumerate(prompts)]
"""
ZERO = """
def zero(prompts, completions, **kw):
    return [0.0] * len(completions)
"""


def reward(tmp_path, source: str, name: str) -> dict[str, dict[str, float]]:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return {"rewards": {f"{path}:{name}": 1.0}}


def config(model_dir, tmp_path, **fields) -> TrainConfig:
    return load(
        TrainConfig, None, {**FAST, "model": model_dir, "run_dir": str(tmp_path / "run"), **fields}
    )


def train_rows(cfg: TrainConfig) -> list[dict]:
    return read_metrics(cfg.run_dir, kind="train")


def test_dapo_trains_on_mixed_groups_only_and_is_charged_for_every_sample(
    small_model_dir, tmp_path
):
    cfg = config(small_model_dir, tmp_path, algo="dapo", steps=3, **reward(tmp_path, HALF, "half"))
    train(cfg)
    rows = train_rows(cfg)
    assert [r["step"] for r in rows] == [1, 2, 3]
    charged = 0
    for r in rows:
        rounds = r["ds/num_gen_rounds"]
        # each round draws N prompts: each group either passed or was dropped all correct
        assert r["ds/kept_groups"] + r["ds/drop_all_correct"] == rounds * N
        assert r["ds/drop_all_wrong"] == 0
        assert r["ds/kept_frac"] == pytest.approx(r["ds/kept_groups"] / (rounds * N))
        assert r["ds/trained_groups"] == N
        assert r["ds/extra_samples"] == (rounds - 1) * N * G
        # trained only on the mixed groups: half their samples score 1, none has zero std
        assert r["reward/mean"] == pytest.approx(0.5)
        assert r["adv/zero_std_frac"] == 0
        charged += rounds * N * G
        assert r["budget/samples"] == charged
    assert charged > 3 * N * G, "no step needed a second round: the test shows nothing"


def test_selection_puts_dynamic_sampling_under_grpo_and_train_partial_skips_empty_steps(
    small_model_dir, tmp_path
):
    # every group is all wrong: two rounds per step keep nothing, so no update is made
    fields = dict(
        algo="grpo",
        selection="dynamic_sampling",
        max_gen_rounds=2,
        on_exhaust="train_partial",
        steps=2,
        **reward(tmp_path, ZERO, "zero"),
    )
    cfg = config(small_model_dir, tmp_path, **fields)
    result = train(cfg)
    rows = train_rows(cfg)
    assert [r["ds/num_gen_rounds"] for r in rows] == [2, 2]
    assert [r["ds/drop_all_wrong"] for r in rows] == [2 * N, 2 * N]
    assert [r["ds/trained_groups"] for r in rows] == [0, 0]
    assert [r["budget/samples"] for r in rows] == [2 * N * G, 4 * N * G]
    before, _ = load_model(small_model_dir)
    after, _ = load_model(f"{result.run_dir}/checkpoints/step_2/model")
    for a, b in zip(before.parameters(), after.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(RoundsExhausted, match="max_gen_rounds"):
        train(cfg.model_copy(update={"on_exhaust": "raise", "run_dir": str(tmp_path / "r2")}))


def test_max_samples_ends_the_run_with_an_evaluation_and_a_checkpoint(small_model_dir, tmp_path):
    # 16 samples per step: after step 2 the run has spent 32 < 40, after step 3 48 ≥ 40
    cfg = config(small_model_dir, tmp_path, steps=10, max_samples=40)
    result = train(cfg)
    assert result.steps == 3 and result.after["step"] == 3
    rows = read_metrics(cfg.run_dir)
    assert [(r["kind"], r["step"]) for r in rows] == [
        ("eval", 0),
        ("train", 1),
        ("train", 2),
        ("train", 3),
        ("eval", 3),
    ]
    assert rows[-1]["budget/samples"] == 48
    assert (tmp_path / "run" / "checkpoints" / "step_3").is_dir()
    assert "3 steps of 4 prompts" in (tmp_path / "run" / "summary.md").read_text()
    # resuming a run that has spent its budget trains no further
    again = train(cfg, resume=True)
    assert again.steps == 3
    assert [r["step"] for r in train_rows(cfg)] == [1, 2, 3]


def test_resume_with_dynamic_sampling_3_plus_3_equals_6(small_model_dir, tmp_path):
    half = reward(tmp_path, HALF, "half")
    straight = config(small_model_dir, tmp_path / "a", algo="dapo", steps=6, eval_every=3, **half)
    train(straight)
    first = config(small_model_dir, tmp_path / "b", algo="dapo", steps=3, eval_every=3, **half)
    train(first)
    train(first.model_copy(update={"steps": 6}), resume=True)
    a = assert_same_metrics(straight.run_dir, first.run_dir)
    assert sum(r.get("ds/num_gen_rounds", 0) for r in a) > 6  # refills happened


def test_dapo_on_the_shipped_tiny_model_logs_dynamic_sampling(tmp_path):
    cfg = load(
        TrainConfig,
        None,
        {
            **FAST,
            "algo": "dapo",
            "model": "tiny",
            "prompts_per_step": 2,
            "max_new_tokens": 16,
            "steps": 3,
            "lr": 5e-5,  # the shipped model is trained: 1e-3 wrecks it in one step
            "run_dir": str(tmp_path / "run"),
        },
    )
    train(cfg)
    rows = train_rows(cfg)
    assert len(rows) == 3
    for r in rows:
        assert r["ds/trained_groups"] == 2
        assert r["ds/num_gen_rounds"] >= 1
        assert r["ds/kept_groups"] >= 2
        assert (
            r["ds/kept_groups"] + r["ds/drop_all_correct"] + r["ds/drop_all_wrong"]
            == r["ds/num_gen_rounds"] * 2
        )
        assert r["budget/samples"] == pytest.approx(
            sum(q["ds/num_gen_rounds"] for q in rows if q["step"] <= r["step"]) * 2 * G
        )
        assert r["adv/zero_std_frac"] == 0  # the exact-answer verifier: kept groups are mixed


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"selection": "dynamic_samplin"}, "unknown selection 'dynamic_samplin'; choices: all"),
        ({"on_exhaust": "skip"}, "on_exhaust"),
        ({"max_gen_rounds": -1}, "max_gen_rounds"),
        ({"max_samples": -5}, "max_samples"),
    ],
)
def test_bad_selection_fields_fail_before_any_work(fields, message):
    with pytest.raises(ConfigError, match=message):
        load(TrainConfig, None, fields)


def test_an_unknown_selection_option_fails_before_a_run_folder_exists(small_model_dir, tmp_path):
    cfg = config(small_model_dir, tmp_path, algo="dapo", selection_options={"metrc": "acc"})
    with pytest.raises(ValueError, match="valid options: metric"):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_vade_sampler_trains_and_resumes(small_model_dir, tmp_path):
    straight = config(small_model_dir, tmp_path / "a", sampler="vade", steps=4, eval_every=2)
    train(straight)
    first = config(small_model_dir, tmp_path / "b", sampler="vade", steps=2, eval_every=2)
    train(first)
    train(first.model_copy(update={"steps": 4}), resume=True)
    assert_same_metrics(straight.run_dir, first.run_dir)
    with pytest.raises(ConfigError, match="sampler"):
        config(small_model_dir, tmp_path / "c", sampler="best")


def test_dapo_adds_the_overlong_penalty_after_the_filter(small_model_dir, tmp_path):
    # max_new_tokens 8: with L_max 8 and L_cache 4, a response of L tokens gets
    # (4 − L)/4 for 4 < L ≤ 8 and 0 up to 4 tokens (DAPO eq. 13, factor 1)
    shaping = {"overlong": {"L_max": 8, "L_cache": 4}}
    cfg = config(
        small_model_dir,
        tmp_path,
        algo="dapo",
        steps=2,
        reward_shaping=shaping,
        **reward(tmp_path, HALF, "half"),
    )
    train(cfg)
    for r in train_rows(cfg):
        assert r["reward/shaping"] < 0  # the untrained small model runs long
        assert r["reward/mean"] == pytest.approx(0.5 + r["reward/shaping"], abs=1e-6)
        assert r["ds/drop_all_wrong"] == 0  # the filter saw the unshaped reward
    with pytest.raises(ValueError, match="L_cache"):
        train(
            cfg.model_copy(
                update={
                    "reward_shaping": {"overlong": {"L_cach": 4}},
                    "run_dir": str(tmp_path / "r2"),
                }
            )
        )
