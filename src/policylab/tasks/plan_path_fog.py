"""plan_path_fog: plan_path with hidden walls, played over several attempts with a
reflection between them, LaMer's testbed (papers/seed_agents.md §A3).

Instances are plan_path's (size 4 by default) of which every wall is drawn as "." with
probability `hide_prob`: the prompt shows that grid, e.g. "..../.#.s/..g./....:" while
the true grid is ".##./.#.s/..g#/....". Only instances whose shortest path on the true
grid takes at most `max_turns` moves are kept, and with `fog_on_path` (default) only those
whose canonical shortest path on the shown grid runs into a hidden wall, so an agent that
trusts the shown grid bumps [ours: without it a shown-grid BFS walker solves 94 % of the
instances in its first attempt and attempts barely matter]. Answer: a shortest move
string on the true grid. Columns: grid (the true grid), start, goal, shortest, shown (the
grid the prompt shows). Single-turn verifier: plan_path's, on the true grid (the model
sees only the shown one).

Multi-turn format (`task.env(example)`, stop ";", max_segment 6, reflect_cue "?"). One
role ("agent", cue "E"), one move per turn:

    ..../.#.s/..g./....:E D; x#2,3; E L; @1,2; E L; x#1,1; E ...

(spaces added here for reading). The agent writes one of U D L R and ";". The env
answers "@r,c;" (the new position) after a legal move; after a move into a wall, hidden or
shown, "x#r,c;" naming the wall's cell (the position is unchanged: the wall is shown from
then on in the transcript); after a move off the grid "x;"; after anything else "!;".
Then the cue "E" unless the attempt is over. Rewards: a legal move 0, a bump or an
unparsable action −0.1 [ours for the unparsable action], reaching the goal +1, which ends
the attempt with success. An attempt ends after `max_turns` moves.

Attempts (`play_text(..., attempts=3, reflect=True)`): after a failed attempt the
transcript plus "?" asks for a reflection of at most 6 characters ending with ";", e.g.
"#2,3;" naming a wall found; the next attempt's context is the reflections so far
followed by `restart()`, which restores the initial state (the position
and no revealed walls) and returns the first observation again:

    ?#2,3;..../.#.s/..g./....:E D; x#2,3; E L; @1,2; E D; @2,2;

`state_key()` is the position and the hidden walls revealed in this attempt, e.g.
"@1,2 #2,3", so equal states match across attempts (anchors hash the state before memory
is added, §A3).

Knobs: size (default 4; 2..5), wall_prob (0.25; 0..0.8), hide_prob (0.5; 0..1), attempts
(3; 1..5), max_turns (6; 1..8), fog_on_path (True), demo_noise (0.75; 0..1), demo_rows
("trial"; "actor_memo" and "retro_memo": Retroformer's warm starts, tasks/fog_memos.py). With the
defaults a whole trial is at most 88 characters: 2 reflections × 7 + grid and cue 21 +
6 turns × 9 − the last cue.

Demonstrator: walks a BFS shortest path on the shown grid, treating hidden walls as free
but avoiding every wall named in its context (bumped this attempt, or named in a
reflection); each move is replaced with probability `noise` by a random move that is
legal on what it knows. Its reflection names the first wall it bumped ("#r,c;"), or is
";" when it bumped none. Measured on 1,000 train examples at the default noise 0.75:
success by attempt 1, 2, 3 (pass@k) 0.19, 0.33, 0.45; 0.67, 0.90, 0.99 without noise.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from policylab.envs.text import (
    Step,
    action_body,
    check_step,
    demonstration_rows,
)
from policylab.tasks.base import Task, check_bool, check_int, check_number
from policylab.tasks.fog_memos import actor_memo_rows, retro_memo_rows
from policylab.tasks.plan_path import MOVES, PlanPath, parse_grid, shortest_path
from policylab.tasks.plan_path_moves import Cell, free, moved, path_from, position_in

R_BUMP, R_BAD, R_GOAL = -0.1, -0.1, 1.0
CUE = "E"
MAX_SEGMENT = 6  # a reflection "#r,c;D" [§A3]
_WALL = re.compile(r"#(\d+),(\d+)")
_BUMP = re.compile(r"x#(\d+),(\d+);")
# what `demonstrations` returns: whole trials with reflections (LaMer's warm start), or
# Retroformer's two warm starts (tasks/fog_memos.py)
DEMO_ROWS = ("trial", "actor_memo", "retro_memo")


@dataclass(frozen=True)
class PlanPathFogKnobs:
    """plan_path_fog: the grid (as plan_path), how many walls are hidden, the attempts,
    the moves per attempt and the demonstrator's noise."""

    size: int = 4
    wall_prob: float = 0.25
    hide_prob: float = 0.5
    attempts: int = 3
    max_turns: int = 6
    fog_on_path: bool = True
    demo_noise: float = 0.75
    demo_rows: str = "trial"

    def __post_init__(self) -> None:
        check_int("plan_path_fog", "size", self.size, 2, 5)
        check_number("plan_path_fog", "wall_prob", self.wall_prob, 0.0, 0.8)
        check_number("plan_path_fog", "hide_prob", self.hide_prob, 0.0, 1.0)
        check_int("plan_path_fog", "attempts", self.attempts, 1, 5)
        check_int("plan_path_fog", "max_turns", self.max_turns, 1, 8)
        check_bool("plan_path_fog", "fog_on_path", self.fog_on_path)
        check_number("plan_path_fog", "demo_noise", self.demo_noise, 0.0, 1.0)
        if self.demo_rows not in DEMO_ROWS:
            raise ValueError(
                f"plan_path_fog knob demo_rows={self.demo_rows!r} is invalid; accepted: "
                + ", ".join(DEMO_ROWS)
            )


