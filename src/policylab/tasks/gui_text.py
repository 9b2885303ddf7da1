"""gui_text: a text GUI — screens as grids of letter-filled elements — for GUI grounding
and GUI actions, the testbed of GUI-R1 and SE-GUI (papers/seed_agents.md §A6).

A screen is 10 × 5 cells, each cell 10 × 10 pixels (x in 0..99, y in 0..49), holding
`min_elements`..`max_elements` elements: rectangles 1..`max_width` cells wide and
1..`max_height` high, each filled with its own capital letter, on "." (no overlaps). The
prompt is the 5 rows joined by "/", ";", the instruction and "=", e.g.

    ..AA....../..AA....../......B.../.CCC....../..........;c:B=     →  64,24

An element's box is `[x0, y0, x1, y1]`, the pixels it covers (both ends included): B
above covers cell column 6, row 2, so its box is [60, 20, 69, 29]. The canonical point is
the box's centre rounded down.

Modes (knob `mode`):
- "ground": `c:K` → `x,y`, a point on element K.
- "action" (GUI-R1's unified action space, in a compact language): `tap K` → `c x,y`;
  `type 42 in K` → `t x,y 42`; `scroll up` → `s up` (up, down, left, right); `back` →
  `b`; drawn with probabilities 0.4, 0.3, 0.2, 0.1 [ours].

Columns: screen, mode, action (click, type, scroll, back), box (the target's box; [] for
scroll and back), text (typed text or direction; "" otherwise), cells (the target's area
in cells; 0 without a target), edge (the knob, read by the rewards). The rewards
`gui_r1`, `gui/format`, `gui/acc`, `se_gui_point` and `gui_hit` read them (gui_rules.py).

Verifier (exact): 1.0 iff the answer parses, its action type equals the gold one, its
point (click, type) lies on the target's pixels (edges included; knob `edge` = "strict"
excludes them) and its text (type, scroll) equals the gold text exactly; else 0.0.

Held-out layouts: the split is the base hash of the prompt, and an instruction is drawn
only among those whose prompt falls in the same split as the bare screen, so every
screen's prompts lie in one split: test screens are never seen in training [ours].

Knobs: mode ("ground"), min_elements (3; 1..8), max_elements (5; 1..8), max_width (3;
1..5), max_height (2; 1..3), edge ("paper": each reward's own rule; "strict" or
"inclusive" for all, the verifier included), demo_noise (0.5; 0..1).
Augmentation ladder: max_elements, then max_width [ours].

Demonstrator (`demonstrations`, what `policylab sft` trains on): the canonical answer,
except that with probability `demo_noise` a point is replaced by a uniformly random
on-screen point (a miss, mostly) [ours: leaves RL its headroom].
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from policylab.tasks import gui_rules
from policylab.tasks.base import Task, check_int, check_number, demonstration, split_of

COLS, ROWS, CELL = 10, 5, 10
KINDS = (("click", 0.4), ("type", 0.3), ("scroll", 0.2), ("back", 0.1))  # [ours]
MODES = ("ground", "action")


@dataclass(frozen=True)
class GuiTextKnobs:
    """gui_text: the instruction language, the number and size of elements, the edge rule
    and the demonstrator's noise."""

    mode: str = "ground"
    min_elements: int = 3
    max_elements: int = 5
    max_width: int = 3
    max_height: int = 2
    edge: str = "paper"
    demo_noise: float = 0.5

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(
                f"gui_text knob mode={self.mode!r} is invalid; accepted: {', '.join(MODES)}"
            )
        if self.edge not in gui_rules.EDGES:
            raise ValueError(
                f"gui_text knob edge={self.edge!r} is invalid; accepted: "
                f"{', '.join(gui_rules.EDGES)}"
            )
        check_int("gui_text", "min_elements", self.min_elements, 1, 8)
        check_int("gui_text", "max_elements", self.max_elements, self.min_elements, 8)
        check_int("gui_text", "max_width", self.max_width, 1, 5)
        check_int("gui_text", "max_height", self.max_height, 1, 3)
        check_number("gui_text", "demo_noise", self.demo_noise, 0.0, 1.0)


def box_of(col: int, row: int, width: int, height: int) -> list[int]:
    """The pixel box [x0, y0, x1, y1] (both ends included) of an element whose top-left
    cell is (col, row), `width` × `height` cells."""
    return [col * CELL, row * CELL, (col + width) * CELL - 1, (row + height) * CELL - 1]


def centre(box: list[int]) -> tuple[int, int]:
    """The box's centre pixel, rounded down."""
    return (box[0] + box[2]) // 2, (box[1] + box[3]) // 2


