"""The agent workflow of the language-model trainer: episodes of an interactive task
(`task.env(example)`, envs/text.py) played by a PolicySet, credited per turn, packed
into Rollouts (papers/seed_agents.md §A0.5, §A0.8).

`MultiTurn(examples) -> (Rollouts, RolloutInfo)` is the same contract as the single-turn
workflow, so the rollout source, the stages and the learner are the ones every other
recipe uses. What differs between agent methods sits in `AgentOptions` (a recipe's
`workflow_options`, overridden by the config's `agent` field): branching, the credit rule,
the grouping keys, the policy regime, attempts and reflection, the packer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from policylab.algebra.credit import Turns, assign_credit, credits
from policylab.algebra.grouping import group_by
from policylab.algebra.options import check_choice, check_range, option
from policylab.envs.text import GuardedEnv
from policylab.policies.policy_set import REGIMES
from policylab.rollouts import Rollouts
from policylab.workflows.multi_turn import BRANCHING, EpisodeSettings, rollout_episodes
from policylab.workflows.packing import pack_trajectories, pack_turns, turn_table
from policylab.workflows.retro import attempt_returns, reflection_ratings, retro_metrics
from policylab.workflows.single_turn import RolloutInfo

PACKINGS = ("turns", "trajectories")
# columns the agent workflow adds to the single-turn ones (pack_turns / pack_trajectories)
AGENT_COLUMNS = frozenset(
    {
        "agent_ids",
        "instance",
        "turn",
        "attempt",
        "branch",
        "traj",
        "anchor",
        "phase",
        "step_return",
        "attempt_score",
        "observation_mask",
        "segment_ids",
        "token_rewards",
    }
)
ROW_REWARDS = ("credit", "attempt_score", "rating")
TRAIN_PHASES = ("all", "reflect", "none")
RATING_RETURNS = ("success", "reward")


@dataclass(frozen=True)
class AgentOptions:
    branching: str = option(
        "independent", "independent: G episodes per instance; tree: K candidates per turn"
    )
    branches: int = option(0, "K candidates per tree node (0 = samples_per_prompt)")
    regime: str = option("shared", "shared: one policy plays every role; per_role: one each")
    grouping: str = option("instance", "row columns whose equal values form a group")
    credit: str = option("outcome", "credit rule: outcome, immediate, discounted, cross_episode")
    credit_options: dict = option({}, "options of the credit rule (gamma, team_coef, form, …)")
    row_reward: str = option(
        "credit", "Rollouts.rewards: the credit, or the attempt score (GiGPO's episode term)"
    )
    attempts: int = option(1, "attempts per trial (LaMer: 3)")
    reflect: bool = option(False, "a reflection turn before each new attempt (LaMer)")
    actor: str = option(
        "", "a frozen actor model (folder or tiny) playing every act turn; '' = the policy"
    )
    actor_temperature: float = option(0.0, "the frozen actor's temperature (0 = greedy)")
    reflections: int = option(1, "reflections per failed attempt, each with its own retry")
    train_phase: str = option("all", "turns that become rows: all, reflect, none (no update)")
    rating_return: str = option(
        "success", "row_reward=rating: an attempt's return, success (0/1) or reward (summed)"
    )
    eval_attempts: int = option(
        0, "attempts of a held-out episode, with reflections when > 1 (0 = attempts)"
    )
    packing: str = option("turns", "turns: a row per turn; trajectories: a row per episode")
    step_timeout_s: float = option(10.0, "an environment step slower than this ends the episode")

    def __post_init__(self) -> None:
        check_choice("agent", "branching", self.branching, BRANCHING)
        check_choice("agent", "regime", self.regime, REGIMES)
        check_choice("agent", "credit", self.credit, credits.names())
        check_choice("agent", "row_reward", self.row_reward, ROW_REWARDS)
        check_choice("agent", "packing", self.packing, PACKINGS)
        check_choice("agent", "train_phase", self.train_phase, TRAIN_PHASES)
        check_choice("agent", "rating_return", self.rating_return, RATING_RETURNS)
        check_range("agent", "reflections", self.reflections, low=1)
        check_range("agent", "actor_temperature", self.actor_temperature, low=0.0)
        if self.reflections > 1 and self.train_phase == "all":
            raise ValueError(
                f"agent.reflections = {self.reflections} copies the turns before each "
                "reflection into every branch; train on train_phase = reflect (or none)"
            )
        if self.reflections > 1 and self.attempts > 2:
            raise ValueError(
                f"agent.reflections = {self.reflections} with attempts = {self.attempts}: the "
                "branches of a later reflection share the earlier one's turn, which would be "
                "trained on once per branch; accepted: attempts ≤ 2 with reflections > 1"
            )
        if self.actor and (
            self.train_phase == "all" or not (self.reflect or self.train_phase == "none")
        ):
            raise ValueError(
                f"agent.actor = {self.actor!r} plays the act turns with a frozen model, whose "
                "turns the policy must not train on (their log-probs are the actor's); "
                "accepted: train_phase = reflect with reflect = true, or train_phase = none"
            )
        if self.row_reward == "rating" and not (self.reflect or self.train_phase == "none"):
            raise ValueError("agent.row_reward = rating rates reflections: it needs reflect = true")
        check_range("agent", "branches", self.branches, low=0)
        check_range("agent", "attempts", self.attempts, low=1)
        check_range("agent", "eval_attempts", self.eval_attempts, low=0)
        if self.packing == "trajectories" and (self.attempts > 1 or self.branching == "tree"):
            raise ValueError(
                "agent.packing = trajectories needs one attempt and independent branching "
                "(a row per episode must be prefix-consistent); use packing = turns"
            )

    def settings(self, n: int, temperature: float, top_p: float, positions: int):
        return EpisodeSettings(
            branching=self.branching,
            branches=self.branches or n,
            attempts=self.attempts,
            reflect=self.reflect,
            reflections=self.reflections,
            actor_temperature=self.actor_temperature,
            temperature=temperature,
            top_p=top_p,
            max_positions=positions,
        )


@dataclass
class MultiTurn:
    """Episodes of `task` by `policies`: `n` per instance (or a K-tree), credited and
    packed. Environment seeds are drawn from `generator`, so a resumed run replays."""

    policies: object  # PolicySet (callable role → policy)
    task: object
    options: AgentOptions
    n: int
    generator: torch.Generator
    temperature: float = 1.0
    top_p: float = 1.0
    annotators: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokenizer = self.policies(0).tokenizer
        model = self.policies(0).model
        self.positions = int(getattr(model.config, "max_position_embeddings", 10**9))

    def make_env(self, example):
        env = self.task.env(example)
        self.roles = tuple(env.roles)
        return GuardedEnv(env, step_timeout_s=self.options.step_timeout_s)

    def __call__(self, examples: list[dict]) -> tuple[Rollouts, RolloutInfo]:
        settings = self.options.settings(self.n, self.temperature, self.top_p, self.positions)
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=self.generator))
        trajs, timing = rollout_episodes(
            examples,
            self.make_env,
            self.policies,
            self.tokenizer,
            settings,
            copies=self.n,
            seed=seed,
            generator=self.generator,
        )
        batch = self.pack(trajs)
        for annotator in self.annotators:
            batch = annotator.annotate(batch, examples, None, self)
        return batch, self.info(trajs, batch, timing)

    def pack(self, trajs) -> Rollouts:
        options, table = self.options, turn_table(trajs)
        turns = Turns(
            reward=table["reward"],
            traj=table["traj"],
            attempt=table["attempt"],
            turn=table["turn"],
            phase=table["phase"],
            outcome=table["outcome"],
            team=table["outcome"],
        )
        credit = assign_credit(turns, options.credit, **options.credit_options)
        if options.row_reward == "rating":  # Retroformer: G_{n+1} − G_n of the reflection
            returns = attempt_returns(trajs, table, options.rating_return)
            table["rating"] = reflection_ratings(table, returns)
        if options.packing == "trajectories":
            per_traj = [[] for _ in trajs]
            for i, (traj, c) in enumerate(
                zip(table["traj"].tolist(), credit.tolist(), strict=True)
            ):
                if table["played"][i] and table["role"][i] == 0:
                    per_traj[traj].append(c)
            return pack_trajectories(trajs, 0, per_traj)
        rewards = credit if options.row_reward == "credit" else table[options.row_reward]
        extras = {"step_return": credit.float(), "attempt_score": table["attempt_score"].float()}
        batch = pack_turns(trajs, rewards, extras=extras, table=table)
        if options.train_phase == "all":
            return batch
        keep = [i for i, p in enumerate(table["phase"]) if options.train_phase == p]
        return batch.select(torch.tensor(keep, dtype=torch.long))

    def info(self, trajs, batch: Rollouts, timing: dict) -> RolloutInfo:
        # reflection branches share the turns before the branch point: count each once
        turns = list({id(t): t for traj in trajs for t in traj.turns}.values())
        phase = self.options.train_phase
        rows = turns if phase == "all" else [t for t in turns if t.phase == phase]
        texts = (
            [t.text for t in rows]
            if self.options.packing == "turns"
            else [" | ".join(t.text for t in traj.played) for traj in trajs]
        )
        contexts = (
            [t.context_ids for t in rows]
            if self.options.packing == "turns"
            else [traj.prompt_ids for traj in trajs]
        )
        failures: dict[str, int] = {}
        for traj in trajs:
            if traj.ended and traj.ended != "overflow":
                reason = traj.ended.split(":")[0]
                failures[f"env_{reason}"] = failures.get(f"env_{reason}", 0) + 1
        info = RolloutInfo(
            texts,
            [self.tokenizer.decode(c) for c in contexts],
            failures,
            sum(len(t.gen_ids) for t in turns),
            timing.get("generate_s", 0.0),
            timing.get("env_s", 0.0),
        )
        if phase != "all":  # every generated turn is charged, rows or not (frozen actors)
            info.generated_samples = len(turns)
        info.metrics = agent_metrics(trajs, batch, self.roles)
        if self.options.row_reward == "rating" or self.options.reflections > 1:
            info.metrics.update(retro_metrics(trajs, batch, self.policies))
        return info

    def score(self, examples, n, *, chunk: int = 16):
        raise NotImplementedError("a scoring pass (VAS) is not defined for multi-turn tasks")


def evaluate_episodes(policies, task, options: AgentOptions, *, n: int, seed: int) -> dict:
    """Held-out scores of an agent task: `n` test instances played greedily (one episode
    each; `eval_attempts` attempts with reflections, or the options' own) and once at
    temperature 1.
    eval/greedy_accuracy = greedy success; eval/greedy_reward = the greedy episodes' mean
    summed reward; eval/sampled_reward = success at T = 1; eval/pass@k with attempts."""
    examples = task.examples("test", n, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    attempts = options.eval_attempts or options.attempts
    played = replace(
        options,
        branching="independent",
        attempts=attempts,
        reflect=attempts > 1 and (options.reflect or options.attempts == 1),
        reflections=1,
        train_phase="none" if options.actor else "all",  # played, not trained on
        packing="turns",
    )
    out: dict[str, float] = {}
    for mode, temperature in (("greedy", 0.0), ("sampled", 1.0)):
        workflow = MultiTurn(policies, task, options, 1, generator, temperature)
        settings = played.settings(1, temperature, 1.0, workflow.positions)
        trajs, _ = rollout_episodes(
            examples,
            workflow.make_env,
            policies,
            workflow.tokenizer,
            settings,
            seed=seed,
            generator=generator,
        )
        success = sum(t.success for t in trajs) / len(trajs)
        if mode == "greedy":
            out["eval/greedy_accuracy"] = success
            out["eval/greedy_reward"] = sum(sum(x.reward for x in t.played) for t in trajs) / len(
                trajs
            )
            out["eval/turns_mean"] = sum(len(t.played) for t in trajs) / len(trajs)
            for k in range(1, attempts + 1) if attempts > 1 else ():
                out[f"eval/pass@{k}"] = sum(any(t.successes[:k]) for t in trajs) / len(trajs)
        else:
            out["eval/sampled_reward"] = success
    return out


def regroup(batch: Rollouts, keys: str | None) -> Rollouts:
    """The rows' groups by the grouping keys (algebra/grouping.py); None keeps them."""
    if keys is None or len(batch) == 0:
        return batch
    return batch.replace(group_ids=group_by(batch, keys))


def agent_metrics(trajs, batch: Rollouts, roles: tuple[str, ...]) -> dict[str, float]:
    """agent/* (§A0.8): success, turns, invalid actions, observation share, overflow, the
    mean reward of each role's turns, abnormal ends by reason; pass@k over attempts."""
    played = [t for traj in trajs for t in traj.played if t.phase == "act"]
    n = max(len(trajs), 1)
    out = {
        "agent/success": sum(t.success for t in trajs) / n,
        "agent/turns_mean": len(played) / n,
        "agent/invalid_frac": _mean([not t.info.get("valid", True) for t in played]),
        "agent/overflow_frac": sum(t.overflow for t in trajs) / n,
        "agent/ended_abnormally_frac": sum(bool(t.ended) for t in trajs) / n,
    }
    if batch.observation_mask is not None:
        seen = batch.observation_mask.sum() + batch.response_mask.sum()
        out["agent/obs_token_frac"] = float(batch.observation_mask.sum() / seen)
    for k, name in enumerate(roles):
        out[f"agent/r_mean/{name}"] = _mean([t.reward for t in played if t.role == k])
    for turn in sorted({t.turn for t in played}):  # per turn: reward, episodes still playing
        out[f"agent/r_mean/turn{turn}"] = _mean([t.reward for t in played if t.turn == turn])
        live = sum(any(t.turn == turn for t in traj.played) for traj in trajs)
        out[f"agent/live_frac/turn{turn}"] = live / n
    attempts = max((len(t.successes) for t in trajs), default=1)
    if attempts > 1:
        for k in range(1, attempts + 1):
            out[f"agent/pass@{k}"] = sum(any(t.successes[:k]) for t in trajs) / n
    return out


def _mean(values) -> float:
    values = list(values)
    return float(sum(values) / len(values)) if values else math.nan
