"""Control networks: MLP actor-critics (categorical and diagonal Gaussian)."""

from policylab.policies.mlp import ActorCritic, PolicyStep, RunningMeanStd, make_actor_critic

__all__ = ["ActorCritic", "PolicyStep", "RunningMeanStd", "make_actor_critic"]
