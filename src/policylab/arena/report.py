"""The arena's report: a table per task (Markdown and HTML), the curves, and a
self-contained page.

    <arena_dir>/
      results.md     heading, how it was run, the table, failed runs, how to read it
      curves.png     mean held-out score per algorithm with its t band, against the budget
      report.html    the same in one file: inline CSS, the PNG as a data URI, no links out
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from policylab.arena.stats import (
    AlgoSummary,
    Interval,
    RunRecord,
    ThresholdSummary,
    _t_quantile,
    mean_curve,
    summarize,
)
from policylab.trainers.run import write_atomic

DASH = "—"


# ---- numbers ----------------------------------------------------------------------------
def fmt_number(x: float, *, signed: bool = False) -> str:
    """About 3 significant digits; thousands separators from 1,000 up; never exponents
    between 1e-3 and 1e15."""
    if x is None or math.isnan(x):
        return DASH
    if abs(x) < 1e-12:  # floating-point residue of a difference that is exactly zero
        x = 0.0
    sign = "+" if signed else ""
    if abs(float(f"{x:.3g}")) >= 1000:  # 999.7 rounds to 1e+03 at 3 digits
        return f"{x:{sign},.0f}"
    if x != 0 and abs(x) < 1e-3:
        return f"{x:{sign}.2e}"
    text = f"{x:{sign}#.3g}".rstrip("0")
    return text.rstrip(".") if text.endswith(".") else text


def fmt_budget(x: float | None) -> str:
    """A budget (steps, tokens) as a whole number with thousands separators."""
    return DASH if x is None else f"{x:,.0f}"


def fmt_interval(interval: Interval, *, signed: bool = False) -> str:
    """`mean [low, high]`; `mean [—]` when there is no interval (fewer than 2 seeds)."""
    if math.isnan(interval.mean):
        return DASH
    mean = fmt_number(interval.mean, signed=signed)
    if math.isnan(interval.low) or math.isnan(interval.high):
        return f"{mean} [{DASH}]"
    low, high = fmt_number(interval.low, signed=signed), fmt_number(interval.high, signed=signed)
    return f"{mean} [{low}, {high}]"


# ---- the table, once, for Markdown and HTML ---------------------------------------------
def table_cells(
    summaries: Sequence[AlgoSummary], *, budget_unit: str, baseline: str, threshold: float | None
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the arena table as plain (unescaped) strings. The threshold
    column is left out when the arena has no threshold."""
    pct = f"{_confidence(summaries):.0%}"
    header = [
        "algorithm",
        "seeds done/failed",
        f"final score, mean [{pct} CI]",
        f"AUC (mean score over the budget) [{pct} CI]",
    ]
    if threshold is not None:
        header.append(f"{budget_unit} to {fmt_number(threshold)} (reached, median)")
    header += [
        f"Δ final vs {baseline} [{pct} CI]",
        "inside the noise?",
        f"Δ AUC [{pct} CI]",
        "wall-clock s",
    ]
    rows = []
    for s in summaries:
        seeds = f"{s.n_done}/{s.n_failed}" + (f" (+{s.n_partial} partial)" if s.n_partial else "")
        row = [s.algo, seeds, fmt_interval(s.final), fmt_interval(s.auc)]
        if threshold is not None:
            row.append(_threshold_cell(s.to_threshold))
        if s.diff_final is None:
            row += ["baseline", DASH, DASH]
        else:
            inside = s.diff_final.contains(0.0)
            row += [
                fmt_interval(s.diff_final, signed=True),
                DASH if inside is None else ("yes" if inside else "no"),
                fmt_interval(s.diff_auc, signed=True),
            ]
        row.append(fmt_number(s.seconds))
        rows.append(row)
    return header, rows


def _threshold_cell(t: ThresholdSummary | None) -> str:
    if t is None:
        return DASH
    return f"{t.reached}/{t.n}" + ("" if t.median is None else f", {fmt_budget(t.median)}")


def markdown_table(
    summaries: Sequence[AlgoSummary], *, budget_unit: str, baseline: str, threshold: float | None
) -> str:
    """The arena table of one task in Markdown, failed runs listed below it."""
    header, rows = table_cells(
        summaries, budget_unit=budget_unit, baseline=baseline, threshold=threshold
    )
    lines = [md_row(header), "|" + "---|" * len(header)]
    lines += [md_row(row) for row in rows]
    failures = _failure_lines(summaries)
    if failures:
        lines += ["", "Failed runs (not in the statistics):", ""]
        lines += [f"- {_md_escape(line)}" for line in failures]
    return "\n".join(lines) + "\n"


def md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_md_escape(c) for c in cells) + " |"


