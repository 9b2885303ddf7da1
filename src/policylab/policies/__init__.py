"""Control networks: MLP actor-critics (categorical and diagonal Gaussian) and a
flow-matching action policy (FPO), and PG-Rainbow's IQN-critic policy."""

from policylab.policies.flow import FlowPolicy, fpo_cfm_loss, make_flow_policy
from policylab.policies.iqn import (
    IQNCritic,
    IQNLearner,
    PGRainbowPolicy,
    cosine_features,
    make_pg_rainbow_policy,
)
from policylab.policies.mlp import ActorCritic, PolicyStep, RunningMeanStd, make_actor_critic

__all__ = [
    "ActorCritic",
    "FlowPolicy",
    "IQNCritic",
    "IQNLearner",
    "PGRainbowPolicy",
    "cosine_features",
    "make_pg_rainbow_policy",
    "PolicyStep",
    "RunningMeanStd",
    "fpo_cfm_loss",
    "make_actor_critic",
    "make_flow_policy",
]
