"""Reward functions are called as TRL's GRPOTrainer calls them: by keyword, with
completion_ids, trainer_state and every dataset column, and with completions as
conversations when the prompts are conversations."""

import json
import sys

import pytest

from policylab import rewards
from policylab.config import TrainConfig, load
from policylab.models import load_model
from policylab.trainers.llm import train
from run_testing import FAST_LLM

CHAT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]


def recorder():
    """A TRL-style reward (`completions` first, everything else in **kwargs) that keeps
    what each call got."""
    calls = []

    def recorded(completions, **kwargs):
        calls.append({"completions": completions, **kwargs})
        return [1.0] * len(completions)

    return recorded, calls


def test_a_trl_reward_gets_every_argument_by_keyword():
    recorded, calls = recorder()
    combined = rewards.combine({recorded: 1.0})
    combined.at_step(3, max_steps=10)
    combined(["p", "q"], ["a", "b"], completion_ids=[[5, 6], [7]], answer=["1", "2"])
    (got,) = calls
    assert set(got) == {"prompts", "completions", "completion_ids", "trainer_state", "answer"}
    assert got["prompts"] == ["p", "q"]
    assert got["completions"] == ["a", "b"]  # plain-text prompts: plain-text completions
    assert got["completion_ids"] == [[5, 6], [7]]
    assert got["answer"] == ["1", "2"]
    state = got["trainer_state"]
    assert isinstance(state, rewards.TrainerState)
    assert (state.global_step, state.max_steps) == (3, 10)


def test_conversational_prompts_give_conversational_completions():
    recorded, calls = recorder()
    prefilled = [*CHAT, {"role": "assistant", "content": "The answer is "}]
    rewards.combine({recorded: 1.0})([CHAT, prefilled], ["4", "4."])
    assert calls[0]["completions"] == [
        [{"role": "assistant", "content": "4"}],
        # a prompt ending in the assistant's own words: TRL prepends them
        [{"role": "assistant", "content": "The answer is 4."}],
    ]
    assert calls[0]["prompts"] == [CHAT, prefilled]  # the prompts as given


def test_trls_documented_conversational_reward_runs_unchanged():
    # the format reward of TRL's GRPOTrainer docs, word for word
    import re

    def format_reward_func(completions, **kwargs):
        """Reward function that checks if the completion has a specific format."""
        pattern = r"^<think>.*?</think><answer>.*?</answer>$"
        completion_contents = [completion[0]["content"] for completion in completions]
        matches = [re.match(pattern, content) for content in completion_contents]
        return [1.0 if match else 0.0 for match in matches]

    result = rewards.combine({format_reward_func: 1.0})(
        [CHAT, CHAT], ["<think>2+2</think><answer>4</answer>", "4"]
    )
    assert result.total == [1.0, 0.0]
    assert result.failures == {}


def test_a_function_without_kwargs_gets_only_what_it_names():
    seen = {}

    def by_ids(completions, completion_ids):
        seen["ids"] = completion_ids
        return [float(len(ids)) for ids in completion_ids]

    def positional(p, c, answer):  # old style: first two are prompts and completions
        seen["positional"] = (p, c, answer)
        return [1.0] * len(c)

    combined = rewards.combine({by_ids: 1.0, positional: 1.0})
    result = combined(["p", "q"], ["a", "bc"], completion_ids=[[1], [2, 3]], answer=["x", "y"])
    assert result.parts["by_ids"] == [1.0, 2.0]
    assert seen["ids"] == [[1], [2, 3]]
    assert seen["positional"] == (["p", "q"], ["a", "bc"], ["x", "y"])


def test_a_sample_retried_alone_keeps_its_own_ids_and_the_shared_state():
    got = []

    def picky(completions, completion_ids, trainer_state, **kwargs):
        if len(completions) > 1:
            raise ValueError("one at a time")  # the batch call fails: retried per sample
        got.append((completion_ids, trainer_state.global_step))
        return [0.5]

    combined = rewards.combine({picky: 1.0}, failure_limit=1.0)
    combined.at_step(7)
    combined(["p", "q"], ["a", "b"], completion_ids=[[1], [2, 3]])
    assert got == [([[1]], 7), ([[2, 3]], 7)]


def test_builtins_read_conversational_completions():
    combined = rewards.combine({"exact_answer": 1.0, "format": 0.5})
    result = combined([CHAT, CHAT], ["<answer>4</answer>", "<answer>5</answer>"], answer=["4"] * 2)
    assert result.total == [1.5, 0.5]


def test_a_training_run_hands_trl_rewards_its_ids_and_progress(
    small_model_dir, tmp_path, monkeypatch
):
    """In a run, completion_ids decode to the completions, and trainer_state counts the
    optimiser steps done before the step's samples were drawn (TRL's global_step)."""
    log = tmp_path / "calls.jsonl"
    (tmp_path / "recording_rewards.py").write_text(
        "import json\n\n"
        "def recorded(completions, completion_ids, trainer_state, **kwargs):\n"
        f"    with open({str(log)!r}, 'a') as f:\n"
        "        f.write(json.dumps({'completions': completions, 'ids': completion_ids,\n"
        "            'step': trainer_state.global_step, 'max_steps': trainer_state.max_steps,\n"
        "            'columns': sorted(kwargs)}) + '\\n')\n"
        "    return [float(len(c)) for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("recording_rewards", None)
    fields = {"rewards": {"recording_rewards:recorded": 1.0}, "steps": 2}
    cfg = load(
        TrainConfig,
        None,
        {**FAST_LLM, "model": small_model_dir, "run_dir": str(tmp_path / "run"), **fields},
    )
    train(cfg)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["step"], c["max_steps"]) for c in calls] == [(0, 2), (1, 2)]
    _, tokenizer = load_model(small_model_dir)
    for call in calls:
        assert len(call["completions"]) == len(call["ids"]) == 16
        decoded = [tokenizer.decode(ids, skip_special_tokens=True) for ids in call["ids"]]
        assert decoded == call["completions"]
        # arithmetic's columns, and TRL's keywords
        assert {"answer", "prompts"} <= set(call["columns"])


@pytest.mark.parametrize("limit", [-0.1, 1.5])
def test_the_failure_limit_is_a_fraction(limit):
    with pytest.raises(ValueError, match="failure_limit must be in"):
        rewards.combine({"format": 1.0}, failure_limit=limit)
