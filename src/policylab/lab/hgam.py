"""HGAM (papers/seed_control_theory.md §12) and its baselines on `lab/uav_coverage`:
`maddpg` (MLP actors on padded observations), `hgam_provisional` (heterogeneous
graph-attention actors, policies/graph.py) and `uav_script` (the scripted reference).

Both learners are MADDPG (Lowe et al. 2017, arXiv:1706.02275): decentralised
deterministic actors μ_i(o_i), centralised critics Q_i(o_1..o_N, a_1..a_N), replay and
soft target updates — the update is the off-policy trainer's
trainers/maddpg.maddpg_update, the buffer workflows/replay.ReplayBuffer, the target
algebra/deterministic.td_target; only the actor differs. One method step, read top to bottom:
  1. act: uniform random actions for the first `learning_starts` env steps, then
     clip(μ_i(o_i) + σ·N(0, 1), −1, 1), in `envs` episodes at once;
  2. store (o_i, a_i, r_i, o_i') per agent; every episode ends at the horizon, a truncation
     (terminated = 0, so y bootstraps);
  3. one maddpg_update per vector step once learning has started (actors and targets
     every `policy_frequency` updates).
The architecture of HGAM is inferred from the abstract (arXiv 2501.14488), hence
`_provisional`. Every random draw comes from the run's generator; the state's
checkpoint holds the networks, optimisers, replay and episodes, so a resume is exact."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

import torch

from policylab.algebra.options import check_range, option
from policylab.envs.uav_coverage import AGENT, POI, SELF, UAVCoverage, split_obs
from policylab.lab import add_method
from policylab.lab.uav_coverage import ScriptPolicy, TeamPolicy
from policylab.policies.deterministic import DeterministicActor, QCritic
from policylab.policies.graph import HeteroGraphActor
from policylab.recipes.base import S
from policylab.tabular.methods import TabularMethod
from policylab.trainers.maddpg import Agent, maddpg_update
from policylab.workflows.replay import ReplayBuffer

_MADDPG = "paper Lowe et al. 2017 arXiv:1706.02275 §5"
_CLEANRL = "code cleanrl:ddpg_continuous_action.py"


@dataclass
class MADDPGOptions:
    lr: float = option(1e-3, help="Adam step of the critics")
    actor_lr: float = option(1e-4, help="Adam step of the actors")
    gamma: float = option(0.95, help="discount γ")
    tau: float = option(0.01, help="soft target update τ")
    batch_size: int = option(128, help="replay minibatch")
    buffer_size: int = option(20_000, help="replay capacity (transitions of the team)")
    exploration_noise: float = option(0.1, help="σ of the gaussian action noise")
    learning_starts: int = option(1_000, help="env steps of uniform random actions")
    policy_frequency: int = option(2, help="actor and target update every d critic updates")
    hidden: list = option([64, 64], help="hidden widths of the MLP actor and the critic")
    envs: int = option(8, help="episodes stepped at once")
    rollout: int = option(4, help="vector steps per method step (each: one update)")
    width: int = option(32, help="graph attention width (hgam only)")

    def __post_init__(self) -> None:
        for name in ("lr", "actor_lr", "tau", "exploration_noise"):
            check_range("options", name, getattr(self, name), low=0.0, low_open=True)
        check_range("options", "gamma", self.gamma, low=0.0, high=1.0)
        for name in ("batch_size", "buffer_size", "policy_frequency", "envs", "rollout", "width"):
            check_range("options", name, getattr(self, name), low=1)
        check_range("options", "learning_starts", self.learning_starts, low=0)


DEFAULTS = {
    "lr": S(1e-3, "[paper Lillicrap et al. 2015 arXiv:1509.02971 §7] critic 10⁻³ (MADDPG: 0.01)"),
    "actor_lr": S(
        1e-4,
        "[paper Lillicrap et al. 2015 arXiv:1509.02971 §7] actor 10⁻⁴; at 10⁻³ both learners "
        "saturated tanh and flew to the walls in every seed (docs, benchmarks/hgam.py)",
    ),
    "gamma": S(0.95, f"[{_MADDPG}] γ = 0.95"),
    "tau": S(0.01, f"[{_MADDPG}] τ = 0.01"),
    "batch_size": S(128, f"[ours] CPU budget; the paper uses 1024 ({_MADDPG})"),
    "buffer_size": S(20_000, f"[ours] our runs are ≤ 2·10⁴ team steps; the paper 10⁶ ({_MADDPG})"),
    "exploration_noise": S(0.1, f"[{_CLEANRL} exploration_noise] σ = 0.1"),
    "learning_starts": S(1_000, "[ours] 10 episodes of random actions"),
    "policy_frequency": S(2, f"[{_CLEANRL} policy_frequency] 2"),
    "hidden": S([64, 64], f"[{_MADDPG}] two-layer ReLU MLP, 64 units"),
    "envs": S(8, "[ours] numpy episodes stepped together"),
    "rollout": S(4, "[ours] one update per 8 env steps"),
    "width": S(32, "[ours] the HGAM paper gives no width"),
}


def _split(cfg, obs):
    return split_obs(obs, cfg.max_agents, cfg.max_pois)


def _actor(kind: str, cfg, options: MADDPGOptions) -> torch.nn.Module:
    if kind == "mlp":
        return DeterministicActor(cfg.obs_dim, [-1.0, -1.0], [1.0, 1.0], list(options.hidden))
    split = functools.partial(_split, cfg)
    return HeteroGraphActor(split, SELF, AGENT, POI, options.width, options.hidden[-1])


def _agents(kind: str, cfg, options: MADDPGOptions) -> list[Agent]:
    n = cfg.n_agents
    agents = []
    for _ in range(n):
        actor = _actor(kind, cfg, options)
        critic = QCritic(n * cfg.obs_dim, n * 2, list(options.hidden))
        agents.append(
            Agent(
                actor,
                critic,
                copy.deepcopy(actor),
                copy.deepcopy(critic),
                torch.optim.Adam(actor.parameters(), lr=options.actor_lr),
                torch.optim.Adam(critic.parameters(), lr=options.lr),
            )
        )
    return agents


def _replay(cfg, options: MADDPGOptions) -> ReplayBuffer:
    fields: dict[str, tuple[int, ...]] = {"terminated": ()}
    for i in range(cfg.n_agents):
        fields |= {
            f"obs_{i}": (cfg.obs_dim,),
            f"action_{i}": (2,),
            f"next_obs_{i}": (cfg.obs_dim,),
            f"reward_{i}": (),
        }
    return ReplayBuffer(options.buffer_size, fields)


def _init(kind: str):
    def init(problem, options: MADDPGOptions, generator: torch.Generator) -> dict:
        # the networks draw their initial weights from the run's generator
        cfg = problem.mdp
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
            agents = _agents(kind, cfg, options)
        env = UAVCoverage(cfg, options.envs)
        obs = env.reset(generator)
        return {
            "kind": kind,
            "agents": agents,
            "replay": _replay(cfg, options),
            "env": env,
            "obs": obs,
            "env_steps": 0,
            "updates": 0,
        }

    return init


def step(problem, state: dict, options: MADDPGOptions, generator: torch.Generator):
    cfg, env, agents, replay = problem.mdp, state["env"], state["agents"], state["replay"]
    n, rows = cfg.n_agents, []
    for _ in range(options.rollout):
        # 1. act
        obs = torch.as_tensor(state["obs"], dtype=torch.float32)  # [E, N, D]
        if state["env_steps"] < options.learning_starts:
            actions = torch.rand(options.envs, n, 2, generator=generator) * 2 - 1
        else:
            with torch.no_grad():
                mu = torch.stack([ag.actor(obs[:, i]) for i, ag in enumerate(agents)], 1)
            noise = options.exploration_noise * torch.randn(mu.shape, generator=generator)
            actions = (mu + noise).clamp(-1.0, 1.0)
        next_obs, reward, done = env.step(actions.double().numpy())
        # 2. store; the horizon truncates, it does not terminate
        nxt = torch.as_tensor(next_obs, dtype=torch.float32)
        r = torch.as_tensor(reward, dtype=torch.float32)
        stored = {"terminated": torch.zeros(options.envs)}
        for i in range(n):
            stored |= {
                f"obs_{i}": obs[:, i],
                f"action_{i}": actions[:, i],
                f"next_obs_{i}": nxt[:, i],
                f"reward_{i}": r[:, i],
            }
        replay.add(**stored)
        state["obs"] = env.reset(generator) if done else next_obs
        state["env_steps"] += options.envs
        # 3. learn
        if state["env_steps"] >= options.learning_starts and len(replay) >= options.batch_size:
            batch = replay.sample(options.batch_size, generator)
            update_actor = state["updates"] % options.policy_frequency == 0
            rows.append(maddpg_update(agents, batch, options.gamma, options.tau, update_actor))
            state["updates"] += 1
    metrics = {"cost": options.envs * options.rollout, "reward/mean": float(reward.mean())}
    for row in rows[-1:]:
        metrics |= {k: v for k, v in row.items() if k.startswith("critic/")}
    return state, metrics


def policy(problem, state: dict) -> TeamPolicy:
    cfg, actors = problem.mdp, [ag.actor for ag in state["agents"]]
    return TeamPolicy(actors[: cfg.n_mission], actors[cfg.n_mission :])


def checkpoint(state: dict) -> dict:
    return {
        "kind": state["kind"],
        "agents": [ag.state_dict() for ag in state["agents"]],
        "replay": state["replay"].state_dict(),
        "env": state["env"].state_dict(),
        "env_steps": state["env_steps"],
        "updates": state["updates"],
    }


def restore(problem, options: MADDPGOptions, saved: dict) -> dict:
    cfg = problem.mdp
    agents = _agents(saved["kind"], cfg, options)
    for ag, sd in zip(agents, saved["agents"], strict=True):
        ag.load_state_dict(sd)
    replay = _replay(cfg, options)
    replay.load_state_dict(saved["replay"])
    env = UAVCoverage(cfg, options.envs)
    env.load_state_dict(saved["env"])
    return {
        "kind": saved["kind"],
        "agents": agents,
        "replay": replay,
        "env": env,
        "obs": env.observe(),
        "env_steps": int(saved["env_steps"]),
        "updates": int(saved["updates"]),
    }


_FORMULA = (
    "a_i = clip(μ_i(o_i) + σ·ε, −1, 1);  replay (o, a, r, o')\n"
    "y_i = r + γ(1 − terminated)·Q_i'(o', μ_1'(o_1')..μ_N'(o_N'))   (td_target)\n"
    "L_Q = mean (Q_i(o, a) − y_i)²;  L_μ = −Q_i(o, a_1..μ_i(o_i)..a_N);  θ' ← τθ + (1 − τ)θ'"
)

add_method(
    TabularMethod(
        tasks=("uav_coverage",),
        name="maddpg",
        title="MADDPG with MLP actors on padded observations",
        paper="Lowe et al. 2017, Multi-agent actor-critic for mixed environments, arXiv:1706.02275",
        formula=_FORMULA + "\nμ_i = MLP(padded o_i)",
        options=MADDPGOptions,
        defaults=DEFAULTS,
        init=_init("mlp"),
        step=step,
        policy=policy,
        checkpoint=checkpoint,
        restore=restore,
        notes=("`width` is unused (graph actors only).",),
    )
)

add_method(
    TabularMethod(
        tasks=("uav_coverage",),
        name="hgam_provisional",
        title="HGAM: heterogeneous graph-attention actors, MADDPG critics (our reading)",
        paper="Hu et al. 2025, Breaking the pre-planning barrier, arXiv:2501.14488",
        formula=_FORMULA
        + "\nμ_i = MLP([h_ego ‖ GAT_mission ‖ GAT_charger ‖ GAT_PoI]),"
        + " α_ij = softmax_j LeakyReLU(aᵀ[W_t h_i ‖ W_s h_j])",
        options=MADDPGOptions,
        defaults=DEFAULTS,
        init=_init("graph"),
        step=step,
        policy=policy,
        checkpoint=checkpoint,
        restore=restore,
        notes=(
            "Architecture inferred from the abstract: one attention layer per edge type into "
            "the acting agent's node, type outputs concatenated (§12.1).",
        ),
    )
)


@dataclass
class ScriptOptions:
    low_battery: float = option(0.3, help="battery level that sends a mission UAV to charge")


def _script_step(problem, state, options, generator):
    # nothing to learn: one step spends one team episode batch so the run ends promptly
    return state, {"cost": problem.mdp.horizon * problem.extras["eval_episodes"]}


add_method(
    TabularMethod(
        tasks=("uav_coverage",),
        name="uav_script",
        title="Scripted reference: nearest PoI with data, charger below 30 % battery",
        paper="papers/seed_control_theory.md §12.2 (ours)",
        formula="mission: → nearest PoI with data (→ nearest charger if battery < 0.3); "
        "charger: → the mission UAV with the lowest battery",
        options=ScriptOptions,
        defaults={"low_battery": S(0.3, "[ours, spec §12.2] 30 % battery")},
        init=lambda problem, options, generator: {"low_battery": options.low_battery},
        step=_script_step,
        policy=lambda problem, state: ScriptPolicy(state["low_battery"]),
    )
)
