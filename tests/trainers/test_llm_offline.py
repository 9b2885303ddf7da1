"""Offline data (BCPG-NSA, spec §15): sampled once from the initial policy, filtered to
mixed-outcome groups, saved in the run folder and trained on for the whole run; only the
sampling pass is charged; resume reads the same set back."""

import pytest
import torch
from test_llm_selection import HALF, reward

from policylab.config import ConfigError, TrainConfig, load
from policylab.rollouts import Rollouts
from policylab.trainers.llm import train
from policylab.trainers.run import read_metrics
from policylab.workflows.offline import OfflineSet, build_offline_set, label_steps
from policylab.workflows.single_turn import RolloutInfo
from run_testing import FAST_LLM, assert_same_metrics

N, G = 4, 4


def config(model_dir, path, **fields) -> TrainConfig:
    base = dict(FAST_LLM, prompts_per_step=N, samples_per_prompt=G, model=model_dir)
    return load(TrainConfig, None, {**base, "run_dir": str(path / "run"), **fields})


def test_build_keeps_the_mixed_groups_and_draw_renumbers():
    rewards = torch.tensor([1.0, 0, 1, 1, 0, 0, 1, 0])  # groups: mixed, all right, all wrong, mixed
    batch = Rollouts(
        rewards=rewards,
        response_mask=torch.ones(8, 1),
        group_ids=torch.arange(4).repeat_interleave(2),
    )
    info = RolloutInfo([f"c{i}" for i in range(8)], [f"p{i // 2}" for i in range(8)], {}, 8, 0, 0)
    built = build_offline_set([(batch, info)])
    assert built.groups == 2 and built.samples == 8 and built.tokens == 8
    assert built.batch.extras["prompt"] == ["p0", "p0", "p3", "p3"]
    groups, drawn, drawn_info = built.draw([1, 0])
    assert drawn.group_ids.tolist() == [0, 0, 1, 1]
    assert drawn_info.completions == ["c6", "c7", "c0", "c1"]
    assert drawn_info.generated_tokens == 0  # drawing charges nothing


def test_label_steps_without_a_judge_marks_no_step():
    batch = Rollouts(
        rewards=torch.zeros(2),
        response_mask=torch.ones(2, 3),
        response_ids=torch.ones(2, 3, dtype=torch.long),
    )
    labelled = label_steps(batch, [{}], tokenizer=None, judge=None)
    assert labelled.extras["step_correct"] == [[], []]
    assert (labelled.segment_ids == -1).all()


def test_bcpg_nsa_offline_charges_only_the_sampling_pass_and_resumes(small_model_dir, tmp_path):
    fields = dict(
        algo="bcpg_nsa", offline_prompts=8, eval_every=2, **reward(tmp_path, HALF, "half")
    )
    straight = config(small_model_dir, tmp_path / "a", steps=4, max_samples=8 * G, **fields)
    train(straight)
    rows = read_metrics(straight.run_dir, kind="train")
    assert len(rows) == 4  # the budget was spent by the offline pass, yet all steps ran
    assert all(r["budget/samples"] == 8 * G for r in rows)
    assert all("bcpg/pg_term" in r for r in rows)
    stored = OfflineSet.load(straight.folder)
    assert stored is not None and stored.groups >= 1
    first = config(small_model_dir, tmp_path / "b", steps=4, max_samples=8 * G, **fields)
    train(first.model_copy(update={"steps": 2}))
    train(first, resume=True)
    assert_same_metrics(straight.run_dir, first.run_dir)


def test_offline_refuses_an_adaptive_sampler_and_too_many_prompts(small_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="uniform sampler"):
        config(small_model_dir, tmp_path, offline_prompts=8, sampler="vade")
    cfg = config(small_model_dir, tmp_path, offline_prompts=50, train_pool=10)
    with pytest.raises(ConfigError, match="exceeds"):
        train(cfg)


def test_a_stored_set_is_read_back_for_its_prompts_and_refused_for_others(tmp_path):
    from policylab.workflows.offline import offline_set

    rewards = torch.tensor([1.0, 0, 0, 1])
    batch = Rollouts(
        rewards=rewards, response_mask=torch.ones(4, 1), group_ids=torch.tensor([0, 0, 1, 1])
    )
    info = RolloutInfo(["a", "b", "c", "d"], ["p", "p", "q", "q"], {}, 4, 0, 0)
    calls = []

    def sample_round(examples):
        calls.append(len(examples))
        return batch, info

    pool = [{"prompt": "p"}, {"prompt": "q"}, {"prompt": "r"}]
    first = offline_set(2, 2, tmp_path, pool, sample_round)
    again = offline_set(2, 2, tmp_path, pool, sample_round)
    assert calls == [2] and first.built_now and not again.built_now
    assert again.samples == first.samples == 4  # what the stage charges either way
    with pytest.raises(ValueError, match="sampled for other prompts"):
        offline_set(3, 2, tmp_path, pool, sample_round)
