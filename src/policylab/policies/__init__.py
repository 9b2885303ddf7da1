"""Control networks: MLP actor-critics (categorical and diagonal Gaussian) and a
flow-matching action policy (FPO)."""

from policylab.policies.flow import FlowPolicy, fpo_cfm_loss, make_flow_policy
from policylab.policies.mlp import ActorCritic, PolicyStep, RunningMeanStd, make_actor_critic

__all__ = [
    "ActorCritic",
    "FlowPolicy",
    "PolicyStep",
    "RunningMeanStd",
    "fpo_cfm_loss",
    "make_actor_critic",
    "make_flow_policy",
]
