"""Multi-turn, multi-role episodes of language-model policies in text environments,
token in / token out (papers/seed_agents.md §A0.2, §A0.8).

An episode is a play of one instance by one or more roles (agents). Each role acts in
turn: its context is the episode's token transcript so far, it generates one segment
(ending at the environment's stop string), the environment steps on the decoded segment
and its observation text is tokenised once and appended. So for consecutive turns

    context_{t+1} = context_t + gen_t + obs_t        (token for token, the TITO invariant)

and the tokens trained on are exactly the tokens sampled: a generated segment is never
decoded and re-tokenised into the context. `envs/text.py`'s `play_text` is the same loop
over text; a test checks the two agree.

Branching. "independent": G separate episodes per instance. "tree" (AT-GRPO, §A1): one
episode per instance; at each (turn, role) the role samples K candidate segments from the
same context, each is scored on a snapshot of the environment, and the best (first on
ties) is played (greedy tree sampling); all K candidates are rows to train on.

Attempts (LaMer, §A3): an unsuccessful attempt is followed (with `reflect`) by a reflection
turn on the failed transcript plus the environment's reflection cue; the next attempt's
context is the reflections so far (memory "reflection_only") followed by the restarted
environment's first observation. A won attempt ends the trial.

Reflections branching (Retroformer, §A4): with `reflections` = G > 1 a failed attempt is
followed by G reflections, each in its own copy of the episode (a fresh environment reset
with the same example and seed), so each is followed by its own retry; the copies share
the turns before the branch point (the same `Turn` objects).

A frozen actor (Retroformer's M_a): when the policies carry one (`policies.actor`), it
plays every act turn at `actor_temperature` and the trained policy writes the
reflections only.

Generation is batched: at each round every pending request of one policy (role → policy
by the `PolicySet`) is generated in one engine call.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from policylab.engines.base import Sampling
from policylab.engines.hf import end_token_ids

BRANCHING = ("independent", "tree")


@dataclass
class Turn:
    """One generated segment and what followed it (token ids of the engine, never
    re-tokenised)."""

    role: int
    turn: int
    attempt: int
    phase: str  # "act" or "reflect"
    context_ids: list[int]  # exactly the ids given to the engine
    gen_ids: list[int]
    gen_logprobs: list[float]
    gen_entropy: list[float]
    obs_ids: list[int]  # ids appended after the segment (empty for a candidate not played)
    reward: float
    done: bool
    info: dict = field(default_factory=dict)
    branch: int = 0  # candidate index within a tree node; the branch of the episode else
    played: bool = True  # False: a tree candidate that was scored and not continued
    truncated: bool = False  # the segment was cut by the segment length limit
    anchor: str = ""  # the environment's state before the turn (GiGPO step groups)
    text: str = ""  # the decoded segment, as the environment saw it


@dataclass
class Trajectory:
    instance: int  # index of the example in the call's list
    branch: int
    prompt_ids: list[int]
    turns: list[Turn] = field(default_factory=list)
    success: bool = False
    successes: list[bool] = field(default_factory=list)  # per attempt played
    ended: str = ""  # why the episode ended abnormally ("" when it ended normally)
    overflow: bool = False  # the context outgrew the model's positions

    @property
    def played(self) -> list[Turn]:
        return [t for t in self.turns if t.played]


@dataclass
class _Episode:
    """The state machine of one live episode."""

    traj: Trajectory
    env: Any
    context: list[int]
    attempt: int = 0
    turn: int = 0
    role: int = 0
    phase: str = "act"
    memory: list[int] = field(default_factory=list)
    live: bool = True
    example: dict = field(default_factory=dict)
    seed: int = 0  # the environment seed (a reflection branch resets a fresh env with it)
    branched: int = -1  # the last attempt whose reflection was branched


@dataclass
class EpisodeSettings:
    """How episodes are played: branching, K candidates per tree node, attempts and
    reflection, the sampling temperature and the model's context limit."""

    branching: str = "independent"
    branches: int = 4  # K of the tree
    attempts: int = 1
    reflect: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    max_positions: int = 128
    reflections: int = 1  # G reflections per failed attempt, each with its own retry
    actor_temperature: float = 0.0  # a frozen actor's (policies.actor) temperature

    def __post_init__(self) -> None:
        if self.branching not in BRANCHING:
            raise ValueError(f"branching = {self.branching!r}; choices: {BRANCHING}")
        if self.branches < 1 or self.attempts < 1 or self.reflections < 1:
            raise ValueError("branches, attempts and reflections must be >= 1")


