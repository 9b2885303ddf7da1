"""Reward functions: a registry of TRL-signature functions, user functions by path, and a
weighted combination that isolates failures.

A reward function is `fn(prompts, completions, **columns) -> list[float]`: TRL's
signature, so users' functions move over unchanged. `None` in the returned list means
"cannot score this sample" and becomes NaN (left out of group statistics).

    rewards.get("countdown")                 # a task's verifier
    rewards.get("exact_answer")              # built-ins: exact_answer, format, math_verify
    rewards.get("my_pkg.rewards:brevity")    # a user function, by module path ...
    rewards.get("rewards.py:brevity")        # ... or by file path
    combined = rewards.combine({"countdown": 1.0, "format": 0.1})
    result = combined(prompts, completions, numbers=..., target=...)
    result.total, result.parts["format"], result.failures
"""

from policylab.rewards.builtin import exact_answer, format_reward, math_verify_reward
from policylab.rewards.combine import CombinedReward, RewardResult, combine
from policylab.rewards.lookup import get, names
from policylab.rewards.registry import load_user_reward, register, reward_functions

__all__ = [
    "CombinedReward",
    "RewardResult",
    "combine",
    "exact_answer",
    "format_reward",
    "get",
    "load_user_reward",
    "math_verify_reward",
    "names",
    "register",
    "reward_functions",
]
