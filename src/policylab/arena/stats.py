"""Statistics of an arena: algorithms side by side on one task, one budget, the same seeds.

An arena has few seeds (typically 3), so every interval here is a Student-t interval over
seeds, and a difference between two algorithms is paired by seed: the arena gives seed s
the same environment seeds / prompt order under every algorithm, so the pairing removes
the luck the two runs share.

Pure functions of plain Python numbers (numpy and scipy only): the runner builds
`RunRecord`s, `summarize` turns them into one `AlgoSummary` per algorithm, and
`arena/report.py` writes them out.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

NAN = float("nan")

Curve = Sequence[tuple[float, float]]


@dataclass
class RunRecord:
    """One (algorithm, seed) run of an arena, as the runner reports it.

    `curve`: (budget used so far, held-out score) at each evaluation, x ascending; x = 0 is
    the evaluation before training. `budget_unit` is e.g. "env steps" or "generated tokens",
    the same for all runs of an arena. `error` is the message when status == "failed"."""

    algo: str
    seed: int
    status: str  # "done", "failed", "partial"
    curve: list[tuple[float, float]]
    seconds: float  # wall-clock of the run
    budget_unit: str
    error: str = ""
    run_dir: str = ""

    @property
    def final(self) -> float:
        """Final score: the score of the last curve point."""
        if not self.curve:
            raise ValueError(f"run {self.algo!r} seed {self.seed} has an empty curve")
        return float(self.curve[-1][1])


@dataclass
class Interval:
    """A point estimate and its confidence interval.

    `n` is the number of values the interval is built from (seeds; pairs for a paired
    difference; both samples together for Welch). `method` is "t" (one sample), "paired"
    or "welch". `low`/`high` are nan when the data cannot give an interval (n < 2)."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float = 0.95
    method: str = "t"

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def clipped(self, low: float, high: float) -> Interval:
        """The interval cut to [low, high], the values the score can take (an accuracy's
        t interval can reach below 0 or above 1; the truth cannot). The mean is kept."""
        if low > high:
            raise ValueError(f"clipped: low {low!r} is above high {high!r}")
        cut = Interval(self.mean, self.low, self.high, self.n, self.confidence, self.method)
        if not math.isnan(cut.low):
            cut.low = min(max(cut.low, low), high)
        if not math.isnan(cut.high):
            cut.high = max(min(cut.high, high), low)
        return cut

    def contains(self, value: float) -> bool | None:
        """Whether `value` lies in [low, high]; None when there is no interval."""
        if math.isnan(self.low) or math.isnan(self.high):
            return None
        return self.low <= value <= self.high


@dataclass
class ThresholdSummary:
    """Budget to reach the threshold over seeds: `reached` of `n` seeds reached it, and
    `median` is the median budget over the seeds that did (None when none did)."""

    threshold: float
    reached: int
    n: int
    median: float | None


