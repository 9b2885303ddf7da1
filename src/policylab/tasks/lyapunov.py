"""Lyapunov function search as a language-model task (Zou, Feng, Zhao, Shi, ICML 2025,
arXiv:2502.02014; papers/seed_control_theory.md §6).

The prompt states a dynamical system ẋ = f(x); the completion is a candidate V(x) written
as a prefix expression over {add, sub, mul, sin, cos, n2, x_i} (`tasks/symbolic.py`: one
character per token, e.g. `+^1^2` = x₁² + x₂²):

| system   | prompt (abridged)                          | canonical answer      |
|----------|--------------------------------------------|-----------------------|
| pendulum | `x1'=x2 x2'=-sin(x1)-0.1x2 V:`             | `--^2c1c1`            |
| linear3  | `x1'=-x1+2x2 x2'=-2x1-x2+x3 x3'=-x2-x3 V:` | `+^1+^2^3`            |
| poly6    | the code's 6-D polynomial system           | `+^1+^2+^3+^4+^5^6`   |

Verifier (rows with `check` = "reward", the training split):

    R = 1 / (1 + 2.5·mean relu(0.05 − (V(x) − V(0))) + mean relu(V̇(x) + 0.2))  ∈ (0, 1]

over the system's fixed training states, V̇ = ∇V·f by autograd [code
dso/task/regression/regression.py make_regression_metric]. R = 0 when the text does not
parse, V misses a state variable [paper §6.1], or any value is NaN/inf (counted in
`task.failures`). Held-out rows (`check` = "success") score 1.0 iff the success test
holds on fresh states, mean relu(−(V − V(0))) + mean relu(V̇) < 1e-12 [code `evaluate`],
else 0.0 — so `eval/greedy_accuracy` is the held-out success rate.

One system per task (knob `system`), as the paper searches one system per run: every row
has the same prompt; train rows share the fixed training states (`states_seed`), each
test row draws fresh states. So unlike the other tasks the split is by states, not by
prompt, and `examples` repeats the prompt [ours]. Knobs: system="pendulum",
n_states=15000 [code csv fn_d_all_y_5: 15,000 pendulum states], states_seed=0.
`demonstrations(n, seed)` gives random well-formed expressions (not Lyapunov functions)
for an SFT warm-up that teaches the grammar only [ours].
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.tasks.base import Task, check_int, demonstration
from policylab.tasks.symbolic import (
    BINARY,
    UNARY,
    VARIABLES,
    Node,
    try_parse,
    value_and_lie_derivative,
)

MARGIN_V = 0.05  # relu(0.05 − ΔV) [code make_regression_metric]
MARGIN_LIE = 0.2  # relu(V̇ + 0.2) [code make_regression_metric]
WEIGHT_V = 2.5  # 2.5·mean relu(...) [code make_regression_metric]
SUCCESS_TOL = 1e-12  # success test threshold [code evaluate]


@dataclass(frozen=True)
class System:
    """ẋ = f(x) on the box [low, high]^n; `A` for a linear system (f(x) = Ax)."""

    name: str
    n: int
    f: Callable[[torch.Tensor], torch.Tensor]  # x [N, n] → ẋ [N, n]
    low: tuple[float, ...]
    high: tuple[float, ...]
    prompt: str
    answer: str  # a known Lyapunov function in the prefix language
    A: tuple[tuple[float, ...], ...] | None = None

    def sample(self, n: int, seed: int) -> torch.Tensor:
        """n states uniform in the box, float64 [n, dim]."""
        g = torch.Generator().manual_seed(seed)
        low = torch.tensor(self.low, dtype=torch.float64)
        high = torch.tensor(self.high, dtype=torch.float64)
        return low + (high - low) * torch.rand(n, self.n, generator=g, dtype=torch.float64)


def _pendulum(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([x[:, 1], -torch.sin(x[:, 0]) - 0.1 * x[:, 1]], dim=-1)


LINEAR3_A = ((-1.0, 2.0, 0.0), (-2.0, -1.0, 1.0), (0.0, -1.0, -1.0))  # [ours] A + Aᵀ ≺ 0


def _linear3(x: torch.Tensor) -> torch.Tensor:
    return x @ torch.tensor(LINEAR3_A, dtype=x.dtype).T


def _poly6(x: torch.Tensor) -> torch.Tensor:
    x1, x2, x3, x4, x5, x6 = x.unbind(-1)
    return torch.stack(
        [
            -x1 + 0.5 * x2 - 0.1 * x5**2,
            -0.5 * x1 - x2,
            -x3 + 0.5 * x4 - 0.1 * x1**2,
            -0.5 * x3 - x4,
            -x5 + 0.5 * x6,
            -0.5 * x5 - x6 + 0.1 * x2**2,
        ],
        dim=-1,
    )


SYSTEMS = {
    s.name: s
    for s in (
        # [paper §6.2; code csv fn_d_all_y_5] U([−3.14, 3.14] × [−6, 6])
        System(
            "pendulum", 2, _pendulum, (-3.14, -6.0), (3.14, 6.0),
            "x1'=x2 x2'=-sin(x1)-0.1x2 V:", "--^2c1c1",
        ),
        # [ours] a 3-D linear system whose sum of squares is a strict quadratic certificate
        System(
            "linear3", 3, _linear3, (-2.0,) * 3, (2.0,) * 3,
            "x1'=-x1+2x2 x2'=-2x1-x2+x3 x3'=-x2-x3 V:", "+^1+^2^3", LINEAR3_A,
        ),
        # [code config_3d_trig.py dynamics(), "6-D Polynomial"]; box [ours]
        System(
            "poly6", 6, _poly6, (-1.0,) * 6, (1.0,) * 6,
            "x1'=-x1+.5x2-.1x5^2 x2'=-.5x1-x2 x3'=-x3+.5x4-.1x1^2 x4'=-.5x3-x4 "
            "x5'=-x5+.5x6 x6'=-.5x5-x6+.1x2^2 V:", "+^1+^2+^3+^4+^5^6",
        ),
    )
}  # fmt: skip


def reward_from_values(delta_v: torch.Tensor, lie: torch.Tensor) -> float:
    """R = 1/(1 + 2.5·mean relu(0.05 − ΔV) + mean relu(V̇ + 0.2)); ΔV = V(x) − V(0),
    V̇ = ∇V·f, both [N] [code make_regression_metric]."""
    penalty_v = torch.relu(MARGIN_V - delta_v).mean()
    penalty_lie = torch.relu(lie + MARGIN_LIE).mean()
    return float(1.0 / (1.0 + WEIGHT_V * penalty_v + penalty_lie))


def success_from_values(delta_v: torch.Tensor, lie: torch.Tensor) -> bool:
    """mean relu(−ΔV) + mean relu(V̇) < 1e-12 [code `evaluate`]."""
    return float(torch.relu(-delta_v).mean() + torch.relu(lie).mean()) < SUCCESS_TOL


def candidate_values(
    tree: Node, system: System, states: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | str:
    """(ΔV [N], V̇ [N]) of a parsed candidate on `states`, or the reason it scores 0:
    "missing_variable" or "nonfinite"."""
    if tree.variables() != frozenset(range(1, system.n + 1)):
        return "missing_variable"
    value, lie = value_and_lie_derivative(tree, system.f, states)
    at_zero, _ = value_and_lie_derivative(tree, system.f, states.new_zeros(1, system.n))
    delta_v = value - at_zero
    if not (torch.isfinite(delta_v).all() and torch.isfinite(lie).all()):
        return "nonfinite"
    return delta_v, lie


@dataclass(frozen=True)
class LyapunovKnobs:
    system: str = "pendulum"
    n_states: int = 15000
    states_seed: int = 0

    def __post_init__(self) -> None:
        if self.system not in SYSTEMS:
            raise ValueError(
                f"lyapunov knob system={self.system!r} is invalid; accepted: {', '.join(SYSTEMS)}"
            )
        check_int("lyapunov", "n_states", self.n_states, 1, 1_000_000)
        check_int("lyapunov", "states_seed", self.states_seed, 0, 2**31 - 1)


class Lyapunov(Task):
    name = "lyapunov"
    knobs_class = LyapunovKnobs
    columns = ("check", "states_seed")
    chars = "".join(sorted(set("".join(s.prompt for s in SYSTEMS.values()) + "+-*sc^123456789")))

    def __init__(self, **knobs) -> None:
        super().__init__(**knobs)
        self.system = SYSTEMS[self.knobs.system]
        self.failures: Counter[str] = Counter()  # why candidates scored 0, for the log
        self._states: dict[int, torch.Tensor] = {}

    def examples(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """`n` rows of this task's one system: train rows check the reward on the fixed
        training states; each test row checks success on its own fresh states."""
        if split not in ("train", "test"):
            raise ValueError(f"split={split!r} is invalid; accepted: train, test")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n={n!r} is invalid; accepted: an integer >= 0")
        rng = random.Random(seed)
        rows = []
        for _ in range(n):
            fresh = 2**31 + rng.randrange(2**31)  # never a training seed (< 2**31)
            check, states = (
                ("reward", self.knobs.states_seed) if split == "train" else ("success", fresh)
            )
            rows.append(
                {
                    "prompt": self.system.prompt,
                    "answer": self.system.answer,
                    "completion": demonstration(self.system.answer),
                    "check": check,
                    "states_seed": states,
                }
            )
        return rows

    def draw(self, split: str, rng: random.Random, exclude=()) -> dict | None:
        return self.examples(split, 1, seed=rng.randrange(2**31))[0]

    def states(self, seed: int) -> torch.Tensor:
        """The `n_states` states of `seed` (the training ones are cached)."""
        if seed not in self._states:
            states = self.system.sample(self.knobs.n_states, seed)
            if seed != self.knobs.states_seed:
                return states
            self._states[seed] = states
        return self._states[seed]

    def demonstrations(self, n: int, seed: int = 0) -> list[dict]:
        """n SFT rows {prompt, completion} whose answers are random well-formed
        expressions over this system's variables (2–12 tokens), not Lyapunov functions:
        a warm-up that teaches the grammar, never the answer [ours]."""
        rng = random.Random(seed)
        rows = []
        while len(rows) < n:
            text = random_expression(rng, self.system.n, max_tokens=12)
            if text != self.system.answer:
                rows.append({"prompt": self.system.prompt, "completion": demonstration(text)})
        return rows

    def _score(self, text: str, example: dict) -> float:
        tree = try_parse(text, self.system.n)
        if tree is None:
            self.failures["parse_error"] += 1
            return 0.0
        values = candidate_values(tree, self.system, self.states(int(example["states_seed"])))
        if isinstance(values, str):
            self.failures[values] += 1
            return 0.0
        if example["check"] == "success":
            return float(success_from_values(*values))
        reward = reward_from_values(*values)
        return reward if math.isfinite(reward) else 0.0


def random_expression(rng: random.Random, n_vars: int, max_tokens: int = 12) -> str:
    """A uniformly built random prefix expression over x_1..x_{n_vars} with at most
    `max_tokens` tokens: each open slot becomes an operator while room remains (p = 0.5),
    else a variable [ours]."""
    ops = list(BINARY) + list(UNARY)
    out: list[str] = []
    open_slots = 1
    while open_slots:
        room = max_tokens - len(out) - open_slots  # tokens left beyond one leaf per slot
        op = rng.choice(ops) if room > 0 and rng.random() < 0.5 else None
        if op is None or (op in BINARY and room < 2):
            out.append(rng.choice(VARIABLES[:n_vars]))
            open_slots -= 1
        else:
            out.append(op)
            open_slots += 1 if op in BINARY else 0
    return "".join(out)
