"""Where the real-model features meet (issue 20's parts merged): LoRA with save_best and
with a model object, chat templates with a tokenizer object, and the context check before
the model loads rendering prompts as the run renders them."""

from __future__ import annotations

import json

import pytest
import torch

import policylab
from policylab.config import ConfigError, TrainConfig
from policylab.models import load_model
from policylab.trainers.llm import compose

SMALL = dict(
    steps=2,
    prompts_per_step=2,
    samples_per_prompt=2,
    eval_n=4,
    max_new_tokens=4,
    progress=False,
    report_to=[],
)


def test_save_best_with_lora_writes_a_loadable_merged_model(tmp_path):
    run = tmp_path / "r"
    policylab.train(
        model="tiny",
        lora={"r": 4},
        save_best="eval/greedy_reward",
        eval_every=1,
        lr=1e-2,
        run_dir=str(run),
        **SMALL,
    )
    best, _ = load_model(run / "best" / "model")  # a full model folder, not adapters only
    assert (run / "best" / "model" / "adapter" / "adapter_config.json").is_file()
    assert sum(p.numel() for p in best.parameters()) > 0


def test_lora_on_a_model_object_leaves_the_object_as_given(tmp_path):
    model, tokenizer = load_model("tiny")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    policylab.train(
        model=model,
        tokenizer=tokenizer,
        lora={"r": 4},
        lr=1e-2,
        run_dir=str(tmp_path / "r"),
        **SMALL,
    )
    after = model.state_dict()
    assert after.keys() == before.keys()  # no lora_A / base_layer keys injected
    assert all(torch.equal(after[k], v) for k, v in before.items())
    merged, _ = load_model(tmp_path / "r" / "model")
    assert merged.state_dict().keys() == before.keys()


def test_chat_with_a_tokenizer_object_uses_that_tokenizer(tmp_path):
    model, tokenizer = load_model("tiny")
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    result = policylab.train(
        model=model, tokenizer=tokenizer, chat=True, run_dir=str(tmp_path / "r"), **SMALL
    )
    assert result.steps == 2
    tokenizer.chat_template = None
    with pytest.raises(ConfigError, match="no chat template"):
        policylab.train(
            model=model, tokenizer=tokenizer, chat=True, run_dir=str(tmp_path / "s"), **SMALL
        )


def test_the_context_check_counts_the_chat_template_before_the_model_loads(tmp_path):
    data = tmp_path / "data.jsonl"
    # 100 characters fit the tiny model's 128 positions with 24 new tokens as plain text,
    # not with a system prompt rendered in front of them
    data.write_text(
        "".join(
            json.dumps({"prompt": f"{i:03d}" + "1" * 97, "answer": "1"}) + "\n" for i in range(40)
        )
    )
    fields = dict(task=str(data), max_new_tokens=24, run_dir=str(tmp_path / "r"))
    compose(TrainConfig(**fields))
    chat = TrainConfig(**fields, chat=True, system_prompt="Answer in <answer></answer> tags.")
    with pytest.raises(ValueError, match="not fit the model's context of 128 positions"):
        compose(chat)


def test_eval_of_a_run_on_data_without_answers_scores_with_the_runs_rewards(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+{i}="}) + "\n" for i in range(60)))
    run = tmp_path / "r"
    policylab.train(
        model="tiny", task=str(data), rewards={"format": 1.0}, run_dir=str(run), **SMALL
    )
    scores = policylab.evaluate_model(str(run), n=4)
    assert set(scores[str(data)]) >= {"eval/greedy_reward", "eval/sampled_reward"}
    with pytest.raises(ValueError, match="no 'answer' column"):
        policylab.evaluate_model("tiny", str(data), n=4)


def test_a_save_best_metric_the_evaluation_lacks_fails_before_the_model_loads(tmp_path):
    with pytest.raises(ConfigError, match="save_best = 'eval/greedy_acc' is not a metric"):
        compose(TrainConfig(save_best="eval/greedy_acc", run_dir=str(tmp_path / "r")))
