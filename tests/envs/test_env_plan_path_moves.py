"""plan_path_moves: AT-GRPO's Plan-Path rewards by hand (papers/seed_agents.md §A1 tests 1
and 4), the two-role protocol and the transcript format."""

from __future__ import annotations

import dataclasses

import pytest

import policylab.tasks as tasks
from policylab.envs.text import play_text
from policylab.tasks.plan_path_moves import PlanPathMovesEnv, parse_moves

CORRIDOR = {"grid": "s.g"}  # 1×3, start (0,0), goal (0,2), BFS shortest 2; φ = −distance


def agent_env() -> PlanPathMovesEnv:
    env = PlanPathMovesEnv(agents=1)
    assert env.reset(CORRIDOR, 0) == "s.g:E"
    return env


def test_spec_test_1_single_moves():
    env = agent_env()
    # R: −0.01 + 0.99·φ(0,1) − φ(0,0) = −0.01 + 0.99·(−1) + 2 = 1.0
    step = env.step("agent", "R;")
    assert step.reward == pytest.approx(1.0, abs=1e-12)
    assert (step.obs, step.done) == ("@0,1;E", False)
    # second R: −0.01 + 0.99·0 + 1 (shaping) + 1 (goal) + 0.5 (2 moves = shortest) = 2.49
    step = env.step("agent", "R;")
    assert step.reward == pytest.approx(2.49, abs=1e-12)
    assert (step.obs, step.done, step.info["success"]) == ("@0,2;", True, True)
    env.restart()
    # L at the start is off the grid: −0.10 + 0.99·(−2) + 2 = −0.08, position unchanged
    step = env.step("agent", "L;")
    assert step.reward == pytest.approx(-0.08, abs=1e-12)
    assert step.obs == "@0,0x;E"


@pytest.mark.parametrize(
    ("action", "reward", "obs"),
    [
        ("RR;", 3.49, "@0,2;"),  # 1.0 + 2.49
        ("LR;", 0.92, "@0,1x;E"),  # −0.08 + 1.0
        ("RRL;", 3.49, "@0,2;"),  # moves after the goal are not executed
        ("LRR;", 2.91, "@0,2x;"),  # −0.08 + 1.0 + 1.99: 3 moves > shortest 2, no +0.5
        ("RR", 3.49, "@0,2;"),  # the stop may be missing (cut at max_segment or <eos>)
    ],
)
def test_spec_test_1_turns(action, reward, obs):
    step = agent_env().step("agent", action)
    assert step.reward == pytest.approx(reward, abs=1e-12)
    assert step.obs == obs


def test_spec_test_4_planner_reward_is_simulated_without_changing_the_state():
    env = PlanPathMovesEnv(agents=2)
    assert env.reset(CORRIDOR, 0) == "s.g:P"
    before = env.snapshot()
    step = env.step("planner", "RR;")
    assert step.reward == pytest.approx(3.49, abs=1e-12)  # what executing RR would earn
    assert (step.obs, step.done) == ("E", False)
    after = env.snapshot()
    # position, executed moves and turn are those before; only whose turn it is moved on
    assert after == dataclasses.replace(before, role=1, proposal="RR")
    step = env.step("executor", "L;")  # the executor need not follow the plan
    assert step.reward == pytest.approx(-0.08, abs=1e-12)
    assert step.obs == "@0,0x;P"


def test_unparsable_actions():
    env = PlanPathMovesEnv(agents=2)
    env.reset(CORRIDOR, 0)
    step = env.step("planner", "RRRR;")  # 4 moves: too many
    assert (step.reward, step.info["valid"], step.obs) == (-2.0, False, "E")
    step = env.step("executor", "go;")
    assert (step.reward, step.info["valid"], step.obs) == (-1.0, False, "@0,0;P")
    agent = agent_env()
    assert agent.step("agent", ";").reward == -2.0
    assert [parse_moves(a) for a in ("R;", "UDL;", ";", "", "RRRR", "r;", "R ;")] == [
        "R",
        "UDL",
        None,
        None,
        None,
        None,
        None,
    ]


def test_protocol_errors():
    env = PlanPathMovesEnv(agents=2)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step("planner", "R;")
    env.reset(CORRIDOR, 0)
    with pytest.raises(ValueError, match="step by role 'executor', but 'planner' acts next"):
        env.step("executor", "R;")
    env.step("planner", "RR;")
    env.step("executor", "RR;")
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("planner", "R;")
    with pytest.raises(ValueError, match="cannot be reached"):
        env.reset({"grid": "s#g"}, 0)


def test_transcript_of_the_docstring_and_turn_limit():
    task = tasks.get("plan_path_moves")
    example = {"grid": "s..#/.#../...g/#..."}
    moves = iter(["DR;", "D;", "DRR;", "DRR;", "R;", "R;"])
    ep = play_text(task.env(example), example, 0, lambda role, context: next(moves))
    last = ep.turns[-1]
    assert last.context + last.segment == "s..#/.#../...g/#...:PDR;ED;@1,0;PDRR;EDRR;@2,2;PR;ER;"
    assert ep.success and [t.role for t in ep.turns[:2]] == ["planner", "executor"]
    # executed D, DRR, R: 5 moves = shortest, so the last turn earns the +0.5
    assert last.reward == pytest.approx(-0.01 + 1.0 + 1.0 + 0.5, abs=1e-12)
    ep = play_text(task.env(example), example, 0, lambda role, context: "U;")
    assert len(ep.turns) == 8 and not ep.success  # 4 turns × 2 roles, then done
    assert ep.turns[-1].info == {"valid": True, "success": False}


def test_state_key():
    env = PlanPathMovesEnv(agents=2)
    env.reset(CORRIDOR, 0)
    assert env.state_key() == "@0,0 n0 t0 planner "
    env.step("planner", "R;")
    assert env.state_key() == "@0,0 n0 t0 executor R"
    env.step("executor", "R;")
    assert env.state_key() == "@0,1 n1 t1 planner "


def test_instances_fit_the_moves_allowed():
    task = tasks.get("plan_path_moves", max_turns=1)
    assert all(ex["shortest"] <= 3 for ex in task.examples("train", 100, seed=0))


def test_the_official_double_count_is_a_knob_off_by_default():
    """§A1: the code adds a plan agent's environment reward twice; the knob reproduces it
    (the fixed −2 penalty is not doubled)."""
    from policylab import tasks

    example = tasks.get("plan_path_moves").examples("train", 1, seed=0)[0]
    plain = tasks.get("plan_path_moves").env(example)
    doubled = tasks.get("plan_path_moves", double_planner_reward=True).env(example)
    for env in (plain, doubled):
        env.reset(example, 0)
    a, b = plain.step("planner", "R;"), doubled.step("planner", "R;")
    assert b.reward == 2 * a.reward and a.reward != 0
    plain.reset(example, 0)
    doubled.reset(example, 0)
    assert plain.step("planner", "zz;").reward == doubled.step("planner", "zz;").reward == -2.0
