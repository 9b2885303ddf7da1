"""rliable's protocol: robust aggregates, stratified bootstrap intervals, probability of
improvement, performance profiles — and the multiple-comparison step a table of several
comparisons needs.

Agarwal, Schwarzer, Castro, Courville, Bellemare, "Deep Reinforcement Learning at the Edge
of the Statistical Precipice", NeurIPS 2021, arXiv:2108.13264. The formulas follow the
authors' package (google-research/rliable: `rliable/metrics.py`, `rliable/library.py`),
which no longer imports on current pandas, so they are rebuilt here on numpy and scipy.

Scores are a 2-D array `[runs, tasks]`: scores[n, m] is run (seed) n on task m. An arena
has one task, so its scores are `finals[:, None]`. Every aggregate also accepts a batch
`[..., runs, tasks]` and returns `[...]`, which is how the bootstrap evaluates all its
resamples in one call.

A caution for the arena's usual 3 seeds (see `stats.mean_ci`): a percentile bootstrap over
3 runs can only recombine 3 values, so its intervals are too narrow there. These intervals
are for arenas with enough seeds; the Student-t intervals of `stats` stay the default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats as sps

from policylab.arena.stats import Interval

NAN = float("nan")

Aggregate = Callable[[np.ndarray], "float | np.ndarray"]


# ---- aggregates: [..., runs, tasks] → [...] -----------------------------------------------
def _out(value: np.ndarray) -> float | np.ndarray:
    value = np.asarray(value, dtype=float)
    return float(value) if value.ndim == 0 else value


def iqm(scores: np.ndarray) -> float | np.ndarray:
    """Interquartile mean: the mean of the middle 50 % of all runs × tasks pooled.

        IQM = mean of the pooled scores after cutting ⌊0.25·N⌋ from each end, N = runs·tasks

    (scipy.stats.trim_mean(·, 0.25), as rliable's `aggregate_iqm`: when N is not a multiple
    of 4 the cut rounds down, so a little more than half the values stay). Robust to a few
    outlier runs, and less noisy than the median because it uses half the values, not one."""
    s = np.asarray(scores, dtype=float)
    return _out(sps.trim_mean(s.reshape(*s.shape[:-2], -1), 0.25, axis=-1))


def mean(scores: np.ndarray) -> float | np.ndarray:
    """Mean over tasks of each task's mean over runs (rliable's `aggregate_mean`)."""
    return _out(np.asarray(scores, dtype=float).mean(axis=-2).mean(axis=-1))


def median(scores: np.ndarray) -> float | np.ndarray:
    """Median over tasks of each task's mean over runs (rliable's `aggregate_median`).

    With one task this is the mean over runs, not the median of the runs."""
    return _out(np.median(np.asarray(scores, dtype=float).mean(axis=-2), axis=-1))


def optimality_gap(scores: np.ndarray, gamma: float = 1.0) -> float | np.ndarray:
    """How far the runs fall short of `gamma`, scores above it counting as gamma.

        gap = γ − mean over runs × tasks of min(score, γ)

    (rliable's `aggregate_optimality_gap`; γ = 1 for normalised scores). Lower is better."""
    s = np.asarray(scores, dtype=float)
    return _out(gamma - np.minimum(s, gamma).mean(axis=(-2, -1)))


# ---- checks -------------------------------------------------------------------------------
def _check_scores(scores: np.ndarray, name: str) -> np.ndarray:
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array [runs, tasks], got shape {s.shape}; "
            "one task's per-seed scores are x[:, None]"
        )
    if s.shape[0] == 0 or s.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {s.shape}): it needs ≥ 1 run and ≥ 1 task")
    if not np.all(np.isfinite(s)):
        raise ValueError(
            f"{name} must be finite, got nan or inf at {np.argwhere(~np.isfinite(s))[0]}"
        )
    return s


def _check_bootstrap(reps: int, confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if int(reps) != reps or reps < 100:
        raise ValueError(f"reps must be an integer ≥ 100 (rliable uses 2000–50000), got {reps!r}")


def _same_tasks(a: np.ndarray, b: np.ndarray, what: str) -> None:
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"{what} have different numbers of tasks: {a.shape[1]} and {b.shape[1]}")


def _same_runs(x: np.ndarray, y: np.ndarray) -> None:
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"paired=True needs the same seeds in x and y, got {x.shape[0]} and {y.shape[0]} "
            "runs; use paired=False for unshared seeds"
        )


# ---- stratified bootstrap -----------------------------------------------------------------
def _run_indices(rng: np.random.Generator, reps: int, runs: int, tasks: int) -> np.ndarray:
    """[reps, runs, tasks] run indices drawn with replacement, independently per task."""
    return rng.integers(0, runs, size=(reps, runs, tasks))


