"""The power line of arena tables written before the arena printed one (issue 23).

For each Markdown table in a document with a "Δ final vs <baseline> [95% CI]" column and a
"seeds done/failed" column, the SD of every comparison's paired differences is recovered
from its paired t interval (half-width = t_{0.975, n−1} · s / √n, so s = half · √n / t),
the noisiest comparison plans (`power.pilot_sd`), and the minimal detectable effect at 80 %
power is `power.minimal_detectable_effect(s, n)`.

    python benchmarks/power_of_old_tables.py docs/arena.md          # print the lines
    python benchmarks/power_of_old_tables.py docs/arena.md --write   # add them under the tables
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from scipy import stats as sps

from policylab.arena.power import minimal_detectable_effect

MARK = "Power (from the Δ intervals above"
NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*(?:e[-+]?\d+)?)"


def table_power(rows: list[list[str]], header: list[str]) -> str | None:
    delta = next((i for i, h in enumerate(header) if h.startswith("Δ final vs")), None)
    seeds = next((i for i, h in enumerate(header) if h.startswith("seeds done")), None)
    if delta is None or seeds is None:
        return None
    sds, ns = [], []
    for row in rows:
        m = re.match(rf"\s*({NUMBER}) \[({NUMBER}), ({NUMBER})\]", row[delta])
        n = int(row[seeds].split("/")[0])
        if not m or n < 2:
            continue
        low, high = (float(g.replace(",", "")) for g in m.groups()[1:])
        t = float(sps.t.ppf(0.975, n - 1))
        sds.append((high - low) / 2 * math.sqrt(n) / t)
        ns.append(n)
    if not sds or max(sds) == 0:
        return None
    n, sd = min(ns), max(sds)
    mde = minimal_detectable_effect(sd, n)
    return (
        f"{MARK}, SD of paired differences s = half-width · √n / t₀.₉₇₅,ₙ₋₁, the noisiest "
        f"comparison; `python benchmarks/power_of_old_tables.py docs/arena.md`): with {n} seeds "
        f"this arena could detect paired differences in final score ≥ {mde:.3g} at 80 % "
        f"power (two-sided α = 0.05, s = {sd:.3g})."
    )


def annotate(text: str) -> tuple[str, list[str]]:
    lines = text.splitlines()
    out, found, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            header = [c.strip() for c in line.strip("|").split(" | ")]
            rows = [[c.strip() for c in r.strip("|").split(" | ")] for r in lines[i + 2 : j]]
            out += lines[i:j]
            power = table_power(rows, header)
            already = j + 1 < len(lines) and lines[j + 1].startswith(MARK)
            if power:
                found.append(power)
                if not already:
                    out += ["", power]
            i = j
            continue
        out.append(line)
        i += 1
    return "\n".join(out) + "\n", found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("doc")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    text, found = annotate(Path(args.doc).read_text())
    for line in found:
        print(line)
    if args.write:
        Path(args.doc).write_text(text)


if __name__ == "__main__":
    main()
