"""plan_path: find a shortest path from start to goal on a small grid with walls.

Prompt: the grid's rows joined by "/", then ":"; "." is free, "#" a wall, "s" the start,
"g" the goal, e.g. "s..#/.#../...g/#...:". Answer: a shortest move string over U (up, row
- 1), D (down), L (left, column - 1), R (right), e.g. "DDRRR". Columns: grid (the rows
joined by "/", str), start ([row, column]), goal ([row, column]), shortest (int, the
length of a shortest path by breadth-first search).

Knobs: size (default 5; 2..6): the grid is size x size; wall_prob (default 0.25; 0..0.8):
start and goal are two distinct cells drawn uniformly, every other cell is a wall with this
probability. Only instances whose goal is reachable are kept.
Augmentation ladder [ours]: size (longer shortest paths on average, more cells to read).
wall_prob stays as set: more walls both block routes and prune the reachable instances,
so its effect on difficulty is not monotone.

The canonical answer is the first shortest path in the move order U, D, L, R (at each step
the first move that brings the goal one step closer).

Verifier: the moves are simulated from the start. Any character other than U D L R, or a
move off the grid or into a wall, gives 0.0. Ending on the goal gives 1.0 when the path has
the shortest length and 0.5 when it is longer; ending elsewhere gives 0.0.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from policylab.tasks.base import Task, check_int, check_number

MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


@dataclass(frozen=True)
class PlanPathKnobs:
    """Difficulty of plan_path: grid size and wall density."""

    size: int = 5
    wall_prob: float = 0.25

    def __post_init__(self) -> None:
        check_int("plan_path", "size", self.size, 2, 6)
        check_number("plan_path", "wall_prob", self.wall_prob, 0.0, 0.8)


def parse_grid(grid: str) -> tuple[list[str], tuple[int, int], tuple[int, int]]:
    """The rows of `grid` ("s..#/.#../...g/#...") and the start and goal cells."""
    rows = grid.split("/")
    cells = {ch: (r, c) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch in "sg"}
    if "s" not in cells or "g" not in cells:
        raise ValueError(f"plan_path grid {grid!r} needs one 's' and one 'g'")
    return rows, cells["s"], cells["g"]


def distances_to(rows: list[str], goal: tuple[int, int]) -> dict[tuple[int, int], int]:
    """Breadth-first-search distance from every cell that can reach `goal` to it."""
    dist = {goal: 0}
    queue = deque([goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES.values():
            nr, nc = r + dr, c + dc
            if (nr, nc) not in dist and _free(rows, nr, nc):
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    return dist


def shortest_path(grid: str) -> str | None:
    """The first shortest move string from 's' to 'g' in the order U, D, L, R; None when
    the goal cannot be reached."""
    rows, (r, c), goal = parse_grid(grid)
    dist = distances_to(rows, goal)
    if (r, c) not in dist:
        return None
    path = []
    while (r, c) != goal:
        for move, (dr, dc) in MOVES.items():
            if dist.get((r + dr, c + dc)) == dist[(r, c)] - 1:
                path.append(move)
                r, c = r + dr, c + dc
                break
    return "".join(path)


def _free(rows: list[str], r: int, c: int) -> bool:
    return 0 <= r < len(rows) and 0 <= c < len(rows[r]) and rows[r][c] != "#"


class PlanPath(Task):
    """Shortest path on a grid: "s..#/.#../...g/#...:" -> "DDRRR"."""

    name = "plan_path"
    knobs_class = PlanPathKnobs
    columns = ("grid",)
    chars = ".#sg/:UDLR"
    ladder = (("size", 2, 6),)

    def _sample(self, rng: random.Random) -> dict | None:
        size, wall_prob = self.knobs.size, self.knobs.wall_prob
        start, goal = rng.sample(range(size * size), 2)
        cells = ["#" if rng.random() < wall_prob else "." for _ in range(size * size)]
        cells[start], cells[goal] = "s", "g"
        grid = "/".join("".join(cells[r * size : (r + 1) * size]) for r in range(size))
        path = shortest_path(grid)
        if path is None:
            return None
        return {
            "prompt": grid + ":",
            "grid": grid,
            "start": [start // size, start % size],
            "goal": [goal // size, goal % size],
            "shortest": len(path),
        }

    def _answer(self, example: dict) -> str:
        return shortest_path(example["grid"])

    def _score(self, text: str, example: dict) -> float:
        rows, (r, c), goal = parse_grid(str(example["grid"]))
        for move in text:
            if move not in MOVES:
                return 0.0
            dr, dc = MOVES[move]
            r, c = r + dr, c + dc
            if not _free(rows, r, c):
                return 0.0
        if (r, c) != goal:
            return 0.0
        # the shortest length is recomputed from the grid, so only the grid column is needed
        return 1.0 if len(text) == len(shortest_path(example["grid"])) else 0.5
