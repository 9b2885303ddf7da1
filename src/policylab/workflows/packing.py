"""Packing episodes into `Rollouts` (papers/seed_agents.md §A0.3): two packers, one
contract.

- `pack_turns`: one row per trained turn. The row's prompt is the turn's context (what
  the engine saw), its response the generated segment. Use when contexts diverge across
  turns (tree candidates, several roles, attempts with reflections) or groups are per
  turn (AT-GRPO, LaMer).
- `pack_trajectories`: one row per (trajectory, role): the prompt is the role's first
  context, the response the role's segments with everything that came between them
  (the environment's text, other roles' turns) as observation tokens —
  `observation_mask` 1 there, `response_mask` 1 on generated tokens, `segment_ids` the
  turn index on both. One forward per episode; per-turn credit goes into `token_rewards`
  (StepTool, token-level credit).

`turn_table` lists the columns every credit rule and grouping reads, one entry per turn
in packing order.
"""

from __future__ import annotations

import hashlib

import torch

from policylab.rollouts import Rollouts
from policylab.workflows.multi_turn import Trajectory, Turn


def trained_turns(trajs: list[Trajectory]) -> list[tuple[int, Turn]]:
    """(trajectory index, turn) of every turn in packing order: trajectories in order,
    turns in the order they were generated (tree candidates included)."""
    return [(i, t) for i, traj in enumerate(trajs) for t in traj.turns]


def turn_table(trajs: list[Trajectory]) -> dict:
    """Per-turn columns, [R] tensors unless noted: reward (the acting role's own reward),
    traj, instance, branch (candidate index on a tree), turn, attempt, role, played (bool),
    reflect (bool), outcome (the trajectory's success, 0/1), attempt_score (the sum of
    the played rewards of the turn's attempt; 0 for a reflection), anchor (list of str),
    phase (list of str)."""
    rows = trained_turns(trajs)
    score: dict[tuple[int, int], float] = {}
    for i, t in rows:
        if t.played and t.phase == "act":
            score[(i, t.attempt)] = score.get((i, t.attempt), 0.0) + t.reward
    return {
        "reward": torch.tensor([t.reward for _, t in rows], dtype=torch.float64),
        "traj": torch.tensor([i for i, _ in rows]),
        "instance": torch.tensor([trajs[i].instance for i, _ in rows]),
        "branch": torch.tensor([t.branch for _, t in rows]),
        "turn": torch.tensor([t.turn for _, t in rows]),
        "attempt": torch.tensor([t.attempt for _, t in rows]),
        "role": torch.tensor([t.role for _, t in rows]),
        "played": torch.tensor([t.played for _, t in rows]),
        "reflect": torch.tensor([t.phase == "reflect" for _, t in rows]),
        "outcome": torch.tensor([float(trajs[i].success) for i, _ in rows], dtype=torch.float64),
        "attempt_score": torch.tensor(
            [score.get((i, t.attempt), 0.0) if t.phase == "act" else 0.0 for i, t in rows],
            dtype=torch.float64,
        ),
        "anchor": [t.anchor if t.phase == "act" else "reflection" for _, t in rows],
        "phase": [t.phase for _, t in rows],
    }


def pack_turns(
    trajs: list[Trajectory],
    rewards: torch.Tensor,
    *,
    extras: dict | None = None,
    table: dict | None = None,
) -> Rollouts:
    """One row per turn of `trained_turns(trajs)`; `rewards` [R] the credit of each turn.

    Rows: response_ids / logprobs / entropy = the engine's, right-padded; agent_ids = the
    acting role; group_ids = the instance (the rounds of a step count instances; a run's
    grouping keys regroup the rows before advantages); extras: prompt_ids (the contexts),
    the turn table's columns (instance, turn, attempt, branch, traj, role, anchor as an
    integer hash, phase) and `extras`. `table`: `turn_table(trajs)` when the caller has it."""
    rows = trained_turns(trajs)
    if not rows:
        raise ValueError("pack_turns: the episodes have no turns to train on")
    table = turn_table(trajs) if table is None else table
    T = max(len(t.gen_ids) for _, t in rows)
    ids = torch.zeros((len(rows), T), dtype=torch.long)
    mask = torch.zeros((len(rows), T))
    logprobs, entropy = torch.zeros((len(rows), T)), torch.zeros((len(rows), T))
    for r, (_, t) in enumerate(rows):
        n = len(t.gen_ids)
        ids[r, :n] = torch.tensor(t.gen_ids, dtype=torch.long)
        mask[r, :n] = 1
        logprobs[r, :n] = torch.tensor(t.gen_logprobs)
        entropy[r, :n] = torch.tensor(t.gen_entropy)
    columns = {k: table[k] for k in ("instance", "turn", "attempt", "branch", "traj")}
    return Rollouts(
        rewards=rewards.float(),
        response_mask=mask,
        group_ids=table["instance"].clone(),
        response_ids=ids,
        logprobs=logprobs,
        entropy=entropy,
        agent_ids=table["role"],
        truncated=torch.tensor([t.truncated for _, t in rows]),
        extras={
            "prompt_ids": [list(t.context_ids) for _, t in rows],
            **columns,
            "anchor": torch.tensor([_hash(a) for a in table["anchor"]]),
            "phase": table["phase"],
            **(extras or {}),
        },
    )


