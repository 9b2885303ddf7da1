"""countdown_calc: StepTool's step scores on the spec's instance (papers/seed_agents.md §A2
test 3), the calculator, the episode end, and the proposer/checker protocol."""

from __future__ import annotations

import pytest

import policylab.tasks as tasks
from policylab.envs.text import play_text
from policylab.tasks.countdown_calc import (
    CountdownCalcEnv,
    first_good_call,
    max_call_chars,
    numbers_in,
    parse_call,
)

EXAMPLE = {"numbers": [3, 5, 7], "target": 22}


def env1() -> CountdownCalcEnv:
    env = tasks.get("countdown_calc").env(EXAMPLE)
    assert env.reset(EXAMPLE, 0) == "3 5 7 -> 22:C"
    assert (env.roles, env.max_turns, env.max_segment, env.stop) == (("agent",), 3, 7, ";")
    return env


@pytest.mark.parametrize(
    ("call", "score", "j1", "j2", "obs"),
    [
        ("3*5;", 1.0, True, True, "=15;C"),  # 15 and 7 make 22: (1·1 + 1)/2
        ("3+5;", 0.5, True, False, "=8;C"),  # 8 and 7 cannot make 22: (1·1 + 0)/2
        ("3*9;", 0.0, False, False, "!;C"),  # 9 is not available
        ("5-7;", 0.0, False, False, "!;C"),  # negative
        ("7/3;", 0.0, False, False, "!;C"),  # not exact
        ("3 * 5;", 0.0, False, False, "!;C"),  # no spaces
        ("hello;", 0.0, False, False, "!;C"),
    ],
)
def test_spec_test_3_step_scores(call, score, j1, j2, obs):
    step = env1().step("agent", call)
    assert step.reward == score
    assert step.info["events"] == {
        "call_ok": j1,
        "contribution": j2,
        "score": score,
        "solved": False,
    }
    assert (step.obs, step.done) == (obs, False)


def test_spec_test_3_episode_is_solved():
    env = env1()
    assert env.step("agent", "3*5;").reward == 1.0
    step = env.step("agent", "15+7;")  # one number left: the episode ends, r_T = IsSolved
    assert (step.obs, step.reward, step.done) == ("=22;", 1.0, True)
    assert step.info["success"] is True and step.info["events"]["solved"] is True


def test_final_reward_is_is_solved():
    env = env1()
    assert env.step("agent", "3+5;").reward == 0.5  # valid, doomed
    assert env.step("agent", "3*9;").reward == 0.0  # invalid: a retry is left
    step = env.step("agent", "8-7;")  # one number left (1), not 22
    assert (step.obs, step.reward, step.done, step.info["success"]) == ("=1;", 0.0, True, False)
    assert step.info["events"] == {
        "call_ok": True,
        "contribution": False,
        "score": 0.5,
        "solved": False,
    }
    env = env1()
    for _ in range(2):
        env.step("agent", "3*9;")
    step = env.step("agent", "3*5;")  # a correct call, but the turns are used up
    assert (step.reward, step.done, step.info["success"]) == (0.0, True, False)
    assert step.info["events"]["score"] == 1.0


def test_checker_protocol():
    env = tasks.get("countdown_calc", agents=2).env(EXAMPLE)
    assert env.reset(EXAMPLE, 0) == "3 5 7 -> 22:C"
    assert (env.roles, env.max_turns) == (("proposer", "checker"), 4)
    step = env.step("proposer", "3+5;")
    assert (step.obs, step.reward) == ("K", 0.5)  # the proposer earns the call's score
    step = env.step("checker", "n;")  # a doomed call rejected: right
    assert (step.obs, step.reward, step.done) == ("C", 1.0, False)
    assert step.info["events"]["verdict"] == "n"
    env.step("proposer", "3*5;")
    step = env.step("checker", "n;")  # a correct call rejected: wrong
    assert (step.obs, step.reward) == ("C", 0.0)
    env.step("proposer", "3*5;")
    step = env.step("checker", "y;")
    assert (step.obs, step.reward) == ("=15;C", 1.0)
    assert env.state_key() == "7 15 t3 proposer"
    env.step("proposer", "15+7;")
    assert env.state_key() == "7 15 t3 checker (15, '+', 7)"
    step = env.step("checker", "y;")
    assert (step.obs, step.reward, step.done, step.info["success"]) == ("=22;", 1.0, True, True)


def test_checker_accepting_an_invalid_call_and_garbage_verdicts():
    env = tasks.get("countdown_calc", agents=2).env(EXAMPLE)
    env.reset(EXAMPLE, 0)
    env.step("proposer", "3*9;")
    step = env.step("checker", "y;")
    assert (step.obs, step.reward) == ("!;C", 0.0)
    env.step("proposer", "3*5;")
    step = env.step("checker", "yes;")  # unparsable verdict: a rejection, scored 0
    assert (step.obs, step.reward, step.info["valid"]) == ("C", 0.0, False)
    assert step.info["events"]["verdict"] is None


def test_docstring_transcript():
    task = tasks.get("countdown_calc", agents=2)
    segments = iter(["3+5;", "n;", "3*5;", "y;", "15+7;", "y;"])
    ep = play_text(task.env(EXAMPLE), EXAMPLE, 0, lambda role, context: next(segments))
    last = ep.turns[-1]
    assert last.context + last.segment == "3 5 7 -> 22:C3+5;Kn;C3*5;Ky;=15;C15+7;Ky;"
    assert ep.success


def test_helpers():
    assert parse_call("12*3;") == (12, "*", 3)
    assert parse_call("12*3") == (12, "*", 3)
    assert parse_call("12*;") is None
    assert max_call_chars(3, 20) == len("400*20;")  # operands ≤ 20² and ≤ 20
    assert max_call_chars(2, 9) == len("9*9;")
    assert max_call_chars(3, 1) == len("4*2;")  # B = max(1, 2) = 2
    assert first_good_call((3, 5, 7), 22) == (5, "*", 3)
    assert first_good_call((7, 8), 22) is None
    assert numbers_in("3 5 7 -> 22:C3*5;=15;C3*9;!;C", [3, 5, 7]) == [7, 15]
    assert numbers_in("3 5 7 -> 22:C3*5;Kn;C3*5;Ky;=15;C", [3, 5, 7]) == [7, 15]
