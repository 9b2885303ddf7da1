"""trade_sim as a text task: FLAG-Trader's market (envs/trade_sim.py, seed_agents.md §A5)
with the state written as text, for language-model workflows and users' agents.

Prompt: the state before the first decision, e.g. `+3-1+2+0+4-2|0:` (the last 6 daily
moves as signed buckets, `|`, the holding flag, `:`). Columns: series (the series seed;
train seeds [0, 10⁶), test seeds [10⁶, 2·10⁶), never shared). Answer: a best first
action in hindsight (B when the next day's move pays the cost, else H).

Single-turn verifier: 1.0 when the completion's first action is a best one in
hindsight — its value after one day is the largest of the three (from flat, S and H tie)
— else 0.0; a completion that is not B, S or H scores 0.

Multi-turn (`task.env(example)`, one role "agent", stop ";"): the agent writes `B;`,
`S;` or `H;`; the env answers with the next state text (15 characters), so a transcript
reads `+3-1+2+0+4-2|0:B;+1-1+2+0+4-2|1:H;…`. Rewards r_t = log(V_{t+1}/V_t); an action
that is not B, S or H holds and costs R_BAD = −0.01 [ours]. `success` at the end:
cumulative return > 0 [ours]. With the default 60 days a transcript has 15 + 60·17
characters, far beyond the tiny model's 128 positions: multi-turn training of the tiny
model needs `days` ≤ 6; the LM-as-policy recipe `flag_trader` reads one state per
forward instead (policies/lm_control.py). Knobs: days, mu, sigma, stay, cost, window
(envs/trade_sim.py MarketKnobs).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from policylab.envs import ID_TRADE_SIM
from policylab.envs.text import Step, action_body, check_step
from policylab.envs.trade_sim import (
    ACTIONS,
    HOLD,
    SPLIT_SIZE,
    MarketKnobs,
    buckets,
    series_seed,
    simulate_prices,
    state_text,
    trade,
)
from policylab.tasks.base import SPLITS, Task

R_BAD = -0.01


@dataclass
class _State:
    t: int
    cash: float
    shares: float
    done: bool


class TradeSimTextEnv:
    """The text environment of one trade_sim series (module docstring)."""

    roles = ("agent",)
    stop = ";"
    max_segment = 2
    reflect_cue = "?"

    def __init__(self, knobs: MarketKnobs) -> None:
        self.knobs = knobs
        self.max_turns = knobs.days
        self._state: _State | None = None

    def reset(self, example: dict, seed: int) -> str:
        """The first state text; `seed` is unused (the series seed is the example's)."""
        self.prices = simulate_prices(int(example["series"]), self.knobs)
        return self.restart()

    def restart(self) -> str:
        self._state = _State(self.knobs.window, 1.0, 0.0, False)
        return self._text()

    def snapshot(self) -> _State:
        return _State(**vars(self._state))

    def restore(self, snap: _State) -> None:
        self._state = _State(**vars(snap))

    def state_key(self) -> str:
        return self._text()

    def _text(self) -> str:
        s = self._state
        return state_text(buckets(self.prices, s.t, self.knobs.window), s.shares > 0)

    def step(self, role: str, action: str) -> Step:
        s = self._state
        check_step("trade_sim", s, "agent", role, action)
        body = action_body(action, self.stop)
        valid = body in ACTIONS
        before = s.cash + s.shares * self.prices[s.t]
        choice = ACTIONS.index(body) if valid else HOLD
        s.cash, s.shares, _ = trade(choice, self.prices[s.t], s.cash, s.shares, self.knobs.cost)
        s.t += 1
        after = s.cash + s.shares * self.prices[s.t]
        reward = math.log(after / before) + (0.0 if valid else R_BAD)
        s.done = s.t >= self.knobs.window + self.knobs.days
        info: dict[str, Any] = {"valid": valid}
        if s.done:
            info["success"] = after > 1.0
        return Step(self._text(), reward, s.done, info)


class TradeSim(Task):
    """FLAG-Trader's market as text: "+3-1+2+0+4-2|0:" -> "B"."""

    name = "trade_sim"
    gym_id = ID_TRADE_SIM  # the same market with numeric observations (flag_trader trains there)
    knobs_class = MarketKnobs
    columns = ("series",)
    chars = "+-0123456789|:BSH;"

    def examples(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """Series seed + 0 … seed + n − 1 of `split` (disjoint seed ranges, so prompts may
        repeat across series but a held-out series is never trained on)."""
        if split not in SPLITS:
            raise ValueError(f"split={split!r} is invalid; accepted: {', '.join(SPLITS)}")
        return [self._row(self._example(series_seed(split, seed + i))) for i in range(n)]

    def env(self, example: dict) -> TradeSimTextEnv:
        if "series" not in example:
            raise ValueError(f"{self.name}.env needs the column 'series'; got: {sorted(example)}")
        return TradeSimTextEnv(self.knobs)

    def _example(self, series: int) -> dict:
        prices = simulate_prices(series, self.knobs)
        prompt = state_text(buckets(prices, self.knobs.window, self.knobs.window), False)
        return {"prompt": prompt, "series": series}

    def _sample(self, rng: random.Random) -> dict | None:
        return self._example(series_seed("train", rng.randrange(SPLIT_SIZE)))

    def _answer(self, example: dict) -> str:
        best = self._best(example)
        return "B" if "B" in best else "H"

    def _best(self, example: dict) -> set[str]:
        """The first actions whose value after one day is the largest."""
        prices = simulate_prices(int(example["series"]), self.knobs)
        t = self.knobs.window
        value = {}
        for a, name in enumerate(ACTIONS):
            cash, shares, _ = trade(a, prices[t], 1.0, 0.0, self.knobs.cost)
            value[name] = cash + shares * prices[t + 1]
        top = max(value.values())
        return {name for name, v in value.items() if v == top}

    def _score(self, text: str, example: dict) -> float:
        action = text.strip()[:1]
        if action not in ACTIONS or "series" not in example:
            return 0.0
        return 1.0 if action in self._best(example) else 0.0