@dataclass
class _State:
    pos: Cell
    revealed: tuple[Cell, ...]  # hidden walls bumped this attempt, in order
    turn: int
    done: bool


class PlanPathFogEnv:
    """The text environment of one plan_path_fog example (see the module docstring)."""

    roles = ("agent",)
    stop = ";"
    max_segment = MAX_SEGMENT
    reflect_cue = "?"

    def __init__(self, max_turns: int = 6) -> None:
        self.max_turns = max_turns
        self._state: _State | None = None

    def reset(self, example: dict, seed: int) -> str:
        """The shown grid, ":" and the cue "E". `example` needs grid (the true grid) and
        shown (default: the true grid); `seed` is unused (the env has no randomness)."""
        self._rows, self._start, self._goal = parse_grid(str(example["grid"]))
        self._shown = str(example.get("shown", example["grid"]))
        shown_rows, *ends = parse_grid(self._shown)
        if [len(r) for r in shown_rows] != [len(r) for r in self._rows] or ends != [
            self._start,
            self._goal,
        ]:
            raise ValueError(
                f"plan_path_fog: shown grid {self._shown!r} does not match grid {example['grid']!r}"
            )
        self._hidden = {
            (r, c)
            for r, row in enumerate(self._rows)
            for c, ch in enumerate(row)
            if ch == "#" and shown_rows[r][c] != "#"
        }
        return self.restart()

    def restart(self) -> str:
        self._state = _State(self._start, (), 0, False)
        return f"{self._shown}:{CUE}"

    def snapshot(self) -> _State:
        return replace(self._state)

    def restore(self, snap: _State) -> None:
        self._state = replace(snap)

    def state_key(self) -> str:
        s = self._state
        return f"@{s.pos[0]},{s.pos[1]}" + "".join(f" #{r},{c}" for r, c in sorted(s.revealed))

    def step(self, role: str, action: str) -> Step:
        state = self._state
        check_step("plan_path_fog", state, "agent", role, action)
        move = action_body(action, self.stop)
        valid = move in MOVES
        if not valid:
            reward, obs = R_BAD, "!;"
        else:
            cell = moved(state.pos, move)
            if free(self._rows, cell):
                state.pos = cell
                reward, obs = (R_GOAL if cell == self._goal else 0.0), f"@{cell[0]},{cell[1]};"
            elif self._on_grid(cell):
                if cell in self._hidden and cell not in state.revealed:
                    state.revealed = (*state.revealed, cell)
                reward, obs = R_BUMP, f"x#{cell[0]},{cell[1]};"
            else:
                reward, obs = R_BUMP, "x;"
        state.turn += 1
        success = state.pos == self._goal
        state.done = success or state.turn >= self.max_turns
        info: dict[str, Any] = {"valid": valid}
        if state.done:
            info["success"] = success
        else:
            obs += CUE
        return Step(obs, reward, state.done, info)

    def _on_grid(self, cell: Cell) -> bool:
        return 0 <= cell[0] < len(self._rows) and 0 <= cell[1] < len(self._rows[0])


