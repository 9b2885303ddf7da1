"""Small gymnasium environments shipped with policylab, registered on import under the
`policylab/` namespace (so `policylab train --task policylab/TwoGoal-v0` works)."""

import gymnasium

from policylab.envs import combination_lock  # noqa: F401  (policylab/CombinationLock-v0, HNPG §8)
from policylab.envs.market_making import MarketMakingEnv
from policylab.envs.trade_sim import TradeSimEnv
from policylab.envs.two_goal import GOALS, TwoGoalEnv, goal_fractions

ID_TWO_GOAL = "policylab/TwoGoal-v0"
ID_TRADE_SIM = "policylab/TradeSim-v0"  # FLAG-Trader's market (seed_agents.md §A5)
ID_MARKET_MAKING = "policylab/MarketMaking-v0"  # DRLMM (seed_control_theory.md §13)

if ID_TWO_GOAL not in gymnasium.registry:
    gymnasium.register(ID_TWO_GOAL, entry_point=TwoGoalEnv)
if ID_TRADE_SIM not in gymnasium.registry:
    gymnasium.register(ID_TRADE_SIM, entry_point=TradeSimEnv)
if ID_MARKET_MAKING not in gymnasium.registry:
    gymnasium.register(ID_MARKET_MAKING, entry_point=MarketMakingEnv)
if "policylab/VisualReach-v0" not in gymnasium.registry:  # CG2A's testbed (control §10)
    gymnasium.register(
        "policylab/VisualReach-v0",
        entry_point="policylab.envs.procedural.visual_reach:VisualReachEnv",
        max_episode_steps=20,
    )

__all__ = [
    "GOALS",
    "ID_MARKET_MAKING",
    "ID_TRADE_SIM",
    "MarketMakingEnv",
    "ID_TWO_GOAL",
    "TradeSimEnv",
    "TwoGoalEnv",
    "goal_fractions",
]
