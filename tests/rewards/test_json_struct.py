"""RL-Struct's JSON reward (papers/seed_agents.md §A8): the spec's five hand-computed
cases, each part as a reward function, the weighted multi reward through `combine`, the
exact and content alternatives, failures counted with their reasons, and properties."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policylab import rewards
from policylab.rewards import json_struct
from policylab.tasks import json_schema

SCHEMA = {"n": "str", "a": "int", "c": "str"}
GOLD = {"n": "Ann", "a": 34, "c": "Oslo"}
ORDER = ("valid", "struct", "fmt", "content", "len")


def parts_of(text: str) -> tuple[float, ...]:
    p = json_schema.score(text, SCHEMA, GOLD)
    return tuple(getattr(p, k) for k in ORDER)


# (completion, parts (valid, struct, fmt, content, len), R) — seed_agents.md §A8 "Tests"
SPEC_CASES = [
    # 1. exact: every part full, no length penalty (29 chars ≤ L = 40): R = 1+1+1+2 = 5
    ('{"n":"Ann","a":34,"c":"Oslo"}', (1, 1, 1, 1, 0), 5.0),
    # 2. age as a string: fmt 2/3, content 2/3: R = 1 + 1 + 2/3 + 2·2/3 = 4
    ('{"n":"Ann","a":"34","c":"Oslo"}', (1, 1, 2 / 3, 2 / 3, 0), 4.0),
    # 3. wrong city, extra key: struct 3/4, fmt 1, content 2/3: R = 1 + .75 + 1 + 4/3
    ('{"n":"Ann","a":34,"c":"Rome","x":1}', (1, 0.75, 1, 2 / 3, 0), 4.0833333333333333),
    # 4. truncated: not JSON, the gate makes every part 0
    ('{"n":"Ann","a":34', (0, 0, 0, 0, 0), 0.0),
    # 5. 54 chars with an extra key: struct 3/4, len (54−40)/40 = 0.35:
    #    R = 1 + .75 + 1 + 2 − 0.5·0.35 = 4.575
    ('{"n": "Ann", "a": 34, "c": "Oslo", "note": "ok ok ok"}', (1, 0.75, 1, 1, 0.35), 4.575),
]


@pytest.mark.parametrize(("text", "parts", "total"), SPEC_CASES)
def test_spec_cases(text, parts, total):
    assert parts_of(text) == pytest.approx(parts, abs=1e-12)
    assert json_schema.score(text, SCHEMA, GOLD).total() == pytest.approx(total, abs=1e-9)


def test_case_five_is_54_characters():
    assert len(SPEC_CASES[4][0]) == 54


@pytest.mark.parametrize(("text", "parts", "total"), SPEC_CASES)
def test_combined_multi_reward_equals_the_spec_and_logs_every_part(text, parts, total):
    combined = rewards.combine(json_struct.MULTI)
    result = combined([""], [text], schema=[SCHEMA], gold=[GOLD])
    assert result.total == [pytest.approx(total, abs=1e-9)]
    names = ("json_valid", "json_struct", "json_format", "json_content", "json_length")
    assert [result.parts[n][0] for n in names] == pytest.approx(parts, abs=1e-12)


def test_answer_tags_are_read_when_present():
    # the task's demonstrations wrap the object in <answer>…</answer>; y is what is inside
    assert parts_of('<answer>{"n":"Ann","a":34,"c":"Oslo"}</answer>') == (1, 1, 1, 1, 0)
    # an unclosed tag is no answer block: the whole text is y, which is not JSON
    assert parts_of('<answer>{"n":"Ann","a":34,"c":"Oslo"}') == (0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("", 0),
        ("   ", 0),
        ("[1, 2]", 0),  # JSON, not an object
        ('"Ann"', 0),
        ("{'n': 'Ann'}", 0),  # a Python literal, which only eval would read
        ('{"a": NaN}', 0),  # NaN is not JSON
        ('{"a": Infinity}', 0),
        ('{"n":"Ann"} trailing', 0),
        ("__import__('os').system('true')", 0),
        ("{}", 1),  # an object with no keys: valid, struct 0
    ],
)
def test_validity(text, valid):
    assert json_schema.score(text, SCHEMA, GOLD).valid == valid


def test_empty_object_scores_valid_only():
    # K = ∅: struct 0/3, fmt 0, content 0; R = 1
    assert parts_of("{}") == (1, 0, 0, 0, 0)


def test_bool_is_not_an_int_and_types_compare_strictly():
    # a = true: wrong type (bool is not int) and not equal to 34
    assert parts_of('{"n":"Ann","a":true,"c":"Oslo"}')[2:4] == (2 / 3, 2 / 3)
    # a = 34.0: a float is not the schema's int, and 34.0 is not gold's 34 as JSON
    assert parts_of('{"n":"Ann","a":34.0,"c":"Oslo"}')[2:4] == (2 / 3, 2 / 3)
    assert json_schema.matches(True, "bool") and not json_schema.matches(True, "int")
    assert json_schema.matches(3, "float")  # an integer is a number


def test_length_penalty_saturates_at_one():
    long = json.dumps({**GOLD, "x": "y" * 200})  # far beyond 2·L
    assert json_schema.score(long, SCHEMA, GOLD).len == 1.0


def test_exact_alternative():
    fn = rewards.get("json_exact")
    texts = [SPEC_CASES[0][0], SPEC_CASES[1][0], SPEC_CASES[2][0], SPEC_CASES[3][0],
             '{"c":"Oslo","a":34,"n":"Ann"}']  # fmt: skip
    assert fn([""] * 5, texts, gold=[GOLD] * 5) == [1.0, 0.0, 0.0, 0.0, 1.0]


def test_content_alternative_ignores_extra_keys():
    fn = rewards.get("json_content")
    out = fn([""] * 2, [SPEC_CASES[4][0], SPEC_CASES[2][0]], schema=[SCHEMA] * 2, gold=[GOLD] * 2)
    assert out == pytest.approx([1.0, 2 / 3])


def test_columns_as_json_strings():
    # a CSV data file holds schema and gold as JSON text
    fn = rewards.get("json_format")
    out = fn([""], [SPEC_CASES[1][0]], schema=[json.dumps(SCHEMA)], gold=[json.dumps(GOLD)])
    assert out == pytest.approx([2 / 3])


def test_invalid_json_is_counted_with_its_reason(caplog):
    before = json_struct.failure_counts()
    fn = rewards.get("json_valid")
    out = fn([""] * 3, ['{"n":', "[1]", SPEC_CASES[0][0]], schema=[SCHEMA] * 3, gold=[GOLD] * 3)
    assert out == [0.0, 0.0, 1.0]
    after = json_struct.failure_counts()
    assert after.get(("json_valid", "syntax"), 0) - before.get(("json_valid", "syntax"), 0) == 1
    key = ("json_valid", "not an object (list)")
    assert after.get(key, 0) - before.get(key, 0) == 1


def test_bad_schema_column_fails_the_sample_and_names_the_field():
    combined = rewards.combine({"json_valid": 1.0})
    result = combined([""], ["{}"], schema=[{"n": "string"}], gold=[{"n": "Ann"}])
    assert result.failures == {"json_valid": 1}
    with pytest.raises(ValueError, match="'schema'.*'string'.*accepted types"):
        json_struct.json_valid([""], ["{}"], schema=[{"n": "string"}], gold=[{"n": "Ann"}])


def test_registered_by_name():
    for name in ("json_valid", "json_struct", "json_format", "json_content", "json_length",
                 "json_exact"):  # fmt: skip
        assert name in rewards.names()


VALUES = st.one_of(
    st.integers(-5, 99), st.text(max_size=6), st.booleans(), st.none(), st.floats(-9, 9)
)


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(st.sampled_from(["n", "a", "c", "x", "y"]), VALUES, max_size=5))
def test_properties_of_valid_objects(obj):
    text = json.dumps(obj)
    p = json_schema.score(text, SCHEMA, GOLD)
    assert p.valid == 1.0
    for part in ("struct", "fmt", "content", "len"):
        assert 0.0 <= getattr(p, part) <= 1.0
    assert 0.5 <= p.total() <= 5.0
    assert p.content <= p.fmt  # a value equal to gold has gold's (schema's) type
    assert (p.total() == 5.0) == (
        obj == GOLD and json_struct.json_exact([""], [text], [GOLD]) == [1.0]
    )


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=40))
def test_any_text_scores_in_range_and_invalid_is_zero(text):
    p = json_schema.score(text, SCHEMA, GOLD)
    assert p.total() == 0.0 if p.reason else 0.5 <= p.total() <= 5.0
    assert not math.isnan(p.total())


def test_each_steps_faults_are_taken_by_function_and_reason():
    from policylab.rewards import FAULTS, FaultLedger

    FAULTS.take()  # whatever earlier tests left
    completions = ['{"n":', "[1]", SPEC_CASES[0][0]]
    json_struct.json_valid([""] * 3, completions, schema=[SCHEMA] * 3, gold=[GOLD] * 3)
    assert FAULTS.take() == {
        "reward/fault/json_valid/not an object (list)": 1.0,
        "reward/fault/json_valid/syntax": 1.0,
    }
    assert FAULTS.take() == {}  # read once: the next step starts from 0
    ledger = FaultLedger()
    ledger.record("f/why")
    ledger.record("f/why")
    assert ledger.take() == {"reward/fault/f/why": 2.0}
