"""reasoning-gym tasks by name (`rg:<name>`): examples, reasoning-gym's verifier as the
reward, disjoint splits, knobs, errors, the eval_n clamp and a short training run."""

import logging
import sys

import pytest

import policylab
from policylab import tasks
from policylab.config import TrainConfig, load
from policylab.tasks import reasoning_gym as rg_tasks
from policylab.trainers.llm import compose
from run_testing import FAST_LLM

SMALL = {"max_terms": 2, "max_digits": 1}  # basic_arithmetic: "Calculate 5 - 3."


def columns(rows):
    return {k: [r[k] for r in rows] for k in rg_tasks.COLUMNS}


def test_examples_have_a_prompt_an_answer_and_the_verifier_columns():
    task = tasks.get("rg:basic_arithmetic", **SMALL)
    rows = task.examples("train", 20, seed=0)
    assert len(rows) == 20 and len({r["prompt"] for r in rows}) == 20
    for row in rows:
        assert set(row) == {"prompt", "answer", "completion", "question", "metadata"}
        assert row["prompt"] == f"{row['question']}\n{rg_tasks.INSTRUCTION}"
        assert row["completion"] == f"<answer>{row['answer']}</answer>"
        # the answer is the value of the expression in the question
        expression = row["metadata"]["expression"]
        assert row["question"] == f"Calculate {expression}."
        assert int(row["answer"]) == eval(expression.replace("/", "//"))  # noqa: S307
    # the same call gives the same rows, and a larger n extends a smaller one
    assert task.examples("train", 20, seed=0) == rows
    assert task.examples("train", 30, seed=0)[:20] == rows
    assert (
        tasks.get("rg:basic_arithmetic", instruction="").examples("test", 1)[0]["prompt"]
        == (tasks.get("rg:basic_arithmetic").examples("test", 1)[0]["question"])
    )


def test_the_verifier_scores_the_answer_in_tags_with_reasoning_gyms_score_answer():
    task = tasks.get("rg:basic_arithmetic", **SMALL)
    rows = task.examples("test", 4, seed=0)
    right = [f"work... <answer> {r['answer']} </answer>" for r in rows]
    wrong = [f"<answer>{int(r['answer']) + 1}</answer>" for r in rows]
    untagged = [r["answer"] for r in rows]
    prompts = [r["prompt"] for r in rows]
    assert task.reward(prompts, right, **columns(rows)) == [1.0] * 4
    assert task.reward(prompts, wrong, **columns(rows)) == [0.0] * 4
    assert task.reward(prompts, untagged, **columns(rows)) == [0.0] * 4
    # a conversation's last message is scored, as for the embedded tasks
    chat = [[{"role": "assistant", "content": c}] for c in right]
    assert task.reward(prompts, chat, **columns(rows)) == [1.0] * 4
    with pytest.raises(ValueError, match="needs the columns question, answer, metadata"):
        task.reward(prompts, right, answer=[r["answer"] for r in rows])


def test_countdown_accepts_any_correct_expression_not_only_the_stored_one():
    task = tasks.get("rg:countdown", min_numbers=3, max_numbers=3)
    row = task.examples("train", 1, seed=0)[0]
    target = row["metadata"]["target"]
    completions = [
        f"<answer>({row['answer']})</answer>",  # not the stored text, but correct
        "<answer>1+1</answer>",
        f"<answer>{target}</answer>",  # the target without the numbers
    ]
    scores = task.reward([row["prompt"]] * 3, completions, **columns([row] * 3))
    # countdown's own score_answer: 1 when correct, 0.05 for a wrong expression
    assert scores == [1.0, 0.05, 0.05]


def test_train_and_test_come_from_disjoint_seeds_and_share_no_prompt(monkeypatch):
    task = tasks.get("rg:basic_arithmetic")
    seeds = {"train": set(), "test": set()}
    real = task._dataset

    def spy(seed, size):
        seeds[split].add(seed)
        return real(seed, size)

    monkeypatch.setattr(task, "_dataset", spy)
    prompts = {}
    for split in ("train", "test"):
        for seed in range(4):
            prompts[split, seed] = {r["prompt"] for r in task.examples(split, 50, seed=seed)}
    assert len(seeds["train"]) == len(seeds["test"]) == 4
    assert seeds["train"].isdisjoint(seeds["test"])
    train = set().union(*(prompts["train", s] for s in range(4)))
    test = set().union(*(prompts["test", s] for s in range(4)))
    assert train.isdisjoint(test)
    # the seed knob moves both splits to other generator seeds
    moved = tasks.get("rg:basic_arithmetic", seed=7).examples("train", 50, seed=0)
    assert {r["prompt"] for r in moved} != prompts["train", 0]


