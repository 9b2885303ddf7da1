"""plan_path: hand-made verifier cases, the canonical path, and generator properties."""

from __future__ import annotations

from collections import deque

import pytest

import policylab.tasks as tasks
from policylab.tasks.plan_path import shortest_path

TASK = tasks.get("plan_path")
# s . . #
# . # . .
# . . . g
# # . . .
GRID = "s..#/.#../...g/#..."
EXAMPLE = {"grid": GRID, "start": [0, 0], "goal": [2, 3], "shortest": 5}


@pytest.mark.parametrize(
    ("moves", "reward"),
    [
        ("DDRRR", 1.0),  # shortest
        ("RRDRD", 1.0),  # another shortest path
        (" DDRRR\n", 1.0),
        ("DDRRRLR", 0.5),  # reaches the goal, 2 moves longer
        ("DDRRRUD", 0.5),  # leaves the goal and comes back
        ("DDRRRL", 0.0),  # passes the goal, ends beside it
        ("DD", 0.0),  # stops short
        ("", 0.0),
        ("RRR", 0.0),  # into a wall
        ("DR", 0.0),  # into the wall at (1, 1)
        ("U", 0.0),  # off the grid
        ("DDDDRRR", 0.0),  # off the bottom
        ("LDDRRRR", 0.0),
        ("ddrrr", 0.0),  # lowercase is not a move
        ("D D R R R", 0.0),
        ("D,D,R,R,R", 0.0),
        ("DDRRX", 0.0),
        ("__import__('os')", 0.0),
        ("DU" * 5_000, 0.0),  # long, ends at the start
    ],
)
def test_verify(moves, reward):
    assert TASK.verify(f"<answer>{moves}</answer>", EXAMPLE) == reward


def test_verify_needs_the_tags():
    assert TASK.verify("DDRRR", EXAMPLE) == 0.0
    assert TASK.verify("<answer>DD</answer><answer>DDRRR</answer>", EXAMPLE) == 0.0
    assert TASK.verify("<answer>DDRRR</answer><answer>DD</answer>", EXAMPLE) == 1.0


@pytest.mark.parametrize(
    ("grid", "path"),
    [
        (GRID, "DDRRR"),  # first shortest path in the order U, D, L, R
        ("g..s", "LLL"),
        ("s#/#g", None),  # unreachable
        ("s./.g", "DR"),
        ("..../.sg./..../....", "R"),
    ],
)
def test_shortest_path(grid, path):
    assert shortest_path(grid) == path


def _bfs_length(grid: str) -> int:
    # an independent breadth-first search from the start
    rows = grid.split("/")
    cells = {(r, c): ch for r, row in enumerate(rows) for c, ch in enumerate(row)}
    start = next(p for p, ch in cells.items() if ch == "s")
    dist, queue = {start: 0}, deque([start])
    while queue:
        r, c = queue.popleft()
        if cells[(r, c)] == "g":
            return dist[(r, c)]
        for nxt in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if cells.get(nxt, "#") != "#" and nxt not in dist:
                dist[nxt] = dist[(r, c)] + 1
                queue.append(nxt)
    raise AssertionError(f"unreachable goal in {grid}")


@pytest.mark.parametrize(
    ("knobs", "n"),
    [({}, 200), ({"size": 2, "wall_prob": 0.0}, 10), ({"size": 6, "wall_prob": 0.4}, 200)],
)
def test_every_instance_is_reachable_and_its_answer_shortest(knobs, n):
    task = tasks.get("plan_path", **knobs)
    size = task.knobs.size
    for example in task.examples("train", n, seed=17):
        grid = example["grid"]
        rows = grid.split("/")
        assert example["prompt"] == grid + ":"
        assert len(rows) == size and all(len(row) == size for row in rows)
        (sr, sc), (gr, gc) = example["start"], example["goal"]
        assert rows[sr][sc] == "s" and rows[gr][gc] == "g" and (sr, sc) != (gr, gc)
        assert grid.count("s") == 1 and grid.count("g") == 1
        assert example["shortest"] == len(example["answer"]) == _bfs_length(grid)
        assert task.verify(example["completion"], example) == 1.0