def rollout_episodes(
    examples: list[dict],
    make_env,
    policies,
    tokenizer,
    settings: EpisodeSettings,
    *,
    copies: int = 1,
    seed: int = 0,
    generator: torch.Generator | None = None,
) -> tuple[list[Trajectory], dict[str, float]]:
    """Play `copies` episodes per example ("independent"; "tree" plays one per example
    whatever `copies`) and return the trajectories, in example-major order, and timing.

    `make_env(example)` → a TextEnv; `policies(role_index)` → the LanguageModelPolicy that
    plays a role (a PolicySet is callable so); reflections are written by role 0's policy.
    Environment seeds are `seed + instance · copies + branch`, so a run is reproducible.
    With `settings.reflections` = G > 1 one episode per example is played (whatever
    `copies`) and a failed attempt branches into G copies, one per reflection."""
    copies = 1 if settings.branching == "tree" or settings.reflections > 1 else copies
    actor = getattr(policies, "actor", None)  # a frozen actor plays every act turn
    episodes: list[_Episode] = []
    for i, example in enumerate(examples):
        for b in range(copies):
            env = make_env(example)
            first = env.reset(example, seed + i * copies + b)
            ids = _encode(tokenizer, first)
            episode = _Episode(Trajectory(i, b, ids), env, list(ids), example=example)
            episode.seed = seed + i * copies + b
            failed = getattr(env, "ended", "") or ("empty first observation" if not ids else "")
            if failed:  # a reset that raised (GuardedEnv) or gave nothing to condition on
                episode.traj.ended, episode.live = f"reset: {failed}", False
            episodes.append(episode)
    n = settings.branches if settings.branching == "tree" else 1
    timing = Counter()
    while live := [e for e in episodes if e.live]:
        if settings.reflections > 1:
            episodes = _branch_reflections(episodes, make_env, settings.reflections)
            live = [e for e in episodes if e.live]
        for e in live:  # context overflow ends the episode before it asks for a segment
            if len(e.context) + e.env.max_segment > settings.max_positions:
                e.traj.overflow, e.traj.ended, e.live = True, "overflow", False
        # one engine call per (policy owner, samples per context): reflections are role 0's
        # and sample once, acting turns sample K on a tree
        # (a frozen actor, "actor", plays every act turn)
        requests: dict[tuple, list[_Episode]] = {}
        for e in (e for e in live if e.live):
            act = e.phase == "act"
            owner = ("actor" if actor is not None else e.role) if act else 0
            requests.setdefault((owner, n if act else 1), []).append(e)
        for (owner, width), members in requests.items():
            policy = actor if owner == "actor" else policies(owner)
            temperature = settings.actor_temperature if owner == "actor" else None
            start = time.perf_counter()
            out = policy.sample(
                [e.context for e in members],
                generator=generator,
                n=width,
                sampling=_sampling(settings, members[0].env, temperature),
            )
            timing["generate_s"] += time.perf_counter() - start
            start = time.perf_counter()
            ends = set(end_token_ids(getattr(policy, "model", None), tokenizer))
            for j, e in enumerate(members):
                rows = range(j * width, (j + 1) * width)
                _advance(e, [_candidate(out, r, ends) for r in rows], tokenizer, settings)
            timing["env_s"] += time.perf_counter() - start
    return [e.traj for e in episodes], dict(timing)


def _branch_reflections(episodes: list[_Episode], make_env, G: int) -> list[_Episode]:
    """Each episode about to reflect on a failed attempt it has not branched yet gets G − 1
    copies right after it (so the list stays example-major): a fresh environment reset
    with the same example and seed (the next attempt restarts it anyway), a shallow copy
    of the trajectory (the turns so far are shared objects) and of the state machine."""
    out = []
    for e in episodes:
        out.append(e)
        if not (e.live and e.phase == "reflect" and e.branched < e.attempt):
            continue
        e.branched = e.attempt
        for g in range(1, G):
            env = make_env(e.example)
            env.reset(e.example, e.seed)
            traj = replace(
                e.traj,
                branch=e.traj.branch * G + g,
                turns=list(e.traj.turns),
                successes=list(e.traj.successes),
            )
            out.append(replace(e, traj=traj, env=env, context=list(e.context)))
        e.traj.branch = e.traj.branch * G
    return out


