"""Small text environments for the multi-turn workflow's tests (any text protocol env)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field


@dataclass
class Step:
    obs: str
    reward: float
    done: bool
    info: dict = field(default_factory=dict)


class Counter:
    """Say digits; each turn the env answers with the running count of characters and,
    for two roles, hands over to the other with its cue. Success: a segment "7;"."""

    stop = ";"
    max_segment = 4
    reflect_cue = "?"

    def __init__(self, roles=("agent",), max_turns=3):
        self.roles, self.max_turns = tuple(roles), max_turns

    def reset(self, example, seed):
        self.example, self.state = example, {"count": 0, "moves": []}
        return example["prompt"] + ">" + self.roles[0][0].upper()

    def restart(self):
        return self.reset(self.example, 0)

    def step(self, role, action):
        self.state["count"] += len(action)
        self.state["moves"].append(action)
        nxt = self.roles[(self.roles.index(role) + 1) % len(self.roles)]
        success = action.startswith("7")
        done = success
        return Step(
            f"={self.state['count']}" + ("" if done else nxt[0].upper()),
            reward=float(len(action) % 3),
            done=done,
            info={"success": success, "valid": action.endswith(";")},
        )

    def snapshot(self):
        return copy.deepcopy(self.state)

    def restore(self, snap):
        self.state = copy.deepcopy(snap)

    def state_key(self):
        return str(self.state["count"])
