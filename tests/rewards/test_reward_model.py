"""A folder holding a sequence classifier is a reward function: its logit on prompt +
completion (the conversation through its chat template when the prompts are chat
messages), batched and padded, equal to a forward pass of the classifier on each text
alone."""

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

from policylab import rewards
from policylab.models import build_tokenizer

# a template that shows every turn, the assistant's included
CHATML = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
CHAT = [{"role": "user", "content": "2+2?"}]


def save_classifier(folder, num_labels: int = 1) -> LlamaForSequenceClassification:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = CHATML
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        num_labels=num_labels,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reward-model")
    return str(folder), save_classifier(folder)


def direct(model, folder, texts: list[str]) -> list[float]:
    """The classifier's logit on each text alone: no padding, no batching."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    out = []
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
            out.append(float(model(input_ids=ids).logits[0, 0]))
    return out


def test_a_classifier_folder_is_a_reward_function(classifier, tmp_path):
    folder, _ = classifier
    assert rewards.is_reward_model(folder)
    assert isinstance(rewards.get(folder), rewards.RewardModel)
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    assert not rewards.is_reward_model(str(tmp_path))  # a causal LM is not a reward model


def test_scores_equal_a_direct_forward_of_the_classifier(classifier):
    folder, model = classifier
    prompts = ["1+1=", "a much longer prompt, 12*12=", "x"]
    completions = ["2", "<answer>144</answer>", "some longer completion than the rest"]
    reward = rewards.RewardModel(folder, batch_size=2, device="cpu")  # two batches, padded
    expected = direct(model, folder, [p + c for p, c in zip(prompts, completions, strict=True)])
    assert len({round(e, 4) for e in expected}) == 3  # the texts score differently
    assert reward(prompts, completions) == pytest.approx(expected, abs=1e-5)


def test_conversations_are_scored_through_the_chat_template(classifier):
    folder, model = classifier
    reward = rewards.RewardModel(folder, device="cpu")
    prompts = [CHAT, [*CHAT, {"role": "assistant", "content": "It is "}]]
    assert reward.texts(prompts, ["4", "4"]) == [
        "<user>2+2?\n<assistant>4\n",
        "<user>2+2?\n<assistant>It is \n<assistant>It is 4\n",  # TRL's prompt + completion
    ]
    expected = direct(model, folder, reward.texts(prompts, ["4", "4"]))
    assert reward(prompts, ["4", "4"]) == pytest.approx(expected, abs=1e-5)


def test_in_a_combination_it_is_named_by_its_folder_and_runs_untimed(classifier):
    folder, model = classifier
    logit = direct(model, folder, ["1+1=<answer>2</answer>"])[0]
    result = rewards.combine({folder: 2.0, "format": 1.0})(["1+1="], ["<answer>2</answer>"])
    assert result.parts[folder] == pytest.approx([logit], abs=1e-5)
    assert result.total == pytest.approx([2 * logit + 1.0], abs=1e-5)
    # a timeout this short fails any timed call; the model's forward pass is not timed
    untimed = rewards.combine({folder: 1.0}, timeout_s=1e-9)(["1+1="], ["<answer>2</answer>"])
    assert untimed.failures == {} and untimed.total == pytest.approx([logit], abs=1e-5)


def test_a_classifier_with_several_outputs_is_refused_on_first_use(tmp_path):
    save_classifier(tmp_path, num_labels=2)
    reward = rewards.get(str(tmp_path))  # planning a run loads nothing
    with pytest.raises(ValueError, match="has 2 outputs \\(num_labels\\); a reward model has one"):
        reward(["p"], ["c"])


def test_a_run_trains_and_evaluates_with_a_reward_model(classifier, small_model_dir, tmp_path):
    import json
    import math

    from policylab.config import TrainConfig, load
    from policylab.trainers.llm import train
    from policylab.trainers.run import read_metrics
    from run_testing import FAST_LLM

    folder, _ = classifier
    data = tmp_path / "open.jsonl"  # prompts without answers: no verifier of their own
    rows = [{"prompt": f"say {i}", "split": "train" if i < 16 else "test"} for i in range(24)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fields = {"model": small_model_dir, "task": str(data), "rewards": {folder: 1.0}, "steps": 1}
    cfg = load(TrainConfig, None, {**FAST_LLM, "run_dir": str(tmp_path / "run"), **fields})
    train(cfg)
    metrics = read_metrics(cfg.run_dir)
    (step,) = [r for r in metrics if r["kind"] == "train"]
    assert step[f"reward/failed/{folder}"] == 0.0 and math.isfinite(step["reward/mean"])
    assert all(math.isfinite(r["eval/sampled_reward"]) for r in metrics if r["kind"] == "eval")
