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

from policylab.arena.power import minimal_detectable_effect, pilot_sd, power_line, seeds_for_power
from policylab.arena.report import fmt_interval, md_row
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


def planning_sd(differences: dict[str, list[float]]) -> tuple[float, int] | None:
    """(SD, n) to plan or state power with: the noisiest comparison's SD of its paired
    differences (`pilot_sd`) and the fewest pairs n over the comparisons with ≥ 2 pairs;
    None when no comparison has 2 pairs."""
    usable = [d for d in differences.values() if len(d) >= 2]
    if not usable:
        return None
    return pilot_sd(usable), min(len(d) for d in usable)


def power_sentence(differences: dict[str, list[float]], alpha: float = 0.05) -> str:
    """The power line of a table: what its seeds detect per comparison at two-sided α,
    and after Bonferroni over its m comparisons (α/m, the strictest step of Holm's
    procedure, which decides the table's "decided?" column)."""
    plan = planning_sd(differences)
    if plan is None:
        return "Power: fewer than 2 paired seeds per comparison, so no power can be stated."
    sd, n = plan
    if sd == 0:
        return f"Power: every paired difference in final score is constant over {n} seeds."
    m = sum(len(d) >= 2 for d in differences.values())
    line = f"Power: {power_line(n, sd, alpha=alpha)}, in final score; the SD is the noisiest "
    line += "comparison's in this table"
    if m > 1:
        strict = minimal_detectable_effect(sd, n, alpha=alpha / m)
        line += f"; after Bonferroni over its {m} comparisons (α/{m}): ≥ {strict:.3g}"
    return line + "."


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
    base = finals.get(baseline, {})
    # bootstrap columns from MIN_BOOTSTRAP_SEEDS seeds each algorithm shares with the baseline
    shared = {a: sorted(set(v) & set(base)) for a, v in finals.items()}
    n_min = min((len(v) for a, v in shared.items() if finals[a]), default=0)
    bootstrap = n_min >= MIN_BOOTSTRAP_SEEDS
    pct = f"{confidence:.0%}"
    header = [
        "algorithm",
        f"IQM final [{pct} bootstrap CI]",
        f"P(better than {baseline}) [{pct} CI]",
        "Holm p (paired t)",
        f"decided at α = {1 - confidence:.2g}?",
    ]
    rows = [md_row(header), "|---" * len(header) + "|"]
    for algo, by_seed in finals.items():
        seeds = shared[algo]
        iqm_cell = poi_cell = "—"
        if len(seeds) >= MIN_BOOTSTRAP_SEEDS:
            x = _column(by_seed, seeds)
            ci = stratified_bootstrap_ci(
                {algo: x}, iqm, reps=REPS, confidence=confidence, seed=seed
            )
            iqm_cell = fmt_interval(ci[algo])
            if algo != baseline:
                poi = probability_of_improvement_ci(
                    x,
                    _column(base, seeds),
                    reps=REPS,
                    confidence=confidence,
                    seed=seed,
                    paired=True,
                )
                poi_cell = fmt_interval(poi)
        p = holm.get(algo, math.nan)
        decided = (
            "—" if algo == baseline or math.isnan(p) else ("yes" if p < 1 - confidence else "no")
        )
        p_cell = "baseline" if algo == baseline else ("—" if math.isnan(p) else f"{p:.3g}")
        rows.append(md_row([algo, iqm_cell, poi_cell, p_cell, decided]))
    paragraphs.append("\n".join(rows))
    if not bootstrap:
        paragraphs.append(
            f"IQM and the probability of improvement are left out: they need ≥ "
            f"{MIN_BOOTSTRAP_SEEDS} seeds shared with the baseline (here {n_min}); a percentile "
            "bootstrap over fewer seeds never leaves their [min, max] and covers less than it "
            "states, so the Student-t intervals above are the ones to read."
        )
    else:
        paragraphs.append(
            "IQM: the mean of the middle 50 % of the seeds' final scores; its interval is a "
            f"percentile bootstrap ({REPS} resamples of the seeds shared with {baseline}). "
            f"P(better than {baseline}): "
            "the chance that a run of the algorithm beats a run of the baseline (ties count "
            "half), with a bootstrap interval; 0.5 means no difference. Holm p: the paired t "
            "test's p-value adjusted for the number of comparisons in this table."
        )
    return paragraphs


def _column(by_seed: dict[int, float], seeds: list[int]) -> np.ndarray:
    """The scores of `seeds`, in that order, as a [runs, 1] array (one task)."""
    return np.asarray([by_seed[s] for s in seeds], dtype=float).reshape(-1, 1)


def check_sizing(min_effect: float | None, pilot_seeds: int, max_seeds: int) -> None:
    """`seeds="auto"`'s settings, checked before the pilot runs."""
    if min_effect is None or not math.isfinite(min_effect) or min_effect <= 0:
        raise ValueError(
            f"--seeds auto needs --min-effect, the smallest difference in final score worth "
            f"detecting (e.g. 0.05 accuracy), a positive number; got {min_effect!r}"
        )
    if isinstance(pilot_seeds, bool) or not isinstance(pilot_seeds, int) or pilot_seeds < 2:
        raise ValueError(f"pilot_seeds {pilot_seeds!r}: a pilot needs at least 2 seeds")
    if not isinstance(max_seeds, int) or max_seeds < pilot_seeds:
        raise ValueError(f"max_seeds {max_seeds!r}: expected a whole number ≥ pilot_seeds")


def seeds_plan(
    records: Sequence[RunRecord],
    baseline: str,
    budget: float,
    confidence: float,
    *,
    min_effect: float,
    pilot_seeds: int,
    max_seeds: int,
) -> tuple[int, str]:
    """How many seeds an arena needs to detect `min_effect` in final score at 80 % power,
    planned from the finished seeds' noisiest paired comparison with α = (1 − confidence)/m
    (Bonferroni, the strictest step of Holm's), and the sentence the report shows."""
    diffs = paired_differences(scores_by_algo(records, "final", budget), baseline)
    plan = planning_sd(diffs)
    if plan is None:
        raise ValueError("the pilot has no comparison with 2 paired seeds: nothing to size from")
    sd, have = plan
    m = max(1, sum(len(d) >= 2 for d in diffs.values()))
    alpha = (1 - confidence) / m
    try:
        needed = seeds_for_power(min_effect, sd, alpha=alpha, max_seeds=max_seeds)
        n, need_text = max(needed, pilot_seeds), str(needed)
    except ValueError:  # more than max_seeds: run max_seeds and say so
        n, need_text = max_seeds, f"more than {max_seeds}"
    text = (
        f"chosen by power: over the {have} seeds finished when sizing (a {pilot_seeds}-seed "
        f"pilot at first), the SD of paired final-score differences was {sd:.3g} (noisiest "
        f"comparison); detecting {min_effect:g} at 80 % power with α = "
        f"{1 - confidence:g}/{m} (Bonferroni over {m} comparisons) needs {need_text} seeds"
    )
    if need_text.startswith("more than"):
        text += f", capped at max_seeds={max_seeds}"
    return n, text
