"""Claims: each seed paper's claim in one line, the arena that tests it at our scale, and
its verdict.

    policylab claims                  # read the arenas under runs/claims, write docs/claims.md
    policylab claims --run --jobs 2   # train what is missing first (hours on a laptop)

A `Claim` names a method, its baseline, the arena (`ClaimArena`: task, algorithms, seeds,
budget, fields — one arena serves every claim on that task) and what the paper says: that
the method scores `better` than the baseline, or that it is `not_worse` (within the
arena's `min_effect`). The verdict is read from the paired difference over seeds:

    better     held          Δ's interval lies above 0 and the Holm-adjusted p < α
                             (above 0 but not after Holm: inside the noise)
               not held      otherwise, if Δ's interval lies below 0 with Holm p < α
                             (worse), or below +min_effect (a gain as large as the arena
                             was sized to detect is excluded)
    not_worse  held          Δ's interval lies above −min_effect (non-inferiority with
                             margin min_effect)
               not held      otherwise, if Δ's interval lies below 0 with Holm p < α
    either     inside the noise at n seeds   none of the above
               not testable here             the claim's `why_not` says why

"Held" asks more of the data (Holm-adjusted) than "not held: a gain ≥ min_effect is
excluded" (the unadjusted interval): the second is a statement about the size of the
gain the claim needs to matter, read as the paper's claim "better by a margin worth having".

Holm–Bonferroni runs over the comparisons of one table (every method against the
arena's baseline on the claim's metric), so one lucky method among sixteen does not
become a finding. Intervals are paired Student-t intervals over seeds (`paired_difference_ci`).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from policylab.arena.decide import (
    holm_pvalues,
    paired_differences,
    planning_sd,
    power_sentence,
    scores_by_algo,
)
from policylab.arena.power import minimal_detectable_effect, seeds_for_power
from policylab.arena.report import fmt_interval, markdown_table, md_row
from policylab.arena.stats import Interval, RunRecord, paired_difference_ci

DIRECTIONS = ("better", "not_worse")
METRICS = ("final", "auc")
HELD, NOT_HELD, NOISE, UNTESTABLE, NOT_RUN = (
    "held",
    "not held",
    "inside the noise",
    "not testable here",
    "not run yet",
)


@dataclass(frozen=True)
class ClaimArena:
    """One arena that several claims read. `min_effect` is the difference (in the score's
    units) the arena is sized to detect: 5 % of the score's range."""

    name: str  # its folder under the claims root
    task: str
    algos: tuple[str, ...]
    seeds: int
    budget: int
    min_effect: float
    overrides: dict[str, Any] = field(default_factory=dict)
    threshold: float | None = None
    score: str = "held-out greedy accuracy"

    def command(self, root: str | Path, jobs: int = 2) -> str:
        """The `policylab arena` command that trains (or continues) this arena."""
        parts = [
            "policylab arena",
            f"--task {self.task}",
            f"--algos {','.join(self.algos)}",
            f"--seeds {self.seeds}",
            f"--budget {self.budget}",
        ]
        if self.threshold is not None:
            parts.append(f"--threshold {self.threshold:g}")
        parts += [f"--jobs {jobs}", f"--out {Path(root) / self.name}"]
        parts += [shlex.quote(f"{k}={v}") for k, v in self.overrides.items()]
        return " ".join(parts)


@dataclass(frozen=True)
class Claim:
    """One paper's claim, tested by `method` against `baseline` in arena `arena`."""

    method: str  # the --algos entry in the arena
    paper: str  # arXiv id
    claim: str  # the paper's claim in one line
    arena: str  # a ClaimArena name
    baseline: str
    metric: str = "final"  # "final" score or "auc" (mean score over the budget: speed)
    direction: str = "better"
    why_not: str = ""  # set when the arena cannot test the claim as the paper states it
    note: str = ""  # what a reader must know to read the measurement

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"claim {self.method!r}: metric {self.metric!r}, expected {METRICS}")
        if self.direction not in DIRECTIONS:
            raise ValueError(
                f"claim {self.method!r}: direction {self.direction!r}, expected {DIRECTIONS}"
            )


@dataclass(frozen=True)
class Recorded:
    """A claim judged by a measurement documented elsewhere (an agent arena that needs a
    warm-started model, an exact check of a theorem), listed in claims.md as recorded
    there: `policylab claims` does not re-run it. `where` links the section that has the
    command and the numbers."""

    method: str
    paper: str
    claim: str
    verdict: str  # one of HELD, NOT_HELD, NOISE, UNTESTABLE
    measured: str  # the measurement in a few words, with its seeds
    where: str  # docs/<page>.md#anchor

    def __post_init__(self) -> None:
        if self.verdict not in (HELD, NOT_HELD, NOISE, UNTESTABLE):
            raise ValueError(f"recorded claim {self.method!r}: unknown verdict {self.verdict!r}")


@dataclass
class Verdict:
    """A claim's measurement and verdict."""

    claim: Claim
    diff: Interval | None  # method − baseline, paired over seeds; None when not run
    p_holm: float  # Holm-adjusted two-sided paired t p-value (nan when not computable)
    verdict: str
    reason: str
    detectable: float = math.nan  # the difference its seeds detect at 80 % power (its SD)


