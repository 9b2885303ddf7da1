"""Bad data files fail early and by name; answers keep their text; the data report
(issue #24: nothing silent)."""

import json
import logging

import pytest

from policylab import tasks
from policylab.config import TrainConfig
from policylab.models import build_tokenizer
from policylab.tasks.files import check_prompt_lengths
from policylab.trainers.llm import compose


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def answers(task) -> dict[str, str]:
    rows = task.examples("train", task.rows["train"]) + task.examples("test", task.rows["test"])
    return {e["prompt"]: e["answer"] for e in rows}


def test_csv_answers_keep_their_text(tmp_path):
    # read by a type-guessing reader, 39 became '39.0' and 007 became '7.0'
    path = tmp_path / "a.csv"
    path.write_text("prompt,answer,level\nwhat is 3*13?,39,1\nbond?,007,2\nhalf of 3?,1.50,3\n")
    got = answers(tasks.get(str(path)))
    assert got == {"what is 3*13?": "39", "bond?": "007", "half of 3?": "1.50"}
    example = tasks.get(str(path)).examples("train", 1)[0]
    assert isinstance(example["level"], str)  # every CSV column is text


def test_jsonl_answers_keep_their_json_values(tmp_path):
    # one float answer made a column reader turn every integer answer into '39.0'
    rows = [{"prompt": "a", "answer": 39}, {"prompt": "b", "answer": 1.5}]
    rows.append({"prompt": "c", "answer": "007"})
    got = answers(tasks.get(str(write_jsonl(tmp_path / "a.jsonl", rows))))
    assert got == {"a": "39", "b": "1.5", "c": "007"}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "null.jsonl",
            '{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": null}\n',
            r"null\.jsonl: line 2: 'answer' is null",
        ),
        (
            "short.jsonl",
            '{"prompt": "a", "answer": "1"}\n\n{"prompt": "b"}\n',
            r"short\.jsonl: line 3: no 'answer'",
        ),
        (
            "empty_cell.csv",
            "prompt,answer\na,1\nb,\n",
            r"empty_cell\.csv: line 3: 'answer' is empty",
        ),
        ("short.csv", "prompt,answer\na,1\nb\n", r"short\.csv: line 3 has 1 field; the header"),
        ("long.csv", "prompt,answer\na,1,2\n", r"long\.csv: line 2 has 3 fields; the header"),
    ],
)
def test_a_missing_answer_is_an_error_naming_the_line(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=message):
        tasks.get(str(tmp_path / name))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.jsonl", b"", r"empty\.jsonl.* is empty \(0 bytes\)"),
        ("blank.jsonl", b"\n  \n\n", r"blank\.jsonl.* has no rows: only blank lines"),
        ("empty.csv", b"", r"empty\.csv.* is empty \(0 bytes\)"),
        ("header_only.csv", b"prompt,answer\n", r"header_only\.csv.* no rows"),
        (
            "latin1.jsonl",
            b'{"prompt": "a", "answer": "1"}\n{"prompt": "caf\xe9", "answer": "2"}\n',
            r"latin1\.jsonl.* not UTF-8: byte 0xe9 at offset 46 \(line 2\)",
        ),
        ("latin1.csv", b"prompt,answer\ncaf\xe9,1\n", r"latin1\.csv.* byte 0xe9 at offset 17"),
    ],
)
def test_empty_blank_and_non_utf8_files_fail_naming_the_file(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=message):
        tasks.get(str(tmp_path / name))


def test_a_null_parquet_answer_is_an_error_naming_the_row(tmp_path):
    # read as is, the null answer became the string 'None'
    import datasets

    rows = [{"prompt": "a", "answer": "1"}, {"prompt": "b", "answer": None}]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "n.parquet"))
    with pytest.raises(ValueError, match=r"n\.parquet: row 2: 'answer' is null"):
        tasks.get(str(tmp_path / "n.parquet"))


