"""How a reward function is called, read from its signature: TRL's way (every argument
by keyword) or positionally (prompts, completions first), and which data columns and
extras (`completion_ids`, `trainer_state`) it takes."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Takes:
    """What a reward function's signature accepts: called by keyword (`keywords`, TRL's
    way) or positionally; `params` the data arguments it names (besides prompts and
    completions) and `required` those without a default; `anything`: it takes **kwargs
    (or its signature cannot be read), so it gets every column and extra."""

    keywords: bool
    params: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    anything: bool = True
    names: frozenset[str] = frozenset()

    def accepts(self, key: str) -> bool:
        return self.anything or key in self.names


def takes(fn: Callable) -> Takes:
    """By keyword when the function names `completions`, or takes **kwargs and fewer
    than two positional parameters (TRL's `def reward(completions, **kwargs)`); else
    positionally, its first two parameters being the prompts and the completions."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return Takes(keywords=False)
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    anything = any(p.kind is p.VAR_KEYWORD for p in params)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind is p.VAR_POSITIONAL for p in params)
    keywords = any(p.name == "completions" for p in named) or (
        anything and len(positional) < 2 and not var_positional
    )
    if keywords:
        data = [p for p in named if p.name not in ("prompts", "completions")]
    else:
        data = [p for p in params[2:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    data = [p for p in data if p.name != "trainer_state"]  # handed to every call itself
    required = tuple(p.name for p in data if p.default is p.empty)
    names = frozenset(p.name for p in named)
    return Takes(keywords, tuple(p.name for p in data), required, anything, names)


def columns_for(name: str, how: Takes, columns: Mapping[str, Any]) -> dict[str, Any]:
    """All columns for a function taking **kwargs; else only the ones it names. A required
    column that is missing is an error naming the function and the available columns."""
    missing = [p for p in how.required if p not in columns]
    if missing:
        raise ValueError(
            f"reward function {name!r} needs column(s) {', '.join(missing)}; the data has: "
            f"{', '.join(sorted(columns)) or '(none)'}"
        )
    if how.anything:
        return dict(columns)
    return {p: columns[p] for p in how.params if p in columns}