def test_knobs_reach_the_dataset_config():
    knobs = {"min_terms": 3, "max_terms": 3, "max_digits": 1, "allow_parentheses": False}
    task = tasks.get("rg:basic_arithmetic", **knobs, allow_negation=False, size=40)
    rows = task.examples("train", 40)
    assert {r["metadata"]["num_terms"] for r in rows} == {3}
    assert {r["metadata"]["num_digits"] for r in rows} == {1}
    # "Calculate 5 * 3 - 6.": three one-digit terms, no parentheses, no negation
    assert all(len(r["question"].removesuffix(".").split()) == 6 for r in rows)
    assert not any(c in r["question"] for r in rows for c in "()")
    assert task.rows == {"train": 40, "test": 40}
    with pytest.raises(ValueError, match=r"has 40 test examples \(size\); asked for 41"):
        task.examples("test", 41)
    assert tasks.get("rg:basic_arithmetic").rows == {}  # unbounded without size
    mini = tasks.get("rg:mini_sudoku", min_empty=2, max_empty=2)
    assert all(r["question"].count("_") == 2 for r in mini.examples("train", 5))


def test_bad_knobs_name_the_knob_and_what_is_accepted():
    with pytest.raises(ValueError, match=r"no knob 'max_term'.*knobs: instruction, min_terms"):
        tasks.get("rg:basic_arithmetic", max_term=3)
    with pytest.raises(ValueError, match=r"rejects the knobs \(min_terms=3, max_terms=2\)"):
        tasks.get("rg:basic_arithmetic", min_terms=3, max_terms=2)
    with pytest.raises(ValueError, match=r"knob size=0 is invalid"):
        tasks.get("rg:basic_arithmetic", size=0)


def test_an_unknown_name_lists_close_matches():
    with pytest.raises(ValueError, match=r"unknown reasoning-gym task 'rg:sudok'.*rg:sudoku"):
        tasks.get("rg:sudok")
    with pytest.raises(KeyError, match="rg:basic_arithmetic"):
        tasks.get("rg:basic_arithmetc")
    with pytest.raises(ValueError, match=r"reasoning-gym: rg:<name>"):
        tasks.get("no_such_task")


def test_without_reasoning_gym_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # import reasoning_gym fails
    with pytest.raises(ImportError, match=r'pip install "policylab\[tasks\]"'):
        tasks.get("rg:countdown")
    with pytest.raises(ValueError, match="task 'rg:countdown' need reasoning-gym"):
        tasks.get("rg:countdown")
    assert "policylab[tasks]" in rg_tasks.catalogue_line()
    assert "arithmetic" in tasks.names()  # the embedded tasks do not need it


def test_names_and_the_catalogue_line():
    every = tasks.names(reasoning_gym=True)
    assert every[: len(tasks.names())] == tasks.names()
    assert {"rg:countdown", "rg:mini_sudoku", "rg:basic_arithmetic"} <= set(every)
    count = len(rg_tasks.dataset_names())
    assert count > 50 and len(every) == len(tasks.names()) + count
    line = rg_tasks.catalogue_line()
    assert line.startswith(f"rg:<name> — {count} reasoning-gym tasks, e.g. basic_arithmetic")


def test_policylab_list_shows_the_reasoning_gym_tasks(capsys):
    from policylab.cli import main

    assert main(["list"]) == 0
    assert "rg:<name> — " in capsys.readouterr().out


def config(tmp_path, **fields):
    return load(TrainConfig, None, {**FAST_LLM, "run_dir": str(tmp_path / "run"), **fields})


def test_eval_n_beyond_the_test_split_clamps_with_a_warning_before_the_model(tmp_path, caplog):
    cfg = config(
        tmp_path,
        task="rg:basic_arithmetic",
        task_knobs={**SMALL, "size": 6},
        eval_n=8,
        model="no-such-model-folder",  # compose loads no model: it would fail
    )
    with caplog.at_level(logging.WARNING, logger="policylab.tasks"):
        plan = compose(cfg)
    assert plan.eval_n == 6 and len(plan.pool) == 6
    assert "eval_n = 8 exceeds the 6 test examples of rg:basic_arithmetic" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="policylab.tasks"):
        assert compose(cfg.model_copy(update={"eval_n": 6})).eval_n == 6
    assert "exceeds" not in caplog.text
    assert compose(cfg.model_copy(update={"task_knobs": SMALL})).eval_n == 8  # unbounded


@pytest.mark.slow
def test_two_training_steps_on_a_reasoning_gym_task(tmp_path):
    result = policylab.train(
        **{
            **FAST_LLM,
            "model": "tiny",
            "task": "rg:basic_arithmetic",
            "task_knobs": {**SMALL, "instruction": "", "size": 16},
            "eval_n": 4,
            "max_new_tokens": 6,
            "steps": 2,
            "run_dir": str(tmp_path / "run"),
        }
    )
    assert result.steps == 2
    assert 0.0 <= result.after["eval/greedy_accuracy"] <= 1.0
    assert result.after["step"] == 2
