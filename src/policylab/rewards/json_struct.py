"""RL-Struct's reward parts as reward functions (papers/seed_agents.md §A8; the formulas
in tasks/json_schema.py). Each reads the columns `schema` (key → type) and `gold` (the
expected object), as dicts or as JSON strings (CSV cells):

    json_valid    1 iff the answer parses (json.loads, never eval) to an object
    json_struct   |K ∩ S| / |K ∪ S| of the answer's keys K and the schema's S
    json_format   share of the schema's keys present with the schema's type
    json_content  share of the schema's keys equal to gold
    json_length   min(1, max(0, |y| − 40) / 40), the verbosity penalty
    json_exact    1 iff the parsed object equals gold (the `exact` alternative)

RL-Struct's multi reward is their weighted sum, `MULTI` (R = valid + struct + fmt +
2·content − 0.5·len; 0 for invalid JSON, since every part is 0 then):

    rewards={json_valid: 1, json_struct: 1, json_format: 1, json_content: 2, json_length: -0.5}

A completion that is not a JSON object gives every part its failure value 0; each such
sample is counted per function and reason (`failure_counts()`), and the first of each
reason is logged with the completion. A schema or gold column that is not what it must
be raises (a bug in the data, counted by the reward combination as a failed sample).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence

from policylab.rewards.counts import FAULTS as reward_faults
from policylab.tasks import json_schema
from policylab.tasks.base import _completion_text as text_of

log = logging.getLogger(__name__)

# RL-Struct's multi reward as run weights [ours, seed_agents.md §A8]
MULTI = {
    "json_valid": 1.0,
    "json_struct": 1.0,
    "json_format": 1.0,
    "json_content": 2.0,
    "json_length": -0.5,
}
_FAILURES: Counter[tuple[str, str]] = Counter()  # (function, reason) → samples


def failure_counts() -> dict[tuple[str, str], int]:
    """(reward function, reason) → how many completions were not a JSON object, since the
    process started (reasons: "empty", "syntax: …", "not an object (list)", …)."""
    return dict(_FAILURES)


def _part(name: str, part: str) -> Callable[..., list[float]]:
    def reward(prompts: Sequence, completions: Sequence, schema, gold, **columns) -> list[float]:
        out = []
        for completion, s, g in zip(completions, schema, gold, strict=True):
            s, g = _checked(s, g)
            text = text_of(completion)
            parts = json_schema.score(text, s, g)
            if parts.reason is not None:
                _count(name, parts.reason, text)
            out.append(getattr(parts, part))
        return out

    reward.__name__ = name
    reward.__doc__ = f"RL-Struct's {part} part per completion (json_struct.py); 0 if not JSON."
    return reward


def json_exact(prompts: Sequence, completions: Sequence, gold, **columns) -> list[float]:
    """1.0 iff the completion parses to an object equal to `gold` (keys, JSON types and
    values), else 0.0."""
    return [
        json_schema.exact(text_of(c), _checked_gold(g))
        for c, g in zip(completions, gold, strict=True)
    ]


def _checked(schema, gold) -> tuple[dict, dict]:
    schema = json_schema.as_object(schema)
    problem = json_schema.check_schema(schema)
    if problem:
        raise ValueError(f"column 'schema' {problem}")
    gold = _checked_gold(gold)
    problem = json_schema.check_gold(gold, schema)
    if problem:
        raise ValueError(f"column 'gold' {problem}")
    return schema, gold


def _checked_gold(gold) -> dict:
    gold = json_schema.as_object(gold)
    if not isinstance(gold, dict):
        raise ValueError(f"column 'gold' must be an object, got {gold!r}")
    return gold


def _count(name: str, reason: str, text: str) -> None:
    kind = reason.split(":")[0]
    if not any(k == kind for _, k in _FAILURES):  # the first of each kind, once
        log.warning(
            "%s: 0 for a completion that is not a JSON object (%s): %r; such samples are "
            "counted per function and reason (json_struct.failure_counts())",
            name,
            reason,
            text,
        )
    _FAILURES[name, kind] += 1
    reward_faults.record(f"{name}/{kind}")  # this step's count, logged as reward/fault/<key>


json_valid = _part("json_valid", "valid")
json_struct = _part("json_struct", "struct")
json_format = _part("json_format", "fmt")
json_content = _part("json_content", "content")
json_length = _part("json_length", "len")

# name → function, registered by rewards/builtin.py
REWARDS = {
    f.__name__: f
    for f in (json_valid, json_struct, json_format, json_content, json_length, json_exact)
}
