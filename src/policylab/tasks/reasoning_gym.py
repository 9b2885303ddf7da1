"""reasoning-gym tasks by name: `tasks.get("rg:countdown")`, `--task rg:mini_sudoku`.

reasoning-gym (the `tasks` extra: `pip install "policylab[tasks]"`) generates ~100
procedural reasoning datasets, each with its own verifier. `rg:<name>` makes one of them
a policylab task with the embedded tasks' interface:

    task = tasks.get("rg:basic_arithmetic", max_terms=3, max_digits=2)
    rows = task.examples("train", 64, seed=0)  # prompt, answer, completion, question, metadata
    task.reward(prompts, completions, question=[...], answer=[...], metadata=[...])

Knobs are the fields of the dataset's config (its difficulty fields, e.g. countdown's
min_numbers / max_numbers, plus `size` and `seed`) and one of ours, `instruction`:

- `seed` (default 0) and `size` (default: unbounded) are the dataset's. A split is a
  stream: the items of the dataset with seed `2·(seed + k)` for train, `2·(seed + k) + 1`
  for test (k: the `seed` of `examples`), so the two never share a generator seed, kept
  when the stable prompt hash of their question (`base.split_of`, as the embedded tasks)
  names that split, each question once. Train and test therefore never share a prompt
  (reasoning-gym alone repeats short ones across seeds), and the test split costs about
  ten items per example. With `size`, a split holds `size` examples and asking for more
  is an error (so `eval_n` clamps to it: `tasks.eval_size`).
- `instruction` (default `INSTRUCTION`) is appended to each question, on its own line,
  so the model answers inside `<answer>…</answer>`; "" leaves the question as it is.

The reward of a completion is reasoning-gym's own verifier, `dataset.score_answer(answer,
entry)`, on the text of the first `<answer>…</answer>` (`extract_answer`, as every
policylab task); no answer block, or a verifier that raises, scores 0.0.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import logging
from collections.abc import Sequence
from typing import Any

from policylab.registry import UnknownNameError
from policylab.tasks.base import (
    MIN_STALL_DRAWS,
    SPLITS,
    _completion_text,
    check_int,
    demonstration,
    extract_answer,
    split_of,
)

log = logging.getLogger(__name__)

PREFIX = "rg:"
INSTRUCTION = "Give only the final answer, between <answer> and </answer>."
COLUMNS = ("question", "answer", "metadata")  # the entry reasoning-gym's verifier reads
EXAMPLES_SHOWN = ("basic_arithmetic", "countdown", "mini_sudoku", "maze", "gsm_symbolic")
# items in each split's stream (reasoning-gym's virtual dataset size; items are generated
# on demand, and a few datasets read the size, so it is fixed)
STREAM = 1_000_000


class MissingExtraError(ImportError, ValueError):
    """An optional dependency is not installed. An ImportError, and a ValueError so that
    config checks and the CLI report it as a bad setting."""


def is_rg_name(name: str) -> bool:
    """`name` asks for a reasoning-gym task (`rg:<name>`)."""
    return isinstance(name, str) and name.startswith(PREFIX)


def _library(name: str = "reasoning-gym tasks"):
    try:
        return importlib.import_module("reasoning_gym")
    except ImportError:
        raise MissingExtraError(
            f"{name} need reasoning-gym, which is not installed: "
            'pip install "policylab[tasks]" (or pip install reasoning-gym)'
        ) from None


def dataset_names() -> list[str]:
    """reasoning-gym's dataset names, sorted (MissingExtraError without the package)."""
    return sorted(_library().factory.DATASETS)


def catalogue_line() -> str:
    """One line for `policylab list`: how to name a reasoning-gym task and how many exist."""
    try:
        names = dataset_names()
    except MissingExtraError:
        return 'rg:<name> — reasoning-gym tasks, once installed: pip install "policylab[tasks]"'
    shown = ", ".join(n for n in EXAMPLES_SHOWN if n in names)
    return (
        f"rg:<name> — {len(names)} reasoning-gym tasks, e.g. {shown}, ... "
        "(tasks.reasoning_gym.dataset_names(); knobs: the dataset's config fields)"
    )


