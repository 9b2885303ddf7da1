"""SPARK in the trainer (seed_agents.md §A7): infer and reward periods alternate once the
cache holds a batch, reward periods are charged to the budget, resume keeps the cache,
bad recycling configs fail before any model loads."""

import pytest

from policylab.config import ConfigError, TrainConfig, load
from policylab.trainers.llm import compose, train
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM, assert_same_metrics


def config(path, **fields) -> TrainConfig:
    # the shipped tiny model answers arithmetic, so groups are mixed and items showable
    base = dict(FAST_LLM, model="tiny", algo="spark", max_new_tokens=24)
    return load(TrainConfig, None, {**base, "run_dir": str(path / "run"), **fields})


@pytest.mark.slow
def test_spark_alternates_periods_charges_them_and_resumes_with_its_cache(tmp_path):
    straight = config(tmp_path / "a", steps=4, eval_every=2)
    train(straight)
    rows = read_metrics(straight.run_dir, kind="train")
    # step 1 infers: 4 judge items + ≤ 4 reflections ≥ a batch of 4 → step 2 is a reward period
    assert [r["spark/period"] for r in rows] == [0.0, 1.0, 0.0, 1.0]
    assert rows[0]["spark/judge_items"] + rows[0]["spark/skipped_groups"] == 4
    assert rows[1]["spark/cache_size"] == rows[0]["spark/cache_size"] - 4
    assert "spark/judge_acc" in rows[1] and "spark/judge_acc" not in rows[0]
    # every period is charged: 4 prompts × 4 samples a step, recycled ones included
    assert [r["budget/samples"] for r in rows] == [16, 32, 48, 64]
    assert all(
        b["budget/tokens"] > a["budget/tokens"] for a, b in zip(rows, rows[1:], strict=False)
    )
    first = config(tmp_path / "b", steps=4, eval_every=2)
    train(first.model_copy(update={"steps": 2}))
    train(first, resume=True)  # the cache, the due reward period and the builder's RNG
    assert_same_metrics(straight.run_dir, first.run_dir)


@pytest.mark.slow
def test_cli_trains_spark_without_reflection(tmp_path):
    from policylab.cli import main

    run = tmp_path / "cli"
    main(
        [
            "train",
            "--algo",
            "spark",
            "--task",
            "arithmetic",
            "steps=2",
            "prompts_per_step=2",
            "samples_per_prompt=2",
            "eval_n=4",
            "progress=false",
            "recycle={reflection: false}",
            f"run_dir={run}",
        ]
    )
    rows = read_metrics(run, kind="train")
    assert len(rows) == 2 and all(r.get("spark/reflect_items", 0) == 0 for r in rows)


def test_bad_recycling_fails_before_any_model_loads(tmp_path):
    with pytest.raises(ConfigError, match="recycle: unknown option"):
        compose(config(tmp_path, recycle={"reflections": False}))
    with pytest.raises(ConfigError, match="pointwise_prob"):
        compose(config(tmp_path, recycle={"pointwise_prob": 2}))
    with pytest.raises(ConfigError, match="single-turn"):
        compose(config(tmp_path, task="plan_path_moves"))
    with pytest.raises(ConfigError, match="offline_prompts"):
        compose(config(tmp_path, offline_prompts=4))
    with pytest.raises(ConfigError, match="not sharded"):
        compose(config(tmp_path, distributed="ddp", workers=2))
    # COPO's annotator fills an answers column a reward period would lack (a crash at the
    # first reward period before); an augmenter rolls out questions the judge does not see
    with pytest.raises(ConfigError, match="stages .*annotate"):
        compose(config(tmp_path, algo="copo", recycle={"reflection": False}))
    with pytest.raises(ConfigError, match="stages .*annotate"):
        compose(config(tmp_path, augment="difficulty", recycle={"reflection": False}))


def test_recycling_is_off_for_other_recipes_and_on_with_any_recycle_key(tmp_path):
    assert compose(config(tmp_path, algo="grpo")).recycle is None
    plan = compose(config(tmp_path, algo="grpo", recycle={"reflection": False}))
    assert plan.recycle is not None and plan.recycle.reflection is False
    assert compose(config(tmp_path)).recycle.pointwise_prob == 0.3
