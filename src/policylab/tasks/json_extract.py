"""json_extract: read a templated sentence into a JSON object (RL-Struct's testbed,
papers/seed_agents.md §A8).

Prompt: one sentence from 5 templates about a person, their age and their city, then
" ->", e.g. "Ann (34) lives in Oslo. ->" or "Oslo is home to Ann, 34. ->". Answer: the
object with the keys n (name, a string), a (age, an integer) and c (city, a string),
written compactly: `{"n":"Ann","a":34,"c":"Oslo"}`. Columns: `schema` ({"n": "str",
"a": "int", "c": "str"}) and `gold` (the object), which the json_* rewards read.

Knobs: names (default 16; 2..16) and cities (16; 2..16), how many of the fixed name and
city lists are drawn from; max_age (80; 18..99), ages drawn from 18..max_age;
held_out_template (-1 = none; 0..4): that template never appears in the train split, and
the test split is made of it alone, the generalisation check of §A8.

Verifier: RL-Struct's hierarchical reward R (json_schema.py) divided by its maximum 5, so
1.0 exactly when the answer parses to the gold object (same keys, JSON types and values)
in at most 40 characters; invalid JSON gives 0.0, a valid object 0.1 … 1. A held-out
evaluation's greedy accuracy (the share scoring 1.0) is therefore exact-match accuracy,
and its greedy reward the mean R/5. The answer is read inside `<answer>…</answer>`, or
the whole completion when the tags are missing.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from policylab.tasks import json_schema
from policylab.tasks.base import Task, check_int

NAMES = (
    "Ann", "Bo", "Carl", "Dora", "Emil", "Finn", "Greta", "Hugo",
    "Ines", "Jonas", "Karl", "Lena", "Mia", "Nils", "Olga", "Paul",
)  # fmt: skip
CITIES = (
    "Oslo", "Rome", "Paris", "Lima", "Kyiv", "Bern", "Riga", "Cairo",
    "Delhi", "Dakar", "Lagos", "Quito", "Seoul", "Tokyo", "Vienna", "Sofia",
)  # fmt: skip
TEMPLATES = (
    "{n} ({a}) lives in {c}.",
    "{c} is home to {n}, {a}.",
    "{n}, aged {a}, is from {c}.",
    "In {c} lives {n} who is {a}.",
    "Age {a}: {n} of {c}.",
)
SUFFIX = " ->"
SCHEMA = {"n": "str", "a": "int", "c": "str"}
MIN_AGE = 18


@dataclass(frozen=True)
class JsonExtractKnobs:
    """How many names and cities, the oldest age, and the template held out."""

    names: int = 16
    cities: int = 16
    max_age: int = 80
    held_out_template: int = -1

    def __post_init__(self) -> None:
        check_int("json_extract", "names", self.names, 2, len(NAMES))
        check_int("json_extract", "cities", self.cities, 2, len(CITIES))
        check_int("json_extract", "max_age", self.max_age, MIN_AGE, 99)
        check_int("json_extract", "held_out_template", self.held_out_template, -1, 4)


class JsonExtract(Task):
    """Templated sentence → JSON: "Ann (34) lives in Oslo. ->" → {"n":"Ann","a":34,"c":"Oslo"}."""

    name = "json_extract"
    knobs_class = JsonExtractKnobs
    columns = ("schema", "gold")
    _split: str | None = None  # the split being drawn (examples, draw), for held_out_template
    chars = "".join(sorted(set("".join(NAMES + CITIES + TEMPLATES) + '0123456789{}":,->')))

    def examples(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """As `Task.examples`; with a held-out template, the train split never shows it and
        the test split shows only it."""
        self._split = split
        try:
            return super().examples(split, n, seed)
        finally:
            self._split = None

    def draw(self, split: str, rng: random.Random, exclude=()) -> dict | None:
        self._split = split
        try:
            return super().draw(split, rng, exclude)
        finally:
            self._split = None

    def _sample(self, rng: random.Random) -> dict | None:
        k = self.knobs
        template = rng.randrange(len(TEMPLATES))
        name = NAMES[rng.randrange(k.names)]
        age = rng.randint(MIN_AGE, k.max_age)
        city = CITIES[rng.randrange(k.cities)]
        held = k.held_out_template
        if held >= 0 and self._split is not None and (template == held) != (self._split == "test"):
            return None
        prompt = TEMPLATES[template].format(n=name, a=age, c=city) + SUFFIX
        return {"prompt": prompt, "schema": dict(SCHEMA), "gold": {"n": name, "a": age, "c": city}}

    def _answer(self, example: dict) -> str:
        return json.dumps(example["gold"], separators=(",", ":"))

    def verify(self, completion: str, example: dict) -> float:
        """R / 5 of the completion (module docstring); 0.0 for invalid JSON."""
        schema = json_schema.as_object(example["schema"])
        gold = json_schema.as_object(example["gold"])
        return json_schema.score(completion, schema, gold).total() / json_schema.MAX_REWARD

    def _score(self, text: str, example: dict) -> float:  # verify reads the completion itself
        return self.verify(text, example)


__all__ = ["CITIES", "NAMES", "SCHEMA", "TEMPLATES", "JsonExtract"]