def _md_escape(text: str) -> str:
    # a "|" in a user string would split the table cell; newlines would end the row
    return text.replace("|", "\\|").replace("\n", " ")


def _failure_lines(summaries: Sequence[AlgoSummary]) -> list[str]:
    return [
        f"{s.algo} seed {seed}: {error or 'no error message'}"
        for s in summaries
        for seed, error in s.failures
    ]


def _confidence(summaries: Sequence[AlgoSummary]) -> float:
    return summaries[0].final.confidence if summaries else 0.95


# ---- the curves -------------------------------------------------------------------------
def plot_curves(
    records: Sequence[RunRecord],
    path: str | Path,
    *,
    title: str,
    budget: float,
    budget_unit: str,
    threshold: float | None = None,
    confidence: float = 0.95,
) -> Path:
    """PNG of the mean held-out score per algorithm with its t band (`mean_curve`), each
    seed as a faint line, against the budget. Only "done" runs are drawn, so the plot
    shows the same runs as the table; partial and failed runs are listed in the report."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    path = Path(path)
    grid = np.linspace(0.0, budget, 201)
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    algos = list(dict.fromkeys(r.algo for r in records))
    for i, algo in enumerate(algos):
        curves = [r.curve for r in records if r.algo == algo and r.status == "done" and r.curve]
        if not curves:
            continue
        color = f"C{i % 10}"
        for curve in curves:
            ax.plot(*zip(*curve, strict=True), color=color, alpha=0.25, linewidth=0.8)
        mean, low, high = mean_curve(curves, grid, confidence)
        ax.plot(grid, mean, color=color, linewidth=1.8, label=f"{algo} (n={len(curves)})")
        if len(curves) >= 2:
            ax.fill_between(grid, low, high, color=color, alpha=0.15, linewidth=0)
    if threshold is not None:
        ax.axhline(threshold, color="grey", linestyle=":", linewidth=1, label="threshold")
    ax.set_xlim(0, budget)
    ax.xaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
    ax.set_xlabel(budget_unit)
    ax.set_ylabel("held-out score")
    ax.set_title(f"{title}\nmean over seeds, band: {confidence:.0%} t interval", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    save_figure(fig, path)
    return path


def save_figure(fig, path: Path) -> None:
    """Write a matplotlib figure as PNG atomically (a reader never sees half a file) and
    close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


# ---- the report -------------------------------------------------------------------------
def how_to_read(confidence: float, baseline: str, seeds: int = 3) -> list[str]:
    """The note under the table, one paragraph per item; `seeds` is the most seeds any
    algorithm has (the t quantile quoted is for that many)."""
    pct = f"{confidence:.0%}"
    width = (
        f"With {seeds} seeds the {pct} t quantile is {_t_quantile(confidence, seeds - 1):.2f}, "
        f"so intervals are wide: that is the honest width of {seeds} seeds, not a bug."
        if seeds > 1
        else "With one seed no interval can be given."
    )
    return [
        f"Intervals are {pct} Student-t intervals over seeds. {width}",
        f"Δ final is paired by seed against {baseline}: seed s uses the same environment "
        "seeds / prompt order under every algorithm, so the luck both runs share cancels.",
        'Inside the noise? "yes" means the Δ interval contains 0: this budget and these '
        "seeds cannot tell the algorithm from the baseline (which is not the same as equal).",
        "AUC is the mean held-out score over the whole budget (the score held after the last "
        "evaluation): it rewards learning early, where the final score does not.",
        "Budget to threshold: how many seeds reached it at an evaluation after training "
        "began, and the median budget over those seeds.",
        f"{DASH} in an interval: fewer than 2 seeds, no interval can be given.",
    ]


