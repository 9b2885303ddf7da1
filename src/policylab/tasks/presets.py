"""Task presets: named harder variants of the embedded tasks, one word for an arena.

A preset is a base task with some difficulty knobs set. `tasks.get("countdown25")` is
`tasks.get("countdown", max_number=25)`: the same class, the same prompts for the same seed
(the train/test split hashes the base task's name), the same verifier. Knobs given with a
preset override the preset's own (`tasks.get("countdown25", max_number=20)` is the default
countdown again).

Each preset was chosen by measurement, not by guess: the shipped tiny model (SFT on the
default knobs only) must score well above 0 greedy on its held-out prompts, so sampled
groups have mixed outcomes and GRPO has a signal, and well below 1, so methods have room
to differ. The numbers and the commands that reproduce them are in docs/tasks.md
(benchmarks/task_headroom.py). Settings that looked natural but score 0.0 for the tiny
model — three arithmetic operands, four countdown numbers — are not presets: a group that
never succeeds gives GRPO no gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Preset:
    """A base task, the knobs it sets, and one line on what makes it harder."""

    task: str
    knobs: dict[str, Any] = field(default_factory=dict)
    description: str = ""


PRESETS: dict[str, Preset] = {
    "arithmetic_mixed": Preset(
        "arithmetic",
        {"ops": "+-*"},
        "two 2-digit operands joined by + - or * (the tiny model was trained on + only)",
    ),
    "countdown25": Preset(
        "countdown",
        {"max_number": 25},
        "three numbers up to 25 instead of 20",
    ),
    "sudoku4_hard": Preset(
        "sudoku4",
        {"blanks": 12},
        "12 blanks instead of 11 (4 givens, still a unique solution)",
    ),
}


def presets() -> dict[str, str]:
    """Preset name → its one-line description (base task and knobs first), sorted."""
    return {
        name: f"{p.task} {_knobs_text(p.knobs)}: {p.description}"
        for name, p in sorted(PRESETS.items())
    }


def resolve(name: str, knobs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(base task, knobs) of preset `name`, the given `knobs` overriding the preset's."""
    preset = PRESETS[name]
    return preset.task, {**preset.knobs, **knobs}


def _knobs_text(knobs: dict[str, Any]) -> str:
    return " ".join(f"{k}={v!r}" for k, v in knobs.items())
