"""Data-file errors name real knobs and the file's real columns; eval_n clamps to a small
test split before the model loads."""

import inspect
import json
import logging
import re

import pytest

from policylab import tasks
from policylab.config import TrainConfig, load
from policylab.tasks.files import KNOBS, FileTask
from policylab.trainers.llm import compose
from run_testing import FAST_LLM


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


ROWS = [{"question": f"{i}+{i}=", "solution": str(2 * i), "level": i % 3} for i in range(40)]


def test_a_missing_prompt_column_names_the_knob_and_the_files_columns(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", ROWS)
    with pytest.raises(ValueError) as err:
        tasks.get(path)
    message = str(err.value)
    assert "no column 'prompt'; columns: question, solution, level" in message
    assert "task_knobs={prompt_column: question}" in message
    # the hint works as written
    knob = re.search(r"task_knobs=\{(\w+): (\w+)\}", message)
    task = tasks.get(path, **{knob[1]: knob[2]}, answer_column="solution")
    example = task.examples("train", 1)[0]
    assert example["prompt"].endswith("=") and example["answer"] == example["solution"]


def test_a_guess_falls_back_to_the_first_column(tmp_path):
    path = write_jsonl(tmp_path / "odd.jsonl", [{"body": "1+1=", "answer": "2"}] * 2)
    with pytest.raises(ValueError, match=r"task_knobs=\{prompt_column: body\}"):
        tasks.get(path)


def test_an_unknown_knob_lists_the_data_file_knobs(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", ROWS)
    with pytest.raises(ValueError, match=r"no knob 'promt_column'.*knobs: prompt_column, answer"):
        tasks.get(path, promt_column="question")
    # every knob the message names is a parameter of FileTask
    assert set(KNOBS) <= set(inspect.signature(FileTask).parameters)


def test_a_row_without_the_answer_names_the_answer_column_knob(tmp_path):
    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2="}]
    path = write_jsonl(tmp_path / "a.jsonl", rows)
    with pytest.raises(ValueError, match=r"line 2: no 'answer' \(the answer column, task knob"):
        tasks.get(path)


def config(tmp_path, **fields):
    return load(TrainConfig, None, {**FAST_LLM, "run_dir": str(tmp_path / "run"), **fields})


def test_eval_n_clamps_to_a_small_test_split_with_a_warning(tmp_path, caplog):
    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1), "split": "train"} for i in range(20)]
    rows += [{"prompt": f"{i}+2=", "answer": str(i + 2), "split": "test"} for i in range(3)]
    path = write_jsonl(tmp_path / "small.jsonl", rows)
    cfg = config(tmp_path, task=path, model="tiny", eval_n=8)
    with caplog.at_level(logging.WARNING, logger="policylab.tasks"):
        plan = compose(cfg)
    assert plan.eval_n == 3
    assert "eval_n = 8 exceeds the 3 test examples of small: evaluating on all 3" in caplog.text
    assert not (tmp_path / "run").exists()  # before any model or folder
    assert tasks.eval_size(plan.task, 3) == 3 and tasks.eval_size(plan.task, 2) == 2


def test_a_folder_without_a_test_split_has_nothing_to_evaluate(tmp_path):
    import datasets

    folder = tmp_path / "folder"
    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(10)]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(folder))
    task = tasks.get(str(folder))
    assert task.rows == {"train": 10, "test": 0}
    with pytest.raises(ValueError, match="has no test rows, so nothing to evaluate"):
        tasks.eval_size(task, 8)
