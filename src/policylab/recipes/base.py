"""The recipe type and its table: a `Recipe` bundles registered components with
paper-faithful defaults, each default carrying its source (papers/seed_llm_algorithms.md;
[paper §x] the paper's text, [code repo] the reference implementation, [ours] our choice
where both are silent). The families register their recipes here (core.py, control.py,
selection.py, objectives.py); `policylab.recipes` imports them all.

`training` holds the paper's own run settings (model-scale numbers such as lr 1e-6 for 7B
models): the trainer reads the ones that transfer (samples per prompt, inner epochs, clip
ranges) and documents where it departs from them.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any

from policylab.registry import Registry

# a recipe that names no special network: any policy kind (a language model, an MLP)
GENERIC_POLICY = "mlp"


@dataclass(frozen=True)
class Setting:
    """A default value and where it comes from."""

    value: Any
    source: str


def S(value: Any, source: str) -> Setting:  # noqa: N802 - short constructor for the tables
    return Setting(value, source)


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    paper: str
    formula: str
    advantage: str
    loss: str
    advantage_options: dict[str, Setting] = field(default_factory=dict)
    loss_options: dict[str, Setting] = field(default_factory=dict)
    selection: str | None = None  # None: every row ("all")
    selection_options: dict[str, Setting] = field(default_factory=dict)
    sampler: str | None = None  # the prompt sampler; None: uniform (samplers.py)
    sampler_options: dict[str, Setting] = field(default_factory=dict)
    reward_shaping: dict[str, dict[str, Setting]] = field(default_factory=dict)
    value_loss: str | None = None
    value_options: dict[str, Setting] = field(default_factory=dict)
    training: dict[str, Setting] = field(default_factory=dict)
    # the recipe's training rewards (name → weight), used when a run names none and its
    # data has the columns they read (compose.recipe_rewards)
    rewards: dict[str, Setting] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    policy: str = "mlp"  # control network: mlp (GENERIC_POLICY), flow (fpo), pg_rainbow
    # agents (workflows/agents.py AgentOptions): branching, credit, grouping, regime, …
    workflow_options: dict[str, Setting] = field(default_factory=dict)

    @property
    def kl(self) -> str:
        """Where the KL to the reference sits: in the loss, in the reward, or nowhere."""
        parts = []
        loss_coef = _value(self.loss_options, "kl_coef", 0.0)
        if loss_coef:
            est = _value(self.loss_options, "kl_estimator", None)
            parts.append(f"{est} in the loss, β={loss_coef}")
        reward_coef = _value(self.advantage_options, "kl_coef", 0.0)
        if reward_coef:
            est = _value(self.advantage_options, "kl_estimator", "k1")
            parts.append(f"{est} in the reward, β={reward_coef}")
        if not parts and self._loss_needs_reference():
            parts.append("a constraint in the loss (see the formula)")
        return "; ".join(parts) or "none (no reference model)"

    def _loss_needs_reference(self) -> bool:
        """Whether the loss, with this recipe's options, reads a reference (e.g. BCPG)."""
        from policylab.algebra.catalogue import policy_losses

        config = policy_losses.entry(self.loss).config
        needs = getattr(config, "needs_reference", None)
        if not isinstance(needs, property):
            return False
        # read the property on the recipe's values without validating them (Dr. GRPO's
        # L_max is only known from the run's max_new_tokens)
        values = {f.name: f.default for f in dataclasses.fields(config)}
        values.update(self.component_defaults("loss"))
        return bool(needs.fget(types.SimpleNamespace(**values)))

    @property
    def needs_reference(self) -> bool:
        return self.kl != "none (no reference model)"

    def component_defaults(self, kind: str) -> dict[str, Any]:
        """Plain option values for one component kind: "advantage", "loss", "value",
        "selection" or "sampler"."""
        table = {
            "advantage": self.advantage_options,
            "loss": self.loss_options,
            "value": self.value_options,
            "selection": self.selection_options,
            "sampler": self.sampler_options,
            "workflow": self.workflow_options,
        }[kind]
        return {k: s.value for k, s in table.items()}

    @property
    def defaults(self) -> dict[str, Any]:
        """Every default, flattened as "component.option" → value."""
        return {key: s.value for key, s in self._settings().items()}

    @property
    def citations(self) -> dict[str, str]:
        """Every default's source, keyed like `defaults`."""
        return {key: s.source for key, s in self._settings().items()}

    def _settings(self) -> dict[str, Setting]:
        out: dict[str, Setting] = {}
        for prefix, table in (
            (f"advantage.{self.advantage}", self.advantage_options),
            (f"loss.{self.loss}", self.loss_options),
            (f"value.{self.value_loss}", self.value_options),
            (f"selection.{self.selection}", self.selection_options),
            (f"sampler.{self.sampler}", self.sampler_options),
            ("agent", self.workflow_options),
            ("training", self.training),
        ):
            out.update({f"{prefix}.{k}": s for k, s in table.items()})
        for shaper, table in self.reward_shaping.items():
            out.update({f"reward_shaping.{shaper}.{k}": s for k, s in table.items()})
        return out


def _value(table: dict[str, Setting], key: str, default: Any) -> Any:
    return table[key].value if key in table else default


recipes: Registry[Recipe] = Registry("algorithm")


def add(recipe: Recipe) -> Recipe:
    recipes.add(recipe.name, recipe, summary=f"{recipe.title} — {recipe.paper}")
    return recipe


def get(name: str) -> Recipe:
    return recipes.get(name)


def names() -> list[str]:
    return recipes.names()


# PPO's clipped surrogate, the line every PPO-family formula shares
PPO_CLIP_FORMULA = "L = max(−A·r, −A·clip(r, 1−ε_low, 1+ε_high)),  r = exp(logp − old_logp)"
