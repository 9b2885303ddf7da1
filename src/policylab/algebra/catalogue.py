"""Every registered algebra component, in one place.

Each algebra module registers its own entries into a registry defined lower down
(`advantages.py`, `losses.py`, `kl.py`, `value.py`, `shaping.py`, `selection.py`,
`credit.py`, `ope.py`), and no module imports one above it. This module imports all of them, so a
table read from here is complete: look components up through `policylab.algebra.catalogue`,
never through the defining module (whose table may lack the entries of modules not yet
imported)."""

from __future__ import annotations

from policylab.algebra import (  # noqa: F401  (imported to register their entries)
    bcpg,
    capo,
    copo,
    deterministic,
    empg,
    gigpo,
    group_filter,
    group_losses,
    rank,
    rpg,
)
from policylab.algebra.advantages import advantage_estimators
from policylab.algebra.credit import credits
from policylab.algebra.kl import kl_estimators
from policylab.algebra.losses import policy_losses
from policylab.algebra.ope import ope_estimators
from policylab.algebra.selection import selections
from policylab.algebra.shaping import reward_shapers
from policylab.algebra.value import value_losses

__all__ = [
    "advantage_estimators",
    "credits",
    "kl_estimators",
    "ope_estimators",
    "policy_losses",
    "reward_shapers",
    "selections",
    "value_losses",
]
