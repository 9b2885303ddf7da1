"""Named algorithms (recipes), grouped by family: agents.py (multi-turn and multi-agent),
gui.py (GUI-R1, SE-GUI),
base.py (the `Recipe` type and the table),
core.py (PPO, GRPO and its direct variants), control.py (FPO, PG-Rainbow), selection.py
(GRPO with a choice of what to train on), objectives.py (changed surrogates, regularisers
and advantages), theory.py (risk-seeking PG for symbolic search). compose.py turns a recipe plus overrides into checked, bound parts.

`policylab describe NAME` prints a recipe; `policy_loss(NAME)` / `advantages(NAME)` give its
components with these defaults.
"""

from policylab.recipes import agents, control, core, gui, objectives, selection, theory  # noqa: F401
from policylab.recipes.base import Recipe, S, Setting, add, get, names, recipes

__all__ = ["Recipe", "S", "Setting", "add", "get", "names", "recipes"]
