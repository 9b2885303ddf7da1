"""Rank-GRPO for a language model (papers/seed_llm_algorithms.md §19): the ranked_list
task's relevance, the rank_items stage (items = lines, rank rewards), the pipeline the
recipe builds, and a two-step run with the shipped tiny model."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from policylab.models import build_tokenizer
from policylab.rollouts import Rollouts
from policylab.stages import stages
from policylab.tasks import get as get_task
from policylab.workflows.single_turn import RolloutInfo

D = [1.0, 1 / math.log2(3), 0.5]


def test_ranked_list_examples_relevance_and_ndcg():
    task = get_task("ranked_list")
    ex = task.examples("train", 3, seed=0)[0]
    digits = [int(c) for c in ex["prompt"].split(" of ")[1].rstrip(":").split()]
    assert ex["relevant"] == "".join(map(str, sorted(digits, reverse=True)[:3]))
    assert task.verify(ex["answer"], ex) == pytest.approx(1.0)
    top = ex["relevant"]
    # rank 1 right, rank 2 repeats it (consumed once), rank 3 right, a 4th line is overflow
    text = f"{top[0]}\n{top[0]}\n{top[2]}\n{top[1]}"
    assert task.relevance(text, ex) == [1.0, 0.0, 1.0]
    assert task.verify(text, ex) == pytest.approx((D[0] + D[2]) / sum(D))
    assert task.relevance(f"<answer>{top[1]}", ex) == [1.0, 0.0, 0.0]  # missing ranks are 0
    with pytest.raises(ValueError, match="n"):
        get_task("ranked_list", m=3, n=4)


def test_rank_items_stage_numbers_lines_and_gives_rank_rewards():
    tokenizer = build_tokenizer()
    ex = {"prompt": "top3 of 1 2 3 4 5 9:", "relevant": "954"}
    texts = ["9\n5\n1", "1\n4\n5"]
    ids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    batch = Rollouts(
        rewards=torch.zeros(2), response_mask=torch.ones(2, 5), response_ids=torch.tensor(ids)
    )
    info = RolloutInfo(texts, ["p", "p"], {}, 10, 0.0, 0.0)
    flow = SimpleNamespace(tokenizer=tokenizer, task=get_task("ranked_list"))
    stage = stages.get("rank_items")
    out = stage(stage.Options()).annotate(batch, [ex], info, flow)
    # "9\n5\n1": the newline belongs to the item it ends
    assert out.segment_ids.tolist() == [[0, 0, 1, 1, 2], [0, 0, 1, 1, 2]]
    assert out.extras["rank_rewards"].tolist() == [[1, 1, 0], [0, 1, 1]]
    decay = stage(stage.Options(reward="log_decay")).annotate(batch, [ex], info, flow)
    assert decay.extras["rank_rewards"][0].tolist() == pytest.approx([1 + D[1], D[1], 0])
    with pytest.raises(ValueError, match="reward = 'dcg'"):
        stage.Options(reward="dcg")


def test_the_recipe_chooses_the_rank_items_stage():
    from policylab.config import TrainConfig
    from policylab.recipes.compose import components
    from policylab.stages import build_pipeline

    cfg = TrainConfig(algo="rank_grpo", task="ranked_list")
    parts = components(cfg.algo, max_new_tokens=cfg.max_new_tokens, loss_overrides=cfg.loss)
    assert [s.name for s in build_pipeline(cfg, parts, pool_size=20).annotators] == ["rank_items"]


@pytest.mark.slow
def test_two_steps_with_the_tiny_model(tmp_path):
    from policylab.config import TrainConfig, load
    from policylab.trainers.llm import train
    from policylab.trainers.run import read_metrics

    fields = dict(
        task="ranked_list",
        algo="rank_grpo",
        model="tiny",
        steps=2,
        prompts_per_step=2,
        samples_per_prompt=4,
        max_new_tokens=8,
        eval_n=4,
        eval_every=0,
        save_every=0,
        progress=False,
        run_dir=str(tmp_path / "run"),
    )
    cfg = load(TrainConfig, None, fields)
    train(cfg)
    rows = read_metrics(cfg.run_dir, kind="train")
    assert len(rows) == 2 and "pg/clipfrac_high" in rows[0] and "kl/loss" in rows[0]
