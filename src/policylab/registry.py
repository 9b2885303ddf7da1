"""Registries: every component kind (advantage estimator, policy loss, KL estimator, ...)
is a name → entry table. Unknown names fail with the list of choices."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """An unknown registry name. A KeyError for dict-like callers, a ValueError for
    config validation; its message lists the registered choices."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered component: the function, its config class (or None) and a summary."""

    name: str
    fn: T
    config: type | None
    summary: str


class Registry(Generic[T]):
    """A name → component table for one kind of component (e.g. "policy loss").

    >>> losses = Registry("policy loss")
    >>> @losses.register("reinforce")
    ... def reinforce(...): ...
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}

    def register(
        self, name: str, *, config: type | None = None, summary: str | None = None
    ) -> Callable[[T], T]:
        """Decorator registering `fn` under `name`; a duplicate name is an error."""

        def decorator(fn: T) -> T:
            self.add(name, fn, config=config, summary=summary)
            return fn

        return decorator

    def add(
        self,
        name: str,
        fn: T,
        *,
        config: type | None = None,
        summary: str | None = None,
        replace: bool = False,
    ):
        """Register `fn` under `name`; a duplicate name is an error unless `replace` (a
        notebook cell run again registers its new function under the same name)."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._entries and not replace:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        if summary is None:
            doc = getattr(fn, "__doc__", None) or ""
            summary = doc.strip().splitlines()[0] if doc.strip() else ""
        self._entries[name] = Entry(name=name, fn=fn, config=config, summary=summary)

    def entry(self, name: str) -> Entry[T]:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; choices: {', '.join(self.names())}"
            ) from None

    def get(self, name: str) -> T:
        """The registered function; an unknown name raises UnknownNameError listing choices."""
        return self.entry(name).fn

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: Any) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
