"""Step judging for countdown completions: BCPG-NSA's stages 1–2 with the task verifier in
place of the LLM judge and the PRM (papers/seed_llm_algorithms.md §15.5; Yang et al.,
arXiv:2505.14403 §4, Eqs. 3–5).

A completion may list steps before its answer, one per line:

    3*5=15
    15+7=22
    <answer>3*5+7</answer>

Stage 1, segmentation [ours, §15.1]: every non-blank line before the first `<answer>` (the
whole completion when there is none) is a step; blank lines, the answer and what follows
belong to no step. A line may start with "Step k:".

Stage 2, two judges and their consensus [§15.5]:
- J1, local validity (the LLM judge's analogue): the line reads `a op b = c` (non-negative
  integers, op one of + - * /), a and b are available — the given multiset plus the results
  of earlier correct steps, each used once — and a op b = c exactly.
- J2, prospect (the PRM's analogue): after the step the target is still reachable from the
  available numbers, all of them used once, with + - * / and any rational intermediates (the
  verifier's rules); exhaustive search, at most `MAX_SEARCH` numbers. J2 is asked only of
  steps J1 accepts: a rejected step has no next state [ours].
- A step is correct iff J1 and J2 hold.
Error propagation and termination [our reading of §15.2]: only a correct step changes the
available numbers. A later step that uses a wrong step's result fails J1 (propagation); one
that again uses only available numbers is judged on its own merit (termination), so a
completion that backtracks after a dead end gets credit for the steps after it.

Token mapping: `segment_ids(pieces, spans)` gives each token the index of its step (−1
outside every step) from the decoded text of each token; `countdown_step_labels` does both
for one response, the inputs the `bcpg` loss reads (`Rollouts.segment_ids` row and
`extras["step_correct"]` row). All functions are pure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from policylab.tasks.base import ANSWER_OPEN

MAX_SEARCH = 6  # J2 searches exhaustively over at most this many numbers (spec §15.5)
_STEP = re.compile(
    r"^(?:step\s*\d+\s*[:.)]\s*)?(\d{1,6})\s*([-+*/])\s*(\d{1,6})\s*=\s*(\d{1,12})\s*\.?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class StepJudgement:
    """One step of a completion and the judges' verdicts."""

    text: str  # the line, stripped
    start: int  # its character span in the completion: completion[start:end] == text
    end: int
    parsed: tuple[int, str, int, int] | None  # (a, op, b, c) of `a op b = c`; None: no parse
    valid: bool  # J1: parses, uses available numbers, exact arithmetic
    reachable: bool  # J2: the target can still be reached after the step (False unless J1)

    @property
    def correct(self) -> bool:
        """The consensus label: both judges accept the step."""
        return self.valid and self.reachable


def step_spans(completion: str) -> list[tuple[int, int]]:
    """Character spans (start, end) of the steps: the non-blank lines before the first
    `<answer>`, each without its surrounding whitespace."""
    cut = completion.find(ANSWER_OPEN)
    region = completion if cut < 0 else completion[:cut]
    spans, offset = [], 0
    for line in region.split("\n"):
        stripped = line.strip()
        if stripped:
            start = offset + (len(line) - len(line.lstrip()))
            spans.append((start, start + len(stripped)))
        offset += len(line) + 1
    return spans


def parse_step(text: str) -> tuple[int, str, int, int] | None:
    """(a, op, b, c) for a line `a op b = c` (optionally "Step k:" first), else None."""
    match = _STEP.match(text.strip())
    if match is None:
        return None
    a, op, b, c = match.groups()
    return int(a), op, int(b), int(c)


def _exact(a: int, op: str, b: int, c: int) -> bool:
    if op == "+":
        return a + b == c
    if op == "-":
        return a - b == c
    if op == "*":
        return a * b == c
    return b != 0 and a == b * c


