"""plan_path_fog: hidden walls, bumps and their observations, restart, state keys that
match across attempts, and the demonstrator carrying a wall through its reflection."""

from __future__ import annotations

import random

import pytest

import policylab.tasks as tasks
from policylab.envs.text import play_text
from policylab.tasks.plan_path import shortest_path
from policylab.tasks.plan_path_fog import PlanPathFogEnv, _bumps

# true grid       shown grid      start (1,3), goal (2,2)
# . # # .         . . . .         (0,1), (0,2), (2,3) hidden; (1,1) shown
# . # . s         . # . s
# . . g #         . . g .
# . . . .         . . . .
EXAMPLE = {"grid": ".##./.#.s/..g#/....", "shown": "..../.#.s/..g./...."}


def fresh() -> PlanPathFogEnv:
    env = tasks.get("plan_path_fog").env(EXAMPLE)
    assert env.reset(EXAMPLE, 0) == "..../.#.s/..g./....:E"
    assert (env.roles, env.max_turns, env.stop, env.max_segment, env.reflect_cue) == (
        ("agent",),
        6,
        ";",
        6,
        "?",
    )
    return env


def test_moves_bumps_and_observations():
    env = fresh()
    step = env.step("agent", "D;")  # into the hidden wall (2,3)
    assert (step.obs, step.reward, step.done) == ("x#2,3;E", -0.1, False)
    assert env.state_key() == "@1,3 #2,3"
    step = env.step("agent", "R;")  # off the grid
    assert (step.obs, step.reward) == ("x;E", -0.1)
    step = env.step("agent", "L;")
    assert (step.obs, step.reward) == ("@1,2;E", 0.0)
    step = env.step("agent", "L;")  # into the shown wall (1,1): shown, so nothing revealed
    assert (step.obs, step.reward) == ("x#1,1;E", -0.1)
    assert env.state_key() == "@1,2 #2,3"
    step = env.step("agent", "stay;")
    assert (step.obs, step.reward, step.info["valid"]) == ("!;E", -0.1, False)
    step = env.step("agent", "D;")  # the goal
    assert (step.obs, step.reward, step.done, step.info["success"]) == ("@2,2;", 1.0, True, True)


def test_attempt_ends_after_max_turns():
    env = fresh()
    steps = [env.step("agent", "U;") for _ in range(6)]
    assert [s.done for s in steps] == [False] * 5 + [True]
    assert [s.obs for s in steps[:2]] == ["@0,3;E", "x;E"]
    assert steps[-1].obs == "x;" and steps[-1].info["success"] is False


def test_restart_hides_the_walls_again_and_keys_match_across_attempts():
    env = fresh()
    keys = []
    moves = iter(["D;", "L;", "L;", "L;", "L;", "L;", "#2,3;", "D;", "L;", "D;"])

    def act(role, context):
        keys.append(env.state_key())
        return next(moves)

    ep = play_text(env, EXAMPLE, 0, act, attempts=3, reflect=True)
    assert ep.successes_by_attempt == [False, True]
    last = ep.turns[-1]
    assert last.context == "?#2,3;..../.#.s/..g./....:ED;x#2,3;EL;@1,2;E"  # the docstring's
    # before each act: attempt 0 (6 moves), the reflection, attempt 1 (3 moves)
    assert keys[:2] == ["@1,3", "@1,3 #2,3"]
    assert keys[7:] == ["@1,3", "@1,3 #2,3", "@1,2 #2,3"]  # the same states, the same keys
    assert ep.turns[6].phase == "reflect" and ep.turns[6].context.endswith("x#1,1;?")


def test_reset_checks_the_shown_grid():
    with pytest.raises(ValueError, match="does not match"):
        PlanPathFogEnv().reset({"grid": "s.g", "shown": "s..g"}, 0)
    env = PlanPathFogEnv()
    assert env.reset({"grid": "s#g"}, 0) == "s#g:E"  # no "shown": nothing hidden


def test_instances_hide_walls_on_the_shown_path():
    task = tasks.get("plan_path_fog")
    for ex in task.examples("train", 200, seed=0):
        assert ex["prompt"] == ex["shown"] + ":"
        shown, grid = ex["shown"], ex["grid"]
        # shown = grid with some walls drawn as "."
        assert all(s == g or (s, g) == (".", "#") for s, g in zip(shown, grid, strict=True))
        assert ex["shortest"] <= 6
        assert _bumps(shortest_path(shown), grid)  # fog_on_path
    plain = tasks.get("plan_path_fog", fog_on_path=False).examples("train", 200, seed=0)
    assert any(not _bumps(shortest_path(ex["shown"]), ex["grid"]) for ex in plain)


def test_demonstrator_reflects_and_avoids_the_named_wall():
    task = tasks.get("plan_path_fog")
    act = task.demonstrator(EXAMPLE, 0.0, random.Random(0))
    # the shown-grid BFS path from (1,3) starts with D into the hidden (2,3)
    assert act("agent", "..../.#.s/..g./....:E") == "D;"
    assert act("agent", "..../.#.s/..g./....:ED;x#2,3;E") == "L;"
    # a reflection names the first wall bumped; the next attempt avoids it from the start
    assert act("reflect", "..../.#.s/..g./....:ED;x#2,3;EU;@0,3;?") == "#2,3;"
    assert act("reflect", "..../.#.s/..g./....:EL;@1,2;?") == ";"
    assert act("agent", "?#2,3;..../.#.s/..g./....:E") == "L;"
