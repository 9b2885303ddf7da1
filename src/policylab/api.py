"""The public entry points over the registries: `policy_loss`, `advantages`,
`kl_estimator`, `value_loss`, `reward_shaping` and the `list_*` functions.

Each takes a registered component name, or an algorithm (recipe) name that gives that
recipe's component with the recipe's defaults, plus keyword overrides; it returns a
callable over plain keyword tensors (nested lists are accepted too)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from policylab import recipes as recipe_book
from policylab.algebra.aggregate import AGG_MODES
from policylab.algebra.catalogue import (
    advantage_estimators,
    kl_estimators,
    policy_losses,
    reward_shapers,
    selections,
    value_losses,
)
from policylab.algebra.options import build_options
from policylab.algebra.selection import Selection, stage_of
from policylab.registry import Entry, Registry, UnknownNameError
from policylab.rollouts import Rollouts


def _resolve(name: str, registry: Registry, kind: str) -> tuple[str, dict[str, Any]]:
    """`name` itself, or the recipe `name`'s component of `kind` with the recipe's defaults."""
    if name in registry:
        return name, {}
    if name in recipe_book.recipes:
        recipe = recipe_book.get(name)
        component = {
            "advantage": recipe.advantage,
            "loss": recipe.loss,
            "value": recipe.value_loss,
        }[kind]
        if component is None:
            raise ValueError(f"algorithm {name!r} has no {registry.kind}")
        return component, recipe.component_defaults(kind)
    raise UnknownNameError(
        f"unknown {registry.kind} {name!r}; choices: {', '.join(registry.names())}; "
        f"or an algorithm: {', '.join(recipe_book.names())}"
    )


def _float(x: Any, like: torch.Tensor | None = None) -> torch.Tensor | None:
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return x
    dtype = like.dtype if like is not None and like.is_floating_point() else None
    return torch.as_tensor(x, dtype=dtype or torch.get_default_dtype())


class PolicyLoss:
    """A policy loss with its options bound: `loss, metrics = fn(logprobs=..., ...)`."""

    def __init__(self, name: str, entry: Entry, options: Any) -> None:
        self.name, self.fn, self.options = name, entry.fn, options

    def __call__(
        self,
        logprobs=None,
        old_logprobs=None,
        advantages=None,
        response_mask=None,
        *,
        ref_logprobs=None,
        rollouts: Rollouts | None = None,
        normaliser: float | None = None,
    ):
        missing = [
            n
            for n, v in (
                ("logprobs", logprobs),
                ("old_logprobs", old_logprobs),
                ("advantages", advantages),
                ("response_mask", response_mask),
            )
            if v is None
        ]
        if missing:
            raise TypeError(f"policy loss {self.name!r} needs {', '.join(missing)}")
        logprobs = _float(logprobs)
        return self.fn(
            logprobs,
            _float(old_logprobs, logprobs),
            _float(advantages, logprobs),
            _float(response_mask, logprobs),
            self.options,
            ref_logprobs=_float(ref_logprobs, logprobs),
            rollouts=rollouts,
            normaliser=normaliser,
        )

    def with_options(self, **changes: Any) -> PolicyLoss:
        """The same loss with some options changed (e.g. an annealed clip range)."""
        new = copy.copy(self)
        new.options = dataclasses.replace(self.options, **changes)
        return new

    def __repr__(self) -> str:
        return f"policy_loss({self.name!r}, {self.options})"


class AdvantageEstimator:
    """An advantage estimator with its options bound: `A = fn(rewards=..., ...)`, or
    `fn(rollouts)`. Without a response_mask it returns one advantage per row ([B])."""

    def __init__(self, name: str, entry: Entry, options: Any) -> None:
        self.name, self.fn, self.options = name, entry.fn, options

    def __call__(
        self,
        rollouts: Rollouts | None = None,
        *,
        rewards=None,
        group_ids=None,
        response_mask=None,
        logprobs=None,
        ref_logprobs=None,
        values=None,
        token_rewards=None,
    ) -> torch.Tensor:
        if rollouts is not None:
            return self.fn(rollouts, self.options)
        token_rewards, values = _float(token_rewards), _float(values)
        logprobs, ref_logprobs = _float(logprobs), _float(ref_logprobs)
        per_row = response_mask is None
        if per_row:
            like = next((t for t in (token_rewards, values, logprobs) if t is not None), None)
            per_row = like is None
            if like is not None:
                response_mask = torch.ones_like(like)
        if rewards is None:
            if token_rewards is None:
                raise TypeError(f"advantage estimator {self.name!r} needs rewards")
            mask = torch.ones_like(token_rewards) if response_mask is None else response_mask
            rewards = (_float(mask) * token_rewards).sum(dim=-1)
        rewards = _float(rewards)
        if per_row:
            response_mask = torch.ones(len(rewards), 1)
        batch = Rollouts(
            rewards=rewards,
            response_mask=_float(response_mask),
            group_ids=None if group_ids is None else torch.as_tensor(group_ids),
            logprobs=logprobs,
            ref_logprobs=ref_logprobs,
            values=values,
            token_rewards=token_rewards,
        )
        adv = self.fn(batch, self.options)
        return adv[:, 0] if per_row else adv

    def metrics(self, rollouts: Rollouts) -> dict[str, float]:
        """The estimator's own diagnostics on `rollouts` (e.g. `empg/*`), for estimators
        that report some through a `metrics(rollouts, options)` attribute; else {}."""
        report = getattr(self.fn, "metrics", None)
        return report(rollouts, self.options) if report is not None else {}

    def __repr__(self) -> str:
        return f"advantages({self.name!r}, {self.options})"


class ValueLoss:
    """A value loss with its options bound: `loss, metrics = fn(values=..., ...)`."""

    def __init__(self, name: str, entry: Entry, options: Any) -> None:
        self.name, self.fn, self.options = name, entry.fn, options

    def __call__(
        self, values, old_values, returns, response_mask, *, normaliser: float | None = None
    ):
        values = _float(values)
        return self.fn(
            values,
            _float(old_values, values),
            _float(returns, values),
            _float(response_mask, values),
            self.options,
            normaliser=normaliser,
        )


class RewardShaping:
    """A reward-shaping rule with its options bound: `penalty = fn(lengths=...)`."""

    def __init__(self, name: str, entry: Entry, options: Any) -> None:
        self.name, self.fn, self.options = name, entry.fn, options

    def __call__(self, **columns: Any) -> torch.Tensor:
        return self.fn(self.options, **columns)


class SelectionRule:
    """A selection with its options bound: `Selection = fn(rollouts, advantages=None)`;
    `stage` says where the trainer calls it (algebra/selection.py)."""

    def __init__(self, name: str, entry: Entry, options: Any) -> None:
        self.name, self.fn, self.options = name, entry.fn, options
        self.stage = stage_of(entry.fn)

    def __call__(
        self, rollouts: Rollouts, advantages: torch.Tensor | None = None, state: Any = None
    ) -> Selection:
        return self.fn(rollouts, advantages, self.options, state)

    def __repr__(self) -> str:
        return f"selection({self.name!r}, {self.options})"


def policy_loss(name: str, **overrides: Any) -> PolicyLoss:
    """The policy loss `name` (a registered loss or an algorithm) with `overrides` applied.

    >>> loss, metrics = policy_loss("dapo")(logprobs=lp, old_logprobs=old,
    ...                                    advantages=adv, response_mask=mask)"""
    component, defaults = _resolve(name, policy_losses, "loss")
    return _bound(
        PolicyLoss, policy_losses, component, defaults, overrides, f"policy_loss({name!r})"
    )


def advantages(name: str, **overrides: Any) -> AdvantageEstimator:
    """The advantage estimator `name` (a registered estimator or an algorithm).

    >>> A = advantages("grpo")(rewards=[1, 0, 0, 1], group_ids=[0, 0, 0, 0])"""
    component, defaults = _resolve(name, advantage_estimators, "advantage")
    return _bound(
        AdvantageEstimator,
        advantage_estimators,
        component,
        defaults,
        overrides,
        f"advantages({name!r})",
    )


def value_loss(name: str, **overrides: Any) -> ValueLoss:
    """The value loss `name` (e.g. "value_clip", or an algorithm with a critic such as "ppo")."""
    component, defaults = _resolve(name, value_losses, "value")
    return _bound(ValueLoss, value_losses, component, defaults, overrides, f"value_loss({name!r})")


def reward_shaping(name: str, **overrides: Any) -> RewardShaping:
    """The reward-shaping rule `name` (e.g. "overlong") with `overrides` applied."""
    entry = reward_shapers.entry(name)
    options = build_options(entry.config, overrides, where=f"reward_shaping({name!r})")
    return RewardShaping(name, entry, options)


class Components:
    """The bound components of one algorithm, as a trainer uses them."""

    def __init__(
        self,
        recipe: recipe_book.Recipe,
        advantage: AdvantageEstimator,
        loss: PolicyLoss,
        value: ValueLoss | None,
        selection: SelectionRule,
        shaping: list[RewardShaping] | None = None,
    ) -> None:
        self.recipe, self.advantage, self.loss, self.value = recipe, advantage, loss, value
        self.selection, self.shaping = selection, shaping or []


def components(
    algorithm: str,
    *,
    max_new_tokens: int | None = None,
    advantage_overrides: dict[str, Any] | None = None,
    loss_overrides: dict[str, Any] | None = None,
    value_overrides: dict[str, Any] | None = None,
    selection: str | None = None,
    selection_overrides: dict[str, Any] | None = None,
    shaping_overrides: dict[str, dict[str, Any]] | None = None,
) -> Components:
    """The advantage estimator, policy loss, (if any) value loss and selection of
    `algorithm`, with the recipe's defaults and the given overrides. Unlike
    `advantages(name)`, where a registered estimator of the same name wins
    (`advantages("rloo")` is the bare estimator, without the recipe's KL-in-reward), this
    always reads the recipe. A loss that divides by the generation budget
    (seq-mean-token-sum-norm) gets L_max = max_new_tokens unless set. `selection` None is
    the recipe's (or "all"); the recipe's selection defaults apply only to its own one.
    Reward shaping: the recipe's shapers, each updated by `shaping_overrides[name]`; a name
    the recipe lacks adds that shaper with its own defaults."""
    recipe = recipe_book.get(algorithm)
    loss_overrides = dict(loss_overrides or {})
    mode = loss_overrides.get(
        "loss_agg_mode", recipe.component_defaults("loss").get("loss_agg_mode")
    )
    budget = loss_overrides.get("L_max", recipe.component_defaults("loss").get("L_max"))
    if mode == "seq-mean-token-sum-norm" and budget is None:
        loss_overrides["L_max"] = max_new_tokens
    where = f"algorithm {algorithm!r}"
    value = None
    if recipe.value_loss is not None:
        value = _bound(
            ValueLoss,
            value_losses,
            recipe.value_loss,
            recipe.component_defaults("value"),
            value_overrides,
            where,
        )
    advantage = _bound(
        AdvantageEstimator,
        advantage_estimators,
        recipe.advantage,
        recipe.component_defaults("advantage"),
        advantage_overrides,
        where,
    )
    loss = _bound(
        PolicyLoss,
        policy_losses,
        recipe.loss,
        recipe.component_defaults("loss"),
        loss_overrides,
        where,
    )
    chosen = selection or recipe.selection or "all"
    rule = _bound(
        SelectionRule,
        selections,
        chosen,
        recipe.component_defaults("selection") if chosen == recipe.selection else {},
        selection_overrides,
        f"{where}, selection {chosen!r}",
    )
    shapers = {
        name: {k: v.value for k, v in t.items()} for name, t in recipe.reward_shaping.items()
    }
    for name, options in (shaping_overrides or {}).items():
        shapers[name] = {**shapers.get(name, {}), **(options or {})}
    shaping = [
        _bound(
            RewardShaping, reward_shapers, name, {}, options, f"{where}, reward shaping {name!r}"
        )
        for name, options in shapers.items()
    ]
    return Components(recipe, advantage, loss, value, rule, shaping)


def _bound(
    cls,
    registry: Registry,
    component: str,
    defaults: dict[str, Any],
    overrides: dict[str, Any] | None,
    where: str,
):
    """`cls` over the registered `component` with `defaults` updated by `overrides`."""
    entry = registry.entry(component)
    options = build_options(entry.config, {**defaults, **(overrides or {})}, where=where)
    return cls(component, entry, options)


def train(config: Any = None, *, resume: bool = False, **fields: Any):
    """Train a language model: `config` is a TrainConfig, a dict of its fields or a YAML
    path; `fields` override it. Returns a TrainResult (run folder, held-out before/after)."""
    from policylab.config import TrainConfig, load
    from policylab.trainers.llm import train as train_llm

    if isinstance(config, TrainConfig):
        cfg = load(TrainConfig, None, {**config.model_dump(), **fields})
    elif isinstance(config, dict):
        cfg = load(TrainConfig, None, {**config, **fields})
    else:
        cfg = load(TrainConfig, config, fields)
    return train_llm(cfg, resume=resume)


def kl_estimator(name: str):
    """The KL estimator `name`: `fn(logprobs, ref_logprobs) -> per-token estimate`."""
    fn = kl_estimators.get(name)

    def estimate(logprobs, ref_logprobs):
        logprobs = _float(logprobs)
        return fn(logprobs, _float(ref_logprobs, logprobs))

    estimate.__doc__ = fn.__doc__
    return estimate


kl = kl_estimator  # DESIGN.md's public name


def list_losses() -> list[str]:
    return policy_losses.names()


def list_advantages() -> list[str]:
    return advantage_estimators.names()


def list_kl() -> list[str]:
    return kl_estimators.names()


def list_value_losses() -> list[str]:
    return value_losses.names()


def list_reward_shaping() -> list[str]:
    return reward_shapers.names()


def list_selections() -> list[str]:
    return selections.names()


def list_agg_modes() -> list[str]:
    return list(AGG_MODES)


def list_algorithms() -> list[str]:
    return recipe_book.names()
