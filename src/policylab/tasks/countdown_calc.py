"""countdown_calc: countdown played with a calculator tool, one call per turn, StepTool's
testbed (papers/seed_agents.md §A2).

Instances, prompt and single-turn verifier are countdown's: prompt "3 5 7 -> 22:", answer
one expression "3*5+7", columns numbers, target.

Multi-turn format (`task.env(example)`, stop ";"). One agent (role "agent", cue "C"):

    3 5 7 -> 22:C 3*5; =15; C 15+7; =22;

(spaces added here for reading). Each turn the agent writes one call `a op b;` (integers,
op one of + - * /, no spaces). The tool answers "=c;" when the call is valid — a and b
are among the remaining numbers and c = a op b is an exact non-negative integer — and
then a and b are replaced by c; otherwise "!;" and nothing changes. Then the cue "C"
unless done. The episode ends when one number is left or after `max_turns` turns;
IsSolved = one number is left and it equals the target.

Two agents ("proposer", cue "C"; "checker", cue "K"): the proposer writes the call, the
env answers "K"; the checker writes "y;" (the call is executed, the tool answers as
above) or "n;" (the call is skipped; the turn is used), then "C" unless done:

    3 5 7 -> 22:C 3+5; K n; C 3*5; K y; =15; C 15+7; K y; =22;

Step scores (StepTool §A2 with the repository's judges, `countdown_steps.judge_steps` on
the line "a op b = c"): J1 = SuccCalling (the call is valid), J2 = Contribution (the
target is still reachable from the remaining numbers after the call, with the verifier's
rules; False when J1 fails), r_s = (α·J1 + J2)/(α + 1), α = 1 [ours], so r_s ∈ {0, 0.5, 1}.

Rewards [ours]: one agent: r_s for an intermediate call and IsSolved (0 or 1) for the
call that ends the episode (StepTool's r_T = IsSolved(a_T)). Two agents: the proposer
gets r_s of its call; the checker 1 when its verdict matches whether the call is a
correct step (J1 and J2) and 0 otherwise (an unparsable verdict counts as a rejection and
gets 0). Every step's `info["events"]` = {"call_ok": J1, "contribution": J2, "score": r_s,
"solved": IsSolved on the last step, else False}, plus "verdict" for the checker.

Knobs: n_numbers (default 3; 2..4), max_number (20; 1..99), max_target (100; 1..9999) as
countdown; agents (1; 1 or 2); max_turns (None: n_numbers with one agent, n_numbers + 1
with two — one spare turn for a retry after an invalid or rejected call [ours]; else
1..8); demo_noise (0.55; 0..1). max_segment = the longest valid call: 2 + the most digits
two operands can have, taking a value of k numbers ≤ max(max_number, 2)^k [ours]; 7 for
the defaults. With the defaults a whole episode is at most 52 characters: prompt and cue
17, a first valid call 6 + "=400;C" 6, an invalid call 7 + "!;C" 3, a final call 7 +
"=8000;" 6; with two agents at most 80 (a rejected turn 7 + "K" + 7 + "C" = 16, as long as
an accepted final call), counting segments that end at their first ";" as generation does.

Demonstrator: a solver (the first call, in a fixed order, after which the target can
still be reached with calculator calls) that with probability `noise` proposes a random
call (two remaining numbers and an operation, which may be invalid); the checker answers
correctly with probability 1 − noise. Measured on 1,000 train examples at the default
noise 0.55: success 0.42 with one agent, 0.20 with two (both roles are noisy).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from policylab.envs.text import (
    Step,
    action_body,
    check_step,
    demonstration_rows,
)
from policylab.tasks.base import Task, check_int, check_number
from policylab.tasks.countdown import Countdown
from policylab.tasks.countdown_steps import judge_steps

ALPHA = 1.0  # weight of SuccCalling in r_s [ours]
CUES = {"agent": "C", "proposer": "C", "checker": "K"}
OPS = "+-*/"
_CALL = re.compile(r"^(\d{1,6})([-+*/])(\d{1,6})$")
_DONE_CALL = re.compile(r"(\d+)([-+*/])(\d+);(?:Ky;)?=(\d+);")

Call = tuple[int, str, int]


@dataclass(frozen=True)
class CountdownCalcKnobs:
    """countdown_calc: the instances (as countdown), the agents, the turns and the
    demonstrator's noise."""

    n_numbers: int = 3
    max_number: int = 20
    max_target: int = 100
    agents: int = 1
    max_turns: int | None = None
    demo_noise: float = 0.55

    def __post_init__(self) -> None:
        check_int("countdown_calc", "n_numbers", self.n_numbers, 2, 4)
        check_int("countdown_calc", "max_number", self.max_number, 1, 99)
        check_int("countdown_calc", "max_target", self.max_target, 1, 9999)
        check_int("countdown_calc", "agents", self.agents, 1, 2)
        if self.max_turns is not None:
            check_int("countdown_calc", "max_turns", self.max_turns, 1, 8)
        check_number("countdown_calc", "demo_noise", self.demo_noise, 0.0, 1.0)

    @property
    def turns(self) -> int:
        """max_turns, or its default: n_numbers (one agent), n_numbers + 1 (two agents)."""
        if self.max_turns is not None:
            return self.max_turns
        return self.n_numbers if self.agents == 1 else self.n_numbers + 1


