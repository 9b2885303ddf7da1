"""GUI rewards: GUI-R1's rule-based action reward and SE-GUI's dense point reward for
grounding, over the compact action language of `gui_text` (papers/seed_agents.md §A6).

Answers (inside `<answer>…</answer>`):

| task mode | instruction     | answer     | action |
|-----------|-----------------|------------|--------|
| ground    | `c:K`           | `x,y`      | click  |
| action    | `tap K`         | `c x,y`    | click  |
| action    | `type 42 in K`  | `t x,y 42` | type   |
| action    | `scroll up`     | `s up`     | scroll |
| action    | `back`          | `b`        | back   |

A box is `[x0, y0, x1, y1]` in pixels, both ends included (the pixels an element covers);
points are integers on a `width × height` screen.

- **gui_r1** (GUI-R1, arXiv 2504.10458; code `ritzz-ai/GUI-R1`
  `verl/utils/reward_score/r1gui.py`): R = 0.8·acc + 0.2·format. format = 1 iff the
  answer parses in the language above with its point on the screen (the code's
  `<think>…</think><answer>[{action, point, input_text}]</answer>` schema, in our DSL).
  acc = 0 unless the action type equals the gold one; click: 1 iff the point lies
  **strictly** inside the box; type and scroll: 1 iff token-F1(pred, gold) ≥ 0.5, where a
  pair of single tokens counts 1 if one is a substring of the other; back: 1.
- **se_gui_point** (SE-GUI, arXiv 2505.12370; code `YXB-NKU/SE-GUI`
  `vlm_modules/qwen_module.py:point_reward`): with coordinates divided by the screen's
  width and height, d the distance from the point to the box centre and d_max the largest
  distance from the box centre to a screen corner,
  R = 1[x0 ≤ x ≤ x1 ∧ y0 ≤ y ≤ y1] + (1 − (d/d_max)²)·1[d ≤ 1] (edges **included**).
- **gui_hit**: 1 iff the point lies in the box (edges included), the binary baseline.

Rows without a box (scroll, back) score in se_gui_point and gui_hit 1 iff the action
type and text equal the gold ones [ours]. The edge rule, where the two codes disagree, is
an option: `edge` = "strict" or "inclusive" overrides a function's own rule (the column
`edge`, set by gui_text's knob; "paper" keeps each function's own).

Faults: a completion without an answer block, an answer that does not parse, or a point
off the screen scores 0 in every function (the dense reward included); each is counted
by reason in `FAULTS` (`faults()`), and the first of each reason is logged.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from policylab.rewards.counts import FAULTS as reward_faults
from policylab.tasks.base import _completion_text, extract_answer

log = logging.getLogger(__name__)

WIDTH, HEIGHT = 100, 50  # gui_text's screen in pixels: 10 × 5 cells of 10 × 10
EDGES = ("paper", "strict", "inclusive")
DIRECTIONS = ("up", "down", "left", "right")
FORMAT_WEIGHT, ACC_WEIGHT = 0.2, 0.8  # [code r1gui.py r1gui_compute_score] 0.8·acc + 0.2·format

_POINT = r"(\d{1,4}),(\d{1,4})"
_GROUND = re.compile(_POINT)
_ACTIONS = {
    "click": re.compile(rf"c {_POINT}"),
    "type": re.compile(rf"t {_POINT} (\S.*)"),
    "scroll": re.compile(r"s (\S+)"),
    "back": re.compile(r"b"),
}

FAULTS: Counter[str] = Counter()  # reason → samples scored 0 for it, over the process


@dataclass(frozen=True)
class Parsed:
    """One answer read in the action language: the action, its point and its text."""

    action: str
    point: tuple[int, int] | None = None
    text: str = ""


def faults() -> dict[str, int]:
    """Samples scored 0 so far, keyed "<function>/<reason>" (reasons: no_answer,
    unparseable, off_screen)."""
    return dict(FAULTS)


def parse(completion: str, mode: str, width: int = WIDTH, height: int = HEIGHT):
    """`(Parsed, "")` for the completion's answer in the action language of `mode`
    ("ground" or "action"), or `(None, reason)` when it has no answer block
    ("no_answer"), does not parse ("unparseable") or its point lies off the
    `width × height` screen ("off_screen")."""
    answer = extract_answer(completion)
    if answer is None:
        return None, "no_answer"
    parsed = read_answer(answer, mode)
    if parsed is None:
        return None, "unparseable"
    if parsed.point is not None:
        x, y = parsed.point
        if not (0 <= x < width and 0 <= y < height):
            return None, "off_screen"
    return parsed, ""


def parse_all(name: str, completions: Sequence, mode: Sequence[str]) -> list[Parsed | None]:
    """Every completion parsed; each fault counted in FAULTS under `name` and the first
    of each kind logged with its answer."""
    out = []
    for completion, m in zip(completions, mode, strict=True):
        text = _completion_text(completion)
        parsed, reason = parse(text, m)
        if parsed is None:
            key = f"{name}/{reason}"
            if not FAULTS[key]:
                log.warning(
                    "%s: %s answer in %r scored 0 (counted in FAULTS[%r])",
                    name,
                    reason,
                    text[-40:],
                    key,
                )
            FAULTS[key] += 1
            reward_faults.record(key)  # this step's count, logged as reward/fault/<key>
        out.append(parsed)
    return out


def read_answer(answer: str, mode: str) -> Parsed | None:
    """An answer text (what is inside the answer block) read in the action language of
    `mode`, or None when it does not parse (no bound check on the point)."""
    if mode == "ground":
        m = _GROUND.fullmatch(answer)
        return Parsed("click", (int(m[1]), int(m[2]))) if m else None
    for action, pattern in _ACTIONS.items():
        m = pattern.fullmatch(answer)
        if m is None:
            continue
        if action in ("click", "type"):
            point = (int(m[1]), int(m[2]))
            return Parsed(action, point, m[3] if action == "type" else "")
        if action == "scroll" and m[1] not in DIRECTIONS:
            return None  # [code r1gui.py] scroll text must be a direction
        return Parsed(action, None, m[1] if action == "scroll" else "")
    return None


def in_box(x: float, y: float, box: Sequence[float], inclusive: bool) -> bool:
    """Whether (x, y) lies in `box` = [x0, y0, x1, y1]: on or inside its edges when
    `inclusive` (SE-GUI), strictly inside otherwise (GUI-R1)."""
    x0, y0, x1, y1 = box
    if inclusive:
        return x0 <= x <= x1 and y0 <= y <= y1
    return x0 < x < x1 and y0 < y < y1


def point_reward(
    x: float, y: float, box: Sequence[float], width: float, height: float, inclusive: bool = True
) -> float:
    """SE-GUI's dense point reward: R = 1[in box] + (1 − (d/d_max)²)·1[d ≤ 1], with
    coordinates divided by the screen's `width` and `height`, d the distance from the
    point to the box centre, d_max the largest distance from the box centre to a screen
    corner [code SE-GUI qwen_module.py:point_reward].

    >>> round(point_reward(12, 22, [10, 20, 30, 40], 100, 80), 7)
    1.9840873
    """
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2 / width, (y0 + y1) / 2 / height
    d = math.hypot(x / width - cx, y / height - cy)
    d_max = max(math.hypot(px - cx, py - cy) for px in (0.0, 1.0) for py in (0.0, 1.0))
    dense = 1.0 - (d / d_max) ** 2 if d <= 1.0 else 0.0
    return float(in_box(x, y, box, inclusive)) + dense


def token_f1(pred: str, gold: str) -> float:
    """Token-level F1 of two whitespace-split texts; a pair of single tokens counts 1
    when one is a substring of the other [code r1gui.py]. F1("hello world", "hello there
    world") = 0.8."""
    p, g = pred.lower().split(), gold.lower().split()
    if len(p) == 1 and len(g) == 1:
        return 1.0 if p[0] in g[0] or g[0] in p[0] else 0.0
    common = sum((Counter(p) & Counter(g)).values())
    if not common:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def gui_r1_acc(
    parsed: Parsed, action: str, box: Sequence[float], text: str, inclusive: bool = False
) -> float:
    """GUI-R1's accuracy of one parsed answer against the gold action, box and text."""
    if parsed.action != action:
        return 0.0
    if action == "click":
        return float(in_box(*parsed.point, box, inclusive))
    if action in ("type", "scroll"):
        return float(token_f1(parsed.text, text) >= 0.5)
    return 1.0


def _inclusive(edge: str | None, paper_inclusive: bool) -> bool:
    if edge in (None, "paper"):
        return paper_inclusive
    if edge not in EDGES:
        raise ValueError(f"edge={edge!r} is invalid; accepted: {', '.join(EDGES)}")
    return edge == "inclusive"


def _edges(edge, n: int) -> list:
    return list(edge) if edge is not None else [None] * n


def _gold_match(parsed: Parsed, action: str, text: str) -> float:
    """Rows without a box (scroll, back): the action type and text are right."""
    return float(parsed.action == action and parsed.text == text)


def _acc(parsed_rows, action, box, text, edge) -> list[float]:
    rows = zip(parsed_rows, action, box, text, _edges(edge, len(parsed_rows)), strict=True)
    return [
        0.0 if p is None else gui_r1_acc(p, a, b, t, _inclusive(e, False)) for p, a, b, t, e in rows
    ]


def gui_format(prompts, completions, mode, **columns) -> list[float]:
    """GUI-R1's format part: 1 iff the answer parses in the action language of its mode,
    its point on the screen."""
    return [float(p is not None) for p in parse_all("gui/format", completions, mode)]


def gui_acc(prompts, completions, mode, action, box, text, edge=None, **columns) -> list[float]:
    """GUI-R1's accuracy part (a click strictly inside the box by default)."""
    return _acc(parse_all("gui/acc", completions, mode), action, box, text, edge)


def gui_r1(prompts, completions, mode, action, box, text, edge=None, **columns) -> list[float]:
    """GUI-R1's reward R = 0.8·acc + 0.2·format [code r1gui.py r1gui_compute_score]."""
    parsed = parse_all("gui_r1", completions, mode)
    acc = _acc(parsed, action, box, text, edge)
    return [
        ACC_WEIGHT * a + FORMAT_WEIGHT * (p is not None) for a, p in zip(acc, parsed, strict=True)
    ]


def _pointwise(name, completions, mode, action, box, text, edge, score) -> list[float]:
    """A point reward over rows: 0 for a fault or a wrong action type; rows without a box
    by `_gold_match`; else `score(x, y, box, inclusive)` with the edge rule of the row."""
    parsed_rows = parse_all(name, completions, mode)
    out = []
    for p, a, b, t, e in zip(
        parsed_rows, action, box, text, _edges(edge, len(parsed_rows)), strict=True
    ):
        if p is None or p.action != a:
            out.append(0.0)
        elif not b:
            out.append(_gold_match(p, a, t))
        else:
            out.append(score(*p.point, b, _inclusive(e, True)))
    return out


def se_gui_point(
    prompts, completions, mode, action, box, text, edge=None, **columns
) -> list[float]:
    """SE-GUI's dense point reward (edges included by default) on gui_text's screen: the
    point of a click (or of a type action) against the target box."""

    def score(x, y, b, inclusive):
        return point_reward(x, y, b, WIDTH, HEIGHT, inclusive)

    return _pointwise("se_gui_point", completions, mode, action, box, text, edge, score)


def gui_hit(prompts, completions, mode, action, box, text, edge=None, **columns) -> list[float]:
    """1 iff the answer's point lies in the target box (edges included by default)."""

    def score(x, y, b, inclusive):
        return float(in_box(x, y, b, inclusive))

    return _pointwise("gui_hit", completions, mode, action, box, text, edge, score)


# name → function, registered by rewards/builtin.py
REWARDS = {
    "gui_r1": gui_r1,
    "gui/format": gui_format,
    "gui/acc": gui_acc,
    "se_gui_point": se_gui_point,
    "gui_hit": gui_hit,
}
