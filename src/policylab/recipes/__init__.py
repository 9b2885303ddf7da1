"""Named algorithms (recipes), grouped by family: agents.py (multi-turn and multi-agent),
base.py (the `Recipe` type and the table),
core.py (PPO, GRPO and its direct variants), control.py (FPO, PG-Rainbow), selection.py
(GRPO with a choice of what to train on), structured.py (RL-Struct's JSON reward),
objectives.py (changed surrogates, regularisers
and advantages), theory.py (risk-seeking PG for symbolic search). compose.py turns a recipe plus overrides into checked, bound parts.

`policylab describe NAME` prints a recipe; `policy_loss(NAME)` / `advantages(NAME)` give its
components with these defaults.
"""

from policylab.recipes import (  # noqa: F401
    agents,
    control,
    core,
    objectives,
    selection,
    structured,
    theory,
)
from policylab.recipes.base import Recipe, S, Setting, add, get, names, recipes

__all__ = ["Recipe", "S", "Setting", "add", "get", "names", "recipes"]