def draw_screen(rng: random.Random, knobs: GuiTextKnobs) -> tuple[str, dict] | None:
    """A random screen (rows joined by "/") and its elements: letter → (box, cells); None
    when fewer than `min_elements` could be placed without overlap."""
    cells = [["."] * COLS for _ in range(ROWS)]
    n = rng.randint(knobs.min_elements, knobs.max_elements)
    letters = rng.sample(string.ascii_uppercase, n)
    elements = {}
    for letter in letters:
        for _ in range(20):
            w, h = rng.randint(1, knobs.max_width), rng.randint(1, knobs.max_height)
            c, r = rng.randrange(COLS - w + 1), rng.randrange(ROWS - h + 1)
            if all(cells[r + i][c + j] == "." for i in range(h) for j in range(w)):
                for i in range(h):
                    for j in range(w):
                        cells[r + i][c + j] = letter
                elements[letter] = (box_of(c, r, w, h), w * h)
                break
    if len(elements) < knobs.min_elements:
        return None
    return "/".join("".join(row) for row in cells), elements


def _instruction(rng: random.Random, mode: str, elements: dict) -> dict:
    """One instruction and its gold action over a screen's elements."""
    letter = rng.choice(sorted(elements))
    box, area = elements[letter]
    if mode == "ground":
        return {"say": f"c:{letter}", "action": "click", "box": box, "text": "", "cells": area}
    kind = rng.choices([k for k, _ in KINDS], weights=[w for _, w in KINDS])[0]
    if kind == "click":
        return {"say": f"tap {letter}", "action": kind, "box": box, "text": "", "cells": area}
    if kind == "type":
        text = str(rng.randint(10, 99))
        return {
            "say": f"type {text} in {letter}",
            "action": kind,
            "box": box,
            "text": text,
            "cells": area,
        }
    if kind == "scroll":
        way = rng.choice(gui_rules.DIRECTIONS)
        return {"say": f"scroll {way}", "action": kind, "box": [], "text": way, "cells": 0}
    return {"say": "back", "action": kind, "box": [], "text": "", "cells": 0}


def answer_for(mode: str, action: str, point: tuple[int, int] | None, text: str) -> str:
    """The answer text of an action in the language of `mode`."""
    if mode == "ground":
        return f"{point[0]},{point[1]}"
    if action == "click":
        return f"c {point[0]},{point[1]}"
    if action == "type":
        return f"t {point[0]},{point[1]} {text}"
    return f"s {text}" if action == "scroll" else "b"


class GuiText(Task):
    """Text GUI screens: "..AA....../…;c:A=" -> "24,4" (grounding) or "…;tap A=" ->
    "c 24,4" (actions)."""

    name = "gui_text"
    knobs_class = GuiTextKnobs
    columns = ("mode", "action", "box", "text", "edge")
    chars = "./;:=, " + string.ascii_uppercase + string.ascii_lowercase + string.digits
    ladder = (("max_elements", 1, 8), ("max_width", 1, 5))

    def _sample(self, rng: random.Random) -> dict | None:
        drawn = draw_screen(rng, self.knobs)
        if drawn is None:
            return None
        screen, elements = drawn
        want = split_of(self.name, screen)
        for _ in range(8):  # an instruction whose prompt lies in the screen's split
            gold = _instruction(rng, self.knobs.mode, elements)
            prompt = f"{screen};{gold.pop('say')}="
            if split_of(self.name, prompt) == want:
                return {
                    "prompt": prompt,
                    "screen": screen,
                    "mode": self.knobs.mode,
                    **gold,
                    "edge": self.knobs.edge,
                }
        return None

    def _answer(self, example: dict) -> str:
        point = centre(example["box"]) if example["box"] else None
        return answer_for(example["mode"], example["action"], point, example["text"])

    def _score(self, text: str, example: dict) -> float:
        parsed = gui_rules.read_answer(text, example["mode"])
        if parsed is None or parsed.action != example["action"]:
            return 0.0
        if parsed.text != example["text"]:
            return 0.0
        if not example["box"]:
            return 1.0
        inclusive = example.get("edge", "paper") != "strict"
        return float(gui_rules.in_box(*parsed.point, example["box"], inclusive))

    def demonstrations(self, n: int, seed: int) -> list[dict]:
        """`n` training rows whose completion is the noisy demonstrator's: with probability
        `demo_noise` a point is replaced by a uniformly random on-screen point."""
        rng = random.Random(seed + 1)  # [ours] noise draws apart from the instance draws
        rows = self.examples("train", n, seed=seed)
        for row in rows:
            if row["box"] and rng.random() < self.knobs.demo_noise:
                point = (rng.randrange(COLS * CELL), rng.randrange(ROWS * CELL))
                row["completion"] = demonstration(
                    answer_for(row["mode"], row["action"], point, row["text"])
                )
        return rows
