"""Selections that run after the rounds: D³S on each step's advantages (rows and tokens
kept, the schedule's progress, exact resume) and VAS's scoring pass (charged to the
budget, logged, exact resume)."""

import pytest
import torch
from test_llm_selection import HALF, reward

from policylab.config import TrainConfig, load
from policylab.trainers.llm import train
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM, assert_same_metrics

N, G = 4, 4


def config(model_dir, path, **fields) -> TrainConfig:
    base = dict(FAST_LLM, prompts_per_step=N, samples_per_prompt=G, model=model_dir)
    return load(TrainConfig, None, {**base, "run_dir": str(path / "run"), **fields})


def test_d3s_trains_on_the_scheduled_share_of_rows_and_tokens(small_model_dir, tmp_path):
    cfg = config(
        small_model_dir,
        tmp_path,
        selection="d3s",
        selection_options={"sample_init": 0.5, "token_init": 0.2},
        steps=4,
        **reward(tmp_path, HALF, "half"),
    )
    train(cfg)
    rows = read_metrics(cfg.run_dir, kind="train")
    assert [r["d3s/p"] for r in rows] == [0, 0.25, 0.5, 0.75]
    for r in rows:
        f_s = 0.5 + 0.5 * r["d3s/p"]
        assert r["d3s/sample_keep_frac"] == pytest.approx(-(-f_s * N * G // 1) / (N * G))
        assert 0 < r["d3s/token_keep_frac"] <= f_s
        assert r["d3s/var_adv_kept"] >= r["d3s/var_adv_all"] - 1e-9
        # reward statistics describe every generated sample, not the kept ones
        assert r["budget/samples"] == r["step"] * N * G
    assert rows[0]["d3s/token_keep_frac"] < 0.5 * 0.2 + 0.1


def test_d3s_resume_3_plus_1_equals_4(small_model_dir, tmp_path):
    fields = dict(selection="d3s", eval_every=3, **reward(tmp_path, HALF, "half"))
    straight = config(small_model_dir, tmp_path / "a", steps=4, **fields)
    train(straight)
    # stopped by the sample budget after 3 steps, so the schedule's total stays 4
    first = config(small_model_dir, tmp_path / "b", steps=4, **fields)
    train(first.model_copy(update={"max_samples": 3 * N * G}))
    train(first, resume=True)
    assert_same_metrics(straight.run_dir, first.run_dir)


def test_d3s_without_entropy_from_the_engine_is_refused_by_name():
    from policylab import Rollouts
    from policylab.api import components

    batch = Rollouts(rewards=torch.zeros(2), response_mask=torch.ones(2, 1))
    with pytest.raises(ValueError, match="entropy"):
        components("grpo", selection="d3s").selection(batch, torch.ones(2, 1), {})


def test_vas_scores_the_pool_every_few_steps_and_is_charged_for_it(small_model_dir, tmp_path):
    cfg = config(
        small_model_dir,
        tmp_path,
        sampler="vas",
        sampler_options={"every": 2, "n_score": 2},
        train_pool=6,
        steps=4,
    )
    train(cfg)
    rows = read_metrics(cfg.run_dir, kind="train")
    # scoring passes before steps 1 and 3 (steps done 0 and 2): 6 prompts × 2 samples
    assert [r.get("vas/refresh_samples", 0) for r in rows] == [12, 0, 12, 0]
    assert [r["budget/samples"] for r in rows] == [12 + 16, 12 + 32, 24 + 48, 24 + 64]
    for key in ("vas/w_mean", "vas/ovs_mean", "vas/tds_mean", "vas/frac_pass0"):
        assert key in rows[-1]


def test_vas_resume_2_plus_2_equals_4(small_model_dir, tmp_path):
    fields = dict(sampler="vas", sampler_options={"every": 2, "n_score": 2}, train_pool=6)
    straight = config(small_model_dir, tmp_path / "a", steps=4, eval_every=2, **fields)
    train(straight)
    first = config(small_model_dir, tmp_path / "b", steps=4, eval_every=2, **fields)
    train(first.model_copy(update={"steps": 2}))
    train(first, resume=True)
    assert_same_metrics(straight.run_dir, first.run_dir)


def test_an_unknown_sampler_option_fails_before_a_run_folder_exists(small_model_dir, tmp_path):
    cfg = config(small_model_dir, tmp_path, sampler="vas", sampler_options={"evry": 2})
    with pytest.raises(ValueError, match="evry"):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_capo_masks_tokens_at_a_high_learning_rate_and_resumes_exactly(small_model_dir, tmp_path):
    fields = dict(selection="capo", eval_every=2, lr=1e-2, **reward(tmp_path, HALF, "half"))
    straight = config(small_model_dir, tmp_path / "a", steps=4, **fields)
    train(straight)
    rows = read_metrics(straight.run_dir, kind="train")
    for key in ("capo/reject_frac", "capo/mH_max", "capo/mF_max", "capo/accepted_tokens"):
        assert key in rows[0]
    # the first update plans steps from an empty Adam model: at lr 1e-2 some are too large
    assert max(r["capo/reject_frac"] for r in rows) > 0
    assert all(r["capo/reject_frac"] < 1 for r in rows)
    first = config(small_model_dir, tmp_path / "b", steps=4, **fields)
    train(first.model_copy(update={"steps": 2}))
    train(first, resume=True)  # the Adam model's moments come back with the checkpoint
    assert_same_metrics(straight.run_dir, first.run_dir)


def test_capo_at_a_tiny_learning_rate_masks_nothing(small_model_dir, tmp_path):
    # m_H and m_F scale with η and η²: planned steps of 1e-12 stay inside the trust region
    cfg = config(small_model_dir, tmp_path, selection="capo", steps=1, lr=1e-12)
    train(cfg)
    (row,) = read_metrics(cfg.run_dir, kind="train")
    assert row["capo/reject_frac"] == 0