def _resample(scores: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """scores[idx[r, n, m], m] for every resample r: [reps, runs, tasks]."""
    return scores[idx, np.arange(scores.shape[1])]


def _percentile(values: np.ndarray, confidence: float) -> np.ndarray:
    """The percentile interval: the (1 − c)/2 and (1 + c)/2 quantiles, on the last axis."""
    return np.quantile(values, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0)


def _batched(aggregate: Aggregate, batch: np.ndarray) -> np.ndarray:
    values = np.asarray(aggregate(batch), dtype=float)
    if values.shape != batch.shape[:1]:
        raise ValueError(
            f"aggregate must map [reps, runs, tasks] to [reps] (as iqm, mean, median, "
            f"optimality_gap do), got shape {values.shape} from {batch.shape}"
        )
    return values


def stratified_bootstrap_ci(
    scores_by_algo: Mapping[str, np.ndarray],
    aggregate: Aggregate,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """`aggregate` of each algorithm's scores with its stratified bootstrap interval.

    Each of `reps` resamples draws, within each task separately, `runs` runs with
    replacement (rliable's `StratifiedBootstrap`, no task bootstrap); the interval is the
    percentile interval of the aggregate over the resamples (rliable's default method):

        [q_{(1−c)/2}, q_{(1+c)/2}] of {aggregate(resample_r)}_{r=1..reps}

    The point (`mean` field) is the aggregate on the data. `aggregate` maps
    [..., runs, tasks] → [...] (`iqm`, `mean`, `median`, `optimality_gap`, or a
    functools.partial of one). Every algorithm draws from a fresh numpy Generator(seed):
    its interval depends on its scores and `seed` only, not on the other algorithms.
    Method "bootstrap", n = runs; with one run low = high = nan (as `stats.mean_ci`)."""
    _check_bootstrap(reps, confidence)
    if not scores_by_algo:
        raise ValueError("scores_by_algo is empty: give at least one algorithm's scores")
    checked = {a: _check_scores(s, f"scores of {a!r}") for a, s in scores_by_algo.items()}
    first = next(iter(checked.values()))
    for s in checked.values():
        _same_tasks(first, s, "the algorithms' scores")
    result = {}
    for algo, s in checked.items():
        runs, tasks = s.shape
        point = float(aggregate(s))
        if runs < 2:
            result[algo] = Interval(point, NAN, NAN, runs, confidence, "bootstrap")
            continue
        idx = _run_indices(np.random.default_rng(seed), reps, runs, tasks)
        low, high = _percentile(_batched(aggregate, _resample(s, idx)), confidence)
        result[algo] = Interval(point, float(low), float(high), runs, confidence, "bootstrap")
    return result


def _two_sample_ci(
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    paired: bool,
    reps: int,
    confidence: float,
    seed: int,
) -> Interval:
    """statistic(x, y) with a stratified bootstrap interval; x and y resampled jointly by
    seed (paired) or independently (rliable's `StratifiedIndependentBootstrap`)."""
    _check_bootstrap(reps, confidence)
    x, y = _check_scores(x, "x"), _check_scores(y, "y")
    _same_tasks(x, y, "x and y")
    if paired:
        _same_runs(x, y)
    method = "paired-bootstrap" if paired else "bootstrap"
    n = x.shape[0] if paired else x.shape[0] + y.shape[0]
    point = float(statistic(x, y))
    if min(x.shape[0], y.shape[0]) < 2:
        return Interval(point, NAN, NAN, n, confidence, method)
    rng = np.random.default_rng(seed)
    idx_x = _run_indices(rng, reps, *x.shape)
    idx_y = idx_x if paired else _run_indices(rng, reps, *y.shape)
    values = np.asarray(statistic(_resample(x, idx_x), _resample(y, idx_y)), dtype=float)
    low, high = _percentile(values, confidence)
    return Interval(point, float(low), float(high), n, confidence, method)


def aggregate_difference_ci(
    x: np.ndarray,
    y: np.ndarray,
    aggregate: Aggregate,
    paired: bool = True,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """aggregate(x) − aggregate(y) with its stratified bootstrap percentile interval.

    paired=True (the arena: run n of x and of y share seed n) resamples the seed indices
    once for both, so the luck a seed gives both algorithms cancels (method
    "paired-bootstrap", n = seeds); paired=False resamples x and y independently (method
    "bootstrap", n = runs of x + runs of y). Our choice, by analogy with
    `stats.paired_difference_ci`."""

    def difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.ndim == 2:  # the point, on the data
            return np.asarray(aggregate(a), dtype=float) - np.asarray(aggregate(b), dtype=float)
        return _batched(aggregate, a) - _batched(aggregate, b)

    return _two_sample_ci(difference, x, y, paired, reps, confidence, seed)


# ---- probability of improvement -----------------------------------------------------------
def _poi(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[..., nx, T] and [..., ny, T] → [...]: mean over tasks of P(X > Y) + ½ P(X = Y)."""
    xs, ys = x[..., :, None, :], y[..., None, :, :]
    per_task = ((xs > ys) + 0.5 * (xs == ys)).mean(axis=(-3, -2))
    return per_task.mean(axis=-1)


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """Probability that a run of X beats a run of Y on a task, averaged over tasks.

        P(X > Y) = (1/M) Σ_m (1/(N_x N_y)) Σ_i Σ_j S(x_im, y_jm),
        S(a, b) = 1 if a > b, ½ if a = b, 0 if a < b

    — each task's Mann–Whitney U statistic over N_x·N_y (rliable's
    `probability_of_improvement`, arXiv:2108.13264 §4.3). 0.5 means neither tends to
    beat the other. x: [runs_x, tasks], y: [runs_y, tasks]; the run counts may differ."""
    x, y = _check_scores(x, "x"), _check_scores(y, "y")
    _same_tasks(x, y, "x and y")
    return float(_poi(x, y))


def probability_of_improvement_ci(
    x: np.ndarray,
    y: np.ndarray,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    paired: bool = False,
) -> Interval:
    """`probability_of_improvement(x, y)` with its stratified bootstrap percentile interval.

    paired=False (rliable's protocol) resamples the runs of x and of y independently,
    within each task; paired=True resamples the seed indices once for both (x and y must
    have the same seeds, in the same order). Methods "bootstrap" (n = runs_x + runs_y) and
    "paired-bootstrap" (n = seeds). Memory grows as reps · runs_x · runs_y · tasks."""
    return _two_sample_ci(_poi, x, y, paired, reps, confidence, seed)


# ---- performance profiles -----------------------------------------------------------------
def _check_taus(taus: Sequence[float]) -> np.ndarray:
    t = np.asarray(taus, dtype=float)
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
        raise ValueError(f"taus must be a non-empty 1-D list of finite thresholds, got {taus!r}")
    return t


def _profile(s: np.ndarray, t: np.ndarray) -> np.ndarray:
    """[..., runs, tasks], [K] → [..., K]: share of runs × tasks with score > τ."""
    return (s[..., None] > t).mean(axis=(-3, -2))


def performance_profile(scores: np.ndarray, taus: Sequence[float]) -> np.ndarray:
    """Run-score distribution: for each τ, the share of all runs × tasks scoring above it.

        F(τ) = (1/(N·M)) Σ_n Σ_m 1[score_nm > τ]

    (rliable's `create_performance_profile` with use_score_distribution=True). One curve
    per algorithm; a curve above another at every τ dominates it."""
    return _profile(_check_scores(scores, "scores"), _check_taus(taus))


def performance_profile_band(
    scores: np.ndarray,
    taus: Sequence[float],
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(profile, low, high) at each τ: `performance_profile` and its pointwise stratified
    bootstrap percentile band (as `stratified_bootstrap_ci`). With one run the band is nan."""
    _check_bootstrap(reps, confidence)
    s, t = _check_scores(scores, "scores"), _check_taus(taus)
    profile = _profile(s, t)
    if s.shape[0] < 2:
        return profile, np.full(t.shape, NAN), np.full(t.shape, NAN)
    idx = _run_indices(np.random.default_rng(seed), reps, *s.shape)
    low, high = _percentile(_profile(_resample(s, idx), t), confidence)
    return profile, low, high


# ---- tests across the comparisons of one table --------------------------------------------
def paired_t_pvalue(differences: Sequence[float]) -> float:
    """Two-sided p-value of the paired t test that the mean of `differences` is 0.

        t = mean(d) / (s_d / √k),  p = 2 · P(T_{k−1} > |t|)

    The test behind `stats.paired_difference_ci`: p < 1 − c exactly when that interval
    excludes 0. nan when k < 2 (no spread to test against). Zero spread (all differences
    equal; scipy would give nan): p = 0 when they are nonzero and p = 1 when they are all 0 —
    our choice, the limits of p as s_d → 0, and what the zero-width t interval says."""
    d = np.asarray(differences, dtype=float)
    if not np.all(np.isfinite(d)):
        raise ValueError(f"differences must be finite, got {d.tolist()}")
    if d.size < 2:
        return NAN
    if np.all(d == d[0]):
        return 0.0 if d[0] != 0 else 1.0
    return float(sps.ttest_1samp(d, 0.0).pvalue)


def holm_bonferroni(
    p_values: Sequence[float], alpha: float = 0.05
) -> tuple[list[float], list[bool]]:
    """Holm's step-down adjustment of the p-values of one table's comparisons.

    With the m non-nan p-values sorted p_(1) ≤ … ≤ p_(m):

        p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j)),   reject H_(i) iff p̃_(i) ≤ α

    which keeps the chance of any false "different" in the table at most α (Holm 1979,
    Scand. J. Statist. 6:65–70). Returns (adjusted, reject) in the input order. A nan
    p-value (a comparison with too few seeds) is no test: it stays nan, is never rejected
    and does not count in m."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    p = np.asarray(p_values, dtype=float).reshape(-1)
    tested = ~np.isnan(p)
    if np.any((p[tested] < 0) | (p[tested] > 1)):
        raise ValueError(f"p_values must lie in [0, 1] (or be nan), got {p.tolist()}")
    adjusted = np.full(p.shape, NAN)
    where = np.flatnonzero(tested)
    order = where[np.argsort(p[where], kind="stable")]
    m = order.size
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted.tolist(), [bool(a <= alpha) for a in adjusted]