def pack_trajectories(trajs: list[Trajectory], role: int, credits: list[list[float]]) -> Rollouts:
    """One row per trajectory for `role`'s played turns; `credits[i][k]` is the credit of
    its k-th turn, placed at the turn's last generated token in `token_rewards`; the row
    reward is the trajectory's success.

    Layout (T-A0.1): generated lengths (2, 1) and observation lengths (3, 0) give
    response_mask [1,1,0,0,0,1], observation_mask [0,0,1,1,1,0], segment_ids
    [0,0,0,0,0,1] and credits at positions 1 and 5."""
    pieces = []
    for traj, credit in zip(trajs, credits, strict=True):
        turns = [t for t in traj.played if t.role == role and t.phase == "act"]
        if not turns:
            raise ValueError(
                f"pack_trajectories: trajectory {traj.instance} has no turn of role {role}"
            )
        if len({t.attempt for t in traj.turns}) > 1:
            raise ValueError(
                "pack_trajectories needs one attempt per trajectory: contexts are not "
                "prefix-consistent across attempts; use pack_turns"
            )
        pieces.append((traj, turns, credit))
    T = max(_row_length(turns) for _, turns, _ in pieces)
    B = len(pieces)
    out = {k: torch.zeros((B, T)) for k in ("gen", "obs", "logp", "ent", "credit")}
    ids = torch.zeros((B, T), dtype=torch.long)
    segments = torch.full((B, T), -1, dtype=torch.long)
    for r, (_, turns, credit) in enumerate(pieces):
        pos = 0
        for k, (t, between) in enumerate(_segments(turns)):
            g, o = len(t.gen_ids), len(between)
            ids[r, pos : pos + g] = torch.tensor(t.gen_ids, dtype=torch.long)
            ids[r, pos + g : pos + g + o] = torch.tensor(between, dtype=torch.long)
            out["gen"][r, pos : pos + g] = 1
            out["obs"][r, pos + g : pos + g + o] = 1
            out["logp"][r, pos : pos + g] = torch.tensor(t.gen_logprobs)
            out["ent"][r, pos : pos + g] = torch.tensor(t.gen_entropy)
            out["credit"][r, pos + g - 1] = float(credit[k])
            segments[r, pos : pos + g + o] = t.turn
            pos += g + o
    return Rollouts(
        rewards=torch.tensor([float(traj.success) for traj, _, _ in pieces]),
        response_mask=out["gen"],
        observation_mask=out["obs"],
        group_ids=torch.tensor([traj.instance for traj, _, _ in pieces]),
        response_ids=ids,
        logprobs=out["logp"],
        entropy=out["ent"],
        segment_ids=segments,
        token_rewards=out["credit"],
        agent_ids=torch.full((B,), role, dtype=torch.long),
        truncated=torch.tensor([any(t.truncated for t in turns) for _, turns, _ in pieces]),
        extras={
            "prompt_ids": [list(turns[0].context_ids) for _, turns, _ in pieces],
            "instance": torch.tensor([traj.instance for traj, _, _ in pieces]),
            "branch": torch.tensor([traj.branch for traj, _, _ in pieces]),
        },
    )


def _segments(turns: list[Turn]) -> list[tuple[Turn, list[int]]]:
    """Each turn with the tokens between its segment and the role's next context: the
    slice of the next turn's context after this segment (other roles' turns and the
    environment's text), or its own observation for the last turn."""
    out = []
    for k, t in enumerate(turns):
        if k + 1 < len(turns):
            nxt = turns[k + 1].context_ids
            start = len(t.context_ids) + len(t.gen_ids)
            if nxt[:start] != t.context_ids + t.gen_ids:
                raise ValueError(
                    "pack_trajectories: a context is not the previous context + segment + "
                    "observation (the TITO invariant); use pack_turns for this workflow"
                )
            out.append((t, nxt[start:]))
        else:
            out.append((t, list(t.obs_ids)))
    return out


def _row_length(turns: list[Turn]) -> int:
    return sum(len(t.gen_ids) + len(between) for t, between in _segments(turns))


def _hash(text: str) -> int:
    """A stable 60-bit integer of a string (anchors as a long tensor)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)
