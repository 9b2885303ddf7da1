"""A small, safe parser and exact evaluator of integer arithmetic expressions.

Grammar (usual precedence, left to right; spaces ignored):

    expr   := term (("+" | "-") term)*
    term   := factor (("*" | "/") factor)*
    factor := INTEGER | "(" expr ")"

Only non-negative integer literals (no leading zeros, at most `MAX_DIGITS` digits), the four
operators and parentheses are accepted: no unary minus, no "**", no names, no calls.
Nothing is ever passed to `eval`. Values are exact `fractions.Fraction`s. Any text outside
the grammar, longer than the length limit, or dividing by zero gives None, never an
exception — model output is hostile input.
"""

from __future__ import annotations

from fractions import Fraction

MAX_LENGTH = 64
MAX_DIGITS = 6
_OPERATORS = "+-*/()"


class _Invalid(Exception):
    """The text is not an expression of the grammar."""


def evaluate(text: str, max_length: int = MAX_LENGTH) -> tuple[Fraction, list[int]] | None:
    """The exact value of `text` and its integer literals in order of appearance, or None
    when `text` is not a valid expression (or is longer than `max_length` characters, or
    divides by zero).

    >>> evaluate("3*(5+7)")
    (Fraction(36, 1), [3, 5, 7])
    >>> evaluate("2**3") is None
    True
    """
    if not isinstance(text, str) or len(text) > max_length:
        return None
    try:
        tokens = _tokenize(text)
        parser = _Parser(tokens)
        value = parser.expr()
        if parser.pos != len(tokens):
            raise _Invalid
    except (_Invalid, ZeroDivisionError):
        return None
    return value, parser.literals


def _tokenize(text: str) -> list[str | int]:
    tokens: list[str | int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == " ":
            i += 1
        elif ch in _OPERATORS:
            tokens.append(ch)
            i += 1
        elif "0" <= ch <= "9":
            j = i
            while j < len(text) and "0" <= text[j] <= "9":
                j += 1
            digits = text[i:j]
            if len(digits) > MAX_DIGITS or (len(digits) > 1 and digits[0] == "0"):
                raise _Invalid
            tokens.append(int(digits))
            i = j
        else:
            raise _Invalid
    return tokens


class _Parser:
    """Recursive descent over the tokens; evaluates as it parses."""

    def __init__(self, tokens: list[str | int]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.literals: list[int] = []

    def _peek(self) -> str | int | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def expr(self) -> Fraction:
        value = self.term()
        while self._peek() in ("+", "-"):
            op = self.tokens[self.pos]
            self.pos += 1
            right = self.term()
            value = value + right if op == "+" else value - right
        return value

    def term(self) -> Fraction:
        value = self.factor()
        while self._peek() in ("*", "/"):
            op = self.tokens[self.pos]
            self.pos += 1
            right = self.factor()
            value = value * right if op == "*" else value / right
        return value

    def factor(self) -> Fraction:
        token = self._peek()
        if isinstance(token, int):
            self.pos += 1
            self.literals.append(token)
            return Fraction(token)
        if token == "(":
            self.pos += 1
            value = self.expr()
            if self._peek() != ")":
                raise _Invalid
            self.pos += 1
            return value
        raise _Invalid
