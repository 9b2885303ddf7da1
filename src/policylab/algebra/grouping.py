"""Grouping keys: which rows of a batch are compared with each other (spec
papers/seed_agents.md §A0.4).

`group_by(columns, keys)` numbers the distinct tuples of the named per-row columns in the
order they first appear. Named groupings of the agent methods: `instance` (GRPO over
trajectories), `instance,turn,agent` (AT-GRPO, arXiv:2510.11062; code PettingLLMs
`_assign_consistent_uids`: uid = (env, turn, agent)), `instance,anchor` (GiGPO step groups,
arXiv:2505.10978 eq. 6: rows whose pre-turn environment state is identical),
`instance,attempt`, `instance,phase`.

The house rules (singleton and zero-variance groups get A = 0, NaN rewards stay out of the
statistics) belong to the estimators that read the ids, not to the grouping.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import torch

from policylab.rollouts import Rollouts

# row fields of Rollouts a key may name, besides its extras; "agent" is the spec's name
# for agent_ids
_ROW_FIELD_KEYS = {
    "agent": "agent_ids",
    "agent_ids": "agent_ids",
    "group_ids": "group_ids",
    "dones": "dones",
    "truncated": "truncated",
}


def parse_keys(keys: Sequence[str] | str) -> tuple[str, ...]:
    """ "instance,turn,agent" or ["instance", "turn", "agent"] → ("instance", "turn", "agent")."""
    names = keys.split(",") if isinstance(keys, str) else list(keys)
    names = [str(k).strip() for k in names]
    if not names or any(not k for k in names):
        raise ValueError(f"group_by: keys {keys!r} name an empty column; e.g. 'instance,turn'")
    return tuple(names)


def row_columns(rollouts: Rollouts) -> dict[str, Any]:
    """The per-row columns of a batch a grouping key may name: its extras first, then the
    row fields (`agent` = agent_ids)."""
    columns: dict[str, Any] = {}
    for key, field in _ROW_FIELD_KEYS.items():
        value = getattr(rollouts, field)
        if value is not None:
            columns[key] = value
    columns.update(rollouts.extras)  # extras win over a row field of the same name
    return columns


def group_by(
    columns: Mapping[str, torch.Tensor | Sequence[Any]] | Rollouts, keys: Sequence[str] | str
) -> torch.Tensor:
    """Dense group ids of the tuples of the named row columns, in first-appearance order.

    g_i = rank of (c_1[i], …, c_K[i]) among the distinct tuples, numbered 0, 1, … in the
    order rows first show them (spec §A0.4; T-A0.2: keys (e,t,k) = [(0,0,0), (0,0,0),
    (0,0,1), (0,1,0), (1,0,0)] → [0, 0, 1, 2, 3]).

    columns: name → [B] tensor or list of hashable values (an anchor may be a string), or
    a Rollouts, whose extras are looked up first, then its row fields (`agent` names
    agent_ids). keys: a sequence of names or one comma-separated string. Tensor values
    are compared by value (1 and 1.0 are the same key); nested lists become tuples.
    Returns a LongTensor [B]."""
    names = parse_keys(keys)
    table = row_columns(columns) if isinstance(columns, Rollouts) else dict(columns)
    missing = [k for k in names if k not in table]
    if missing:
        raise ValueError(
            f"group_by: no column {', '.join(repr(k) for k in missing)}; available columns: "
            f"{', '.join(sorted(table)) or '(none)'}"
        )
    rows = [_hashable_rows(table[k], k) for k in names]
    sizes = {len(r) for r in rows}
    if len(sizes) > 1:
        shown = ", ".join(f"{k}: {len(r)}" for k, r in zip(names, rows, strict=True))
        raise ValueError(f"group_by: the key columns have different lengths ({shown})")
    ids: dict[tuple, int] = {}
    out = [ids.setdefault(key, len(ids)) for key in zip(*rows, strict=True)]
    return torch.tensor(out, dtype=torch.long)


def _hashable_rows(column: torch.Tensor | Sequence[Any], name: str) -> list[Hashable]:
    values = column.tolist() if isinstance(column, torch.Tensor) else list(column)
    out = [_hashable(v) for v in values]
    for i, v in enumerate(out):
        try:
            hash(v)
        except TypeError:
            raise ValueError(
                f"group_by: column {name!r} row {i} holds an unhashable {type(v).__name__}"
            ) from None
    return out


def _hashable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value
