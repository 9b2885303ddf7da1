"""Text environments for multi-turn agents: the protocol, the reference play loop, and a
guard that keeps a faulty user environment from crashing training
(papers/seed_agents.md §A0.1, §A0.8).

An environment sees text only. `reset` gives the first observation, which ends with the
*cue* of the role that acts first (one character such as "P"); each `step(role, action)`
takes the raw text a role generated (its *segment*, normally ending with the env's `stop`
delimiter, but possibly cut short or garbage) and returns the observation appended after
it, again ending with the next role's cue (or final text when the episode is done). So the
transcript is always

    reset() + segment_0 + obs_0 + segment_1 + obs_1 + ...

and `play_text` below is the definition of how contexts are built; the token-level
workflow reproduces it token for token.

    env = tasks.get("plan_path_moves").env(example)
    episode = play_text(env, example, seed=0, act=my_policy, attempts=1)
    episode.turns[0].context, episode.turns[0].segment, episode.success

Reserved `Step.info` keys: `valid` (the action parsed), `success` (on the last step of an
attempt), `truncated`, `events` (step annotations, e.g. `call_ok`, `contribution`),
`ended` (why an episode ended abnormally: "timeout", "obs_too_long", "error: ...").
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from policylab.tasks.base import check_number

REFLECT = "reflect"  # the role name `play_text` gives `act` for a reflection turn


@dataclass
class Step:
    """What an environment returns for one action."""

    obs: str  # appended after the action; ends with the next role's cue unless done
    reward: float  # the acting role's own (local, immediate) reward for this action
    done: bool
    info: dict = field(default_factory=dict)


@runtime_checkable
class TextEnv(Protocol):
    """A multi-turn text environment (seed_agents.md §A0.1). Deterministic given
    (example, seed)."""

    roles: tuple[str, ...]  # schedule order within one turn
    max_turns: int  # a turn = one action of every role in order
    stop: str  # the delimiter that ends an action, e.g. ";"
    max_segment: int  # most characters one action may have, the delimiter included
    reflect_cue: str  # appended to a failed attempt's transcript to ask for a reflection

    def reset(self, example: dict, seed: int) -> str: ...
    def step(self, role: str, action: str) -> Step: ...
    def snapshot(self) -> Any: ...
    def restore(self, snap: Any) -> None: ...
    def restart(self) -> str: ...
    def state_key(self) -> str: ...


def check_step(name: str, state: Any, expected: str, role: str, action: Any) -> None:
    """Raise for a step the protocol forbids (for env implementers): before reset
    (`state` None), after the end (`state.done`), out of turn (`role` is not `expected`),
    or an action that is not a str."""
    if state is None:
        raise RuntimeError(f"{name}: step() before reset()")
    if state.done:
        raise RuntimeError(f"{name}: step() after the episode ended; call reset() or restart()")
    if role != expected:
        raise ValueError(f"{name}: step by role {role!r}, but {expected!r} acts next")
    if not isinstance(action, str):
        raise TypeError(f"{name}: action={action!r}; accepted: a str")


def action_body(action: str, stop: str) -> str:
    """The text of an action before its first `stop` (all of it when there is none)."""
    cut = action.find(stop)
    return action if cut < 0 else action[:cut]


# --------------------------------------------------------------------------------------
# The reference play loop


@dataclass
class TextTurn:
    """One generated segment and what followed it."""

    role: str  # the env role, or "reflect" for a reflection
    turn: int  # turn index within the attempt (a reflection: the turns the attempt played)
    attempt: int
    phase: str  # "act" or "reflect"
    context: str  # exactly the text the segment was generated from
    segment: str
    reward: float
    done: bool
    info: dict


@dataclass
class Episode:
    """A played trial: every turn in order, and success per attempt."""

    turns: list[TextTurn]
    success: bool
    attempts_used: int
    successes_by_attempt: list[bool]


def play_text(
    env: TextEnv,
    example: dict,
    seed: int,
    act: Callable[[str, str], str],
    *,
    attempts: int = 1,
    reflect: bool = False,
) -> Episode:
    """Play one trial of `example` with `act(role, context) -> segment`; the definition of
    the contexts (papers/seed_agents.md §A0.8, §A3).

    Per attempt, context = first observation; each turn (up to `env.max_turns`) every role
    in `env.roles` acts in order: segment = act(role, context), step = env.step(role,
    segment), context ← context + segment + step.obs; the attempt ends when a step is done.
    It succeeded when that step's `info["success"]` is true; a won attempt ends the trial.
    After a failed attempt with attempts left: when `reflect`, one reflection
    segment = act("reflect", context + env.reflect_cue) is recorded (phase "reflect",
    reward 0) and memory ← memory + env.reflect_cue + segment. The next attempt's context
    is memory + env.restart() (LaMer's `reflection_only` memory; memory stays empty
    without `reflect`).
    """
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"attempts={attempts!r} is invalid; accepted: an integer >= 1")
    turns: list[TextTurn] = []
    successes: list[bool] = []
    memory = ""
    context = env.reset(example, seed)
    for attempt in range(attempts):
        if attempt > 0:
            context = memory + env.restart()
        success, context, played = _play_attempt(env, act, context, attempt, turns)
        successes.append(success)
        if success or attempt == attempts - 1:
            break
        if reflect:
            r_context = context + env.reflect_cue
            segment = act(REFLECT, r_context)
            turns.append(
                TextTurn(REFLECT, played, attempt, "reflect", r_context, segment, 0.0, False, {})
            )
            memory = memory + env.reflect_cue + segment
    return Episode(turns, any(successes), len(successes), successes)


def _play_attempt(
    env: TextEnv, act: Callable[[str, str], str], context: str, attempt: int, out: list[TextTurn]
) -> tuple[bool, str, int]:
    """One attempt from `context`; appends its turns to `out`. Returns (success, the final
    context, the number of turns played)."""
    for turn in range(env.max_turns):
        for role in env.roles:
            segment = act(role, context)
            step = env.step(role, segment)
            out.append(
                TextTurn(
                    role, turn, attempt, "act", context, segment, step.reward, step.done, step.info
                )
            )
            context = context + segment + step.obs
            if step.done:
                return bool(step.info.get("success")), context, turn + 1
    return False, context, env.max_turns


def episode_rows(episode: Episode) -> list[dict]:
    """Supervised rows of a played episode: one {"prompt": context, "completion": segment}
    per turn (reflections included), in order."""
    return [{"prompt": t.context, "completion": t.segment} for t in episode.turns]


def play_demonstrations(
    task: Any, n: int, seed: int, noise: float, *, attempts: int = 1, reflect: bool = False
) -> list[Episode]:
    """`task`'s scripted demonstrator played on its first `n` train examples (seed `seed`).

    `task` provides `examples`, `env(example)` and `demonstrator(example, noise, rng)`;
    example i's demonstrator draws from `random.Random(seed * 1_000_003 + i)`."""
    episodes = []
    for i, example in enumerate(task.examples("train", n, seed)):
        act = task.demonstrator(example, noise, random.Random(seed * 1_000_003 + i))
        episodes.append(
            play_text(task.env(example), example, seed, act, attempts=attempts, reflect=reflect)
        )
    return episodes


