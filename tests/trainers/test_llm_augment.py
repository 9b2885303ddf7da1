"""Reg-GRPO's difficulty-aware augmentation in the trainer: groups that beat the recent
average are replaced by harder variants (rolled out again and charged), the metrics are
logged, a resumed run continues exactly, and bad settings fail before any work."""

import pytest
from test_llm_selection import HALF, reward

from policylab.config import ConfigError, TrainConfig, load
from policylab.trainers.llm import train
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM, assert_same_metrics

N, G = 4, 4


def config(model_dir, path, **fields) -> TrainConfig:
    base = dict(FAST_LLM, prompts_per_step=N, samples_per_prompt=G, model=model_dir)
    return load(TrainConfig, None, {**base, "run_dir": str(path / "run"), **fields})


def test_augmentation_replaces_groups_and_charges_their_samples(small_model_dir, tmp_path):
    # group means 1 (all-correct prompts) or 0.5: both sides of the running average
    half = reward(tmp_path, HALF, "half")
    cfg = config(small_model_dir, tmp_path, algo="reg_grpo", augment="difficulty", steps=4, **half)
    train(cfg)
    rows = read_metrics(cfg.run_dir, kind="train")
    assert "aug/frac_harder" not in rows[0] or rows[0]["aug/frac_harder"] == 0  # empty buffer
    varied = [r["aug/frac_harder"] + r["aug/frac_easier"] for r in rows[1:]]
    assert any(v > 0 for v in varied), "no group was ever varied: the test shows nothing"
    spent = [r["budget/samples"] for r in rows]
    per_step = [b - a for a, b in zip([0, *spent], spent, strict=False)]
    # each step: N groups of G, plus G for every group rolled out again as a variant
    assert all(d >= N * G and d % G == 0 for d in per_step)
    assert any(d > N * G for d in per_step[1:]) and per_step[0] == N * G
    for d, v in zip(per_step[1:], varied, strict=True):
        assert d - N * G <= round(v * N) * G  # vary() may return None and keep a prompt


def test_augmentation_resumes_exactly(small_model_dir, tmp_path):
    fields = dict(
        algo="reg_grpo", augment="difficulty", eval_every=2, **reward(tmp_path, HALF, "half")
    )
    straight = config(small_model_dir, tmp_path / "a", steps=4, **fields)
    train(straight)
    first = config(small_model_dir, tmp_path / "b", steps=4, **fields)
    train(first.model_copy(update={"steps": 2}))
    train(first, resume=True)
    assert_same_metrics(straight.run_dir, first.run_dir)


def test_bad_augmentation_settings_fail_early(small_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="online data"):
        config(small_model_dir, tmp_path, augment="difficulty", offline_prompts=8)
    with pytest.raises(ConfigError, match="augment"):
        config(small_model_dir, tmp_path, augment="harder")
    cfg = config(small_model_dir, tmp_path, augment="difficulty", augment_options={"windw": 5})
    with pytest.raises(ValueError, match="windw"):
        train(cfg)
    assert not (tmp_path / "run").exists()
