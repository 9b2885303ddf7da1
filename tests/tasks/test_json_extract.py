"""json_extract (RL-Struct's testbed, seed_agents.md §A8): the verifier on hand-made
answers, templates and the held-out template, knobs, and JSON-extraction data files
checked before any model loads."""

from __future__ import annotations

import json
import re

import pytest

import policylab.tasks as tasks
from policylab.tasks.json_extract import SCHEMA, TEMPLATES

TASK = tasks.get("json_extract")
EXAMPLE = {"schema": SCHEMA, "gold": {"n": "Ann", "a": 34, "c": "Oslo"}}


@pytest.mark.parametrize(
    ("completion", "reward"),
    [
        ('<answer>{"n":"Ann","a":34,"c":"Oslo"}</answer>', 1.0),  # R = 5 → 1
        ('{"n":"Ann","a":34,"c":"Oslo"}', 1.0),  # without the tags: the whole text
        ('<answer>{"n":"Ann","a":"34","c":"Oslo"}</answer>', 0.8),  # R = 4
        ('<answer>{"n":"Ann","a":34</answer>', 0.0),  # truncated: gate
        ("<answer>{}</answer>", 0.2),  # R = valid only = 1
        ("no json here", 0.0),
    ],
)
def test_verify(completion, reward):
    assert TASK.verify(completion, EXAMPLE) == pytest.approx(reward)


def test_demonstrations_score_one_and_match_the_gold():
    rows = TASK.examples("train", 50, seed=1)
    prompts, completions = [r["prompt"] for r in rows], [r["completion"] for r in rows]
    columns = {"schema": [r["schema"] for r in rows], "gold": [r["gold"] for r in rows]}
    assert TASK.reward(prompts, completions, **columns) == [1.0] * 50
    for row in rows:
        assert json.loads(row["answer"]) == row["gold"]
        assert row["completion"] == f"<answer>{row['answer']}</answer>"
        assert len(row["answer"]) <= 40 and row["prompt"].endswith(" ->")
        gold = row["gold"]
        assert gold["n"] in row["prompt"] and str(gold["a"]) in row["prompt"]
        assert gold["c"] in row["prompt"]


def test_first_template_reads_as_the_spec():
    sentence = TEMPLATES[0].format(n="Ann", a=34, c="Oslo")
    assert sentence == "Ann (34) lives in Oslo."
    assert TEMPLATES[1].format(n="Ann", a=34, c="Oslo") == "Oslo is home to Ann, 34."


def template_of(prompt: str) -> int:
    """Which template wrote `prompt`."""
    text = prompt.removesuffix(" ->")
    for i, template in enumerate(TEMPLATES):
        pattern = re.escape(template)
        for field in ("n", "a", "c"):
            pattern = pattern.replace(re.escape("{" + field + "}"), r"\w+")
        if re.fullmatch(pattern, text):
            return i
    raise AssertionError(prompt)


def test_held_out_template_is_only_in_the_test_split():
    task = tasks.get("json_extract", held_out_template=2)
    train = {template_of(r["prompt"]) for r in task.examples("train", 300)}
    test = {template_of(r["prompt"]) for r in task.examples("test", 40)}
    assert 2 not in train and train == {0, 1, 3, 4}
    assert test == {2}


def test_splits_are_disjoint_and_every_template_appears():
    train = TASK.examples("train", 300)
    test = TASK.examples("test", 50)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in test}
    assert {template_of(r["prompt"]) for r in train} == set(range(5))


def test_knobs_narrow_the_lists():
    task = tasks.get("json_extract", names=2, cities=3, max_age=20)
    rows = task.examples("train", 20)
    assert {r["gold"]["n"] for r in rows} <= {"Ann", "Bo"}
    assert {r["gold"]["c"] for r in rows} <= {"Oslo", "Rome", "Paris"}
    assert {r["gold"]["a"] for r in rows} <= {18, 19, 20}


@pytest.mark.parametrize(
    ("knob", "value"),
    [("names", 1), ("cities", 17), ("max_age", 17), ("held_out_template", 5), ("names", "4")],
)
def test_bad_knobs(knob, value):
    with pytest.raises(ValueError, match=f"{knob}={value!r} is invalid"):
        tasks.get("json_extract", **{knob: value})


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


GOOD = {"prompt": "Ann is 34", "schema": {"n": "str", "a": "int"}, "gold": {"n": "Ann", "a": 34}}


def test_a_json_extraction_file_reads(tmp_path):
    rows = [{**GOOD, "prompt": f"p{i}"} for i in range(20)]
    task = tasks.get(write(tmp_path / "d.jsonl", rows), reward="json_exact")
    assert task.rows["train"] + task.rows["test"] == 20


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"schema": {"n": "string", "a": "int"}}, "line 3: field 'schema' key 'n' has type"),
        ({"schema": ["n", "a"]}, "line 3: field 'schema' must be a non-empty object"),
        ({"gold": {"n": "Ann"}}, r"line 3: field 'gold' keys differ.*missing \['a'\]"),
        ({"gold": {"n": "Ann", "a": "34"}}, "line 3: field 'gold' 'a' = '34' is not of the sch"),
        ({"gold": {"n": "Ann", "a": True}}, "line 3: field 'gold' 'a' = True"),
        ({"gold": "Ann"}, "line 3: field 'gold' must be an object"),
    ],
)  # fmt: skip
def test_a_file_whose_row_breaks_the_schema_fails_naming_line_and_field(tmp_path, bad, message):
    rows = [{**GOOD, "prompt": f"p{i}"} for i in range(5)]
    rows[2] = {**rows[2], **bad}
    with pytest.raises(ValueError, match=message):
        tasks.get(write(tmp_path / "d.jsonl", rows))


def test_a_row_without_gold_fails(tmp_path):
    rows = [{**GOOD, "prompt": f"p{i}"} for i in range(3)]
    del rows[1]["gold"]
    with pytest.raises(ValueError, match="line 2: no 'gold' column"):
        tasks.get(write(tmp_path / "d.jsonl", rows))


def test_a_gold_column_without_schema_is_any_other_column(tmp_path):
    rows = [{"prompt": f"{i}+2=", "answer": str(i + 2), "gold": str(i + 2)} for i in range(10)]
    task = tasks.get(write(tmp_path / "d.jsonl", rows))
    assert task.rows["train"] + task.rows["test"] == 10


def test_csv_cells_hold_json_text(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(
        'prompt,schema,gold\np1,"{""n"": ""str""}","{""n"": ""Ann""}"\n'
        'p2,"{""n"": ""str""}","{""n"": 7}"\n'
    )
    with pytest.raises(ValueError, match="line 3: field 'gold' 'n' = 7"):
        tasks.get(str(path))
