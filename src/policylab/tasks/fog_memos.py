"""Warm-start rows for Retroformer on plan_path_fog (papers/seed_agents.md §A4): the
frozen actor learns to *use* a memo of hidden walls, the retrospective model learns the
memo's *format* only.

- `actor_memo_rows`: one attempt of the scripted demonstrator per example whose context
  starts with a memo, exactly as a second attempt's context does after a reflection:
  "?#0,2;..../.#.s/..g./....:E" (reflect cue "?", the memo "#r,c;", then the restarted
  grid). With probability `MEMO_PROB` the memo names one hidden wall of the instance
  (uniformly), else there is none and the context is a first attempt's. The
  demonstrator avoids every wall named in its context, so the rows teach "route around
  the wall the memo names". Rows: one per move.
- `retro_memo_rows`: the demonstrator's *failed* first attempts, each followed by the
  reflect cue, with a random memo "#r,c;" (a uniformly drawn cell of the grid, wall or
  not) as the completion. The model learns to write one well-formed memo, not which
  one helps: that is left to policy gradient (Retroformer's M_r).

Example i draws from `random.Random(seed * 1_000_003 + i)` (as `play_demonstrations`).
"""

from __future__ import annotations

import random

from policylab.tasks.plan_path import parse_grid

MEMO_PROB = 0.5  # [ours] half the actor's rows carry a memo, half are plain first attempts


def hidden_walls(example: dict) -> list[tuple[int, int]]:
    """The walls of the true grid that the shown grid hides, in reading order."""
    rows, _, _ = parse_grid(str(example["grid"]))
    shown, _, _ = parse_grid(str(example.get("shown", example["grid"])))
    return [
        (r, c)
        for r, row in enumerate(rows)
        for c, ch in enumerate(row)
        if ch == "#" and shown[r][c] != "#"
    ]


def memo(cell: tuple[int, int]) -> str:
    """The memo naming a wall at `cell`: "#r,c;"."""
    return f"#{cell[0]},{cell[1]};"


def _attempt(task, example: dict, prefix: str, seed: int, act) -> tuple[list[dict], bool, str]:
    """One attempt from context `prefix` + the first observation: (rows, success, the
    final context)."""
    env = task.env(example)
    context = prefix + env.reset(example, seed)
    rows, success = [], False
    for _ in range(env.max_turns):
        segment = act("agent", context)
        step = env.step("agent", segment)
        rows.append({"prompt": context, "completion": segment})
        context += segment + step.obs
        if step.done:
            success = bool(step.info.get("success"))
            break
    return rows, success, context


def actor_memo_rows(task, n: int, seed: int, noise: float) -> list[dict]:
    """Per-move rows of one attempt per example, half of them after a memo naming one
    hidden wall (module docstring)."""
    out = []
    for i, example in enumerate(task.examples("train", n, seed)):
        rng = random.Random(seed * 1_000_003 + i)
        walls = hidden_walls(example)
        prefix = ""
        if walls and rng.random() < MEMO_PROB:
            prefix = task.env(example).reflect_cue + memo(rng.choice(walls))
        act = task.demonstrator(example, noise, rng)
        out += _attempt(task, example, prefix, seed, act)[0]
    return out


def retro_memo_rows(task, n: int, seed: int, noise: float) -> list[dict]:
    """One row per failed demonstrator attempt among the first `n` examples: the failed
    transcript + "?" → a random memo (module docstring)."""
    out = []
    for i, example in enumerate(task.examples("train", n, seed)):
        rng = random.Random(seed * 1_000_003 + i)
        act = task.demonstrator(example, noise, rng)
        _, success, context = _attempt(task, example, "", seed, act)
        if success:
            continue
        rows, _, _ = parse_grid(str(example["grid"]))
        cell = (rng.randrange(len(rows)), rng.randrange(len(rows[0])))
        out.append({"prompt": context + task.env(example).reflect_cue, "completion": memo(cell)})
    return out
