"""How different N responses to one prompt are from each other: the Trajectory Diversity
Score (TDS) measures of VAS (MMR1, Leng et al., arXiv:2509.21268 §3.1;
papers/seed_llm_algorithms.md §7). Responses are lists of token ids; every function takes
`responses: list[N] of list[int]` and returns one float.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

Responses = Sequence[Sequence[int]]

SMOOTHING_EPSILON = 0.1  # NLTK SmoothingFunction().method1's default ε


def _ngrams(tokens: Sequence[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def sentence_bleu_123(hypothesis: Sequence[int], references: Responses) -> float:
    """NLTK's `sentence_bleu(references, hypothesis, weights=(1/3, 1/3, 1/3),
    smoothing_function=SmoothingFunction().method1)`, re-derived so we need no nltk:

        BLEU = BP · exp(Σ_{k=1..3} (1/3) ln p_k)
        p_k  = Σ_g min(c_hyp(g), max_ref c_ref(g)) / max(1, #k-grams of the hypothesis)
        BP   = 1 if c > r, else exp(1 − r/c)   (c = |hyp|, r = closest reference length,
                                                 ties to the shorter; BP = 0 if c = 0)

    method1: a p_k with a zero numerator becomes ε / (its unreduced denominator), ε = 0.1.
    As in NLTK, no unigram match at all gives 0 before any smoothing."""
    numerators, denominators = [], []
    for k in (1, 2, 3):
        counts = Counter(_ngrams(hypothesis, k))
        best_ref: Counter = Counter()
        for ref in references:
            best_ref |= Counter(_ngrams(ref, k))  # element-wise max over the references
        numerators.append(sum(min(c, best_ref[g]) for g, c in counts.items()))
        denominators.append(max(1, sum(counts.values())))
    if numerators[0] == 0:
        return 0.0
    c = len(hypothesis)
    r = min((len(ref) for ref in references), key=lambda length: (abs(length - c), length))
    bp = 1.0 if c > r else math.exp(1 - r / c)
    log_p = [
        math.log((num if num > 0 else SMOOTHING_EPSILON) / den)
        for num, den in zip(numerators, denominators, strict=True)
    ]
    return bp * math.exp(math.fsum(log_p) / 3)


def self_bleu_123(responses: Responses) -> float:
    """Self-BLEU-123: SB = (1/N) Σ_n BLEU(y_n; refs = the other N − 1 responses), BLEU as
    in `sentence_bleu_123` (uniform weights over 1–3-grams, method1 smoothing, token ids as
    symbols). SB = 0 if N < 2. Higher = more alike; VAS uses TDS = 1 − SB.
    Paper §3.1 ("inverse self-BLEU"), App. C Table 6 (`self_bleu_123`);
    code verl/curriculum/metrics.py:calculate_self_bleu_123."""
    if len(responses) < 2:
        return 0.0
    scores = [
        sentence_bleu_123(hyp, [*responses[:i], *responses[i + 1 :]])
        for i, hyp in enumerate(responses)
    ]
    return math.fsum(scores) / len(scores)


def distinct_n(responses: Responses, n: int = 3) -> float:
    """Distinct-n: |unique n-grams| / |all n-grams|, pooled over the N responses; 0 when no
    response has n tokens. Code verl/curriculum/metrics.py:calculate_distinct_n (n = 3)."""
    pooled = [g for tokens in responses for g in _ngrams(tokens, n)]
    return len(set(pooled)) / len(pooled) if pooled else 0.0


def levenshtein(a: Sequence[int], b: Sequence[int]) -> int:
    """Insertions, deletions and substitutions turning `a` into `b` (unit costs)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def edit_sq(responses: Responses) -> float:
    """Mean squared normalised edit distance over ordered pairs (paper App. A.3 estimator):

        TDS = 1/(N(N − 1)) Σ_{n ≠ n'} d(y_n, y_n')²,  d = Levenshtein / max(|y_n|, |y_n'|)

    d ∈ [0, 1]; two empty responses have d = 0 and N < 2 gives 0 [ours]. (The code's
    `calculate_pairwise_edit_distance` is the raw mean Levenshtein, a different quantity.)
    d is symmetric, so the unordered pairs are summed once and counted twice."""
    n = len(responses)
    if n < 2:
        return 0.0
    total = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            longest = max(len(responses[i]), len(responses[j]))
            if longest:
                total += (levenshtein(responses[i], responses[j]) / longest) ** 2
    return 2 * total / (n * (n - 1))


DIVERSITY = {
    "inv_self_bleu": lambda responses: 1.0 - self_bleu_123(responses),
    "distinct_n": distinct_n,
    "edit_sq": edit_sq,
}
