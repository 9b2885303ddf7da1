"""How many seeds an arena needs: power of its paired design.

The arena compares two algorithms over the same seeds, so what is tested is the mean of
the k per-seed differences d_s = a_s − b_s, with the two-sided paired t test (the test
behind `stats.paired_difference_ci`). If the differences have mean Δ and standard
deviation σ, the t statistic follows a noncentral t with k − 1 degrees of freedom and
noncentrality δ = Δ / (σ/√k), and the power is the chance that it lands beyond ±t_{1−α/2}.

Pure functions of plain numbers (scipy only). The usual planning loop: run a small pilot,
take `pilot_sd` of its paired differences, then `seeds_for_power` for the effect worth
detecting, or `minimal_detectable_effect` / `power_line` for what the seeds at hand can see.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import optimize
from scipy import stats as sps


def _check_unit(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")


def _check_sd(sd: float) -> None:
    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"sd must be a finite number ≥ 0 (of the paired differences), got {sd!r}")


def _check_n(n: int) -> None:
    if int(n) != n or n < 2:
        raise ValueError(f"n must be an integer ≥ 2 (pairs of seeds; t needs n − 1 ≥ 1), got {n!r}")


def paired_t_power(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t test with n pairs.

        δ = effect / (sd / √n),   t* = t_{1−α/2, n−1}
        power = P(T'_{n−1, δ} > t*) + P(T'_{n−1, δ} < −t*)

    with T' the noncentral t (scipy.stats.nct): exact, not the normal approximation, which
    overstates the power at the arena's few seeds. `effect` is the true mean paired
    difference (only |effect| matters), `sd` the standard deviation of the paired
    differences. At effect = 0 the power is α. sd = 0 (every pair differs by exactly
    `effect`): 1 when effect ≠ 0 and 0 when effect = 0, as `rliable.paired_t_pvalue` gives
    p = 0 and p = 1 there."""
    if not math.isfinite(effect):
        raise ValueError(f"effect must be a finite number, got {effect!r}")
    _check_sd(sd)
    _check_n(n)
    _check_unit("alpha", alpha)
    if sd == 0:
        return 1.0 if effect != 0 else 0.0
    df, delta = n - 1, abs(effect) / (sd / math.sqrt(n))
    t_star = sps.t.ppf(1 - alpha / 2, df)
    if delta == 0:
        return float(2 * sps.t.sf(t_star, df))
    upper = float(sps.nct.sf(t_star, df, delta))
    # P(T' < −t*) ≤ P(T' < 0) = Φ(−δ): scipy's nct gives nan far in this tail (seen for
    # Φ(−δ) < 1.5e-14), where the term is negligible
    lower = float(sps.nct.cdf(-t_star, df, delta))
    return upper + (lower if math.isfinite(lower) else 0.0)


def seeds_for_power(
    effect: float, sd: float, power: float = 0.8, alpha: float = 0.05, max_seeds: int = 200
) -> int:
    """The smallest number of seeds n ≥ 2 with paired_t_power(effect, sd, n, alpha) ≥ power.

    sd = 0 gives 2 (the smallest arena a t test accepts). Raises ValueError when more
    than `max_seeds` would be needed: an arena that large is a different plan, so say
    the effect is too small for the noise instead of running for ever."""
    if not (math.isfinite(effect) and effect != 0):
        raise ValueError(f"effect must be a nonzero finite difference to detect, got {effect!r}")
    _check_sd(sd)
    _check_unit("power", power)
    _check_unit("alpha", alpha)
    for n in range(2, max_seeds + 1):
        if paired_t_power(effect, sd, n, alpha) >= power:
            return n
    raise ValueError(
        f"detecting a paired difference of {effect:g} with SD {sd:g} at {power:.0%} power "
        f"needs more than max_seeds={max_seeds} seeds "
        f"(power with {max_seeds}: {paired_t_power(effect, sd, max_seeds, alpha):.2f})"
    )


def minimal_detectable_effect(sd: float, n: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """The smallest |mean paired difference| that n seeds detect with probability `power`.

        solve paired_t_power(Δ, sd, n, α) = power for Δ > 0   (scipy.optimize.brentq)

    Solved for the standardised effect Δ/sd and scaled back, so it is exactly
    proportional to sd; sd = 0 gives 0. `power` must exceed α (the power at Δ = 0)."""
    _check_sd(sd)
    _check_n(n)
    _check_unit("alpha", alpha)
    _check_unit("power", power)
    if power <= alpha:
        raise ValueError(
            f"power must exceed alpha={alpha:g} (the power at no effect), got {power!r}"
        )
    if sd == 0:
        return 0.0
    high = 1.0
    while paired_t_power(high, 1.0, n, alpha) < power:  # bracket: power rises to 1 with Δ
        high *= 2.0
    z = optimize.brentq(lambda e: paired_t_power(e, 1.0, n, alpha) - power, 0.0, high, xtol=1e-12)
    return float(z) * sd


def pilot_sd(
    differences_by_comparison: Mapping[str, Sequence[float]] | Sequence[Sequence[float]],
    upper_confidence: float | None = None,
) -> float:
    """The SD of paired differences to plan with: the largest over the pilot's comparisons.

        s = max over comparisons c of s_c,   s_c² = Σ_s (d_cs − mean(d_c))² / (k_c − 1)

    Our choice: the largest sample SD, not a pooled one. Seeds must suffice for every
    comparison of the table, and pooling would average the noisiest comparison with the
    quiet ones and plan too few seeds for it.

    upper_confidence = c (e.g. 0.8) replaces each s_c by its one-sided upper confidence
    bound for σ,

        s_c · √((k_c − 1) / χ²_{1−c, k_c−1})     (χ²_q: the q-quantile)

    — conservative for a small pilot, whose s can easily fall well below σ. Comparisons
    with fewer than 2 differences have no SD and are skipped."""
    groups = list(
        differences_by_comparison.values()
        if isinstance(differences_by_comparison, Mapping)
        else differences_by_comparison
    )
    if upper_confidence is not None:
        _check_unit("upper_confidence", upper_confidence)
    sds = []
    for group in groups:
        d = np.asarray(group, dtype=float)
        if not np.all(np.isfinite(d)):
            raise ValueError(f"paired differences must be finite, got {d.tolist()}")
        if d.size < 2:
            continue
        s = float(d.std(ddof=1))
        if upper_confidence is not None:
            s *= math.sqrt((d.size - 1) / sps.chi2.ppf(1 - upper_confidence, d.size - 1))
        sds.append(s)
    if not sds:
        raise ValueError(
            "differences_by_comparison needs at least one comparison with ≥ 2 paired "
            f"differences, got sizes {[len(g) for g in groups]}"
        )
    return max(sds)


def power_line(n: int, sd: float, power: float = 0.8, alpha: float = 0.05, unit: str = "") -> str:
    """The sentence under an arena table: the smallest paired difference its seeds detect.

    "with 3 seeds this arena can detect paired differences ≥ 0.392 at 80 % power (two-sided
    α = 0.05, SD of paired differences 0.12 from these runs)" — the numbers are
    `minimal_detectable_effect(sd, n, power, alpha)` and `sd`, to 3 significant digits."""
    mde = minimal_detectable_effect(sd, n, power, alpha)
    unit = f" {unit}" if unit else ""
    return (
        f"with {n} seeds this arena can detect paired differences ≥ {mde:.3g}{unit} at "
        f"{power * 100:g} % power (two-sided α = {alpha:g}, SD of paired differences "
        f"{sd:.3g}{unit} from these runs)"
    )