def reachable(numbers: Sequence[int | Fraction], target: int | Fraction) -> bool:
    """Whether an expression using every number once, with + - * / and parentheses, equals
    `target` (intermediates may be negative or fractional, as in the verifier).

    Exhaustive: for each split of the numbers into two groups, the values one group can
    make are enumerated and the value the other group would need is looked up. Countdown's
    states after a step have at most 4 numbers (milliseconds); 6 take seconds."""
    if len(numbers) > MAX_SEARCH:
        raise ValueError(
            f"reachable: {len(numbers)} numbers given; the exhaustive search takes at most "
            f"{MAX_SEARCH}"
        )
    if not numbers:
        return False
    values = tuple(sorted(Fraction(x) for x in numbers))
    t = Fraction(target)
    if len(values) == 1:
        return values[0] == t
    for left, right in _splits(values):
        small, large = sorted((_values(left), _values(right)), key=len)
        for a in small:
            if not large.isdisjoint(_partners(a, t)):
                return True
            if a == 0 and t == 0:  # 0·b = 0 for whatever b the other side makes
                return True
    return False


def _partners(a: Fraction, t: Fraction) -> set[Fraction]:
    """The values b with a op b = t or b op a = t for an op in + - * /
    (a = 0 with t = 0 is handled by the caller: any b works)."""
    out = {t - a, a - t, t + a}  # a + b, a − b, b − a
    if a != 0:
        out.update((t / a, t * a))  # a·b, b/a
        if t != 0:
            out.add(a / t)  # a/b
    return out


def _splits(values: tuple[Fraction, ...]):
    """Every split into two non-empty groups, each unordered pair once (the first number is
    always on the left)."""
    n = len(values)
    for mask in range(1, 2**n - 1):
        if mask & 1:
            left = tuple(v for k, v in enumerate(values) if mask >> k & 1)
            right = tuple(v for k, v in enumerate(values) if not mask >> k & 1)
            yield left, right


@lru_cache(maxsize=4096)
def _values(values: tuple[Fraction, ...]) -> frozenset[Fraction]:
    """Every value an expression using each of `values` (sorted) once can take."""
    if len(values) == 1:
        return frozenset(values)
    out: set[Fraction] = set()
    for left, right in _splits(values):
        right_values = _values(right)
        for a in _values(left):
            for b in right_values:
                out.update((a + b, a - b, b - a, a * b))
                if b != 0:
                    out.add(a / b)
                if a != 0:
                    out.add(b / a)
    return frozenset(out)


def judge_steps(completion: str, example: dict) -> list[StepJudgement]:
    """Segment a countdown completion into steps and judge each (J1, J2, consensus); the
    example gives `numbers` and `target`. See the module docstring for the rules."""
    available = Counter(int(x) for x in example["numbers"])
    target = int(example["target"])
    out = []
    for start, end in step_spans(completion):
        text = completion[start:end]
        parsed = parse_step(text)
        valid = ok = False
        if parsed is not None:
            a, op, b, c = parsed
            needs = Counter([a, b])
            valid = all(available[k] >= n for k, n in needs.items()) and _exact(*parsed)
            if valid:
                after = available - needs + Counter([c])
                ok = reachable(list(after.elements()), target)
                if ok:  # only a correct step changes what is available
                    available = after
        out.append(StepJudgement(text, start, end, parsed, valid, ok))
    return out


def step_labels(completion: str, example: dict) -> list[bool]:
    """The consensus label of each step of `completion` (J1 ∧ J2), in order."""
    return [step.correct for step in judge_steps(completion, example)]


def segment_ids(pieces: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[int]:
    """Step index of each token [T] from the decoded text of each token.

    Token j covers the characters [o_j, o_j + len(pieces[j])) of "".join(pieces); it gets
    the index of the first span (start, end) it overlaps, −1 when it overlaps none
    (newlines, the answer, empty pieces such as a skipped EOS). `spans` must be sorted."""
    out, offset, k = [], 0, 0
    for piece in pieces:
        start, end = offset, offset + len(piece)
        while k < len(spans) and spans[k][1] <= start:
            k += 1
        out.append(k if k < len(spans) and start < end and spans[k][0] < end else -1)
        offset = end
    return out


def countdown_step_labels(pieces: Sequence[str], example: dict) -> tuple[list[bool], list[int]]:
    """For one response given as decoded token pieces: (the label of each step, the step
    index of each token), i.e. a row of `extras["step_correct"]` and of `segment_ids`."""
    completion = "".join(pieces)
    steps = judge_steps(completion, example)
    return [s.correct for s in steps], segment_ids(pieces, [(s.start, s.end) for s in steps])
