"""Several tasks at once: one arena per task, then rliable's aggregates over seeds × tasks.

    policylab arena --tasks arithmetic,countdown,sudoku4 --algos grpo,dr_grpo --seeds 5

    <out>/
      tasks.json          the tasks (each arena's settings are in its own folder)
      <task>/             an ordinary arena folder per task (results.md, runs/, ...)
      aggregate.md        IQM and mean over seeds × tasks with stratified bootstrap CIs,
                          the probability of improvement over the baseline, Holm p-values
      profiles.png        performance profiles: fraction of runs × tasks above each score

Scores are aggregated as they are, so every task must score on one scale: accuracies in
[0, 1] (language-model and agent tasks) or the tabular score. Control returns are not on
one scale across tasks and are refused.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from policylab.arena.decide import REPS, holm_pvalues
from policylab.arena.report import save_figure
from policylab.arena.rliable import (
    iqm,
    mean,
    performance_profile_band,
    probability_of_improvement_ci,
    stratified_bootstrap_ci,
)
from policylab.arena.runner import ArenaResult, arena, folder_name, report
from policylab.trainers.run import write_atomic

TASKS_FILE = "tasks.json"


def split_tasks(text: str | list[str]) -> list[str]:
    """The --tasks list: comma-separated, each once, at least two."""
    tasks = [t.strip() for t in (text.split(",") if isinstance(text, str) else text)]
    tasks = [t for t in tasks if t]
    if len(tasks) < 2:
        raise ValueError(f"--tasks {text!r}: name at least two tasks (one task: --task)")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"--tasks {text!r}: a task appears twice")
    return tasks


def arena_tasks(
    tasks: str | list[str],
    algos: list[str] | str,
    seeds: Any = None,
    *,
    out_dir: str | Path | None = None,
    **kwargs: Any,
) -> tuple[list[ArenaResult], Path]:
    """Run (or continue) one arena per task under `out_dir`, then write the aggregate."""
    tasks = split_tasks(tasks)
    folder = Path(out_dir or "runs/arena-" + "+".join(folder_name(t) for t in tasks))
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / TASKS_FILE, json.dumps({"tasks": tasks}, indent=2) + "\n")
    results = [arena(t, algos, seeds, out_dir=folder / folder_name(t), **kwargs) for t in tasks]
    return results, write_aggregate(folder, results, results[0].spec.confidence)


def report_tasks(folder: str | Path) -> tuple[list[ArenaResult], Path]:
    """Re-read a multi-task arena folder and rewrite every report and the aggregate."""
    folder = Path(folder)
    tasks = json.loads((folder / TASKS_FILE).read_text())["tasks"]
    results = [report(folder / folder_name(t)) for t in tasks]
    return results, write_aggregate(folder, results, results[0].spec.confidence)


def score_matrix(results: list[ArenaResult]) -> tuple[dict[str, np.ndarray], list[int]]:
    """algo → final scores [seeds, tasks] over the seeds every task finished for every
    algorithm (the same seeds everywhere, so paired statistics stay paired)."""
    kinds = {r.spec.kind for r in results}
    if "control" in kinds:
        raise ValueError(
            "a multi-task aggregate needs scores on one scale (accuracies or tabular scores); "
            "control returns differ in scale between environments"
        )
    algos = list(results[0].spec.algos)
    for r in results[1:]:
        if list(r.spec.algos) != algos:
            raise ValueError(
                f"tasks {results[0].spec.task} and {r.spec.task} ran different algorithms"
            )
    done = [
        {(rec.algo, rec.seed): rec.final for rec in r.records if rec.status == "done"}
        for r in results
    ]
    seeds = sorted(
        s for s in results[0].spec.seeds if all((a, s) in d for a in algos for d in done)
    )
    return {a: np.array([[d[(a, s)] for d in done] for s in seeds]) for a in algos}, seeds


def write_aggregate(folder: Path, results: list[ArenaResult], confidence: float = 0.95) -> Path:
    """aggregate.md and profiles.png (module doc); returns the Markdown's path."""
    from policylab.arena.report import fmt_interval, md_row

    scores, seeds = score_matrix(results)
    baseline = results[0].spec.baseline
    tasks = [r.spec.task for r in results]
    pct = f"{confidence:.0%}"
    lines = [
        f"# Arena over {len(tasks)} tasks: {', '.join(tasks)}",
        "",
        f"Final held-out scores of the seeds every run finished ({len(seeds)}: "
        f"{', '.join(map(str, seeds)) or 'none'}); per-task tables in each task's folder.",
        "",
    ]
    if len(seeds) < 2:
        lines.append("Fewer than 2 seeds finished on every task: no aggregate can be given.")
        path = folder / "aggregate.md"
        write_atomic(path, "\n".join(lines) + "\n")
        return path
    iqms = stratified_bootstrap_ci(scores, iqm, reps=REPS, confidence=confidence, seed=0)
    means = stratified_bootstrap_ci(scores, mean, reps=REPS, confidence=confidence, seed=0)
    # paired over seed × task: the mean difference per seed across tasks
    diffs = {a: list((scores[a] - scores[baseline]).mean(axis=1)) for a in scores if a != baseline}
    holm = holm_pvalues(diffs, 1 - confidence)
    lines += [
        f"| algorithm | IQM [{pct} CI] | mean [{pct} CI] | P(better than {baseline}) [{pct} CI] "
        "| Holm p (paired t over seeds) |",
        "|---|---|---|---|---|",
    ]
    for algo, x in scores.items():
        poi = "—"
        if algo != baseline:
            poi = fmt_interval(
                probability_of_improvement_ci(
                    x, scores[baseline], reps=REPS, confidence=confidence, seed=0, paired=True
                )
            )
        p = holm.get(algo, math.nan)
        p_cell = "baseline" if algo == baseline else ("—" if math.isnan(p) else f"{p:.3g}")
        lines.append(
            md_row([algo, fmt_interval(iqms[algo]), fmt_interval(means[algo]), poi, p_cell])
        )
    lines += [
        "",
        "IQM: the mean of the middle 50 % of all seed × task scores. Intervals: stratified "
        f"percentile bootstrap ({REPS} resamples of seeds within each task). P(better than "
        f"{baseline}): the chance that a run of the algorithm beats a run of the baseline on "
        "the same task (ties count half), averaged over tasks. Holm p: paired t test on the "
        "per-seed mean difference over tasks, adjusted for the comparisons in this table.",
        "",
        "![performance profiles](profiles.png)",
    ]
    _plot_profiles(folder / "profiles.png", scores, confidence)
    path = folder / "aggregate.md"
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def _plot_profiles(path: Path, scores: dict[str, np.ndarray], confidence: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    every = np.concatenate([x.ravel() for x in scores.values()])
    taus = np.linspace(float(every.min()), float(every.max()), 101)
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for i, (algo, x) in enumerate(scores.items()):
        profile, low, high = performance_profile_band(
            x, taus, reps=REPS, confidence=confidence, seed=0
        )
        ax.plot(taus, profile, color=f"C{i % 10}", label=algo)
        ax.fill_between(taus, low, high, color=f"C{i % 10}", alpha=0.15, linewidth=0)
    ax.set_xlabel("final held-out score τ")
    ax.set_ylabel("fraction of runs × tasks with score > τ")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)