class ReasoningGymTask:
    """A reasoning-gym dataset as a policylab task (see the module docstring)."""

    columns = COLUMNS

    def __init__(self, name: str, **knobs: Any) -> None:
        library = _library(f"task {name!r}")
        self.name = self.reward_name = name
        self.dataset_name = name.removeprefix(PREFIX)
        registry = library.factory.DATASETS
        if self.dataset_name not in registry:
            close = difflib.get_close_matches(self.dataset_name, list(registry), n=5, cutoff=0.6)
            close += sorted(n for n in registry if self.dataset_name in n and n not in close)
            hint = f"close matches: {', '.join(PREFIX + n for n in close[:5])}; " if close else ""
            raise UnknownNameError(
                f"unknown reasoning-gym task {name!r}; {hint}all {len(registry)}: "
                "policylab.tasks.reasoning_gym.dataset_names()"
            )
        self._dataset_cls, self._config_cls = registry[self.dataset_name]
        fields = [f.name for f in dataclasses.fields(self._config_cls)]
        accepted = ["instruction", *fields]
        for knob, value in knobs.items():
            if knob not in accepted:
                raise ValueError(
                    f"{name} has no knob {knob!r} (got {knob}={value!r}); knobs: "
                    f"{', '.join(accepted)}"
                )
        self.instruction = knobs.pop("instruction", INSTRUCTION)
        if not isinstance(self.instruction, str):
            raise ValueError(f"{name} knob instruction={self.instruction!r}; accepted: a string")
        self.size = knobs.pop("size", None)
        if self.size is not None:
            check_int(name, "size", self.size, 1, 2**31 - 1)
        self.seed = knobs.pop("seed", 0)
        check_int(name, "seed", self.seed, 0, 2**31 - 1)
        self.config = knobs  # the dataset's own (difficulty) fields
        self.knobs = {**knobs, "seed": self.seed, "size": self.size}
        self._scorer = self._dataset(seed=0, size=1)  # score_answer reads the config too

    @property
    def rows(self) -> dict[str, int]:
        """Items per split when `size` is set; unbounded splits are absent."""
        return {split: self.size for split in SPLITS} if self.size is not None else {}

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.knobs.items() if v is not None)
        return f"{self.name}({settings})"

    def _dataset(self, seed: int, size: int):
        try:
            return self._dataset_cls(config=self._config_cls(**self.config, seed=seed, size=size))
        except (AssertionError, TypeError, ValueError) as err:
            fields = ", ".join(f"{k}={v!r}" for k, v in self.config.items()) or "defaults"
            raise ValueError(
                f"{self.name}: reasoning-gym rejects the knobs ({fields}): {err or 'invalid'}"
            ) from None

    def examples(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """The first `n` examples of `split`'s stream: the items of the split's dataset
        (seed 2·(seed knob + `seed`), +1 for test) whose question the prompt hash puts in
        `split` (`split_of`), each question once; so a larger `n` extends a smaller one.
        ValueError when `n` exceeds `size`, or when `MIN_STALL_DRAWS` items in a row bring
        no new example (the instance space is exhausted)."""
        if split not in SPLITS:
            raise ValueError(f"split={split!r} is invalid; accepted: {', '.join(SPLITS)}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n={n!r} is invalid; accepted: an integer >= 0")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed={seed!r} is invalid; accepted: an integer >= 0")
        if self.size is not None and n > self.size:
            raise ValueError(f"{self!r} has {self.size} {split} examples (size); asked for {n}")
        dataset = self._dataset(2 * (self.seed + seed) + SPLITS.index(split), STREAM)
        out, seen, misses = [], set(), 0
        for index in range(STREAM):
            if len(out) == n:
                break
            entry = dataset[index]
            question = entry["question"]
            if question in seen or split_of(self.name, question) != split:
                misses += 1
                if misses > MIN_STALL_DRAWS:
                    break
                continue
            seen.add(question)
            misses = 0
            out.append(self._row(entry))
        if len(out) < n:
            raise ValueError(
                f"{self!r} has only about {len(out)} distinct {split} examples (no new one in "
                f"{misses} items); ask for n <= {len(out)} or widen the dataset's knobs"
            )
        return out

    def _row(self, entry: dict) -> dict:
        question, answer = entry["question"], str(entry["answer"])
        prompt = f"{question.rstrip()}\n{self.instruction}" if self.instruction else question
        return {
            "prompt": prompt,
            "answer": answer,
            "completion": demonstration(answer),
            "question": question,
            "metadata": entry.get("metadata", {}),
        }

    def verify(self, completion: str, example: dict) -> float:
        """reasoning-gym's `score_answer` of the text in the first <answer>…</answer> of
        `completion` against `example` (its question, answer and metadata); 0.0 without an
        answer block or when the verifier raises."""
        text = extract_answer(completion)
        if text is None:
            return 0.0
        entry = {k: example[k] for k in COLUMNS}
        try:
            return float(self._scorer.score_answer(text, entry))
        except Exception as err:  # noqa: BLE001 - a malformed answer scores 0, as in every task
            log.debug("%s: score_answer raised %r on %r", self.name, err, text)
            return 0.0

    def reward(self, prompts: Sequence[str], completions: Sequence, **columns: Any) -> list[float]:
        """The verifier as a TRL-style reward function: one float per completion; it reads
        the columns question, answer and metadata (one value per completion)."""
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"{self.name} reward: {len(prompts)} prompts but {n} completions")
        for column in COLUMNS:
            if column not in columns or len(columns[column]) != n:
                got = ", ".join(f"{k} ({len(v)})" for k, v in sorted(columns.items()))
                raise ValueError(
                    f"{self.name} reward needs the columns {', '.join(COLUMNS)}, one value "
                    f"per completion ({n}); got: {got or '(none)'}"
                )
        return [
            self.verify(_completion_text(c), {k: columns[k][i] for k in COLUMNS})
            for i, c in enumerate(completions)
        ]
