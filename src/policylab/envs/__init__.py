"""Small gymnasium environments shipped with policylab, registered on import under the
`policylab/` namespace (so `policylab train --task policylab/TwoGoal-v0` works)."""

import gymnasium

from policylab.envs.two_goal import GOALS, TwoGoalEnv, goal_fractions

ID_TWO_GOAL = "policylab/TwoGoal-v0"

if ID_TWO_GOAL not in gymnasium.registry:
    gymnasium.register(ID_TWO_GOAL, entry_point=TwoGoalEnv)

__all__ = ["GOALS", "ID_TWO_GOAL", "TwoGoalEnv", "goal_fractions"]
