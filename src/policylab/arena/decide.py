"""What an arena can decide: the power line, rliable's statistics and Holm–Bonferroni,
as paragraphs under the arena's table (`write_report(extra=...)`), and the same across
several tasks (`aggregate`).

    with 10 seeds this arena can detect paired differences ≥ 0.041 at 80 % power …

    | algorithm | IQM final [95% bootstrap CI] | P(better than grpo) [95% CI] | Holm p | decided? |

Intervals of the bootstrap kind need ≥ `MIN_BOOTSTRAP_SEEDS` seeds: a percentile
bootstrap over 3 values never leaves their [min, max] and covers far less than it states,
so below that the arena keeps its Student-t intervals and says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from policylab.arena.power import pilot_sd, power_line
from policylab.arena.rliable import (
    holm_bonferroni,
    iqm,
    paired_t_pvalue,
    probability_of_improvement_ci,
    stratified_bootstrap_ci,
)
from policylab.arena.stats import RunRecord, area_under_curve

MIN_BOOTSTRAP_SEEDS = 5
REPS = 2000


def scores_by_algo(records: Sequence[RunRecord], metric: str, budget: float) -> dict[str, dict]:
    """algo → {seed: final score ("final") or AUC ("auc")} over the done runs, algorithms
    in table order (an algorithm without a done run maps to {})."""
    out: dict[str, dict[int, float]] = {}
    for r in records:
        out.setdefault(r.algo, {})
        if r.status == "done":
            out[r.algo][r.seed] = (
                r.final if metric == "final" else area_under_curve(r.curve, budget)
            )
    return out


def paired_differences(values: dict[str, dict], baseline: str) -> dict[str, list[float]]:
    """algo → its per-seed differences to the baseline over the seeds both finished."""
    base = values.get(baseline, {})
    return {
        algo: [mine[s] - base[s] for s in sorted(set(mine) & set(base))]
        for algo, mine in values.items()
        if algo != baseline
    }


def power_sentence(differences: dict[str, list[float]], alpha: float = 0.05) -> str:
    """The power line from the paired final-score differences of every comparison in a
    table: the noisiest comparison's SD plans (`pilot_sd`); n is the fewest pairs."""
    usable = [d for d in differences.values() if len(d) >= 2]
    if not usable:
        return "Power: fewer than 2 paired seeds per comparison, so no power can be stated."
    n = min(len(d) for d in usable)
    sd = pilot_sd(usable)
    if sd == 0:
        return f"Power: every paired difference in final score is constant over {n} seeds."
    return (
        f"Power: {power_line(n, sd, alpha=alpha)}, in final score; the SD is the noisiest "
        "comparison's in this table."
    )


def holm_pvalues(differences: dict[str, list[float]], alpha: float = 0.05) -> dict[str, float]:
    """algo → Holm-adjusted two-sided paired t p-value over the table's comparisons (nan
    where there are fewer than 2 pairs)."""
    raw = {a: paired_t_pvalue(d) for a, d in differences.items()}
    finite = [a for a, p in raw.items() if not math.isnan(p)]
    out = dict.fromkeys(raw, math.nan)
    if finite:
        adjusted, _ = holm_bonferroni([raw[a] for a in finite], alpha)
        out.update(zip(finite, (float(p) for p in adjusted), strict=True))
    return out


def statistics_paragraphs(
    records: Sequence[RunRecord],
    baseline: str,
    budget: float,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[str]:
    """The power line and the rliable table of one arena (Markdown paragraphs)."""
    finals = scores_by_algo(records, "final", budget)
    diffs = paired_differences(finals, baseline)
    paragraphs = [power_sentence(diffs, 1.0 - confidence)]
    holm = holm_pvalues(diffs, 1.0 - confidence)
    n_min = min((len(v) for v in finals.values()), default=0)
    bootstrap = n_min >= MIN_BOOTSTRAP_SEEDS
    pct = f"{confidence:.0%}"
    header = (
        f"| algorithm | IQM final [{pct} bootstrap CI] | P(better than {baseline}) "
        f"[{pct} CI] | Holm p (paired t) | decided at α = {1 - confidence:.2g}? |\n"
        "|---|---|---|---|---|"
    )
    rows = []
    base = _column(finals.get(baseline, {}))
    for algo, by_seed in finals.items():
        x = _column(by_seed)
        iqm_cell = poi_cell = "—"
        if bootstrap and x.size:
            ci = stratified_bootstrap_ci(
                {algo: x}, iqm, reps=REPS, confidence=confidence, seed=seed
            )
            iqm_cell = _fmt_ci(ci[algo])
            if algo != baseline:
                poi = probability_of_improvement_ci(
                    x, base, reps=REPS, confidence=confidence, seed=seed, paired=True
                )
                poi_cell = _fmt_ci(poi)
        p = holm.get(algo, math.nan)
        decided = (
            "—" if algo == baseline or math.isnan(p) else ("yes" if p < 1 - confidence else "no")
        )
        p_cell = "baseline" if algo == baseline else ("—" if math.isnan(p) else f"{p:.3g}")
        rows.append(f"| {algo} | {iqm_cell} | {poi_cell} | {p_cell} | {decided} |")
    paragraphs.append(header + "\n" + "\n".join(rows))
    if not bootstrap:
        paragraphs.append(
            f"IQM and the probability of improvement are left out: they need ≥ "
            f"{MIN_BOOTSTRAP_SEEDS} seeds per algorithm (here {n_min}); a percentile "
            "bootstrap over fewer seeds never leaves their [min, max] and covers less than it "
            "states, so the Student-t intervals above are the ones to read."
        )
    else:
        paragraphs.append(
            "IQM: the mean of the middle 50 % of the seeds' final scores; its interval is a "
            f"percentile bootstrap ({REPS} resamples of seeds). P(better than {baseline}): "
            "the chance that a run of the algorithm beats a run of the baseline (ties count "
            "half), with a bootstrap interval; 0.5 means no difference. Holm p: the paired t "
            "test's p-value adjusted for the number of comparisons in this table."
        )
    return paragraphs


def _column(by_seed: dict[int, float]) -> np.ndarray:
    """Scores as a [runs, 1] array (one task), seeds in order."""
    return np.asarray([by_seed[s] for s in sorted(by_seed)], dtype=float).reshape(-1, 1)


def _fmt_ci(interval) -> str:
    from policylab.arena.report import fmt_interval

    return fmt_interval(interval)
