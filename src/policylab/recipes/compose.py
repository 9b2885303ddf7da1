"""Composition: turns a recipe plus overrides into checked, bound parts (issue #14).

`components(algorithm, ...)` gives a trainer the advantage estimator, policy loss, value
loss, selection and reward shaping of one recipe, each a registered component bound to its
options (recipe defaults updated by overrides, validated before any model loads).
`_resolve` is the one rule that maps a name given to `policy_loss(name)` /
`advantages(name)` / `value_loss(name)` to a component and its defaults (see its
docstring). `policylab.api` re-exports these names; trainers import them from here."""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any

import torch

from policylab import recipes as recipe_book
from policylab.algebra.advantages import Estimate
from policylab.algebra.catalogue import (
    advantage_estimators,
    policy_losses,
    reward_shapers,
    selections,
    value_losses,
)
from policylab.algebra.options import build_options
from policylab.algebra.selection import Selection, stage_of
from policylab.registry import Entry, Registry, UnknownNameError
from policylab.rollouts import Rollouts

log = logging.getLogger(__name__)

BARE = "component:"  # prefix that names a registered component, never a recipe


def _resolve(name: str, registry: Registry, kind: str) -> tuple[str, dict[str, Any]]:
    """The component and defaults that `name` gives, by one rule:

    1. "component:NAME": the registered component NAME with its own defaults (the bare one);
    2. an algorithm's name: that recipe's component of `kind` with the recipe's defaults,
       even when a component has the same name (`advantages("rloo")` has RLOO's β = 0.05
       KL-in-reward; `policy_loss("reg_grpo")` its k3 KL term);
    3. a name that is only a registered component: that component with its own defaults.
    Anything else is an UnknownNameError listing the components and the algorithms."""
    if name.startswith(BARE):
        return registry.entry(name[len(BARE) :]).name, {}
    if name in recipe_book.recipes:
        recipe = recipe_book.get(name)
        component = {
            "advantage": recipe.advantage,
            "loss": recipe.loss,
            "value": recipe.value_loss,
        }[kind]
        if component is None:
            raise ValueError(
                f"algorithm {name!r} has no {registry.kind}; the {registry.kind}s are: "
                f"{', '.join(registry.names())}"
            )
        return component, recipe.component_defaults(kind)
    if name in registry:
        return name, {}
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
            return self.estimate(rollouts).advantages
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
        adv = self.estimate(batch).advantages
        return adv[:, 0] if per_row else adv

    def estimate(self, rollouts: Rollouts) -> Estimate:
        """The full result on `rollouts`: advantages, the per-row columns a loss of the
        same method reads (add them with `rollouts.with_extras(est.columns)`: COPO's
        global advantage) and the estimator's diagnostics (EMPG's `empg/*`)."""
        return Estimate.of(self.fn(rollouts, self.options))

    def metrics(self, rollouts: Rollouts) -> dict[str, float]:
        """The estimator's own diagnostics on `rollouts` (runs the estimator; a trainer
        takes them from `estimate` instead)."""
        return self.estimate(rollouts).metrics

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
    `algorithm`, with the recipe's defaults and the given overrides (as `advantages(name)`
    and `policy_loss(name)` give for an algorithm's name, see `_resolve`). A loss that divides by the generation budget
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


def recipe_rewards(recipe: recipe_book.Recipe, example: dict[str, Any]) -> dict[str, float]:
    """The recipe's own training rewards, name → weight (GUI-R1's 0.8·acc + 0.2·format,
    RL-Struct's five parts), when every one of them can score rows like `example`; {} when
    the recipe names none, or when the data lacks a column one of them reads (the run then
    trains on its task's verifier, and the log says which columns were missing)."""
    from policylab.rewards.lookup import function, missing_columns

    if not recipe.rewards:
        return {}
    columns = [key for key in example if key not in ("prompt", "completion")]
    lacking = {
        name: missing
        for name in recipe.rewards
        if (missing := missing_columns(function(name), columns))
    }
    if lacking:
        log.warning(
            "%s's rewards %s need columns this data lacks (%s): training on the task's "
            "verifier instead (give rewards = {name: weight} to choose)",
            recipe.name,
            sorted(recipe.rewards),
            "; ".join(f"{name}: {', '.join(cols)}" for name, cols in lacking.items()),
        )
        return {}
    return {name: float(setting.value) for name, setting in recipe.rewards.items()}
