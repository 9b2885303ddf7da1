"""Method stages: the stateful pieces a recipe plugs into a trainer.

A paper that changes *which* prompts, samples or tokens are trained on, or *what* a batch
carries, is a stage: a small class with a name, an options dataclass, checkpointable
state, its own metrics, and a declaration of what it reads and what it spends from the
run's budget. The trainer never asks which stage it runs; it calls each one at the point
its `kind` names:

| kind         | called                                   | examples                      |
|--------------|------------------------------------------|-------------------------------|
| `prompts`    | each round: `sample(n)`, then `update`   | uniform, vade, vas, offline   |
| `annotate`   | on each generated round, before scoring  | step_labels (BCPG-NSA)        |
|              | is used (adds columns)                   |                               |
| `augment`    | on each generated round                  | difficulty (Reg-GRPO)         |
| `filter`     | on each round; refills until enough      | dynamic_sampling (DAPO)       |
|              | groups are kept                          |                               |
| `advantages` | once per step, on the kept groups'       | d3s                           |
|              | advantages                               |                               |
| `learn`      | on every micro-batch's forward pass      | capo                          |

Any stage may also implement `setup(ctx)` (once, before a resumed run restores its state:
building an offline set) and `prepare(step, ctx)` (before each step: VAS's scoring pass),
charging what it generates to `ctx.budget`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from policylab.registry import Registry

KINDS = ("prompts", "annotate", "augment", "filter", "advantages", "learn")


class Stage:
    """One method stage. Subclasses set the class attributes and implement their kind's
    hook (see the module docstring); the defaults keep no state and log nothing."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    Options: ClassVar[type] = type(None)
    # Rollouts columns (or extras) the stage reads, checked before any model loads
    reads: ClassVar[tuple[str, ...]] = ()
    # what the stage spends from the budget: "" (nothing), or "samples" (it generates)
    spends: ClassVar[str] = ""
    # columns an annotator adds to each round (Rollouts fields or extras keys)
    provides: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: Any = None) -> None:
        self.options = options

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned; stateless stages ignore it."""

    def metrics(self) -> dict[str, float]:
        return {}

    def __repr__(self) -> str:
        return f"stage {self.name!r} ({self.kind}, {self.options})"


stages: Registry[type[Stage]] = Registry("stage")


def register(cls: type[Stage]) -> type[Stage]:
    """Class decorator: register a stage class under its `name`."""
    if cls.kind not in KINDS:
        raise ValueError(f"stage {cls.name!r} has kind {cls.kind!r}; choices: {KINDS}")
    stages.add(cls.name, cls, config=cls.Options, summary=None)
    return cls


@dataclass
class Budget:
    """What a run has spent: every generated sample and token, kept or not (the arena's
    budget axis), charged where it is generated."""

    samples: int = 0
    tokens: int = 0

    def charge(self, samples: int = 0, tokens: int = 0) -> None:
        self.samples += int(samples)
        self.tokens += int(tokens)

    def as_metrics(self) -> dict[str, float]:
        return {"budget/samples": self.samples, "budget/tokens": self.tokens}

    def state_dict(self) -> dict[str, int]:
        return {"samples": self.samples, "tokens": self.tokens}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.samples, self.tokens = int(state["samples"]), int(state["tokens"])


@dataclass
class StageContext:
    """What `prepare` may use: the training prompts, the workflow that rolls them out
    (`workflow(examples) -> (Rollouts, RolloutInfo)`; `workflow.score(examples, n)` for a
    scoring pass), the run's budget and folder, and the per-step generation size."""

    pool: list[dict]
    workflow: Any
    budget: Budget
    folder: Any
    prompts_per_step: int
