"""Prefix expressions over {add, sub, mul, sin, cos, n2, x_i}: a safe parser, a torch
evaluator and the Lie derivative V̇ = ∇V·f by autograd (Zou et al., arXiv:2502.02014 §6.1;
DSO's function set ["add", "sub", "mul", "sin", "cos", "n2"] [code
Analytical-Lyapunov-Function-Discovery:example_config/config_3d_trig.py]).

One character per token, so the tiny character-level model writes one token per step
[ours]:

| char | token | arity |   | char      | token       | arity |
|------|-------|-------|---|-----------|-------------|-------|
| `+`  | add   | 2     |   | `s`       | sin         | 1     |
| `-`  | sub   | 2     |   | `c`       | cos         | 1     |
| `*`  | mul   | 2     |   | `^`       | n2 (square) | 1     |
| `1`…`9` | x_1…x_9 | 0 |   |           |             |       |

So `+^1^2` is x₁² + x₂² and `--^2c1c1` is x₂² − 2cos x₁. Spaces are ignored. There are no
constants (DSO's "const" token is off in the paper's configs [code config_3d_trig.py prior
const.on False]). Nothing is ever passed to `eval`: text outside the grammar raises
`ExpressionError` (a ValueError naming the position), or `try_parse` gives None — model
output is hostile input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

MAX_TOKENS = 32  # our choice: the paper's length prior is 4–12 tokens [code config]
BINARY = {"+": torch.add, "-": torch.sub, "*": torch.mul}
UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "s": torch.sin,
    "c": torch.cos,
    "^": torch.square,
}
VARIABLES = "123456789"
TOKEN_NAMES = {"+": "add", "-": "sub", "*": "mul", "s": "sin", "c": "cos", "^": "n2"}


class ExpressionError(ValueError):
    """The text is not a prefix expression of the grammar."""


@dataclass(frozen=True)
class Node:
    """One token of an expression tree: `token` (a char of the table) and its children."""

    token: str
    children: tuple[Node, ...] = ()

    def variables(self) -> frozenset[int]:
        """The 1-based indices of the state variables the expression reads."""
        if self.token in VARIABLES:
            return frozenset({int(self.token)})
        return frozenset().union(*(c.variables() for c in self.children))

    def prefix(self) -> str:
        """The expression written back as prefix text (no spaces)."""
        return self.token + "".join(c.prefix() for c in self.children)


def parse(text: str, n_vars: int, max_tokens: int = MAX_TOKENS) -> Node:
    """The tree of the prefix expression `text` over x_1..x_{n_vars}.

    Raises ExpressionError naming the position and what was expected when a character is
    not a token, a variable index exceeds `n_vars`, operands are missing, tokens are left
    over, or there are more than `max_tokens` tokens."""
    if not isinstance(text, str):
        raise ExpressionError(f"an expression must be a str, got {type(text).__name__}")
    if not 1 <= n_vars <= len(VARIABLES):
        raise ValueError(f"n_vars={n_vars!r} is invalid; accepted: 1 to {len(VARIABLES)}")
    tokens = [ch for ch in text if ch != " "]
    if not tokens:
        raise ExpressionError("the expression is empty")
    if len(tokens) > max_tokens:
        raise ExpressionError(f"{len(tokens)} tokens; at most {max_tokens} are accepted")
    allowed = VARIABLES[:n_vars]
    for i, ch in enumerate(tokens):
        if ch not in BINARY and ch not in UNARY and ch not in allowed:
            raise ExpressionError(
                f"token {i} is {ch!r}; accepted: + - * s c ^ and the variables {allowed}"
            )
    # arity-counting walk from the right: a stack of finished subtrees
    stack: list[Node] = []
    for i in range(len(tokens) - 1, -1, -1):
        ch = tokens[i]
        arity = 2 if ch in BINARY else 1 if ch in UNARY else 0
        if len(stack) < arity:
            raise ExpressionError(f"token {i} ({TOKEN_NAMES[ch]}) lacks operands")
        children = tuple(stack.pop() for _ in range(arity))
        stack.append(Node(ch, children))
    if len(stack) != 1:
        raise ExpressionError(
            f"{len(stack) - 1} complete expression(s) left over after the first; "
            "a prefix expression is one tree"
        )
    return stack[0]


def try_parse(text: str, n_vars: int, max_tokens: int = MAX_TOKENS) -> Node | None:
    """`parse`, or None when the text is not an expression of the grammar."""
    try:
        return parse(text, n_vars, max_tokens)
    except ExpressionError:
        return None


def evaluate(tree: Node, x: torch.Tensor) -> torch.Tensor:
    """V(x) for states x [N, n] → [N] (differentiable in x)."""
    if tree.token in VARIABLES:
        return x[:, int(tree.token) - 1]
    if tree.token in BINARY:
        left, right = tree.children
        return BINARY[tree.token](evaluate(left, x), evaluate(right, x))
    return UNARY[tree.token](evaluate(tree.children[0], x))


def value_and_lie_derivative(
    V: Node | Callable[[torch.Tensor], torch.Tensor],
    dynamics: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(V(x) [N], V̇(x) = ∇V(x)·f(x) [N]) by autograd, for a parsed tree or any
    differentiable V: x [N, n] → [N]; `dynamics` maps x [N, n] → ẋ [N, n]. A V that does
    not depend on x has ∇V = 0."""
    x = x.detach().clone().requires_grad_(True)
    value = evaluate(V, x) if isinstance(V, Node) else V(x)
    if value.requires_grad:
        (grad,) = torch.autograd.grad(value.sum(), x, allow_unused=True)
    else:
        grad = None
    grad = torch.zeros_like(x) if grad is None else grad
    with torch.no_grad():
        lie = (grad * dynamics(x.detach())).sum(-1)
    return value.detach(), lie
