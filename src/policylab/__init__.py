"""policylab: policy-gradient RL for language models and control, one shared algebra.

Public API (DESIGN.md): `train` (a config, or objects as TRL's trainers take them:
objects.py), `evaluate_model`; for control
`load_policy`, `ControlPolicy` (SB3-style `predict`, one-file `save`/`load`) and
`evaluate_policy`; `policy_loss`, `advantages`, `kl` / `kl_estimator`,
`value_loss`, `reward_shaping`, `Rollouts`, `Registry`, and the `list_*` functions."""

from policylab.api import (
    advantages,
    evaluate_model,
    kl,
    kl_estimator,
    list_advantages,
    list_agg_modes,
    list_algorithms,
    list_kl,
    list_losses,
    list_reward_shaping,
    list_selections,
    list_value_losses,
    policy_loss,
    reward_shaping,
    train,
    value_loss,
)
from policylab.control_policy import ControlPolicy, evaluate_policy, load_policy
from policylab.recipes import Recipe
from policylab.registry import Registry, UnknownNameError
from policylab.rollouts import Rollouts
from policylab.version import __version__

__all__ = [
    "__version__",
    "ControlPolicy",
    "Recipe",
    "Registry",
    "Rollouts",
    "UnknownNameError",
    "advantages",
    "evaluate_model",
    "evaluate_policy",
    "kl",
    "kl_estimator",
    "list_advantages",
    "list_agg_modes",
    "list_algorithms",
    "list_kl",
    "list_losses",
    "list_reward_shaping",
    "list_selections",
    "list_value_losses",
    "load_policy",
    "policy_loss",
    "reward_shaping",
    "train",
    "value_loss",
]