def demonstration_rows(
    task: Any,
    n: int,
    seed: int,
    noise: float | None = None,
    *,
    attempts: int = 1,
    reflect: bool = False,
) -> list[dict]:
    """Supervised rows {"prompt": context, "completion": segment}, one per turn
    (reflections included), from `task`'s demonstrator playing its first `n` train
    examples of `seed`; `noise` defaults to the task's `demo_noise` knob. What every
    interactive task's `demonstrations` returns."""
    noise = task.knobs.demo_noise if noise is None else noise
    check_number(task.name, "noise", noise, 0.0, 1.0)
    episodes = play_demonstrations(task, n, seed, noise, attempts=attempts, reflect=reflect)
    return [row for e in episodes for row in episode_rows(e)]


# --------------------------------------------------------------------------------------
# Guarding user environments


@dataclass(frozen=True)
class _GuardedSnapshot:
    inner: Any  # the wrapped env's snapshot; None when it was taken after the episode ended
    ended: str | None


class _Timeout(Exception):
    pass


class GuardedEnv:
    """Any `TextEnv`, made safe to train on: a faulty environment ends its episode instead
    of crashing training.

    - `reset`, `step`, `restart`, `snapshot`, `restore` or `state_key` raising, or `step`
      returning something that is not a valid `Step` (obs a str, reward a finite number,
      done a bool, info a dict): the episode ends (done, reward 0, info
      `{"ended": "error: <ExceptionType>: <message>"}`).
    - a call slower than `step_timeout_s`: the episode ends with `ended="timeout"`. Calls run
      in a daemon worker thread awaited through a `concurrent.futures.Future`; Python
      cannot kill a thread, so a hung call is abandoned (it keeps running in the background
      and does not block interpreter exit) and this instance never touches the wrapped env
      again: every later call answers as an ended episode. Make a fresh env instead.
      `step_timeout_s=None` runs calls inline, without a thread or a limit.
    - an observation longer than `max_obs_chars`: cut to that length, and the step is
      made final (done, `truncated=True`, `ended="obs_too_long"`); the step's reward is kept.

    After an error (not a timeout) `reset`, `restart` or `restore` may bring the wrapped env
    back. A `reset` that fails returns "" and `ended` says why; the next `step` then ends
    the episode at once. The protocol attributes are those of the wrapped env.
    """

    def __init__(
        self, env: Any, *, step_timeout_s: float | None = 5.0, max_obs_chars: int | None = None
    ) -> None:
        if step_timeout_s is not None and (
            isinstance(step_timeout_s, bool)
            or not isinstance(step_timeout_s, (int, float))
            or not step_timeout_s > 0
        ):
            raise ValueError(
                f"step_timeout_s={step_timeout_s!r} is invalid; accepted: a number > 0 or None"
            )
        if max_obs_chars is not None and (
            isinstance(max_obs_chars, bool)
            or not isinstance(max_obs_chars, int)
            or max_obs_chars < 1
        ):
            raise ValueError(
                f"max_obs_chars={max_obs_chars!r} is invalid; accepted: an integer >= 1 or None"
            )
        self.env = env
        self.step_timeout_s = step_timeout_s
        self.max_obs_chars = max_obs_chars
        self.ended: str | None = None  # why the current episode ended abnormally
        self._hung = False  # a call timed out: the wrapped env is never called again

    # The protocol attributes are the wrapped env's.
    roles = property(lambda self: self.env.roles)
    max_turns = property(lambda self: self.env.max_turns)
    stop = property(lambda self: self.env.stop)
    max_segment = property(lambda self: self.env.max_segment)
    reflect_cue = property(lambda self: self.env.reflect_cue)

    def reset(self, example: dict, seed: int) -> str:
        return self._first_obs(lambda: self.env.reset(example, seed))

    def restart(self) -> str:
        return self._first_obs(self.env.restart)

    def step(self, role: str, action: str) -> Step:
        if self.ended is not None:
            return self._ended_step()
        try:
            step = self._call(lambda: self.env.step(role, action))
            problem = _step_problem(step)
            if problem:
                raise TypeError(problem)
        except _Timeout:
            return self._ended_step()
        except Exception as exc:
            self.ended = _error(exc)
            return self._ended_step()
        if self.max_obs_chars is not None and len(step.obs) > self.max_obs_chars:
            self.ended = "obs_too_long"
            info = {**step.info, "truncated": True, "ended": self.ended}
            return Step(step.obs[: self.max_obs_chars], float(step.reward), True, info)
        return step

    def snapshot(self) -> _GuardedSnapshot:
        if self.ended is not None:
            return _GuardedSnapshot(None, self.ended)
        try:
            return _GuardedSnapshot(self._call(self.env.snapshot), None)
        except _Timeout:
            return _GuardedSnapshot(None, self.ended)
        except Exception as exc:
            self.ended = _error(exc)
            return _GuardedSnapshot(None, self.ended)

    def restore(self, snap: _GuardedSnapshot) -> None:
        if self._hung:
            return
        self.ended = snap.ended
        if snap.inner is None:
            return
        try:
            self._call(lambda: self.env.restore(snap.inner))
        except _Timeout:
            pass
        except Exception as exc:
            self.ended = _error(exc)

    def state_key(self) -> str:
        if self.ended is None:
            try:
                key = self._call(self.env.state_key)
                if isinstance(key, str):
                    return key
                raise TypeError(f"state_key() returned {key!r}; accepted: a str")
            except _Timeout:
                pass
            except Exception as exc:
                self.ended = _error(exc)
        return f"ended: {self.ended}"

    def _first_obs(self, call: Callable[[], Any]) -> str:
        if self._hung:
            return ""
        self.ended = None
        try:
            obs = self._call(call)
            if not isinstance(obs, str):
                raise TypeError(f"the first observation is {obs!r}; accepted: a str")
        except _Timeout:
            return ""
        except Exception as exc:
            self.ended = _error(exc)
            return ""
        if self.max_obs_chars is not None and len(obs) > self.max_obs_chars:
            self.ended = "obs_too_long"
            return obs[: self.max_obs_chars]
        return obs

    def _ended_step(self) -> Step:
        info = {"valid": False, "ended": self.ended}
        if self.ended == "obs_too_long":
            info["truncated"] = True
        return Step("", 0.0, True, info)

    def _call(self, fn: Callable[[], Any]) -> Any:
        """fn() in a daemon worker thread, awaited at most `step_timeout_s`; raises _Timeout
        (and marks this instance hung) when it does not finish in time."""
        if self.step_timeout_s is None:
            return fn()
        future: Future = Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the caller through the future
                future.set_exception(exc)

        threading.Thread(target=work, name="policylab-env-call", daemon=True).start()
        try:
            return future.result(timeout=self.step_timeout_s)
        except FutureTimeout:
            if future.done():  # the env itself raised a TimeoutError: an error, not a hang
                raise
            self._hung = True
            self.ended = "timeout"
            raise _Timeout from None


