"""Reward functions: a registry of TRL-signature functions, user functions by path, and a
weighted combination that isolates failures.

A reward function is `fn(prompts, completions, **columns) -> list[float]`: TRL's
signature, so users' functions move over unchanged. `None` in the returned list means
"cannot score this sample" and becomes NaN (left out of group statistics).

    rewards.get("countdown")                 # a task's verifier
    rewards.get("exact_answer")              # built-ins: exact_answer, format, math_verify
    rewards.get("my_pkg.rewards:brevity")    # a user function, by module path ...
    rewards.get("rewards.py:brevity")        # ... or by file path
    rewards.get("models/my-reward-model")    # a reward model (sequence classifier folder)
    combined = rewards.combine({"countdown": 1.0, "format": 0.1})
    result = combined(prompts, completions, numbers=..., target=...)
    result.total, result.parts["format"], result.failures
    result.counts.metrics()                  # reward/failed/<name>, reward/nonfinite/<name>

Functions are called as TRL's GRPOTrainer calls them (trl.py): by keyword, with
`completion_ids`, `trainer_state` and every column, and completions as conversations
when the prompts are. Every call is contained: any exception but KeyboardInterrupt
(sys.exit included) fails only its samples, a call past `timeout_s` is abandoned, a NaN,
±inf or huge value is left out and counted, a function failing on more than
`failure_limit` of a batch raises `RewardFailureError` with its traceback, and
`UnscoredSteps` stops a run whose rewards score nothing.
"""

from policylab.rewards.builtin import exact_answer, format_reward, math_verify_reward
from policylab.rewards.combine import CombinedReward, RewardFailureError, RewardResult, combine
from policylab.rewards.counts import (
    FAULTS,
    FaultLedger,
    RewardCounts,
    UnscoredRunError,
    UnscoredSteps,
)
from policylab.rewards.lookup import get, names, verifies
from policylab.rewards.registry import load_user_reward, register, reward_functions
from policylab.rewards.reward_model import RewardModel, is_reward_model
from policylab.rewards.trl import TrainerState, as_completions, is_conversational

__all__ = [
    "FAULTS",
    "CombinedReward",
    "FaultLedger",
    "RewardCounts",
    "RewardFailureError",
    "RewardModel",
    "RewardResult",
    "TrainerState",
    "UnscoredRunError",
    "UnscoredSteps",
    "as_completions",
    "combine",
    "exact_answer",
    "format_reward",
    "get",
    "is_conversational",
    "is_reward_model",
    "load_user_reward",
    "math_verify_reward",
    "names",
    "register",
    "reward_functions",
    "verifies",
]
