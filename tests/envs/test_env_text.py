"""The text-environment layer: play_text's context rules (attempts, reflection, memory),
GuardedEnv on faulty environments, and check_env's errors."""

from __future__ import annotations

import copy
import threading
import time

import pytest

from policylab.envs.text import (
    Episode,
    GuardedEnv,
    Step,
    TextEnv,
    TextTurn,
    action_body,
    check_env,
    episode_rows,
    play_text,
)


class Counter:
    """A toy env: role "a" (cue "A") then "b" (cue "B"); each action's obs is "<n>" plus
    the next cue; the episode is won when a segment reads "win;", lost after max_turns."""

    stop = ";"
    max_segment = 4
    reflect_cue = "?"

    def __init__(self, roles=("a", "b"), max_turns=2):
        self.roles, self.max_turns = roles, max_turns
        self.resets = self.restarts = 0

    def reset(self, example, seed):
        self.resets += 1
        self.n, self.seed, self.prompt = 0, seed, example["prompt"]
        return f"{self.prompt}:{self.roles[0].upper()}"

    def restart(self):
        self.restarts += 1
        self.n = 0
        return f"{self.prompt}:{self.roles[0].upper()}"

    def step(self, role, action):
        self.n += 1
        won = action == "win;"
        last = won or self.n == self.max_turns * len(self.roles)
        nxt = self.roles[self.n % len(self.roles)].upper()
        info = {"valid": True, **({"success": won} if last else {})}
        return Step(f"{self.n}" + ("" if last else nxt), float(self.n), last, info)

    def snapshot(self):
        return self.n

    def restore(self, snap):
        self.n = snap

    def state_key(self):
        return str(self.n)


def scripted(segments):
    """act() answering from a list, recording (role, context) of each call."""
    calls, it = [], iter(segments)

    def act(role, context):
        calls.append((role, context))
        return next(it)

    return act, calls


def test_protocol_and_action_body():
    assert isinstance(Counter(), TextEnv)
    assert action_body("RD;junk", ";") == "RD"
    assert action_body("RD", ";") == "RD"
    assert action_body(";", ";") == ""


def test_play_text_builds_contexts_turn_by_turn():
    env = Counter()
    act, calls = scripted(["a1;", "b1;", "a2;", "b2;"])
    ep = play_text(env, {"prompt": "p"}, 7, act)
    # context ← context + segment + obs, obs ending with the next role's cue
    assert [c for _, c in calls] == ["p:A", "p:Aa1;1B", "p:Aa1;1Bb1;2A", "p:Aa1;1Bb1;2Aa2;3B"]
    assert [(t.role, t.turn, t.attempt, t.phase) for t in ep.turns] == [
        ("a", 0, 0, "act"),
        ("b", 0, 0, "act"),
        ("a", 1, 0, "act"),
        ("b", 1, 0, "act"),
    ]
    assert [t.reward for t in ep.turns] == [1.0, 2.0, 3.0, 4.0]
    assert [t.done for t in ep.turns] == [False, False, False, True]
    assert ep.turns[-1].segment == "b2;" and ep.turns[-1].info["success"] is False
    assert (ep.success, ep.attempts_used, ep.successes_by_attempt) == (False, 1, [False])
    assert env.seed == 7
    assert episode_rows(ep)[1] == {"prompt": "p:Aa1;1B", "completion": "b1;"}


def test_play_text_stops_at_done():
    act, calls = scripted(["win;"])
    ep = play_text(Counter(), {"prompt": "p"}, 0, act, attempts=3, reflect=True)
    assert len(calls) == 1  # a won attempt ends the trial: no reflection, no restart
    assert (ep.success, ep.attempts_used, ep.successes_by_attempt) == (True, 1, [True])


