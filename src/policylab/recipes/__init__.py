"""Named algorithms (recipes), grouped by family: agents.py (multi-turn and multi-agent),
retroformer.py (Retroformer and its baselines), base.py (the `Recipe` type and the table),
core.py (PPO, GRPO and its direct variants), control.py (FPO, PG-Rainbow), offpolicy.py (DDPG), selection.py
(GRPO with a choice of what to train on), spark.py (SPARK's recycling), structured.py
(RL-Struct's JSON reward), objectives.py (changed surrogates, regularisers and advantages),
theory.py (risk-seeking PG for symbolic search), testtime.py (test-time latent policy
gradient: LatentSeek, DMLR-text), trader.py (FLAG-Trader), gui.py (GUI-R1, SE-GUI). compose.py turns a recipe
plus overrides into checked, bound parts.

`policylab describe NAME` prints a recipe; `policy_loss(NAME)` / `advantages(NAME)` give its
components with these defaults.
"""

from policylab.recipes import (  # noqa: F401
    agents,
    cg2a,
    control,
    core,
    dppo,
    gui,
    mdm,
    objectives,
    offpolicy,
    rank_grpo,
    retroformer,
    selection,
    spark,
    structured,
    testtime,
    theory,
    trader,
)
from policylab.recipes.base import Recipe, S, Setting, add, get, names, recipes

__all__ = ["Recipe", "S", "Setting", "add", "get", "names", "recipes"]