def calculate(call: Call) -> int | None:
    """a op b when it is an exact non-negative integer, else None."""
    a, op, b = call
    if op == "+":
        return a + b
    if op == "*":
        return a * b
    if op == "-":
        return a - b if a >= b else None
    return a // b if b != 0 and a % b == 0 else None


def parse_call(action: str, stop: str = ";") -> Call | None:
    """(a, op, b) of an action `a op b;` (no spaces), else None."""
    match = _CALL.match(action_body(action, stop))
    if match is None:
        return None
    return int(match[1]), match[2], int(match[3])


def judge_call(numbers: list[int], target: int, call: Call | None) -> tuple[bool, bool, int | None]:
    """(J1, J2, c) of a call on the remaining `numbers`: the repository's step judges
    (`countdown_steps.judge_steps`) on the line "a op b = c"."""
    c = None if call is None else calculate(call)
    if c is None:
        return False, False, None
    a, op, b = call
    (judgement,) = judge_steps(f"{a}{op}{b}={c}", {"numbers": numbers, "target": target})
    return judgement.valid, judgement.reachable, c


def step_score(j1: bool, j2: bool) -> float:
    """r_s = (α·J1 + J2)/(α + 1)."""
    return (ALPHA * j1 + j2) / (ALPHA + 1)


def max_call_chars(n_numbers: int, max_number: int) -> int:
    """The longest valid call `a op b;`: operands made of k and n − k numbers are at most
    B^k and B^(n−k) with B = max(max_number, 2) (sums and products of numbers ≤ B)."""
    base = max(max_number, 2)
    return 2 + max(
        len(str(base**k)) + len(str(base ** (n_numbers - k))) for k in range(1, n_numbers)
    )


@dataclass
class _State:
    numbers: list[int]  # remaining, sorted
    turn: int
    role: int
    pending: tuple[Call | None, bool, bool, int | None] | None  # proposer's call and judgement
    done: bool


class CountdownCalcEnv:
    """The text environment of one countdown_calc example (see the module docstring)."""

    stop = ";"
    reflect_cue = "?"

    def __init__(self, agents: int = 1, max_turns: int = 3, max_segment: int = 7) -> None:
        self.roles = ("agent",) if agents == 1 else ("proposer", "checker")
        self.max_turns = max_turns
        self.max_segment = max_segment
        self._state: _State | None = None

    def reset(self, example: dict, seed: int) -> str:
        """Countdown's prompt and the first cue. `example` needs numbers and target;
        `seed` is unused (the env has no randomness)."""
        self._numbers = sorted(int(x) for x in example["numbers"])
        self._target = int(example["target"])
        return self.restart()

    def restart(self) -> str:
        self._state = _State(list(self._numbers), 0, 0, None, False)
        prompt = f"{' '.join(map(str, self._numbers))} -> {self._target}:"
        return prompt + CUES[self.roles[0]]

    def snapshot(self) -> _State:
        return replace(self._state, numbers=list(self._state.numbers))

    def restore(self, snap: _State) -> None:
        self._state = replace(snap, numbers=list(snap.numbers))

    def state_key(self) -> str:
        s = self._state
        pending = "" if s.pending is None else f" {s.pending[0]}"
        return f"{' '.join(map(str, s.numbers))} t{s.turn} {self.roles[s.role]}{pending}"

    def step(self, role: str, action: str) -> Step:
        state = self._state
        check_step("countdown_calc", state, state and self.roles[state.role], role, action)
        if role == "proposer":
            call = parse_call(action, self.stop)
            j1, j2, c = judge_call(state.numbers, self._target, call)
            state.pending, state.role = (call, j1, j2, c), 1
            events = _events(j1, j2, False)
            return Step(
                CUES["checker"],
                step_score(j1, j2),
                False,
                {"valid": call is not None, "events": events},
            )
        if role == "agent":
            call = parse_call(action, self.stop)
            j1, j2, c = judge_call(state.numbers, self._target, call)
            obs = self._execute(call, j1, c)
            valid, verdict = call is not None, None
        else:  # checker
            call, j1, j2, c = state.pending
            body = action_body(action, self.stop)
            verdict = body if body in ("y", "n") else None
            obs = self._execute(call, j1, c) if verdict == "y" else ""
            valid = verdict is not None
        state.turn, state.role, state.pending = state.turn + 1, 0, None
        state.done = len(state.numbers) == 1 or state.turn >= self.max_turns
        solved = state.done and state.numbers == [self._target]
        events = _events(j1, j2, solved)
        if role == "agent":
            reward = float(solved) if state.done else step_score(j1, j2)
        else:
            events["verdict"] = verdict
            reward = float(verdict is not None and (verdict == "y") == (j1 and j2))
        info: dict[str, Any] = {"valid": valid, "events": events}
        if state.done:
            info["success"] = solved
        else:
            obs += CUES[self.roles[0]]
        return Step(obs, reward, state.done, info)

    def _execute(self, call: Call | None, j1: bool, c: int | None) -> str:
        """Run a call on the remaining numbers: "=c;" and a, b replaced by c when it is
        valid (J1), else "!;" and nothing changes."""
        if not j1:
            return "!;"
        a, _, b = call
        remaining = Counter(self._state.numbers) - Counter([a, b])
        self._state.numbers = sorted([*remaining.elements(), c])
        return f"={c};"