def test_play_text_reflection_memory():
    env = Counter(roles=("a",), max_turns=1)
    act, calls = scripted(["a;", "r1;", "b;", "r2;", "win;"])
    ep = play_text(env, {"prompt": "p"}, 0, act, attempts=3, reflect=True)
    assert calls == [
        ("a", "p:A"),
        ("reflect", "p:Aa;1?"),  # the failed attempt + reflect_cue
        ("a", "?r1;p:A"),  # memory + restart()
        ("reflect", "?r1;p:Ab;1?"),
        ("a", "?r1;?r2;p:A"),  # memories accumulate (reflection_only: no history)
    ]
    reflect = ep.turns[1]
    assert (reflect.role, reflect.phase, reflect.turn, reflect.attempt) == (
        "reflect",
        "reflect",
        1,
        0,
    )
    assert (reflect.reward, reflect.done, reflect.segment) == (0.0, False, "r1;")
    assert [t.attempt for t in ep.turns] == [0, 0, 1, 1, 2]
    assert (ep.success, ep.attempts_used, ep.successes_by_attempt) == (
        True,
        3,
        [False, False, True],
    )
    assert env.resets == 1 and env.restarts == 2


def test_play_text_without_reflection_restarts_with_empty_memory():
    env = Counter(roles=("a",), max_turns=1)
    act, calls = scripted(["a;", "b;"])
    ep = play_text(env, {"prompt": "p"}, 0, act, attempts=2)
    assert calls == [("a", "p:A"), ("a", "p:A")]
    assert ep.successes_by_attempt == [False, False] and not ep.success
    assert isinstance(ep, Episode) and all(isinstance(t, TextTurn) for t in ep.turns)


def test_play_text_caps_turns_when_the_env_never_ends():
    class Endless(Counter):
        def step(self, role, action):
            return Step("A", 0.0, False, {})

    act, calls = scripted(["s;"] * 10)
    ep = play_text(Endless(roles=("a",), max_turns=3), {"prompt": "p"}, 0, act)
    assert len(calls) == 3 and not ep.success


def test_play_text_rejects_bad_attempts():
    with pytest.raises(ValueError, match="attempts=0"):
        play_text(Counter(), {"prompt": "p"}, 0, lambda r, c: ";", attempts=0)


# -------------------------------------------------------------------------- GuardedEnv


class Raising(Counter):
    def step(self, role, action):
        raise KeyError("boom")


class Sleeping(Counter):
    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def step(self, role, action):
        self.release.wait(10)  # the test releases it; never a real 10 s
        return super().step(role, action)


class Verbose(Counter):
    def step(self, role, action):
        return Step("y" * 10_000, 0.5, False, {"valid": True})


def test_guard_passes_a_good_env_through():
    env = GuardedEnv(Counter())
    assert (env.roles, env.max_turns, env.stop, env.max_segment, env.reflect_cue) == (
        ("a", "b"),
        2,
        ";",
        4,
        "?",
    )
    act, _ = scripted(["a1;", "b1;", "a2;", "b2;"])
    assert (
        play_text(env, {"prompt": "p"}, 0, act).turns
        == play_text(Counter(), {"prompt": "p"}, 0, scripted(["a1;", "b1;", "a2;", "b2;"])[0]).turns
    )
    check_env(env, {"prompt": "p"})


def test_guard_ends_the_episode_on_an_exception():
    env = GuardedEnv(Raising())
    assert env.reset({"prompt": "p"}, 0) == "p:A"
    step = env.step("a", "x;")
    assert (step.obs, step.reward, step.done) == ("", 0.0, True)
    assert step.info["ended"] == "error: KeyError: 'boom'"
    assert env.step("b", "y;").done  # stays ended
    assert env.reset({"prompt": "p"}, 0) == "p:A" and env.ended is None  # reset recovers


def test_guard_reset_error_ends_at_the_first_step():
    class BadReset(Counter):
        def reset(self, example, seed):
            raise ValueError("no grid")

    env = GuardedEnv(BadReset())
    assert env.reset({}, 0) == ""
    assert env.ended == "error: ValueError: no grid"
    act, calls = scripted(["z;"])
    ep = play_text(env, {}, 0, act)
    assert len(ep.turns) == 1 and ep.turns[0].done and not ep.success