@dataclass
class AlgoSummary:
    """One row of the arena table. Statistics use the "done" runs only."""

    algo: str
    n_done: int
    n_failed: int
    final: Interval
    auc: Interval
    to_threshold: ThresholdSummary | None  # None when the arena has no threshold
    seconds: float  # mean wall-clock of the done runs
    diff_final: Interval | None  # paired difference to the baseline; None for the baseline
    diff_auc: Interval | None
    significant: bool  # diff_final's interval excludes 0
    n_partial: int = 0
    seeds: list[int] = field(default_factory=list)  # seeds of the done runs
    failures: list[tuple[int, str]] = field(default_factory=list)  # (seed, error) per failed run


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def _t_quantile(confidence: float, df: float) -> float:
    """t_{(1+c)/2, df}: the two-sided Student-t quantile."""
    return float(sps.t.ppf((1.0 + confidence) / 2.0, df))


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Mean of `values` with its Student-t confidence interval.

        mean ± t_{(1+c)/2, n−1} · s / √n,   s² = Σ (x_i − mean)² / (n − 1)

    n = 1: low = high = nan, since one value says nothing about the spread between seeds
    (s is undefined). n = 0: mean, low and high are all nan.

    Why t and not a bootstrap: at the arena's usual 3 seeds the t quantile (4.30 at 95%)
    accounts for s itself being estimated from 3 values; a percentile bootstrap resamples
    only 3 values, so its interval never leaves [min, max] and covers far less than the
    stated 95%."""
    _check_confidence(confidence)
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        return Interval(NAN, NAN, NAN, 0, confidence)
    mean = float(x.mean())
    if n == 1:
        return Interval(mean, NAN, NAN, 1, confidence)
    half = _t_quantile(confidence, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, confidence)


def welch_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Interval:
    """Difference mean(a) − mean(b) of two independent samples, Welch's t interval.

        se² = s_a²/n_a + s_b²/n_b
        df  = se⁴ / ((s_a²/n_a)²/(n_a − 1) + (s_b²/n_b)²/(n_b − 1))   (Welch–Satterthwaite)
        diff ± t_{(1+c)/2, df} · se

    Bounds are nan when either sample has fewer than 2 values; all nan when one is empty.
    When both samples are constant (se = 0) the interval is the point diff."""
    _check_confidence(confidence)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = int(x.size + y.size)
    if x.size == 0 or y.size == 0:
        return Interval(NAN, NAN, NAN, n, confidence, "welch")
    diff = float(x.mean() - y.mean())
    if x.size < 2 or y.size < 2:
        return Interval(diff, NAN, NAN, n, confidence, "welch")
    va, vb = float(x.var(ddof=1)) / x.size, float(y.var(ddof=1)) / y.size
    se2 = va + vb
    if se2 == 0.0:
        return Interval(diff, diff, diff, n, confidence, "welch")
    df = se2**2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = _t_quantile(confidence, df) * math.sqrt(se2)
    return Interval(diff, diff - half, diff + half, n, confidence, "welch")


def paired_difference_ci(
    a: dict[int, float], b: dict[int, float], confidence: float = 0.95
) -> Interval:
    """Difference of `a` minus `b` (seed → value), paired by seed.

        d_s = a_s − b_s  for the seeds s in both;   mean(d) ± t_{(1+c)/2, k−1} · s_d / √k

    (`mean_ci` of the k per-seed differences, method "paired"). Seeds present in only one
    of the two are left out. With no common seed at all it falls back to `welch_ci` over
    all values of each (method "welch")."""
    common = sorted(set(a) & set(b))
    if not common:
        return welch_ci(list(a.values()), list(b.values()), confidence)
    interval = mean_ci([a[s] - b[s] for s in common], confidence)
    interval.method = "paired"
    return interval


def _check_curve(curve: Curve) -> tuple[np.ndarray, np.ndarray]:
    if len(curve) == 0:
        raise ValueError("curve is empty: a run needs at least one evaluation (x, score)")
    xs = np.asarray([p[0] for p in curve], dtype=float)
    ys = np.asarray([p[1] for p in curve], dtype=float)
    if np.any(np.diff(xs) < 0):
        raise ValueError(f"curve x must be ascending, got {xs.tolist()}")
    return xs, ys


def area_under_curve(curve: Curve, budget: float) -> float:
    """Normalised area under the curve: the mean score over the budget.

        AUC = (1 / B) ∫_0^B score(x) dx

    with score(x) linear between evaluations (trapezoid rule), held at its last score
    after the last evaluation up to B, and cut at B when evaluations run past it (the last
    rollout may overshoot the budget). The curve must start at x = 0 (the evaluation
    before training): an area over a stretch that was never measured would be invented."""
    xs, ys = _check_curve(curve)
    if not budget > 0:
        raise ValueError(f"budget must be positive, got {budget!r}")
    if xs[0] != 0:
        raise ValueError(
            f"curve starts at x={xs[0]:g}; the area needs the evaluation before training at x=0"
        )
    inside = xs < budget
    grid = np.concatenate([xs[inside], [budget]])
    scores = np.interp(grid, xs, ys)  # np.interp holds the last score after the end
    area = float(np.sum((grid[1:] - grid[:-1]) * (scores[1:] + scores[:-1]) / 2.0))
    return area / budget


def budget_to_threshold(curve: Curve, threshold: float) -> float | None:
    """The first budget x > 0 at which the score is ≥ `threshold`; None if never.

    The evaluation at x = 0 never counts: an untrained policy over the threshold means
    the threshold is too low, not that the algorithm got there."""
    for x, score in curve:
        if x > 0 and score >= threshold:
            return float(x)
    return None


def mean_curve(
    curves: Sequence[Curve], grid: Sequence[float], confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean curve across runs on `grid`, with a t band at each grid point.

    Each curve is interpolated linearly between its evaluations and held at its last
    (first) score after its end (before its start); then at each grid point g

        mean(g) ± t_{(1+c)/2, n−1} · s(g) / √n   over the n curves   (as `mean_ci`)

    The band is nan with fewer than 2 curves; everything is nan with none."""
    _check_confidence(confidence)
    g = np.asarray(grid, dtype=float)
    if len(curves) == 0:
        nan = np.full(g.shape, NAN)
        return nan, nan.copy(), nan.copy()
    values = np.stack([np.interp(g, *_check_curve(c)) for c in curves])  # [runs, grid]
    mean = values.mean(axis=0)
    n = values.shape[0]
    if n < 2:
        nan = np.full(g.shape, NAN)
        return mean, nan, nan.copy()
    half = _t_quantile(confidence, n - 1) * values.std(axis=0, ddof=1) / math.sqrt(n)
    return mean, mean - half, mean + half


