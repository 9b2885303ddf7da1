"""User tasks from JSONL, CSV, Parquet and datasets folders."""

import json

import pytest

from policylab import tasks


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROWS = [{"question": f"{i}+{i}=", "answer": str(2 * i), "level": i % 3} for i in range(200)]


def test_jsonl_task_examples_columns_and_reward(tmp_path):
    path = write_jsonl(tmp_path / "sums.jsonl", ROWS)
    task = tasks.get(str(path), prompt_column="question")
    train, test = task.examples("train", 150, seed=0), task.examples("test", 5, seed=0)
    assert {e["prompt"] for e in train}.isdisjoint({e["prompt"] for e in test})
    ex = train[0]
    assert set(ex) == {"prompt", "answer", "completion", "level"}
    assert ex["completion"] == f"<answer>{ex['answer']}</answer>"
    assert task.examples("train", 10, seed=3) == task.examples("train", 10, seed=3)
    got = task.reward(
        [ex["prompt"]] * 2,
        [ex["completion"], "<answer>x</answer>"],
        answer=[ex["answer"]] * 2,
        level=[0, 0],
    )
    assert got == [1.0, 0.0]


def test_csv_and_parquet_and_a_split_column(tmp_path):
    import datasets

    rows = [{**r, "split": "test" if i < 20 else "train"} for i, r in enumerate(ROWS)]
    ds = datasets.Dataset.from_list(rows)
    ds.to_csv(str(tmp_path / "d.csv"), index=False)
    ds.to_parquet(str(tmp_path / "d.parquet"))
    for name in ("d.csv", "d.parquet"):
        task = tasks.get(str(tmp_path / name), prompt_column="question")
        assert len(task.examples("test", 20)) == 20
        with pytest.raises(ValueError, match="has 20 test rows; asked for 21"):
            task.examples("test", 21)


def test_a_datasets_folder_with_splits(tmp_path):
    import datasets

    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(ROWS[:50]),
            "test": datasets.Dataset.from_list(ROWS[50:60]),
        }
    )
    dd.save_to_disk(str(tmp_path / "folder"))
    task = tasks.get(str(tmp_path / "folder"), prompt_column="question")
    assert len(task.examples("test", 10)) == 10


def test_chat_message_prompts_are_accepted(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": f"{i}?"}], "answer": str(i)} for i in range(40)]
    task = tasks.get(str(write_jsonl(tmp_path / "chat.jsonl", rows)))
    assert isinstance(task.examples("train", 1)[0]["prompt"], list)


def test_bad_rows_are_reported_with_their_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": \n')
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        tasks.get(str(path))
    path = write_jsonl(
        tmp_path / "empty_prompt.jsonl",
        [{"prompt": "a", "answer": "1"}, {"prompt": "", "answer": "2"}],
    )
    with pytest.raises(ValueError, match="line 2: 'prompt' must be a non-empty string"):
        tasks.get(str(path))
    with pytest.raises(ValueError, match="no column 'prompt'; columns: question"):
        tasks.get(str(write_jsonl(tmp_path / "q.jsonl", ROWS)))
    with pytest.raises(ValueError, match="does not exist"):
        tasks.get(str(tmp_path / "missing.jsonl"))