def test_test_prompts_that_are_also_train_prompts_are_reported(tmp_path, caplog):
    rows = [{"prompt": f"{i}?", "answer": "1", "split": "train"} for i in range(5)]
    rows.append({"prompt": "3?", "answer": "1", "split": "test"})
    path = write_jsonl(tmp_path / "leak.jsonl", rows)
    with caplog.at_level(logging.WARNING, logger="policylab.tasks.files"):
        tasks.get(str(path))
    assert "1 test prompt is also a train prompt (line 6)" in caplog.text


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("prompt,answer\na,1\n".encode("utf-8-sig"))
    assert answers(tasks.get(str(path))) == {"a": "1"}


def test_conflicting_duplicates_are_an_error_listing_their_lines(tmp_path):
    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(6)]
    rows += [{"prompt": "2+1=", "answer": "4"}, {"prompt": "5+1=", "answer": "7"}]
    path = write_jsonl(tmp_path / "clash.jsonl", rows)
    with pytest.raises(ValueError, match=r"2 prompts have different answers") as err:
        tasks.get(str(path))
    assert "line 3 ('3') and line 7 ('4')" in str(err.value)
    assert "line 6 ('6') and line 8 ('7')" in str(err.value)


def test_the_data_report_counts_rows_duplicates_and_the_longest_prompt(tmp_path, caplog):
    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(30)]
    rows += [rows[4], {"prompt": "a much longer prompt+1=", "answer": "x"}]
    path = write_jsonl(tmp_path / "dup.jsonl", rows)
    with caplog.at_level(logging.INFO, logger="policylab.tasks.files"):
        task = tasks.get(str(path))
    assert sum(task.rows.values()) == 32  # exact duplicates are kept, and reported
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("1 row repeats an earlier row exactly: line 31 = line 5" in m for m in warned)
    report = " ".join(r.getMessage() for r in caplog.records)
    assert "32 rows" in report and "longest prompt 23 characters (line 32)" in report


def test_a_prompt_longer_than_the_context_is_an_error_naming_its_line():
    tokenizer = build_tokenizer()
    chat = [{"role": "user", "content": "y" * 105}]
    examples = [{"prompt": "1+1="}, {"prompt": "x" * 110}, {"prompt": chat}]
    where = ["line 1", "line 2", "line 3"]
    assert check_prompt_lengths(examples[:1], tokenizer, 128, 24, "d.jsonl") == 4
    with pytest.raises(ValueError, match=r"d\.jsonl: 2 prompts do not fit") as err:
        check_prompt_lengths(examples, tokenizer, 128, 24, "d.jsonl", where)
    message = str(err.value)
    assert "line 2 (110 tokens)" in message and "line 3 (105 tokens)" in message
    assert "context of 128 positions with max_new_tokens 24" in message
    assert "drop prompts over 104 tokens" in message
    # a prompt of a million characters is counted on a prefix (32 characters per position)
    with pytest.raises(ValueError, match=r"row 1 \(over 4096 tokens\)"):
        check_prompt_lengths([{"prompt": "z" * 1_000_000}], tokenizer, 128, 24, "d.jsonl")


def test_the_trainer_checks_prompt_lengths_before_the_run_folder_exists(tmp_path):
    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(20)]
    rows.append({"prompt": "x" * 2000, "answer": "1"})
    path = write_jsonl(tmp_path / "long.jsonl", rows)
    cfg = TrainConfig(task=str(path), run_dir=str(tmp_path / "runs" / "long"))
    with pytest.raises(ValueError, match=r"long\.jsonl: 1 prompt does not fit.*line 21"):
        compose(cfg)
    assert not (tmp_path / "runs").exists()
    rows[-1]["prompt"] = "x" * 100  # fits with max_new_tokens 28 (100 + 28 = 128), not 29
    write_jsonl(path, rows)
    assert compose(cfg.model_copy(update={"max_new_tokens": 28})).task.name == "long"
    with pytest.raises(ValueError, match=r"line 21 \(100 tokens\)"):
        compose(cfg.model_copy(update={"max_new_tokens": 29}))