def verdict_of(
    diff: Interval, p_holm: float, *, direction: str, min_effect: float, alpha: float = 0.05
) -> tuple[str, str]:
    """(verdict, reason) from a paired difference and its Holm-adjusted p (module doc)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}, expected one of {DIRECTIONS}")
    if not min_effect > 0:
        raise ValueError(f"min_effect must be positive, got {min_effect!r}")
    n = diff.n
    if math.isnan(diff.low) or math.isnan(diff.high):
        return NOT_RUN, f"{n} paired seed(s): no interval"
    significant = not math.isnan(p_holm) and p_holm < alpha
    if direction == "better":
        if diff.low > 0:
            if significant:
                return HELD, "better than the baseline"
            return NOISE, f"interval above 0, but not after Holm (p = {p_holm:.3g}); n = {n}"
        if diff.high < 0 and significant:
            return NOT_HELD, "worse than the baseline"
        if diff.high < min_effect:
            return NOT_HELD, f"a gain ≥ {min_effect:g} is excluded"
        return NOISE, f"n = {n}"
    if diff.low > -min_effect:  # non-inferiority with margin min_effect
        return HELD, f"a loss ≥ {min_effect:g} is excluded"
    if diff.high < 0 and significant:
        return NOT_HELD, "worse than the baseline"
    return NOISE, f"n = {n}"


def judge(
    claims: Sequence[Claim],
    records: Sequence[RunRecord],
    arena: ClaimArena,
    *,
    confidence: float = 0.95,
) -> list[Verdict]:
    """The verdict of every claim on one arena's runs. Holm's family: per (baseline,
    metric), every algorithm of the arena against that baseline."""
    alpha = 1.0 - confidence
    verdicts = []
    for claim in claims:
        if claim.arena != arena.name:
            raise ValueError(
                f"claim {claim.method!r} is on arena {claim.arena!r}, not {arena.name!r}"
            )
        values = scores_by_algo(records, claim.metric, arena.budget)
        family = {a: v for a, v in values.items() if a in arena.algos}
        differences = paired_differences(family, claim.baseline)
        adjusted = holm_pvalues(differences, alpha)
        mine, base = values.get(claim.method, {}), values.get(claim.baseline, {})
        if not mine or not base:
            verdicts.append(Verdict(claim, None, math.nan, NOT_RUN, "no finished runs"))
            continue
        if not set(mine) & set(base):  # an unpaired (Welch) interval would judge other seeds
            verdicts.append(Verdict(claim, None, math.nan, NOT_RUN, "no seed finished by both"))
            continue
        diff = paired_difference_ci(mine, base, confidence)
        p = adjusted.get(claim.method, math.nan)
        verdict, reason = verdict_of(
            diff, p, direction=claim.direction, min_effect=arena.min_effect, alpha=alpha
        )
        if claim.why_not:
            verdict, reason = UNTESTABLE, claim.why_not
        mine_diffs = differences.get(claim.method, [])
        sd = float(np.std(mine_diffs, ddof=1)) if len(mine_diffs) >= 2 else math.nan
        mde = minimal_detectable_effect(sd, len(mine_diffs), alpha=alpha) if sd > 0 else math.nan
        verdicts.append(Verdict(claim, diff, p, verdict, reason, mde))
    return verdicts


def power_line(
    records: Sequence[RunRecord], arena: ClaimArena, baseline: str, alpha: float = 0.05
) -> str:
    """The arena's power line (`decide.power_sentence`) and whether it reaches the
    `min_effect` the arena is sized for."""
    diffs = paired_differences(scores_by_algo(records, "final", arena.budget), baseline)
    sentence = power_sentence(diffs, alpha)
    plan = planning_sd(diffs)
    if plan is None or plan[0] == 0:
        return sentence
    mde = minimal_detectable_effect(*plan, alpha=alpha)
    if mde <= arena.min_effect:
        return f"{sentence} Per comparison it reaches the {arena.min_effect:g} it is sized for."
    try:
        need = f"{seeds_for_power(arena.min_effect, plan[0], alpha=alpha, max_seeds=1000)} seeds"
    except ValueError:
        need = "more than 1,000 seeds"
    return (
        f"{sentence} Per comparison it does not reach the {arena.min_effect:g} it is sized "
        f"for: at this SD that takes {need}."
    )


# ---- the document -----------------------------------------------------------------------
def claims_report(
    root: str | Path,
    claims: Sequence[Claim],
    arenas: dict[str, ClaimArena],
    *,
    recorded: Sequence[Recorded] = (),
    run: bool = False,
    jobs: int = 2,
    progress: bool = True,
) -> tuple[list[Verdict], str]:
    """Read (or, with `run`, first train or continue) every claims arena under `root` and
    return the verdicts and docs/claims.md's text. An arena folder that does not exist
    gives "not run yet" rows with the command that trains it."""
    from policylab.arena.runner import arena as run_arena
    from policylab.arena.runner import report as read_arena

    root = Path(root)
    unknown = sorted({c.arena for c in claims} - set(arenas))
    if unknown:
        raise ValueError(f"claims name unknown arenas {unknown}; known: {sorted(arenas)}")
    verdicts: list[Verdict] = []
    sections: list[str] = []
    for name, setup in arenas.items():
        mine = [c for c in claims if c.arena == name]
        if not mine:
            continue
        folder = root / name
        command = setup.command(root, jobs)
        if run:
            result = run_arena(
                setup.task,
                list(setup.algos),
                setup.seeds,
                budget=setup.budget,
                jobs=jobs,
                overrides={k: _field(v) for k, v in setup.overrides.items()},
                threshold=setup.threshold,
                out_dir=folder,
                progress=progress,
            )
        elif (folder / "arena.json").is_file():
            result = read_arena(folder)
        else:
            verdicts += [Verdict(c, None, math.nan, NOT_RUN, f"run: {command}") for c in mine]
            sections += [f"### {name}", "", f"Not run yet: `{command}`", ""]
            continue
        verdicts += judge(mine, result.records, setup, confidence=result.spec.confidence)
        baseline = result.spec.baseline
        table = markdown_table(
            result.summaries,
            budget_unit=result.spec.budget_unit,
            baseline=baseline,
            threshold=setup.threshold,
        )
        sections += [
            f"### {name}",
            "",
            f"Task `{setup.task}`, score: {setup.score}; {setup.budget:,} "
            f"{result.spec.budget_unit} per run; sized to detect {setup.min_effect:g}.",
            "",
            f"```bash\n{command}\n```",
            "",
            power_line(result.records, setup, baseline, 1 - result.spec.confidence),
            "",
            table,
            result.statistics[1],
            "",
        ]
    return verdicts, _document(verdicts, sections, root, recorded)


def _field(value: Any) -> Any:
    """An override as the CLI would parse it ("3e-5" → 3e-05)."""
    from policylab.config import parse_overrides

    return next(iter(parse_overrides([f"x={value}"]).values()))


def _document(
    verdicts: Sequence[Verdict],
    sections: Sequence[str],
    root: Path,
    recorded: Sequence[Recorded] = (),
) -> str:
    counts = {v: sum(x.verdict == v for x in verdicts) for v in (HELD, NOT_HELD, NOISE)}
    lines = [
        "# Claims: one verdict per seed paper",
        "",
        "Written by `policylab claims --root "
        f"{root}` from the arenas below (`--run` trains what is missing). Each row: the "
        "paper's claim in one line, the arena that tests it at our scale (tiny model or "
        "small control task on a 2-core CPU), the paired difference to the baseline over "
        "seeds with its 95 % Student-t interval, the Holm-adjusted p-value over the "
        "comparisons of that arena's table, and the verdict:",
        "",
        "- **held**: better than the baseline (interval above 0, Holm p < 0.05); for an "
        "'at least as good' claim, the interval excludes a loss as large as the arena's "
        "minimal effect (non-inferiority);",
        "- **not held**: otherwise, worse than the baseline (interval below 0, Holm p < "
        "0.05), or, for a 'better' claim, the interval excludes a gain as large as the "
        "minimal effect;",
        "- **inside the noise**: neither, at the arena's seeds;",
        "- **not testable here**: the arena cannot test the claim as stated (the reason is "
        "given; the measurement is still shown).",
        "",
        f"Held {counts[HELD]}, not held {counts[NOT_HELD]}, inside the noise {counts[NOISE]}, "
        f"of {len(verdicts)} claims.",
        "",
        "| method | paper | claim | arena, metric | Δ vs baseline [95% CI], n | Holm p | "
        "detectable at 80 % power | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        c = v.claim
        diff = "—" if v.diff is None else _interval_text(v.diff)
        p = "—" if math.isnan(v.p_holm) else f"{v.p_holm:.3g}"
        what = c.claim + (f" ({c.note})" if c.note else "")
        where = f"{c.arena}, {c.metric} vs {c.baseline}"
        detect = "—" if math.isnan(v.detectable) else f"{v.detectable:.3g}"
        cells = [c.method, f"arXiv:{c.paper}", what, where, diff, p, detect]
        cells.append(f"**{v.verdict}**: {v.reason}")
        lines.append(md_row(cells))
    if recorded:
        lines += [
            "",
            "## Measured elsewhere",
            "",
            "Claims judged in other pages, by arenas that need a warm-started model (agents) "
            "or by exact checks (theory); recorded here from those pages, which hold the "
            "commands and the numbers. `policylab claims` does not re-run them.",
            "",
            "| method | paper | claim | measured | verdict | where |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            md_row(
                [r.method, f"arXiv:{r.paper}", r.claim, r.measured, f"**{r.verdict}**"]
                + [f"[{r.where.split('#')[0]}]({r.where.removeprefix('docs/')})"]
            )
            for r in recorded
        ]
    return "\n".join([*lines, "", "## The arenas", "", *sections]).rstrip() + "\n"


def _interval_text(diff: Interval) -> str:
    return f"{fmt_interval(diff, signed=True)}, {diff.n}"
