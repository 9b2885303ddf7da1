"""`trade_sim`: a seeded, regime-switching synthetic market for FLAG-Trader's testbed
(papers/seed_agents.md §A5), as plain functions, a gymnasium environment with the
7-number observation (for the control trainer's MLP PPO and the LM policy of
policies/lm_control.py) and the trader's metrics.

Prices. p_t = p_{t−1}·exp(μ_{s_t} + σ·ε_t), ε_t ~ N(0, 1), hidden regime s_t ∈ {up, down}
(Markov, stay probability 0.95), μ_up = +0.004, μ_down = −0.004, σ = 0.01, p_0 = 100
[ours, §A5]. A series holds `window` moves of history before the first decision, then
`days` decisions. Training series come from seeds [0, 10⁶), held-out ones from
[10⁶, 2·10⁶): the two splits never share a series.

Trading. Actions B (buy), S (sell), H (hold); all-in / all-out; a trade costs `cost` of
its value (0.1 %). Buying while holding and selling while flat change nothing and cost
nothing. V = cash + shares·price; the reward of decision t is r_t = log(V_{t+1}/V_t).

State. The last `window` daily moves as signed digits, bucket = clip(round(100·log-return
/ 0.5), −9, 9), then `|`, the holding flag and `:`, e.g. `+3-1+2+0+4-2|1:` (15
characters); the gymnasium observation is the same 7 numbers (6 buckets, the flag).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np

ACTIONS = ("B", "S", "H")  # action index → the LM's token (policies/lm_control.py)
BUY, SELL, HOLD = 0, 1, 2
TRAIN_BASE, TEST_BASE, SPLIT_SIZE = 0, 1_000_000, 1_000_000
TRADING_DAYS = 252  # annualisation of Sharpe ratio and volatility


@dataclass(frozen=True)
class MarketKnobs:
    """Difficulty knobs of the simulated market (defaults [ours], seed_agents.md §A5).
    Smaller |μ|/σ or a lower stay probability make momentum weaker and the task harder."""

    days: int = 60  # decisions per episode
    mu: float = 0.004  # |drift| of a regime per day
    sigma: float = 0.01  # daily volatility
    stay: float = 0.95  # probability that the regime persists a day
    cost: float = 0.001  # fraction of the traded value paid per trade
    window: int = 6  # moves shown in the state

    def __post_init__(self) -> None:
        checks = {
            "days": (self.days >= 1, "an integer ≥ 1"),
            "mu": (math.isfinite(self.mu), "a finite number"),
            "sigma": (math.isfinite(self.sigma) and self.sigma >= 0, "a finite number ≥ 0"),
            "stay": (0.0 <= self.stay <= 1.0, "a probability in [0, 1]"),
            "cost": (0.0 <= self.cost < 1.0, "a fraction in [0, 1)"),
            "window": (1 <= self.window <= 20, "an integer in [1, 20]"),
        }
        for name, (ok, accepted) in checks.items():
            if not ok:
                raise ValueError(
                    f"trade_sim knob {name} = {getattr(self, name)!r}; accepted: {accepted}"
                )


def series_seed(split: str, seed: int) -> int:
    """The series seed of example `seed` of a split: disjoint ranges for train and test."""
    if split not in ("train", "test"):
        raise ValueError(f"trade_sim split {split!r}; choices: train, test")
    return (TRAIN_BASE if split == "train" else TEST_BASE) + int(seed) % SPLIT_SIZE


def simulate_prices(seed: int, knobs: MarketKnobs = MarketKnobs()) -> np.ndarray:
    """Prices p_0 … p_{window+days} [window + days + 1] of series `seed` (float64)."""
    rng = np.random.default_rng(seed)
    n = knobs.window + knobs.days
    regime = 1 if rng.random() < 0.5 else -1
    moves = np.empty(n)
    for t in range(n):
        if rng.random() >= knobs.stay:
            regime = -regime
        moves[t] = regime * knobs.mu + knobs.sigma * rng.standard_normal()
    return 100.0 * np.exp(np.concatenate([[0.0], np.cumsum(moves)]))


def check_prices(prices, window: int = 0) -> np.ndarray:
    """`prices` as float64 [N], or a ValueError naming the first bad entry: every price must
    be finite and > 0, and a series needs window + 2 prices (a history and one decision)."""
    series = np.asarray(prices, dtype=np.float64)
    if series.ndim != 1 or len(series) < window + 2:
        raise ValueError(
            f"trade_sim price series of shape {series.shape}; accepted: a 1-D series of at "
            f"least window + 2 = {window + 2} prices"
        )
    bad = ~np.isfinite(series) | (series <= 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"trade_sim price series: price[{i}] = {float(series[i])!r}; "
            "accepted: finite prices > 0"
        )
    return series


def buckets(prices: np.ndarray, t: int, window: int) -> list[int]:
    """The last `window` moves before decision time t: clip(round(100·log(p_s/p_{s−1})/0.5),
    −9, 9) for s = t−window+1 … t."""
    moves = np.log(prices[t - window + 1 : t + 1] / prices[t - window : t])
    return [int(b) for b in np.clip(np.round(100.0 * moves / 0.5), -9, 9)]


def state_text(moves: list[int], holding: bool) -> str:
    """`+3-1+2+0+4-2|1:`: signed digits of the moves, `|`, the holding flag, `:`."""
    return "".join(f"{m:+d}" for m in moves) + f"|{int(holding)}:"


def observation_text(obs) -> str:
    """The state text of a 7-number observation (6 buckets, holding flag)."""
    values = [int(round(float(v))) for v in obs]
    return state_text(values[:-1], values[-1] > 0)


def trade(action: int, price: float, cash: float, shares: float, cost: float):
    """(cash, shares, traded) after action at `price`: B buys with all cash, S sells every
    share, both paying `cost` of the traded value; B while holding, S while flat and H do
    nothing and cost nothing."""
    if action == BUY and shares == 0:
        return 0.0, cash * (1 - cost) / price, True
    if action == SELL and shares > 0:
        return shares * price * (1 - cost), 0.0, True
    return cash, shares, False


def play(prices, actions, cost: float = 0.001, start: float = 1.0) -> np.ndarray:
    """Portfolio values V_0 … V_n [n + 1] of actions a_0 … a_{n−1} taken at prices
    p_0 … p_{n−1} (V_{t+1} marked at p_{t+1}); rewards are log(V_{t+1}/V_t)."""
    prices = check_prices(prices)
    cash, shares, values = start, 0.0, [start]
    for t, action in enumerate(actions):
        cash, shares, _ = trade(int(action), prices[t], cash, shares, cost)
        values.append(cash + shares * prices[t + 1])
    return np.array(values)


def trade_metrics(values, trades: int | None = None) -> dict[str, float]:
    """A trader's figures from portfolio values V_0 … V_n: cumulative return CR = V_n/V_0 − 1,
    Sharpe ratio SR = mean(d)/std(d)·√252 over daily returns d_t = V_{t+1}/V_t − 1 (Bessel
    std; 0 when the std is 0), annualised volatility AV = std(d)·√252, maximum drawdown
    MDD = max_t (max_{s≤t} V_s − V_t)/max_{s≤t} V_s, and turnover = trades per decision."""
    values = np.asarray(values, dtype=np.float64)
    daily = values[1:] / values[:-1] - 1.0
    std = float(daily.std(ddof=1)) if len(daily) > 1 else 0.0
    peak = np.maximum.accumulate(values)
    out = {
        "trade/cr": float(values[-1] / values[0] - 1.0),
        "trade/sharpe": float(daily.mean() / std * math.sqrt(TRADING_DAYS)) if std > 0 else 0.0,
        "trade/av": std * math.sqrt(TRADING_DAYS),
        "trade/mdd": float(((peak - values) / peak).max()),
    }
    if trades is not None:
        out["trade/turnover"] = trades / max(len(daily), 1)
    return out


class TradeSimEnv(gym.Env):
    """The market as a gymnasium environment: observation the 7 numbers of the state (6
    move buckets, holding flag), actions Discrete(3) = B, S, H, reward log(V_{t+1}/V_t).
    An episode is `days` decisions on one series and ends with `terminated` (never
    truncated); the last step's info holds the episode's trade metrics and action counts.
    `reset(seed=s)` plays series `series_seed(split, s)`; without a seed, a series drawn
    from the split's range. `prices` replaces the simulator by one given series."""

    metadata = {"render_modes": []}

    def __init__(self, split: str = "train", prices=None, **knobs) -> None:
        market = MarketKnobs(**knobs)
        self.knobs = asdict(market)  # plain values: the collector can save the env's state
        series_seed(split, 0)  # checks the split's name
        self.split = split
        self.given = None if prices is None else check_prices(prices, market.window)
        high = np.array([9.0] * market.window + [1.0], dtype=np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(ACTIONS))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.given is not None:
            self.prices = self.given
        else:
            draw = seed if seed is not None else int(self.np_random.integers(SPLIT_SIZE))
            market = MarketKnobs(**self.knobs)
            self.prices = simulate_prices(series_seed(self.split, draw), market)
        window = self.knobs["window"]
        self.t, self.end = window, min(len(self.prices) - 1, window + self.knobs["days"])
        self.cash, self.shares, self.trades = 1.0, 0.0, 0
        self.values = [1.0]
        self.counts = [0, 0, 0]
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        moves = buckets(self.prices, self.t, self.knobs["window"])
        return np.array(moves + [float(self.shares > 0)], dtype=np.float32)

    def step(self, action):
        action = int(action)
        before = self.values[-1]
        self.cash, self.shares, traded = trade(
            action, self.prices[self.t], self.cash, self.shares, self.knobs["cost"]
        )
        self.trades += int(traded)
        self.t += 1
        after = self.cash + self.shares * self.prices[self.t]
        self.values.append(after)
        self.counts[action] += 1
        done = self.t >= self.end
        info = {}
        if done:
            info = trade_metrics(self.values, self.trades)
            n = sum(self.counts)
            for name, count in zip(ACTIONS, self.counts, strict=True):
                info[f"trade/freq_{name}"] = count / n
        return self._obs(), math.log(after / before), done, False, info


