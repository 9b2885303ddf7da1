"""Rollouts: the one batch type every workflow produces and every algebra function reads.

One row per sampled response (language models) or per time step (control). Fields and
shapes are the contract of DESIGN.md; construction validates them and a failure names the
field, the shape received and the shape expected."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

_TOKEN_FIELDS = (
    "logprobs",
    "ref_logprobs",
    "values",
    "entropy",
    "segment_ids",
    "token_rewards",
    "observation_mask",
)
_ROW_FIELDS = ("agent_ids", "dones", "truncated")
_INTEGER_FIELDS = ("response_ids", "group_ids", "segment_ids", "agent_ids")
# generated samples (papers/seed_generative.md G0.2): extras name → expected shape
_GENERATIVE_EXTRAS = {
    "chain": "[B, K+1, D]",
    "cond": "[B, C]",
    "tau_draws": "[B, N, 1]",
    "eps_draws": "[B, N, D]",
    "x_noise": "[B, D]",
    "reveal": "[B, L]",
    "schedule_actions": "[B, S, A]",
}
_SHARED_SIZES = (  # (extra, extra, axis, what the axis is)
    ("chain", "x_noise", -1, "the sample dimension D"),
    ("chain", "eps_draws", -1, "the sample dimension D"),
    ("tau_draws", "eps_draws", 1, "the number of draws N"),
)
_FLOAT_FIELDS = ("logprobs", "ref_logprobs", "values", "entropy", "token_rewards", "rewards")


def _shape(x: torch.Tensor) -> str:
    return "[" + ", ".join(str(d) for d in x.shape) + "]"


@dataclass
class Rollouts:
    """A batch of B rows; token fields are [B, T], row fields [B].

    Required: `rewards` [B] and `response_mask` [B, T] (0/1). `group_ids` [B] defaults to
    one group per row. Every other field is optional and checked when present.

    `observation_mask` [B, T] (0/1, disjoint from `response_mask`) marks tokens inside a
    response row that the policy did not generate (an environment's text, another role's
    turn; papers/seed_agents.md §A0.3): the model attends to them, losses, KL and
    statistics never read them (they read `response_mask` only)."""

    rewards: torch.Tensor
    response_mask: torch.Tensor
    group_ids: torch.Tensor | None = None
    response_ids: torch.Tensor | None = None
    logprobs: torch.Tensor | None = None
    ref_logprobs: torch.Tensor | None = None
    values: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    segment_ids: torch.Tensor | None = None
    observation_mask: torch.Tensor | None = None
    token_rewards: torch.Tensor | None = None
    agent_ids: torch.Tensor | None = None
    actions: torch.Tensor | None = None
    dones: torch.Tensor | None = None
    truncated: torch.Tensor | None = None
    reward_parts: dict[str, torch.Tensor] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("reward_parts", "extras") or value is None:
                continue
            if not isinstance(value, torch.Tensor):
                try:
                    value = torch.as_tensor(value)
                except (TypeError, ValueError, RuntimeError) as err:
                    raise ValueError(f"Rollouts.{f.name} must be a tensor: {err}") from None
                if f.name in _FLOAT_FIELDS and not value.is_floating_point():
                    value = value.to(torch.get_default_dtype())
                setattr(self, f.name, value)
        if self.group_ids is None:
            self.group_ids = torch.arange(len(self.rewards), device=self.rewards.device)
        self.reward_parts = {k: torch.as_tensor(v) for k, v in self.reward_parts.items()}
        self.validate()

    # ---- validation -------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return int(self.response_mask.shape[0])

    def __len__(self) -> int:
        return self.batch_size

    def validate(self) -> None:
        mask = self.response_mask
        if mask.dim() != 2:
            raise ValueError(
                f"Rollouts.response_mask has shape {_shape(mask)}; expected [B, T] (2 dims)"
            )
        B, T = mask.shape
        if not _is_binary(mask):
            raise ValueError("Rollouts.response_mask must hold only 0 and 1 (or booleans)")
        self._expect("rewards", (B,), "[B]")
        self._expect("group_ids", (B,), "[B]")
        if self.response_ids is not None:
            self._expect("response_ids", (B, T), "[B, T]")
        for name in _TOKEN_FIELDS:
            if getattr(self, name) is not None:
                self._expect(name, (B, T), "[B, T]")
        for name in _ROW_FIELDS:
            if getattr(self, name) is not None:
                self._expect(name, (B,), "[B]")
        if self.actions is not None and (self.actions.dim() == 0 or self.actions.shape[0] != B):
            raise ValueError(
                f"Rollouts.actions has shape {_shape(self.actions)}; expected [B, ...] with B={B}"
            )
        for name in _INTEGER_FIELDS:
            value = getattr(self, name)
            if value is not None and (value.is_floating_point() or value.is_complex()):
                raise ValueError(f"Rollouts.{name} must be an integer tensor, got {value.dtype}")
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if value is not None and not value.is_floating_point():
                raise ValueError(f"Rollouts.{name} must be a floating tensor, got {value.dtype}")
        if self.observation_mask is not None:
            if not _is_binary(self.observation_mask):
                raise ValueError("Rollouts.observation_mask must hold only 0 and 1 (or booleans)")
            if bool(((self.observation_mask > 0) & (mask > 0)).any()):
                raise ValueError(
                    "Rollouts.observation_mask overlaps response_mask: a token is either "
                    "generated by the policy (response) or observed (environment), not both"
                )
        for name in ("dones", "truncated"):
            value = getattr(self, name)
            if value is not None and not _is_binary(value):
                raise ValueError(f"Rollouts.{name} must hold only 0/1 or booleans")
        for key, part in self.reward_parts.items():
            if part.shape != (B,):
                raise ValueError(
                    f"Rollouts.reward_parts[{key!r}] has shape {_shape(part)}; expected [B] "
                    f"with B={B}"
                )
        for key, column in self.extras.items():
            if len(column) != B:
                raise ValueError(f"Rollouts.extras[{key!r}] has {len(column)} rows; expected B={B}")
        self._check_generative_extras()

    def _check_generative_extras(self) -> None:
        """The per-row tensors of generated samples (papers/seed_generative.md G0.2), checked
        by name: their number of dims, and the sizes two of them must share."""
        shapes = {}
        for key, pattern in _GENERATIVE_EXTRAS.items():
            value = self.extras.get(key)
            if isinstance(value, torch.Tensor):
                if value.dim() != pattern.count(",") + 1:
                    raise ValueError(
                        f"Rollouts.extras[{key!r}] has shape {_shape(value)}; expected {pattern}"
                    )
                shapes[key] = tuple(value.shape)
        for a, b, axis, name in _SHARED_SIZES:
            if a in shapes and b in shapes and shapes[a][axis] != shapes[b][axis]:
                raise ValueError(
                    f"Rollouts.extras[{a!r}] {_shape(self.extras[a])} and [{b!r}] "
                    f"{_shape(self.extras[b])} disagree on {name}"
                )

    def _expect(self, name: str, shape: tuple[int, ...], pattern: str) -> None:
        value = getattr(self, name)
        if tuple(value.shape) != shape:
            dims = dict(zip(("B", "T"), self.response_mask.shape, strict=True))
            given = ", ".join(f"{k}={v}" for k, v in dims.items())
            raise ValueError(
                f"Rollouts.{name} has shape {_shape(value)}; expected {pattern} "
                f"({given}, from response_mask)"
            )

    def require(self, *names: str, by: str) -> None:
        """Fail clearly when a component needs fields this batch lacks."""
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(f"{by} needs Rollouts.{', Rollouts.'.join(missing)}, which is not set")

    # ---- row selection ----------------------------------------------------------------
    def select(self, rows: torch.Tensor | list[int] | slice) -> Rollouts:
        """A new Rollouts with the given rows (indices, boolean mask or slice)."""
        if isinstance(rows, slice):
            rows = torch.arange(self.batch_size)[rows]
        rows = torch.as_tensor(rows)
        if rows.dtype == torch.bool:
            rows = rows.nonzero(as_tuple=True)[0]
        index = rows.tolist()
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "reward_parts":
                out[f.name] = {k: v[rows] for k, v in value.items()}
            elif f.name == "extras":
                out[f.name] = {
                    k: v[rows] if isinstance(v, torch.Tensor) else [v[i] for i in index]
                    for k, v in value.items()
                }
            else:
                out[f.name] = None if value is None else value[rows]
        return Rollouts(**out)

    def with_extras(self, columns: dict[str, Any]) -> Rollouts:
        """A copy with `columns` (name → per-row list or [B] tensor) added to `extras`."""
        return self.replace(extras={**self.extras, **columns}) if columns else self

    def replace(self, **changes: Any) -> Rollouts:
        return dataclasses.replace(self, **changes)

    @classmethod
    def concat(cls, batches: list[Rollouts]) -> Rollouts:
        """The rows of `batches` one after another. Token fields are right-padded with 0
        to the widest T (masked positions never matter); group ids are kept as given, so
        a caller merging independent batches offsets them first. Every batch must set the
        same optional fields, reward parts and extras."""
        if not batches:
            raise ValueError("Rollouts.concat needs at least one batch")
        width = max(b.response_mask.shape[1] for b in batches)
        out: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            values = [getattr(b, f.name) for b in batches]
            if f.name in ("reward_parts", "extras"):
                out[f.name] = _concat_columns(f.name, values)
                continue
            present = [v is not None for v in values]
            if not any(present):
                out[f.name] = None
            elif not all(present):
                missing = present.index(False)
                raise ValueError(f"Rollouts.concat: batch {missing} has no {f.name}, others do")
            elif f.name in ("response_mask", "response_ids", *_TOKEN_FIELDS):
                out[f.name] = torch.cat([_pad_right(v, width) for v in values])
            else:
                out[f.name] = torch.cat(values)
        return cls(**out)


def _pad_right(x: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(x, (0, width - x.shape[1]))


def _concat_columns(name: str, columns: list[dict[str, Any]]) -> dict[str, Any]:
    """Concatenate the dict fields (reward_parts, extras): same keys in every batch."""
    keys = set(columns[0])
    for i, c in enumerate(columns[1:], start=1):
        if set(c) != keys:
            raise ValueError(
                f"Rollouts.concat: batch {i} has {name} {sorted(c)}, batch 0 has {sorted(keys)}"
            )
    out: dict[str, Any] = {}
    for key in columns[0]:
        parts = [c[key] for c in columns]
        if isinstance(parts[0], torch.Tensor):
            out[key] = torch.cat(parts)
        else:
            out[key] = [row for part in parts for row in part]
    return out


def _is_binary(x: torch.Tensor) -> bool:
    if x.dtype == torch.bool:
        return True
    return bool(((x == 0) | (x == 1)).all())