def _sampling(settings: EpisodeSettings, env, temperature: float | None = None) -> Sampling:
    return Sampling(
        temperature=settings.temperature if temperature is None else temperature,
        top_p=settings.top_p,
        max_new_tokens=env.max_segment,
        stop_strings=(env.stop,) if env.stop else (),  # "" = no stop string
    )


def _candidate(out, row: int, ends: set[int]) -> dict:
    valid = out.mask[row] > 0
    ids = out.actions[row][valid].tolist()
    return {
        "ids": ids,
        "logprobs": out.logprobs[row][valid].tolist(),
        "entropy": out.entropy[row][valid].tolist()
        if out.entropy is not None
        else [0.0] * len(ids),
        "text": out.extras["texts"][row],
        "truncated": out.extras["finish_reason"][row] == "length",
        "eos": bool(ids) and ids[-1] in ends,  # the model's end of turn: the episode ends
    }


def _advance(e: _Episode, candidates: list[dict], tokenizer, settings: EpisodeSettings) -> None:
    """Play one generated segment (the best of the candidates on a tree) and move the
    episode's state machine on: next role, next turn, reflection, next attempt or end."""
    if e.phase == "reflect":
        c = candidates[0]
        e.traj.turns.append(_turn(e, c, [], 0.0, False, {}, ""))
        e.memory = e.memory + _encode(tokenizer, e.env.reflect_cue) + c["ids"]
        _next_attempt(e, tokenizer)
        return
    role_name = e.env.roles[e.role]
    anchor = _anchor(e.env)
    if len(candidates) > 1:  # tree: score every candidate on a snapshot, play the best
        snap = e.env.snapshot()
        scored = []
        for k, c in enumerate(candidates):
            step = e.env.step(role_name, c["text"])
            e.env.restore(snap)
            scored.append(step.reward)
            e.traj.turns.append(
                _turn(e, c, [], step.reward, step.done, step.info, anchor, branch=k, played=False)
            )
        best = max(range(len(candidates)), key=lambda k: (scored[k], -k))
        e.traj.turns[-len(candidates) + best].played = True
        played = e.traj.turns[-len(candidates) + best]
        step = e.env.step(role_name, candidates[best]["text"])
        played.obs_ids = _encode(tokenizer, step.obs)
        chosen = candidates[best]
    else:
        chosen = candidates[0]
        step = e.env.step(role_name, chosen["text"])
        played = _turn(
            e, chosen, _encode(tokenizer, step.obs), step.reward, step.done, step.info, anchor
        )
        e.traj.turns.append(played)
    e.context = e.context + chosen["ids"] + played.obs_ids
    done = step.done or chosen["eos"]
    if chosen["eos"] and not step.done:
        played.info = {**played.info, "ended": "eos"}
    if step.info.get("ended"):
        e.traj.ended = str(step.info["ended"])
    e.role += 1
    if e.role == len(e.env.roles):
        e.role, e.turn = 0, e.turn + 1
    if not (done or e.turn >= e.env.max_turns):
        return
    success = bool(step.info.get("success", False))
    e.traj.successes.append(success)
    e.traj.success = e.traj.success or success
    more = e.attempt + 1 < settings.attempts
    if success or not more or e.traj.ended:
        e.live = False
    elif settings.reflect:
        e.phase = "reflect"
        e.context = e.context + _encode(tokenizer, e.env.reflect_cue)
    else:
        _next_attempt(e, tokenizer)


def _next_attempt(e: _Episode, tokenizer) -> None:
    e.attempt, e.turn, e.role, e.phase = e.attempt + 1, 0, 0, "act"
    e.context = e.memory + _encode(tokenizer, e.env.restart())


def _turn(
    e: _Episode, c: dict, obs_ids, reward, done, info, anchor, *, branch=None, played=True
) -> Turn:
    return Turn(
        role=e.role if e.phase == "act" else 0,  # reflections: role 0's policy writes them
        turn=e.turn,
        attempt=e.attempt,
        phase=e.phase,
        context_ids=list(e.context),
        gen_ids=c["ids"],
        gen_logprobs=c["logprobs"],
        gen_entropy=c["entropy"],
        obs_ids=obs_ids,
        reward=float(reward),
        done=bool(done),
        info=dict(info),
        branch=e.traj.branch if branch is None else branch,
        played=played,
        truncated=c["truncated"],
        anchor=anchor,
        text=c["text"],
    )


def _anchor(env) -> str:
    key = env.state_key() if hasattr(env, "state_key") else ""
    return hashlib.sha256(str(key).encode()).hexdigest()[:16]


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