def buy_and_hold(obs: np.ndarray) -> np.ndarray:
    """Baseline: buy on the first day and hold (B while holding is a no-op)."""
    return np.full(len(obs), BUY)


def momentum(obs: np.ndarray) -> np.ndarray:
    """Baseline: hold the asset while the sum of the shown moves is > 0, else be flat."""
    return np.where(np.asarray(obs)[:, :-1].sum(1) > 0, BUY, SELL)


BASELINES = {"buy_and_hold": buy_and_hold, "momentum": momentum}


def evaluate_trader(act, n: int = 50, split: str = "test", first: int = 0, **knobs) -> dict:
    """Play `act` (observations [n, 7] → actions [n]) on series first … first + n − 1 of
    `split`, all in lock-step; the mean of each trade metric over the series, and the
    per-series values under "per_series" (the arena pairs algorithms series by series)."""
    envs = [TradeSimEnv(split, **knobs) for _ in range(n)]
    obs = np.stack([env.reset(seed=first + i)[0] for i, env in enumerate(envs)])
    infos: list[dict] = [{} for _ in range(n)]
    running = True
    while running:
        actions = np.asarray(act(obs))
        steps = [env.step(int(a)) for env, a in zip(envs, actions, strict=True)]
        obs = np.stack([s[0] for s in steps])
        for i, s in enumerate(steps):
            if s[2]:
                infos[i] = s[4]
        running = not all(s[2] for s in steps)
    per_series = {key: [info[key] for info in infos] for key in infos[0]}
    return {**{k: float(np.mean(v)) for k, v in per_series.items()}, "per_series": per_series}