def write_report(
    arena_dir: str | Path,
    records: Sequence[RunRecord],
    *,
    task: str,
    baseline: str,
    threshold: float | None,
    budget: float,
    confidence: float = 0.95,
    title: str | None = None,
    meta: dict[str, str] | None = None,
    score_range: tuple[float, float] | None = None,
    extra: Sequence[str] = (),
) -> dict[str, Path]:
    """Write results.md, curves.png and report.html into `arena_dir` (see module doc).

    `meta` holds the lines that say how the arena was run (command, config, versions),
    shown verbatim above the table; `score_range` cuts the intervals to the scores'
    possible values (`summarize`); `extra` holds Markdown paragraphs shown under the table
    (the power line, the rliable statistics). Returns {"markdown": ..., "html": ...,
    "png": ...}."""
    if not records:
        raise ValueError("write_report got no run records: nothing to report")
    units = sorted({r.budget_unit for r in records})
    if len(units) != 1:
        raise ValueError(f"runs of one arena must share one budget unit, got {units}")
    unit = units[0]
    title = title or f"Arena: {task}"
    meta = dict(meta or {})
    summaries = summarize(records, baseline, threshold, budget, confidence, score_range)
    out = Path(arena_dir)
    out.mkdir(parents=True, exist_ok=True)

    png = plot_curves(
        records,
        out / "curves.png",
        title=title,
        budget=budget,
        budget_unit=unit,
        threshold=threshold,
        confidence=confidence,
    )
    setup = _setup_line(records, task, budget, unit, baseline, threshold)
    seeds = max((s.n_done for s in summaries), default=0)
    notes = how_to_read(confidence, baseline, seeds)

    md = [f"# {title}", ""]
    md += [f"- {key}: {value}" for key, value in meta.items()]
    md += ["", setup, ""]
    md += [markdown_table(summaries, budget_unit=unit, baseline=baseline, threshold=threshold)]
    md += [*[f"{paragraph}\n" for paragraph in extra]]
    md += ["How to read this table:", ""] + [f"- {n}" for n in notes]
    md += ["", "![curves](curves.png)", ""]
    write_atomic(out / "results.md", "\n".join(md))

    page = _html_page(title, meta, setup, summaries, notes, png, unit, baseline, threshold, extra)
    write_atomic(out / "report.html", page)
    return {"markdown": out / "results.md", "html": out / "report.html", "png": png}


def _setup_line(
    records: Sequence[RunRecord],
    task: str,
    budget: float,
    unit: str,
    baseline: str,
    threshold: float | None,
) -> str:
    seeds = ", ".join(str(s) for s in sorted({r.seed for r in records}))
    line = f"Task {task}; budget {fmt_budget(budget)} {unit} per run; seeds {seeds}; "
    line += f"baseline {baseline}"
    return line + ("." if threshold is None else f"; threshold {fmt_number(threshold)}.")


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.35em 0.7em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
td.noise-no { background: #e8f5e9; } td.noise-yes { color: #777; }
ul.meta { font-family: ui-monospace, monospace; font-size: 0.88em; }
img { max-width: 100%; } .failed { color: #b00020; }
"""


def _html_page(
    title: str,
    meta: dict[str, str],
    setup: str,
    summaries: Sequence[AlgoSummary],
    notes: list[str],
    png: Path,
    unit: str,
    baseline: str,
    threshold: float | None,
    extra: Sequence[str] = (),
) -> str:
    e = html.escape
    header, rows = table_cells(summaries, budget_unit=unit, baseline=baseline, threshold=threshold)
    noise = header.index("inside the noise?")
    body_rows = []
    for row in rows:
        cells = [
            f'<td class="noise-{e(c)}">{e(c)}</td>' if i == noise else f"<td>{e(c)}</td>"
            for i, c in enumerate(row)
        ]
        body_rows.append("<tr>" + "".join(cells) + "</tr>")
    image = base64.b64encode(png.read_bytes()).decode("ascii")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        _html_list(f"{k}: {v}" for k, v in meta.items()).replace("<ul>", '<ul class="meta">'),
        f"<p>{e(setup)}</p>",
        "<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead>",
        "<tbody>" + "\n".join(body_rows) + "</tbody></table>",
    ]
    failures = _failure_lines(summaries)
    if failures:
        parts.append("<p>Failed runs (not in the statistics):</p>")
        parts.append(_html_list(failures).replace("<ul>", '<ul class="failed">'))
    parts += [_html_block(paragraph) for paragraph in extra]
    parts.append("<h2>How to read this table</h2>")
    parts.append(_html_list(notes))
    parts.append(f'<img alt="curves" src="data:image/png;base64,{image}">')
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _html_block(markdown: str) -> str:
    """A paragraph or a small Markdown table of `extra` as escaped HTML."""
    e = html.escape
    lines = [line for line in markdown.splitlines() if line.strip()]
    if len(lines) >= 2 and all(line.startswith("|") for line in lines[:2]):
        rows = [_md_cells(line) for line in lines]
        head, body = rows[0], [r for r in rows[2:]]
        html_rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in body)
        head_html = "".join(f"<th>{e(c)}</th>" for c in head)
        return f"<table><thead><tr>{head_html}</tr></thead><tbody>{html_rows}</tbody></table>"
    return f"<p>{e(' '.join(lines))}</p>"


def _md_cells(line: str) -> list[str]:
    """The cells of one Markdown table row written by `md_row` (escaped pipes kept)."""
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def _html_list(items: Iterable[str]) -> str:
    """An escaped <ul>; empty string for no items."""
    lis = "".join(f"<li>{html.escape(item)}</li>" for item in items)
    return f"<ul>{lis}</ul>" if lis else ""
