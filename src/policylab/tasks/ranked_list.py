"""ranked_list: write the N largest of M distinct digits, one per line, largest first — a
small ranked-list text task for Rank-GRPO's language-model recipe
(papers/seed_llm_algorithms.md §19; ours).

Prompt: "top3 of 5 2 9 7 1 4:". Answer: "9\\n7\\n5". Columns: `relevant`, the N largest
digits as a string ("975"). Line k of the completion (an <answer>…</answer> block if there
is one, else the whole completion; tags stripped from each line) is relevant when it is
one digit of `relevant` not already given on an earlier line (each relevant digit counts
once, as Rank-GRPO's matcher consumes each ground truth once [code
libs/metrics_align.py:evaluate_direct_match_aligned]). Lines past N are overflow.

Verifier: NDCG@N with that binary relevance, Σ_k rel_k·d_k / Σ_k d_k, d_k = 1/log2(k + 1).
`relevance(completion, example)` gives the N per-rank values the `rank_items` stage turns
into Rank-GRPO's rank rewards.

Knobs: m (digits shown, default 6; 2..10), n (list length, default 3; 1..m)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from policylab.tasks.base import ANSWER_CLOSE, ANSWER_OPEN, Task, check_int


@dataclass(frozen=True)
class RankedListKnobs:
    m: int = 6
    n: int = 3

    def __post_init__(self) -> None:
        check_int("ranked_list", "m", self.m, 2, 10)
        check_int("ranked_list", "n", self.n, 1, self.m)


def _lines(completion: str) -> list[str]:
    """The completion's lines, tags removed; line k is rank k."""
    return [
        line.replace(ANSWER_OPEN, "").replace(ANSWER_CLOSE, "").strip()
        for line in completion.split("\n")
    ]


class RankedList(Task):
    """Rank the N largest digits: "top3 of 5 2 9 7 1 4:" -> "9\\n7\\n5"."""

    name = "ranked_list"
    knobs_class = RankedListKnobs
    columns = ("relevant",)
    chars = "0123456789 top f:\n"

    def _sample(self, rng: random.Random) -> dict:
        k = self.knobs
        digits = rng.sample(range(10), k.m)
        top = sorted(digits, reverse=True)[: k.n]
        prompt = f"top{k.n} of {' '.join(map(str, digits))}:"
        return {"prompt": prompt, "relevant": "".join(map(str, top))}

    def _answer(self, example: dict) -> str:
        return "\n".join(example["relevant"])

    def relevance(self, completion: str, example: dict) -> list[float]:
        """rel[k] ∈ {0, 1} for ranks k = 0..N−1 (missing lines are 0)."""
        left = set(str(example["relevant"]))
        rel = []
        for line in _lines(completion)[: self.knobs.n]:
            hit = len(line) == 1 and line in left
            left.discard(line)
            rel.append(1.0 if hit else 0.0)
        return rel + [0.0] * (self.knobs.n - len(rel))

    def verify(self, completion: str, example: dict) -> float:
        rel = self.relevance(completion, example)
        d = [1.0 / math.log2(k + 2) for k in range(self.knobs.n)]
        return sum(r * w for r, w in zip(rel, d, strict=True)) / sum(d)

    def _score(self, text: str, example: dict) -> float:
        return self.verify(text, example)