def _events(j1: bool, j2: bool, solved: bool) -> dict:
    return {"call_ok": j1, "contribution": j2, "score": step_score(j1, j2), "solved": solved}


@lru_cache(maxsize=65536)
def _solvable(numbers: tuple[int, ...], target: int) -> bool:
    """Whether calculator calls (exact non-negative integers) turn `numbers` (sorted) into
    exactly [target]."""
    if len(numbers) == 1:
        return numbers[0] == target
    return first_good_call(numbers, target) is not None


def first_good_call(numbers: tuple[int, ...], target: int) -> Call | None:
    """The first call (pairs in order, larger operand first, ops + - * /) after which the
    target can still be reached with calculator calls; None when there is none."""
    for i in range(len(numbers)):
        for j in range(len(numbers)):
            if i == j or numbers[i] < numbers[j] or (numbers[i] == numbers[j] and i > j):
                continue
            rest = [x for k, x in enumerate(numbers) if k not in (i, j)]
            for op in OPS:
                c = calculate((numbers[i], op, numbers[j]))
                if c is not None and _solvable(tuple(sorted([*rest, c])), target):
                    return numbers[i], op, numbers[j]
    return None


def numbers_in(context: str, numbers: list[int]) -> list[int]:
    """The remaining numbers after the executed calls ("a op b;=c;") in `context`."""
    remaining = Counter(numbers)
    for a, _, b, c in _DONE_CALL.findall(context):
        remaining = remaining - Counter([int(a), int(b)]) + Counter([int(c)])
    return sorted(remaining.elements())


class CountdownCalc(Task):
    """countdown with a calculator, one call per turn: "3 5 7 -> 22:C" -> "3*5;"."""

    name = "countdown_calc"
    knobs_class = CountdownCalcKnobs
    columns = ("numbers", "target")
    chars = "0123456789+-*/() >:"
    ladder = (("n_numbers", 2, 4),)

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        k = self.knobs
        self._plain = Countdown(
            n_numbers=k.n_numbers, max_number=k.max_number, max_target=k.max_target
        )

    def env(self, example: dict) -> CountdownCalcEnv:
        """A fresh text environment for `example` (reset it with the example)."""
        for column in self.columns:
            if column not in example:
                raise ValueError(
                    f"{self.name}.env needs the column {column!r}; got: {sorted(example)}"
                )
        k = self.knobs
        return CountdownCalcEnv(k.agents, k.turns, max_call_chars(k.n_numbers, k.max_number))

    def demonstrator(self, example: dict, noise: float, rng: random.Random) -> Callable:
        """The scripted, noisy demonstrator: act(role, context) -> segment (module
        docstring). It reads the remaining numbers from the context."""
        start, target = [int(x) for x in example["numbers"]], int(example["target"])

        def act(role: str, context: str) -> str:
            if role == "checker":  # the pending call sits between the last "C" and the final "K"
                call = parse_call(context[context.rindex("C") + 1 : -1])
                numbers = numbers_in(context[: context.rindex("C")], start)
                j1, j2, _ = judge_call(numbers, target, call)
                right = j1 and j2
                return "y;" if right != (rng.random() < noise) else "n;"
            numbers = numbers_in(context, start)
            call = first_good_call(tuple(numbers), target)
            if call is None or rng.random() < noise:
                i, j = rng.sample(range(len(numbers)), 2) if len(numbers) > 1 else (0, 0)
                call = numbers[i], rng.choice(OPS), numbers[j]
            return f"{call[0]}{call[1]}{call[2]};"

        return act

    def demonstrations(self, n: int, seed: int, noise: float | None = None) -> list[dict]:
        """Per-turn supervised rows from the demonstrator (envs/text.py `demonstration_rows`)."""
        return demonstration_rows(self, n, seed, noise)

    def _sample(self, rng: random.Random) -> dict | None:
        return self._plain._sample(rng)

    def _answer(self, example: dict) -> str:
        return self._plain._answer(example)

    def _score(self, text: str, example: dict) -> float:
        return self._plain._score(text, example)
