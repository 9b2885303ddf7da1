"""Market making on a seeded synthetic order book whose optimum is computable (DRLMM,
papers/seed_control_theory.md §13; Sadighian, arXiv:1911.08647).

A market maker rests one bid and one ask at a depth of 1–4 ticks from the mid-price, or
flattens its inventory, for `horizon` steps. Each step a resting order at depth δ is
filled with probability A·e^{−k·δ} (Avellaneda–Stoikov intensities), independently for
the two sides; a filled bid buys one unit (q + 1) and earns δ ticks against the mid, a
filled ask sells one (q − 1) and earns δ. The bid is not quoted at q = +Q, the ask not at
q = −Q. Then the mid moves ±1 tick with probability ½ each, so the inventory gains
q'·Δmid. Each step costs φ·q'², flattening costs `flatten_cost` ticks per unit, and the
last step costs c·|q_T|.

Because the mid's move has mean zero, the expected objective depends on (t, q) only:
`solve` finds the optimal policy by backward induction and `evaluate` gives any policy's
exact expected objective, so a learned policy has an exact gap — what real order-book
data cannot give.

The 17 actions are the code's [code crypto-rl:gym_trading/envs/market_maker.py
map_action_to_broker]: 0 no-op; 1–15 the (bid, ask) level pairs of {0, 4, 9, 14}² except
(0, 0), here depths {1, 2, 3, 4} ticks; 16 flatten. Three rewards (`reward=`):
- "pnl": the step's PnL in ticks (fills + q'·Δmid − φq'² − flattening − terminal cost),
  whose expectation is the objective [code reward.py default_with_fills];
- "trade_completion": the code's reward on the step's realised PnL (fills − flattening,
  as a return: ticks × `tick_return`) with the market fee [code reward.py];
- "dsr": Moody's differential Sharpe ratio of the step's PnL return, η = 0.01, ×0.01
  [code reward.py differential_sharpe_ratio].
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

LEVELS = (1, 2, 3, 4)  # ticks, for the code's book levels (0, 4, 9, 14)
NOOP, FLATTEN = "noop", "flatten"


def env_actions(levels: tuple[int, ...] = LEVELS) -> list:
    """The 17 actions: "noop", the (bid depth, ask depth) pairs except the tightest
    (the code's (0, 0)), "flatten"."""
    pairs = [p for p in itertools.product(levels, levels) if p != (levels[0], levels[0])]
    return [NOOP, *pairs, FLATTEN]


@dataclass(frozen=True)
class Book:
    """The market's parameters (all [ours] except where the module docstring says)."""

    horizon: int = 50
    max_inventory: int = 5  # [code crypto-rl:experiment.py max_position 5]
    fill_a: float = 0.9  # A in A·e^{−kδ}
    fill_k: float = 0.7
    inventory_penalty: float = 0.02  # φ
    terminal_penalty: float = 2.0  # c, per unit held at the end
    flatten_cost: float = 1.0  # ticks per unit (crossing the half-spread)
    actions: list = field(default_factory=env_actions)

    def __post_init__(self) -> None:
        if self.horizon < 1 or self.max_inventory < 1:
            raise ValueError(
                f"horizon={self.horizon}, max_inventory={self.max_inventory}: both must be ≥ 1"
            )
        if not (self.fill_a > 0 and self.fill_k >= 0):
            raise ValueError(f"fill_a={self.fill_a}, fill_k={self.fill_k}: need A > 0, k ≥ 0")
        for depth in self.depths():
            p = self.fill_probability(depth)
            if not 0 <= p <= 1:
                raise ValueError(
                    f"fill probability A·e^(−k·{depth}) = {p:.3g} at depth {depth}: choose "
                    "fill_a and fill_k so that it lies in [0, 1]"
                )

    def depths(self) -> list[int]:
        return sorted({d for a in self.actions if isinstance(a, tuple) for d in a})

    def fill_probability(self, depth: float) -> float:
        return self.fill_a * math.exp(-self.fill_k * depth)


def outcomes(book: Book, q: int, action) -> list[tuple[float, int, float]]:
    """(probability, next inventory, expected reward without the mid's move) of one step
    from inventory q: fills, the inventory penalty on q', and flattening."""
    Q = book.max_inventory
    if action == FLATTEN:
        return [(1.0, 0, -book.flatten_cost * abs(q))]
    if action == NOOP:
        return [(1.0, q, -book.inventory_penalty * q * q)]
    bid, ask = action
    p_bid = book.fill_probability(bid) if q < Q else 0.0
    p_ask = book.fill_probability(ask) if q > -Q else 0.0
    out = []
    for bid_fill, ask_fill in itertools.product((0, 1), (0, 1)):
        p = (p_bid if bid_fill else 1 - p_bid) * (p_ask if ask_fill else 1 - p_ask)
        if p == 0:
            continue
        q_next = q + bid_fill - ask_fill
        r = bid * bid_fill + ask * ask_fill - book.inventory_penalty * q_next * q_next
        out.append((p, q_next, r))
    return out


def _backup(book: Book, choose) -> np.ndarray:
    """V[t, q + Q] by backward induction; `choose(t, q, values)` returns the value of the
    state from each action's value (max for the optimum, an expectation for a policy)."""
    Q, T = book.max_inventory, book.horizon
    V = np.zeros((T + 1, 2 * Q + 1))
    V[T] = [-book.terminal_penalty * abs(q) for q in range(-Q, Q + 1)]
    for t in range(T - 1, -1, -1):
        for q in range(-Q, Q + 1):
            values = np.array(
                [
                    sum(p * (r + V[t + 1, qn + Q]) for p, qn, r in outcomes(book, q, a))
                    for a in book.actions
                ]
            )
            V[t, q + Q] = choose(t, q, values)
    return V


def solve(book: Book) -> tuple[np.ndarray, np.ndarray]:
    """(V*[t, q + Q], the optimal action index [t, q + Q]) by backward induction (the
    first best action on ties)."""
    Q, T = book.max_inventory, book.horizon
    best = np.zeros((T, 2 * Q + 1), dtype=int)

    def choose(t, q, values):
        best[t, q + Q] = int(np.argmax(values))
        return values.max()

    return _backup(book, choose), best


def evaluate(book: Book, policy: np.ndarray) -> np.ndarray:
    """V^π[t, q + Q] of a policy given as action probabilities [T, 2Q + 1, n_actions] or
    action indices [T, 2Q + 1]."""
    policy = np.asarray(policy)
    if policy.ndim == 2:
        policy = np.eye(len(book.actions))[policy]
    shape = (book.horizon, 2 * book.max_inventory + 1, len(book.actions))
    if policy.shape != shape:
        raise ValueError(f"policy has shape {policy.shape}; expected {shape} (t, q + Q, action)")
    Q = book.max_inventory
    return _backup(book, lambda t, q, values: float(policy[t, q + Q] @ values))


def trade_completion(step_pnl: float, fee: float, profit_ratio: float = 2.0) -> float:
    """+1 above profit_ratio·fee, the PnL itself in (0, that], −1 below −fee, else the PnL
    [code crypto-rl:gym_trading/utils/reward.py trade_completion]."""
    if step_pnl > fee * profit_ratio:
        return 1.0
    if step_pnl > 0.0:
        return step_pnl
    if step_pnl < -fee:
        return -1.0
    return step_pnl


def differential_sharpe(
    ret: float, a: float, b: float, eta: float = 0.01
) -> tuple[float, float, float]:
    """(reward, A', B'): Moody's differential Sharpe ratio (B·ΔA − ½A·ΔB)/(B − A²)^{3/2}
    × 0.01, A' = A + η·ΔA, B' = B + η·ΔB [code crypto-rl:reward.py]. A zero return leaves
    A and B and pays 0 (the code); so does B ≤ A² (the code divides by zero or takes a
    negative number's power there [ours: 0])."""
    if ret == 0.0:
        return 0.0, a, b
    da, db = ret - a, ret * ret - b
    a_next, b_next = a + eta * da, b + eta * db
    variance = b - a * a
    numerator = b * da - 0.5 * a * db
    if variance <= 0.0 or numerator == 0.0:
        return 0.0, a_next, b_next
    return 0.01 * numerator / variance**1.5, a_next, b_next


class MarketMakingEnv(gym.Env):
    """`policylab/MarketMaking-v0`: observation [t/T, q/Q], Discrete(17) actions (module
    docstring). Knobs: the `Book` fields, `reward` ∈ {pnl, trade_completion, dsr},
    `fee` (market fee, 0.20 % [code configurations.py]) and `tick_return` (one tick as a
    fraction of the price, for the return-based rewards [ours])."""

    REWARDS = ("pnl", "trade_completion", "dsr")

    def __init__(
        self,
        reward: str = "pnl",
        fee: float = 0.002,
        tick_return: float = 0.001,
        dsr_eta: float = 0.01,
        **book,
    ) -> None:
        if reward not in self.REWARDS:
            raise ValueError(f"reward={reward!r}; expected one of {', '.join(self.REWARDS)}")
        self.book = Book(**book)
        self.reward_kind, self.fee, self.tick_return, self.dsr_eta = (
            reward,
            fee,
            tick_return,
            dsr_eta,
        )
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(self.book.actions))
        self.t, self.q, self.dsr_a, self.dsr_b = 0, 0, 0.0, 0.0

    def _obs(self) -> np.ndarray:
        return np.array(
            [self.t / self.book.horizon, self.q / self.book.max_inventory], dtype=np.float32
        )

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.q, self.dsr_a, self.dsr_b = 0, 0, 0.0, 0.0
        return self._obs(), {}

    def step(self, action):
        book, rng = self.book, self.np_random
        chosen = book.actions[int(action)]
        q, Q = self.q, book.max_inventory
        realised = 0.0
        if chosen == FLATTEN:
            realised, q_next = -book.flatten_cost * abs(q), 0
        elif chosen == NOOP:
            q_next = q
        else:
            bid, ask = chosen
            bid_fill = q < Q and rng.random() < book.fill_probability(bid)
            ask_fill = q > -Q and rng.random() < book.fill_probability(ask)
            realised = bid * bid_fill + ask * ask_fill
            q_next = q + int(bid_fill) - int(ask_fill)
        move = 1 if rng.random() < 0.5 else -1
        self.t, self.q = self.t + 1, q_next
        terminated = self.t >= book.horizon
        pnl = realised + q_next * move - book.inventory_penalty * q_next * q_next
        if terminated:
            pnl -= book.terminal_penalty * abs(q_next)
        reward = self._reward(pnl, realised)
        info = {"pnl": pnl, "inventory": q_next}
        return self._obs(), reward, terminated, False, info

    def _reward(self, pnl: float, realised: float) -> float:
        if self.reward_kind == "pnl":
            return float(pnl)
        if self.reward_kind == "trade_completion":
            return trade_completion(realised * self.tick_return, self.fee)
        reward, self.dsr_a, self.dsr_b = differential_sharpe(
            pnl * self.tick_return, self.dsr_a, self.dsr_b, self.dsr_eta
        )
        return reward


def policy_table(act, book: Book) -> np.ndarray:
    """The action indices [T, 2Q + 1] a policy `act(observations [N, 2]) -> actions [N]`
    takes at every (t, q) — for `evaluate` on a trained policy's deterministic actions."""
    Q, T = book.max_inventory, book.horizon
    grid = np.array([[t / T, q / Q] for t in range(T) for q in range(-Q, Q + 1)], dtype=np.float32)
    return np.asarray(act(grid)).reshape(T, 2 * Q + 1)