def _error(exc: Exception) -> str:
    return f"error: {type(exc).__name__}: {exc}"


def _step_problem(step: Any) -> str | None:
    """Why `step` is not a valid Step, or None."""
    if not isinstance(step, Step):
        return f"step() returned {type(step).__name__}; accepted: a policylab.envs.text.Step"
    if not isinstance(step.obs, str):
        return f"Step.obs={step.obs!r}; accepted: a str"
    reward = step.reward
    if (
        isinstance(reward, bool)
        or not isinstance(reward, (int, float))
        or not math.isfinite(reward)
    ):
        return f"Step.reward={reward!r}; accepted: a finite number"
    if not isinstance(step.done, bool):
        return f"Step.done={step.done!r}; accepted: True or False"
    if not isinstance(step.info, dict):
        return f"Step.info={step.info!r}; accepted: a dict"
    return None


# --------------------------------------------------------------------------------------
# Checking a user environment


def check_env(env: Any, example: dict) -> None:
    """Validate a user `TextEnv` before training: its attributes, then one short play of
    `example` (reset, a snapshot, one step, restore, restart). Raises ValueError naming
    the attribute or call, the value received and what is accepted."""
    roles = getattr(env, "roles", None)
    if (
        not isinstance(roles, tuple)
        or not roles
        or not all(isinstance(r, str) and r for r in roles)
        or len(set(roles)) != len(roles)
        or REFLECT in roles
    ):
        raise ValueError(
            f"env.roles={roles!r} is invalid; accepted: a non-empty tuple of distinct non-empty "
            f"strings, not {REFLECT!r} (the name play_text gives reflection turns)"
        )
    _check_attr(env, "max_turns", lambda v: _is_int(v) and v >= 1, "an integer >= 1")
    _check_attr(env, "stop", lambda v: isinstance(v, str) and v != "", "a non-empty str")
    _check_attr(
        env,
        "max_segment",
        lambda v: _is_int(v) and v >= len(env.stop),
        f"an integer >= len(env.stop) = {len(env.stop)}",
    )
    _check_attr(env, "reflect_cue", lambda v: isinstance(v, str), "a str")
    for method in ("reset", "step", "snapshot", "restore", "restart", "state_key"):
        if not callable(getattr(env, method, None)):
            raise ValueError(f"env.{method} is missing or not callable; a TextEnv needs it")

    first = _returns_str(env.reset(example, 0), "env.reset(example, 0)")
    again = _returns_str(env.reset(example, 0), "env.reset(example, 0), called again")
    if again != first:
        raise ValueError(
            f"env.reset(example, 0) is not deterministic: {first!r} then {again!r}; "
            "accepted: the same text for the same example and seed"
        )
    key = _returns_str(env.state_key(), "env.state_key()")
    snap = env.snapshot()
    step = env.step(env.roles[0], env.stop)  # an empty action: must be handled, not raised
    problem = _step_problem(step)
    if problem:
        raise ValueError(f"env.step({env.roles[0]!r}, {env.stop!r}): {problem}")
    env.restore(snap)
    restored = _returns_str(env.state_key(), "env.state_key() after restore")
    if restored != key:
        raise ValueError(
            f"env.restore(env.snapshot()) does not bring the state back: state_key {key!r} "
            f"before the step, {restored!r} after restore"
        )
    env.step(env.roles[0], env.stop)
    restarted = _returns_str(env.restart(), "env.restart()")
    if restarted != first:
        raise ValueError(
            f"env.restart() returned {restarted!r}; accepted: the first observation {first!r}"
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_attr(env: Any, name: str, ok: Callable[[Any], bool], accepted: str) -> None:
    value = getattr(env, name, None)
    if not ok(value):
        raise ValueError(f"env.{name}={value!r} is invalid; accepted: {accepted}")


def _returns_str(value: Any, call: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{call} returned {value!r}; accepted: a str")
    return value
