"""The Task base class: difficulty knobs, the fixed train/test split, answer extraction and
the verifier as a TRL-style reward function.

Every task draws instances from its own seeded `random.Random`. An example is a dict with

- `prompt`: the text the model sees (short, small character set; see each task's `chars`),
- `answer`: one canonical correct answer,
- `completion`: the demonstration `<answer>{answer}</answer>` that SFT trains on,
- the task's own columns (countdown: `numbers`, `target`; ...), which its verifier reads.

The split of an instance is a stable hash (SHA-256) of the task name and its prompt: about
`TEST_FRACTION` of all prompts are "test", the rest "train". So the held-out split never
overlaps training, whatever the seed, the knobs, the machine or the Python version.

Difficulty-aware augmentation (DeepVideo-R1, arXiv 2506.07464 §3.3; papers/
seed_llm_algorithms.md §5.2) asks a task for a harder or easier variant of a prompt:
`vary(example, harder, level, rng)`. Our text-task reading [ours]: instead of the paper's
input noise (harder) or answer hints (easier), the variant is a fresh train-split instance
drawn with the task's difficulty knobs moved along its `ladder` (`shifted_knobs`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"
SPLITS = ("train", "test")
TEST_FRACTION = 0.1  # our choice: 10 % of the instance space is held out
# examples() gives up when this many draws in a row (or 20x the distinct prompts seen, if
# larger) bring no new example of the split: the instance space is exhausted.
MIN_STALL_DRAWS = 10_000


def extract_answer(completion: str) -> str | None:
    """The text between the first `<answer>` and the next `</answer>`, stripped of
    surrounding whitespace; None when either tag is missing or `completion` is not a str.

    >>> extract_answer("think... <answer> 42 </answer>")
    '42'
    >>> extract_answer("<answer>1</answer><answer>2</answer>")
    '1'
    """
    if not isinstance(completion, str):
        return None
    start = completion.find(ANSWER_OPEN)
    if start < 0:
        return None
    start += len(ANSWER_OPEN)
    end = completion.find(ANSWER_CLOSE, start)
    if end < 0:
        return None
    return completion[start:end].strip()


def demonstration(answer: str) -> str:
    """The completion SFT trains on: exactly `<answer>{answer}</answer>`."""
    return f"{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"


def split_of(task_name: str, prompt: str) -> str:
    """ "test" or "train": a stable hash of the task name and the prompt decides."""
    digest = hashlib.sha256(f"{task_name}\n{prompt}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if bucket < TEST_FRACTION else "train"


def shift_on_ladder(
    knobs: Any, ladder: Sequence[tuple[str, int, int]], harder: bool, level: float
) -> Any | None:
    """`knobs` (a frozen dataclass) moved `s` unit steps along a difficulty ladder, or None
    when no knob can move (the ladder is empty or already at its end).

    The ladder lists integer knobs `(name, low, high)` in the order they move, each
    harder as it grows, with its valid range. [ours]

        s = max(1, ⌊ℓ · Σ_k (high_k − low_k) + ½⌋)

    Harder raises the first knob up to its `high`, and the steps left over raise the next;
    easier lowers them towards `low` in the same order. So ℓ = 1 reaches the ladder's end
    from anywhere, and any ℓ > 0 moves at least one step. Half steps round up (not to even).
    """
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 <= level <= 1:
        raise ValueError(f"level={level!r} is invalid; accepted: a number from 0 to 1")
    span = sum(high - low for _, low, high in ladder)
    steps = max(1, math.floor(level * span + 0.5))
    changes = {}
    for name, low, high in ladder:
        value = getattr(knobs, name)
        moved = min(high, value + steps) if harder else max(low, value - steps)
        steps -= abs(moved - value)
        if moved != value:
            changes[name] = moved
    return dataclasses.replace(knobs, **changes) if changes else None


def check_int(task: str, knob: str, value: Any, low: int, high: int) -> None:
    """Raise ValueError naming the knob and the value unless `low <= value <= high`."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(
            f"{task} knob {knob}={value!r} is invalid; accepted: an integer from {low} to {high}"
        )


def check_number(task: str, knob: str, value: Any, low: float, high: float) -> None:
    """Raise ValueError naming the knob and the value unless it is a number in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(
            f"{task} knob {knob}={value!r} is invalid; accepted: a number from {low} to {high}"
        )


def check_bool(task: str, knob: str, value: Any) -> None:
    """Raise ValueError naming the knob and the value unless it is True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"{task} knob {knob}={value!r} is invalid; accepted: True or False")