def _bumps(moves: str, grid: str) -> bool:
    """Whether walking `moves` from the start of `grid` runs into a wall of it."""
    rows, cell, _ = parse_grid(grid)
    for move in moves:
        cell = moved(cell, move)
        if not free(rows, cell):
            return True
    return False


class PlanPathFog(Task):
    """plan_path with hidden walls over attempts: "s.../.#../...g/....:E" -> "R;"."""

    name = "plan_path_fog"
    knobs_class = PlanPathFogKnobs
    columns = ("grid",)
    chars = ".#sg/:UDLR"
    ladder = (("size", 2, 5),)

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self._plain = PlanPath(size=self.knobs.size, wall_prob=self.knobs.wall_prob)

    def env(self, example: dict) -> PlanPathFogEnv:
        """A fresh text environment for `example` (reset it with the example)."""
        if "grid" not in example:
            raise ValueError(f"{self.name}.env needs the column 'grid'; got: {sorted(example)}")
        return PlanPathFogEnv(max_turns=self.knobs.max_turns)

    def demonstrator(self, example: dict, noise: float, rng: random.Random) -> Callable:
        """The scripted, noisy demonstrator: act(role, context) -> segment (module
        docstring). It reads positions and walls from the context."""
        shown = str(example.get("shown", example["grid"]))
        rows, start, goal = parse_grid(shown)

        def act(role: str, context: str) -> str:
            memory, _, attempt = context.partition(shown + ":")
            if role == "reflect":
                bumps = _BUMP.findall(attempt)
                return f"#{bumps[0][0]},{bumps[0][1]};" if bumps else ";"
            known = [list(row) for row in rows]
            for r, c in _WALL.findall(context):
                if 0 <= int(r) < len(known) and 0 <= int(c) < len(known[0]):
                    known[int(r)][int(c)] = "#"
            known_rows = ["".join(row) for row in known]
            cell = position_in(attempt, start)
            path = path_from(known_rows, cell, goal)
            legal = [m for m in MOVES if free(known_rows, moved(cell, m))]
            if not path or (legal and rng.random() < noise):
                return (rng.choice(legal) if legal else rng.choice("UDLR")) + ";"
            return path[0] + ";"

        return act

    def demonstrations(self, n: int, seed: int, noise: float | None = None) -> list[dict]:
        """Per-turn supervised rows (reflections included) of trials of `attempts`
        attempts (envs/text.py `demonstration_rows`); with the knob demo_rows =
        actor_memo or retro_memo, Retroformer's warm starts (tasks/fog_memos.py)."""
        noise = self.knobs.demo_noise if noise is None else noise
        if self.knobs.demo_rows == "actor_memo":
            return actor_memo_rows(self, n, seed, noise)
        if self.knobs.demo_rows == "retro_memo":
            return retro_memo_rows(self, n, seed, noise)
        return demonstration_rows(self, n, seed, noise, attempts=self.knobs.attempts, reflect=True)

    def _sample(self, rng: random.Random) -> dict | None:
        example = self._plain._sample(rng)
        if example is None or example["shortest"] > self.knobs.max_turns:
            return None
        grid = example["grid"]
        shown = "".join(
            "." if ch == "#" and rng.random() < self.knobs.hide_prob else ch for ch in grid
        )
        if self.knobs.fog_on_path and not _bumps(shortest_path(shown), grid):
            return None
        return {**example, "prompt": shown + ":", "shown": shown}

    def _answer(self, example: dict) -> str:
        return self._plain._answer(example)

    def _score(self, text: str, example: dict) -> float:
        return self._plain._score(text, example)
