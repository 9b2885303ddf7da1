"""The held-out evaluation scores with the run's rewards when the task has no verifier of
its own (a data file without answers); tasks with a verifier keep theirs."""

import json
import sys

import pytest

from policylab import rewards, tasks
from policylab.config import ConfigError, TrainConfig, load
from policylab.evaluate import evaluate
from policylab.models import load_model
from policylab.trainers import llm
from policylab.trainers.llm import compose, train
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM


def data_file(tmp_path, answers: bool):
    rows = [
        {"prompt": f"say {i}", "split": "train" if i < 16 else "test"}
        | ({"answer": str(i)} if answers else {})
        for i in range(24)
    ]
    path = tmp_path / ("qa.jsonl" if answers else "open.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def config(small_model_dir, tmp_path, task: str, **fields):
    base = {**FAST_LLM, "model": small_model_dir, "run_dir": str(tmp_path / "run")}
    return load(TrainConfig, None, {**base, "task": task, **fields})


def constant_reward(tmp_path, monkeypatch) -> str:
    (tmp_path / "open_rewards.py").write_text(
        "def quarter(completions, **kwargs):\n    return [0.25] * len(completions)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("open_rewards", None)
    return "open_rewards:quarter"


def test_which_tasks_verify_themselves(tmp_path):
    def verifies(task):
        return rewards.verifies(task, task.examples("train", 1)[0])

    assert verifies(tasks.get("arithmetic"))
    assert verifies(tasks.get(data_file(tmp_path, answers=True)))
    assert not verifies(tasks.get(data_file(tmp_path, answers=False)))  # exact_answer: no answer
    assert verifies(tasks.get(data_file(tmp_path, answers=False), reward="format"))


def test_data_without_answers_needs_the_runs_rewards(small_model_dir, tmp_path):
    cfg = config(small_model_dir, tmp_path, data_file(tmp_path, answers=False))
    with pytest.raises(ConfigError, match="no 'answer' column, which its verifier 'exact_answer'"):
        compose(cfg)


def test_evaluate_scores_with_a_given_reward(small_model_dir, tmp_path):
    model, tokenizer = load_model(small_model_dir)
    task = tasks.get(data_file(tmp_path, answers=False))
    seen = []

    def length(completions, completion_ids, **kwargs):
        seen.append((list(completions), [len(ids) for ids in completion_ids]))
        return [float(len(c)) for c in completions]

    result = evaluate(
        model, tokenizer, task, n=8, max_new_tokens=6, reward=rewards.combine({length: 1.0})
    )
    (greedy, greedy_ids), (sampled, _) = seen  # one call per pass (8 prompts < batch_size)
    assert result.greedy_reward == pytest.approx(sum(map(len, greedy)) / 8)
    assert result.sampled_reward == pytest.approx(sum(map(len, sampled)) / 8)
    assert result.greedy_accuracy == sum(len(c) >= 1 for c in greedy) / 8
    assert all(0 < n <= 6 for n in greedy_ids)


def test_a_run_on_data_without_answers_evaluates_with_its_rewards(
    small_model_dir, tmp_path, monkeypatch
):
    reward = constant_reward(tmp_path, monkeypatch)
    task = data_file(tmp_path, answers=False)
    cfg = config(small_model_dir, tmp_path, task, steps=1, rewards={reward: 1.0})
    train(cfg)
    evals = [r for r in read_metrics(cfg.run_dir) if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 1]
    for row in evals:  # every held-out sample scored 0.25 by the training reward
        assert row["eval/greedy_reward"] == row["eval/sampled_reward"] == 0.25
        assert row["eval/greedy_accuracy"] == 0.0


def test_a_task_with_a_verifier_keeps_it(small_model_dir, tmp_path, monkeypatch):
    reward = constant_reward(tmp_path, monkeypatch)
    task = data_file(tmp_path, answers=True)
    cfg = config(small_model_dir, tmp_path, task, steps=1, rewards={reward: 1.0})
    given = []
    real = llm.evaluate

    def spy(*args, **kwargs):
        given.append(kwargs.get("reward"))
        return real(*args, **kwargs)

    monkeypatch.setattr(llm, "evaluate", spy)
    train(cfg)
    assert given == [None, None]  # the task's exact_answer, before and after