def test_guard_rejects_a_malformed_step():
    class Bad(Counter):
        def step(self, role, action):
            return Step("o", float("nan"), False, {})

    env = GuardedEnv(Bad(), step_timeout_s=None)
    env.reset({"prompt": "p"}, 0)
    step = env.step("a", ";")
    assert step.done and step.info["ended"].startswith("error: TypeError: Step.reward=nan")


def test_guard_times_out_a_hung_step_and_abandons_the_env():
    inner = Sleeping()
    env = GuardedEnv(inner, step_timeout_s=0.2)
    env.reset({"prompt": "p"}, 0)
    start = time.perf_counter()
    step = env.step("a", "x;")
    elapsed = time.perf_counter() - start
    assert 0.15 < elapsed < 2.0
    assert step.done and step.reward == 0.0 and step.info["ended"] == "timeout"
    assert env.reset({"prompt": "p"}, 0) == ""  # never reused after a hang
    assert env.step("a", "x;").info["ended"] == "timeout"
    assert env.state_key() == "ended: timeout"
    inner.release.set()  # let the abandoned thread finish


def test_guard_cuts_a_long_observation():
    env = GuardedEnv(Verbose(), max_obs_chars=50)
    env.reset({"prompt": "p"}, 0)
    step = env.step("a", "x;")
    assert step.obs == "y" * 50
    assert step.done and step.reward == 0.5
    assert step.info["truncated"] is True and step.info["ended"] == "obs_too_long"
    assert step.info["valid"] is True  # the env's own info is kept


def test_guard_snapshot_restore_round_trip():
    env = GuardedEnv(Counter())
    env.reset({"prompt": "p"}, 0)
    snap = env.snapshot()
    env.step("a", "x;")
    assert env.state_key() == "1"
    env.restore(snap)
    assert env.state_key() == "0"


def test_guard_rejects_bad_settings():
    with pytest.raises(ValueError, match="step_timeout_s=0"):
        GuardedEnv(Counter(), step_timeout_s=0)
    with pytest.raises(ValueError, match="max_obs_chars=0"):
        GuardedEnv(Counter(), max_obs_chars=0)


# --------------------------------------------------------------------------- check_env


def broken(**changes):
    env = Counter()
    for name, value in changes.items():
        setattr(env, name, value)
    return env


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (broken(roles=()), r"env.roles=\(\) is invalid; accepted: a non-empty tuple"),
        (broken(roles=["a"]), r"env.roles=\['a'\]"),
        (broken(roles=("a", "a")), "distinct"),
        (broken(roles=("reflect",)), "not 'reflect'"),
        (broken(max_turns=0), "env.max_turns=0 is invalid; accepted: an integer >= 1"),
        (broken(max_turns=True), "env.max_turns=True"),
        (broken(stop=""), "env.stop='' is invalid; accepted: a non-empty str"),
        (broken(max_segment=0), r"env.max_segment=0 is invalid; accepted: an integer >= len"),
        (broken(reflect_cue=None), "env.reflect_cue=None is invalid"),
        (broken(state_key=None), "env.state_key is missing or not callable"),
    ],
)
def test_check_env_names_the_attribute(env, message):
    with pytest.raises(ValueError, match=message):
        check_env(env, {"prompt": "p"})


def test_check_env_calls():
    class NotStr(Counter):
        def reset(self, example, seed):
            return 3

    class NoRestore(Counter):
        def restore(self, snap):
            pass

    class Drifting(Counter):
        def reset(self, example, seed):
            self.n, self.prompt = 0, "p"
            self.resets += 1
            return f"p{self.resets}"

    class BadStep(Counter):
        def step(self, role, action):
            return ("obs", 0.0, False, {})

    cases = [
        (NotStr(), r"env.reset\(example, 0\) returned 3"),
        (NoRestore(), "does not bring the state back"),
        (Drifting(), "not deterministic"),
        (BadStep(), "step\\('a', ';'\\): step\\(\\) returned tuple"),
    ]
    for env, message in cases:
        with pytest.raises(ValueError, match=message):
            check_env(env, {"prompt": "p"})
    check_env(copy.deepcopy(Counter()), {"prompt": "p"})