class Task:
    """One embedded task. Subclasses set `name`, `knobs_class` (a frozen dataclass whose
    `__post_init__` validates), `columns` (what `verify` reads besides the completion),
    `chars` (every character a prompt or answer may contain) and implement

    - `_sample(rng) -> dict | None`: a random instance with "prompt" and the task's
      columns, or None when this draw is rejected (e.g. an unreachable goal);
    - `_answer(example) -> str`: the canonical answer (called only for kept examples);
    - `_score(text, example) -> float`: the reward of an extracted answer text; it must
      return 0.0, never raise, on any malformed text.

    and may set `ladder`, the integer knobs that difficulty-aware augmentation moves
    (`shift_on_ladder`); a task without one cannot `vary`.
    """

    name: ClassVar[str]
    knobs_class: ClassVar[type]
    columns: ClassVar[tuple[str, ...]]
    chars: ClassVar[str]
    ladder: ClassVar[tuple[tuple[str, int, int], ...]] = ()

    def __init__(self, **knobs: Any) -> None:
        fields = [f.name for f in dataclasses.fields(self.knobs_class)]
        for knob, value in knobs.items():
            if knob not in fields:
                raise ValueError(
                    f"{self.name} has no knob {knob!r} (got {knob}={value!r}); "
                    f"knobs: {', '.join(fields)}"
                )
        self.knobs = self.knobs_class(**knobs)

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in dataclasses.asdict(self.knobs).items())
        return f"{self.name}({settings})"

    def examples(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """`n` distinct examples (distinct prompts) of `split` ("train" or "test").

        Instances are drawn from `random.Random(seed)` and those of the other split are
        skipped, so the same (knobs, split, n, seed) always gives the same list, and a
        larger `n` extends a smaller one. Raises ValueError when the instance space of
        these knobs holds fewer than `n` examples of the split (the message says how many).
        """
        if split not in SPLITS:
            raise ValueError(f"split={split!r} is invalid; accepted: {', '.join(SPLITS)}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n={n!r} is invalid; accepted: an integer >= 0")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed={seed!r} is invalid; accepted: an integer")
        rng = random.Random(seed)
        out: list[dict] = []
        seen: set[str] = set()
        misses = 0
        while len(out) < n:
            example = self._sample(rng)
            if example is None or example["prompt"] in seen:
                misses += 1
                if misses > max(MIN_STALL_DRAWS, 20 * len(seen)):
                    raise ValueError(
                        f"{self!r} has only about {len(out)} distinct {split} examples (no new "
                        f"one in {misses} draws; {len(seen)} distinct prompts in all); ask for "
                        f"n <= {len(out)} or make the knobs larger"
                    )
                continue
            seen.add(example["prompt"])
            if split_of(self.name, example["prompt"]) != split:
                continue
            misses = 0
            out.append(self._row(example))
        return out

    def draw(self, split: str, rng: random.Random, exclude: Collection[str] = ()) -> dict | None:
        """One example of `split` (a row as `examples` gives) drawn from `rng`, its prompt
        not in `exclude`; None when `MIN_STALL_DRAWS` draws in a row bring none."""
        if split not in SPLITS:
            raise ValueError(f"split={split!r} is invalid; accepted: {', '.join(SPLITS)}")
        for _ in range(MIN_STALL_DRAWS):
            example = self._sample(rng)
            if (
                example is not None
                and example["prompt"] not in exclude
                and split_of(self.name, example["prompt"]) == split
            ):
                return self._row(example)
        return None

    def shifted_knobs(self, harder: bool, level: float) -> Any | None:
        """This task's knobs made harder (or easier) at level ℓ ∈ [0, 1]: moved along
        `ladder` by `shift_on_ladder`; None when they cannot move. [ours]"""
        return shift_on_ladder(self.knobs, self.ladder, harder, level)

    def vary(self, example: dict, harder: bool, level: float, rng: random.Random) -> dict | None:
        """A harder (or easier) variant of `example` for difficulty-aware augmentation
        (DeepVideo-R1, arXiv 2506.07464 §3.3), or None when this task cannot vary (no
        ladder, or its knobs already at the ladder's end in that direction).

        Our text-task reading [ours]: in place of the paper's input noise (harder) and
        partial answer hints (easier), a fresh instance drawn from `rng` by this task with
        `shifted_knobs(harder, level)`, so the shift grows with ℓ. The variant always comes
        from the train split (the prompt hash of `split_of`, as `examples("train")`), so
        augmentation never trains on a held-out prompt, and its prompt differs from
        `example`'s. Its difficulty is relative to this task's knobs, not `example`'s."""
        knobs = self.shifted_knobs(harder, level)
        if knobs is None:
            return None
        varied = type(self)(**dataclasses.asdict(knobs))
        return varied.draw("train", rng, exclude={example.get("prompt")})

    def _row(self, example: dict) -> dict:
        """A sampled instance as a row: prompt, answer, completion, then its columns."""
        answer = self._answer(example)
        return {
            "prompt": example.pop("prompt"),
            "answer": answer,
            "completion": demonstration(answer),
            **example,
        }

    def verify(self, completion: str, example: dict) -> float:
        """The reward of one completion for one example (a dict with the task's columns):
        the text inside the first <answer>…</answer> is scored; no answer block gives 0.0."""
        text = extract_answer(completion)
        return 0.0 if text is None else float(self._score(text, example))

    def reward(self, prompts: Sequence[str], completions: Sequence, **columns: Any) -> list[float]:
        """The verifier as a TRL-style reward function: one float per completion. Columns
        come as lists, one value per completion (e.g. `numbers=[...], target=[...]`);
        columns the task does not read are ignored. A completion may be a string or a
        conversation (a list of messages); then the last message's content is scored."""
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"{self.name} reward: {len(prompts)} prompts but {n} completions")
        for column in self.columns:
            if column not in columns:
                raise ValueError(
                    f"{self.name} reward needs the column {column!r} (needs: "
                    f"{', '.join(self.columns)}); got: {', '.join(sorted(columns)) or '(none)'}"
                )
            if len(columns[column]) != n:
                raise ValueError(
                    f"{self.name} reward: column {column!r} has {len(columns[column])} "
                    f"values for {n} completions"
                )
        scores = []
        for i, completion in enumerate(completions):
            example = {"prompt": prompts[i], **{c: columns[c][i] for c in self.columns}}
            scores.append(self.verify(_completion_text(completion), example))
        return scores

    def _sample(self, rng: random.Random) -> dict | None:
        raise NotImplementedError

    def _answer(self, example: dict) -> str:
        raise NotImplementedError

    def _score(self, text: str, example: dict) -> float:
        raise NotImplementedError


def _completion_text(completion: Any) -> str:
    """A completion as text: a str as is; a conversation (TRL's conversational format, a
    list of {"role", "content"} dicts) as the content of its last message."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (list, tuple)) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        return content if isinstance(content, str) else ""
    raise TypeError(
        f"a completion must be a str or a list of messages, got {type(completion).__name__}"
    )
