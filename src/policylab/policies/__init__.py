"""Policies: one protocol (`sample` / `evaluate`, policies/base.py) and its kinds — MLP
actor-critics (categorical and diagonal Gaussian), a flow-matching action policy (FPO),
PG-Rainbow's IQN-critic policy, a tabular softmax policy and a language model."""

import policylab.policies.mdm_anyorder  # noqa: F401  (registers mdm_logprob `any_order`, G1.4)
from policylab.policies.base import Evaluation, Policy, Sample
from policylab.policies.flow import FlowPolicy, fpo_cfm_loss, make_flow_policy
from policylab.policies.iqn import (
    IQNCritic,
    IQNLearner,
    PGRainbowPolicy,
    cosine_features,
    make_pg_rainbow_policy,
)
from policylab.policies.language_model import LanguageModelPolicy
from policylab.policies.mlp import ActorCritic, RunningMeanStd, make_actor_critic
from policylab.policies.table import TablePolicy

__all__ = [
    "ActorCritic",
    "Evaluation",
    "FlowPolicy",
    "IQNCritic",
    "IQNLearner",
    "LanguageModelPolicy",
    "PGRainbowPolicy",
    "Policy",
    "RunningMeanStd",
    "Sample",
    "TablePolicy",
    "cosine_features",
    "fpo_cfm_loss",
    "make_actor_critic",
    "make_flow_policy",
    "make_pg_rainbow_policy",
]
