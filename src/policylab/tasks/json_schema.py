"""RL-Struct's hierarchical reward for JSON output, as pure functions of one completion
(papers/seed_agents.md §A8; Hu & Wu, arXiv 2512.00319). The reward functions of
`rewards/json_struct.py` and the `json_extract` task's verifier are built on these.

For a completion y (the text inside `<answer>…</answer>` when the tags are there, else the
whole completion, stripped), a schema S (key → type name) and a gold dict g:

    valid   = 1 iff json.loads(y) is a dict (JSON parsed by a real parser, never eval)
    struct  = |K ∩ S| / |K ∪ S|             K = the keys of y (missing and extra keys cost)
    fmt     = share of S's keys present in y with S's type (a bool is not an int)
    content = share of S's keys whose value equals g's (same JSON type and value)
    len     = min(1, max(0, |y| − L) / L)    L = 40 characters
    R       = 1·valid + 1·struct + 1·fmt + 2·content − 0.5·len

Invalid JSON gates everything: every part is 0, so R = 0; otherwise R ∈ [0.5, 5]. The
weights, L and the gate are ours: no training code or reward weights of the paper were
found (§A8 "Reward (ours)"). Content compares JSON types strictly (34 ≠ 34.0 ≠ "34";
our choice), so content = 1 implies fmt = 1 for gold that matches its schema.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from policylab.tasks.base import extract_answer

LENGTH_ALLOWANCE = 40  # L, characters [ours, seed_agents.md §A8]
# R's weights per part [ours, seed_agents.md §A8]: content counts twice, length penalises
WEIGHTS = {"valid": 1.0, "struct": 1.0, "fmt": 1.0, "content": 2.0, "len": -0.5}
MAX_REWARD = 5.0  # R of a valid, exact, short answer

# schema type name → the Python types json.loads gives for it
TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (float, int),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class Parts:
    """The five reward parts of one completion, and why it is invalid (None when valid)."""

    valid: float
    struct: float
    fmt: float
    content: float
    len: float
    reason: str | None = None

    def total(self, weights: dict[str, float] = WEIGHTS) -> float:
        """R = Σ_part w_part · part."""
        return sum(w * getattr(self, part) for part, w in weights.items())


INVALID = {"valid": 0.0, "struct": 0.0, "fmt": 0.0, "content": 0.0, "len": 0.0}


def answer_text(completion: str) -> str:
    """y: the text inside `<answer>…</answer>` when the completion has the tags, else the
    whole completion; stripped of surrounding whitespace."""
    inside = extract_answer(completion)
    return (inside if inside is not None else completion).strip()


def parse(text: str) -> tuple[dict | None, str | None]:
    """(the JSON object in `text`, None), or (None, why not): "empty", "syntax: <msg>",
    "not an object (<type>)" or "non-finite number"."""
    if not text:
        return None, "empty"
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as err:  # json.JSONDecodeError, and NaN/Infinity rejected below
        message = getattr(err, "msg", str(err))
        return None, f"syntax: {message}"
    if not isinstance(value, dict):
        return None, f"not an object ({type(value).__name__})"
    return value, None


def _reject_constant(name: str) -> float:
    # json.loads accepts NaN and Infinity, which are not JSON (RFC 8259)
    raise ValueError(f"{name} is not JSON")


def matches(value: Any, type_name: str) -> bool:
    """Whether a parsed JSON value has the schema type `type_name` (a bool is not an int,
    an int is a float)."""
    if isinstance(value, bool) and type_name != "bool":
        return False
    return isinstance(value, TYPES[type_name])


def same(value: Any, gold: Any) -> bool:
    """Equal as JSON values: the same JSON type and the same value (34 ≠ 34.0, 1 ≠ true)."""
    if _json_type(value) != _json_type(gold):
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return value == gold


def _json_type(value: Any) -> str:
    for name in ("bool", "int", "float", "str", "list", "dict"):  # bool before int
        if isinstance(value, TYPES[name][0]):
            return name
    return "null"


def score(completion: str, schema: dict, gold: dict, allowance: int = LENGTH_ALLOWANCE) -> Parts:
    """The five parts of one completion against `schema` and `gold` (module docstring)."""
    y = answer_text(completion)
    parsed, reason = parse(y)
    if parsed is None:
        return Parts(**INVALID, reason=reason)
    keys, wanted = set(parsed), set(schema)
    union = keys | wanted
    struct = len(keys & wanted) / len(union) if union else 1.0
    n = len(wanted)
    fmt = sum(k in parsed and matches(parsed[k], schema[k]) for k in wanted) / n if n else 1.0
    content = sum(k in parsed and same(parsed[k], gold.get(k)) for k in wanted) / n if n else 1.0
    length = min(1.0, max(0, len(y) - allowance) / allowance)
    return Parts(1.0, struct, fmt, content, length)


def exact(completion: str, gold: dict) -> float:
    """1.0 iff the completion parses to a dict equal to `gold` (same keys, JSON types and
    values), else 0.0: the `exact` alternative of §A8's arena."""
    parsed, _ = parse(answer_text(completion))
    if parsed is None or set(parsed) != set(gold):
        return 0.0
    return 1.0 if all(same(parsed[k], gold[k]) for k in gold) else 0.0


def check_schema(schema: Any) -> str | None:
    """Why `schema` is not a key → type-name map (None when it is)."""
    if not isinstance(schema, dict) or not schema:
        return f"must be a non-empty object of key → type, got {schema!r}"
    for key, type_name in schema.items():
        if type_name not in TYPES:
            return f"key {key!r} has type {type_name!r}; accepted types: {', '.join(TYPES)}"
    return None


def check_gold(gold: Any, schema: dict) -> str | None:
    """Why `gold` does not match `schema` (None when it does): the same keys, each value of
    its schema type."""
    if not isinstance(gold, dict):
        return f"must be an object, got {gold!r}"
    missing = [k for k in schema if k not in gold]
    extra = [k for k in gold if k not in schema]
    if missing or extra:
        return f"keys differ from the schema's: missing {missing}, not in the schema {extra}"
    for key, type_name in schema.items():
        if not matches(gold[key], type_name):
            return f"{key!r} = {gold[key]!r} is not of the schema's type {type_name!r}"
    return None


def as_object(value: Any) -> Any:
    """A schema or gold column value: a dict as is, a JSON string (a CSV cell) parsed."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def check_rows(path: Any, rows: list[tuple[str, dict]]) -> None:
    """A data file of JSON-extraction rows (a `schema` column marks one; a `gold` column
    alone is any other data's column): every row's schema is a key → type map and its gold
    matches it; else ValueError naming the file, the line (or row), the field and what is
    accepted. Called before any model loads."""
    if not any("schema" in row for _, row in rows):
        return
    for place, row in rows:
        for column in ("schema", "gold"):
            if column not in row:
                raise ValueError(
                    f"{path}: {place}: no {column!r} column; JSON-extraction rows need "
                    "both 'schema' (key → type) and 'gold' (the expected object)"
                )
        schema = as_object(row["schema"])
        problem = check_schema(schema)
        if problem:
            raise ValueError(f"{path}: {place}: field 'schema' {problem}")
        problem = check_gold(as_object(row["gold"]), schema)
        if problem:
            raise ValueError(f"{path}: {place}: field 'gold' {problem}")