def summarize(
    records: Sequence[RunRecord],
    baseline: str,
    threshold: float | None,
    budget: float,
    confidence: float = 0.95,
    score_range: tuple[float, float] | None = None,
) -> list[AlgoSummary]:
    """One `AlgoSummary` per algorithm, in order of first appearance in `records`.

    Statistics use the runs with status "done" only; failed and partial runs are counted
    (failed ones with their errors). Per algorithm, over its done seeds:
    final = `mean_ci` of final scores; auc = `mean_ci` of `area_under_curve(curve, budget)`;
    to_threshold = how many seeds reached `threshold` and the median budget over those
    that did; diff_final / diff_auc = `paired_difference_ci` against the baseline's done
    seeds; significant = the diff_final interval excludes 0.

    `score_range` (low, high): the values a score can take (an accuracy's [0, 1]); the
    intervals of final and AUC are cut to it, and those of the differences to
    [low − high, high − low]."""
    _check_confidence(confidence)
    lo, hi = score_range if score_range is not None else (-math.inf, math.inf)
    if not lo < hi:
        raise ValueError(f"score_range {score_range!r}: expected (low, high) with low < high")
    algos = list(dict.fromkeys(r.algo for r in records))
    if baseline not in algos:
        raise ValueError(f"baseline {baseline!r} is not among the arena's algorithms {algos}")
    done: dict[str, dict[int, RunRecord]] = {a: {} for a in algos}
    for r in records:
        if r.status not in ("done", "failed", "partial"):
            raise ValueError(
                f"run {r.algo!r} seed {r.seed}: status {r.status!r}, expected done/failed/partial"
            )
        if r.status == "done":
            if r.seed in done[r.algo]:
                raise ValueError(f"algorithm {r.algo!r} has two done runs for seed {r.seed}")
            done[r.algo][r.seed] = r
    finals = {a: {s: r.final for s, r in runs.items()} for a, runs in done.items()}
    aucs = {
        a: {s: area_under_curve(r.curve, budget) for s, r in runs.items()}
        for a, runs in done.items()
    }

    rows = []
    for algo in algos:
        runs = done[algo]
        failed = [r for r in records if r.algo == algo and r.status == "failed"]
        n_partial = sum(r.algo == algo and r.status == "partial" for r in records)
        is_base = algo == baseline
        diff_final = diff_auc = None
        if not is_base:
            diff_final = paired_difference_ci(finals[algo], finals[baseline], confidence)
            diff_final = diff_final.clipped(lo - hi, hi - lo)
            diff_auc = paired_difference_ci(aucs[algo], aucs[baseline], confidence)
            diff_auc = diff_auc.clipped(lo - hi, hi - lo)
        rows.append(
            AlgoSummary(
                algo=algo,
                n_done=len(runs),
                n_failed=len(failed),
                final=mean_ci(list(finals[algo].values()), confidence).clipped(lo, hi),
                auc=mean_ci(list(aucs[algo].values()), confidence).clipped(lo, hi),
                to_threshold=None if threshold is None else _to_threshold(runs, threshold),
                seconds=statistics.fmean(r.seconds for r in runs.values()) if runs else NAN,
                diff_final=diff_final,
                diff_auc=diff_auc,
                significant=diff_final is not None and diff_final.contains(0.0) is False,
                n_partial=n_partial,
                seeds=sorted(runs),
                failures=[(r.seed, r.error) for r in failed],
            )
        )
    return rows


def _to_threshold(runs: dict[int, RunRecord], threshold: float) -> ThresholdSummary:
    hits = [b for r in runs.values() if (b := budget_to_threshold(r.curve, threshold)) is not None]
    median = float(statistics.median(hits)) if hits else None
    return ThresholdSummary(threshold, reached=len(hits), n=len(runs), median=median)


def mcnemar_p(a: list[bool], b: list[bool]) -> float:
    """Exact two-sided McNemar test of paired 0/1 outcomes: with n₁₀ prompts only `a`
    gets right and n₀₁ only `b`, p = min(1, 2·P(X ≤ min(n₁₀, n₀₁))), X ~ Bin(n₁₀ + n₀₁, ½)."""
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_bootstrap_ci(
    a: list[list[bool]], b: list[list[bool]], draws: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Accuracy difference a − b with a 95 % percentile bootstrap over items (prompts),
    paired: a[s][i] is item i's outcome under seed s; each draw resamples items and averages
    the seeds (an eval-only arena's interval over the held-out set, benchmarks/testtime.py)."""
    n = len(a[0])
    per_prompt = [
        sum(float(a[s][i]) - float(b[s][i]) for s in range(len(a))) / len(a) for i in range(n)
    ]
    rng = random.Random(seed)
    means = sorted(sum(per_prompt[rng.randrange(n)] for _ in range(n)) / n for _ in range(draws))
    return sum(per_prompt) / n, means[int(0.025 * draws)], means[int(0.975 * draws) - 1]
