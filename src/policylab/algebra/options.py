"""Config dataclasses of algebra components and the checks they share.

Every registered component declares a frozen dataclass of its options. `build_options`
turns keyword overrides into one, rejecting unknown keys with the list of valid ones;
each dataclass checks its own values in `__post_init__` with the helpers below, so a bad
value fails when the component is built, not in the middle of a training step."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

C = TypeVar("C")


def build_options(cls: type[C], overrides: Mapping[str, Any], *, where: str) -> C:
    """`cls(**overrides)` with an error naming `where` and the valid fields on unknown keys."""
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"{where}: unknown option(s) {', '.join(unknown)}; valid options: "
            f"{', '.join(sorted(fields)) or '(none)'}"
        )
    return cls(**overrides)


def describe_options(cls: type | None) -> list[tuple[str, Any, str]]:
    """(name, default, help) for each field, for `policylab describe`."""
    if cls is None:
        return []
    rows = []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else None
        rows.append((f.name, default, f.metadata.get("help", "")))
    return rows


def option(default: Any, help: str) -> Any:
    """A dataclass field with a one-line description (shown by `policylab describe`); a
    dict or list default is copied for each instance."""
    if isinstance(default, (dict, list)):
        return dataclasses.field(
            default_factory=lambda: type(default)(default), metadata={"help": help}
        )
    return dataclasses.field(default=default, metadata={"help": help})


def check_choice(owner: str, field: str, value: Any, choices: Iterable[Any]) -> None:
    choices = list(choices)
    if value not in choices:
        shown = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{owner}.{field} = {value!r} is not valid; choices: {shown}")


def check_range(
    owner: str,
    field: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    allow_none: bool = False,
    finite: bool = False,
) -> None:
    """Check `low <= value <= high` (strict on the low side when `low_open`); NaN is
    always refused, ±inf too when `finite`."""
    if value is None:
        if allow_none:
            return
        raise ValueError(f"{owner}.{field} must be set, got None")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{owner}.{field} must be a number, got {value!r}")
    if value != value or (finite and value in (float("inf"), float("-inf"))):
        kind = "a finite number" if finite else "a number, not NaN"
        raise ValueError(f"{owner}.{field} = {value!r}; it must be {kind}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and value > high
    if too_low or too_high:
        lo = "" if low is None else f"{'>' if low_open else '>='} {low}"
        hi = "" if high is None else f"<= {high}"
        need = " and ".join(s for s in (lo, hi) if s)
        raise ValueError(f"{owner}.{field} = {value!r} is out of range; it must be {need}")
