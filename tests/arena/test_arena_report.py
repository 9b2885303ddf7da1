"""The arena's report files (policylab.arena.report): Markdown, PNG and self-contained HTML."""

from __future__ import annotations

import base64
import re

import pytest

from policylab.arena.report import (
    fmt_interval,
    fmt_number,
    markdown_table,
    plot_curves,
    write_report,
)
from policylab.arena.stats import Interval, RunRecord, summarize

EVIL = "<script>alert(1)</script>"
UNIT = "env steps"


def ramp(final: float) -> list[tuple[float, float]]:
    return [(0.0, 0.0), (25_000.0, final / 2), (50_000.0, final)]


def records() -> list[RunRecord]:
    # same numbers as the stats hand case, at budget 50,000: ppo [1, 2, 3], grpo [3, 4, 6]
    finals = {"ppo": [1.0, 2.0, 3.0], "grpo": [3.0, 4.0, 6.0], EVIL: [1.0, 2.0, 4.0]}
    out = [
        RunRecord(algo, seed, "done", ramp(f), 120.0, UNIT)
        for algo, fs in finals.items()
        for seed, f in enumerate(fs)
    ]
    out.append(RunRecord("grpo", 3, "failed", [], 3.0, UNIT, "CUDA out of memory"))
    return out


def test_number_formats():
    assert fmt_number(0.51234) == "0.512"
    assert fmt_number(2.0) == "2"
    assert fmt_number(-163.74) == "-164"
    assert fmt_number(120.0) == "120"
    assert fmt_number(28160.4) == "28,160"
    assert fmt_number(999.7) == "1,000"  # not 1e+03
    assert fmt_number(0.5, signed=True) == "+0.5"
    assert fmt_number(float("nan")) == "—"
    assert fmt_number(3.7e-17, signed=True) == "+0"  # residue of an exactly-zero difference
    assert fmt_number(2.5e-4) == "2.50e-04"  # small but real
    assert fmt_interval(Interval(2.0, -0.4841, 4.4841, 3)) == "2 [-0.484, 4.48]"
    assert fmt_interval(Interval(5.0, float("nan"), float("nan"), 1)) == "5 [—]"


def test_markdown_table():
    rows = summarize(records(), baseline="ppo", threshold=2.0, budget=50_000)
    text = markdown_table(rows, budget_unit=UNIT, baseline="ppo", threshold=2.0)
    lines = text.splitlines()
    assert lines[0] == (
        "| algorithm | seeds done/failed | final score, mean [95% CI] "
        "| AUC (mean score over the budget) [95% CI] | env steps to 2 (reached, median) "
        "| Δ final vs ppo [95% CI] | inside the noise? | Δ AUC [95% CI] | wall-clock s |"
    )
    assert lines[1] == "|" + "---|" * 9
    # ppo: 2 ± 2.484; AUC 1 ± 1.242; seeds 1, 2 reach 2 at 50,000
    assert lines[2] == (
        "| ppo | 3/0 | 2 [-0.484, 4.48] | 1 [-0.242, 2.24] | 2/3, 50,000 | baseline | — | — | 120 |"
    )
    # grpo: Δ = 7/3 ± 1.434 → [0.899, 3.77], outside the noise; its failed seed counted
    assert lines[3].startswith("| grpo | 3/1 | 4.33 [")
    assert "| +2.33 [+0.899, +3.77] | no |" in lines[3]
    assert "| 3/3, 25,000 |" in lines[3]
    # a2c-like row: Δ = 1/3 ± 1.434 contains 0
    assert "| +0.333 [-1.1, +1.77] | yes |" in lines[4]  # trailing zeros dropped
    assert "- grpo seed 3: CUDA out of memory" in lines


def test_markdown_table_without_threshold_has_no_threshold_column():
    rows = summarize(records(), baseline="ppo", threshold=None, budget=50_000)
    text = markdown_table(rows, budget_unit=UNIT, baseline="ppo", threshold=None)
    assert "reached" not in text
    assert text.splitlines()[1] == "|" + "---|" * 8


def test_markdown_escapes_table_breakers():
    recs = [RunRecord("a|b", 0, "done", ramp(1.0), 1.0, UNIT)]
    rows = summarize(recs, baseline="a|b", threshold=None, budget=50_000)
    assert "| a\\|b |" in markdown_table(rows, budget_unit=UNIT, baseline="a|b", threshold=None)


def test_write_report(tmp_path):
    meta = {"command": "policylab arena --task cartpole --algos ppo,grpo --seeds 0,1,2"}
    paths = write_report(
        tmp_path / "arena",
        records(),
        task="cartpole",
        baseline="ppo",
        threshold=2.0,
        budget=50_000,
        meta=meta,
    )
    assert set(paths) == {"markdown", "html", "png"}
    assert all(p.is_file() and p.parent == tmp_path / "arena" for p in paths.values())
    png = paths["png"].read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")

    md = paths["markdown"].read_text()
    assert md.startswith("# Arena: cartpole\n")
    assert f"- command: {meta['command']}" in md
    assert "Task cartpole; budget 50,000 env steps per run; seeds 0, 1, 2, 3; " in md
    assert "| algorithm | seeds done/failed |" in md
    assert "- grpo seed 3: CUDA out of memory" in md
    assert "![curves](curves.png)" in md

    page = paths["html"].read_text()
    assert "http://" not in page and "https://" not in page
    sources = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", page)
    assert len(sources) == 1 and sources[0].startswith("data:image/png;base64,")
    assert base64.b64decode(sources[0].split(",", 1)[1]) == png  # the PNG itself, embedded
    assert "<link" not in page and "@import" not in page
    assert "<td>ppo</td>" in page and "<td>grpo</td>" in page
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "CUDA out of memory" in page
    assert page.count("<tr>") == 4  # header + 3 algorithms


def test_write_report_rejects_mixed_units(tmp_path):
    recs = records() + [RunRecord("ppo", 9, "done", ramp(1.0), 1.0, "generated tokens")]
    with pytest.raises(ValueError, match="budget unit"):
        write_report(tmp_path, recs, task="t", baseline="ppo", threshold=None, budget=50_000)


def test_plot_curves_with_one_seed_and_failures(tmp_path):
    recs = [
        RunRecord("ppo", 0, "done", ramp(1.0), 1.0, UNIT),
        RunRecord("sac", 0, "failed", [], 1.0, UNIT, "boom"),
    ]
    path = plot_curves(recs, tmp_path / "c.png", title="t", budget=50_000, budget_unit=UNIT)
    assert path.read_bytes().startswith(b"\x89PNG")
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind
