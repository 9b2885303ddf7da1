"""The off-policy trainer: DDPG on a gymnasium environment with Box actions, one loop, read
top to bottom; MADDPG's update is the same code looped over agents (`maddpg_update`).

Per environment step (CleanRL ddpg_continuous_action.py): act — uniform random actions
before `learning_starts`, then clip(μ(s) + noise) — → store (s, a, r, s', terminated) in the
replay buffer (s' the episode's last observation at its end) → once learning has started,
one critic step on a minibatch towards y = r + γ(1 − terminated)·Q'(s', μ'(s')) (a
truncation bootstraps), and every `policy_frequency` steps one actor step on −Q(s, μ(s))
and the soft target updates θ' ← τθ + (1 − τ)θ' → metrics, evaluation, checkpoint.
Every random draw (warm-up actions, noise, minibatches) comes from one torch generator;
checkpoints hold it, the networks, the optimisers, the replay buffer and the environment's
state, so a resumed run continues step for step. Run folder, metrics and checkpoints are
trainers/run.py's; evaluation is workflows/episodes.evaluate_policy on μ.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from policylab import recipes
from policylab.config import load
from policylab.config_offpolicy import OffPolicyConfig
from policylab.envs.user import check_buildable
from policylab.policies.deterministic import DeterministicActor
from policylab.policies.spaces import encode, encode_one
from policylab.trainers.control import (
    ControlProgress,
    ControlResult,
    env_arguments,
    evaluation,
    summary_table,
)
from policylab.trainers.maddpg import Agent, maddpg_update
from policylab.trainers.run import (
    Run,
    latest_checkpoint,
    load_state,
    mean_metrics,
    progress_bar,
    run_options,
    torch_threads,
)
from policylab.workflows.episodes import EpisodeCollector
from policylab.workflows.replay import ReplayBuffer

log = logging.getLogger(__name__)

CONTROL_MAX_THREADS = 1  # a few 256-wide layers on 256 rows: as trainers/control.py
CURVES = ["eval/return_mean", "rollout/episode_return", "critic/loss", "actor/q_mean"]


class ExplorationNoise:
    """Noise added to μ(s), in units of the action scale: gaussian ε ~ σ·N(0, 1) (CleanRL),
    or Ornstein–Uhlenbeck x ← x − θ·x·dt + σ·√dt·N(0, 1), reset at each episode's end
    (SB3's OrnsteinUhlenbeckActionNoise, mean 0)."""

    def __init__(self, kind: str, sigma: float, shape: tuple[int, ...], theta: float, dt: float):
        self.kind, self.sigma, self.theta, self.dt = kind, sigma, theta, dt
        self.state = torch.zeros(shape)

    def __call__(self, generator: torch.Generator) -> torch.Tensor:
        z = torch.randn(self.state.shape, generator=generator)
        if self.kind == "gaussian":
            return self.sigma * z
        self.state = self.state - self.theta * self.state * self.dt + self.sigma * self.dt**0.5 * z
        return self.state.clone()

    def reset(self, done: np.ndarray) -> None:
        self.state[torch.as_tensor(done, dtype=torch.bool)] = 0.0


def train(cfg: OffPolicyConfig, *, resume: bool = False, callbacks=()) -> ControlResult:
    """Train DDPG on `cfg.task` (a Box action space); `callbacks` (policylab.callbacks)
    hear of each logged row, evaluation and checkpoint."""
    with torch_threads(cfg.threads, limit=CONTROL_MAX_THREADS):
        return _train(cfg, resume, callbacks)


def _train(cfg: OffPolicyConfig, resume: bool, callbacks=()) -> ControlResult:
    check_buildable(cfg.task, "sync")
    collector = EpisodeCollector(cfg.task, 1, cfg.seed, **env_arguments(cfg))
    space = collector.envs.single_action_space
    if not isinstance(space, gym.spaces.Box):
        collector.close()
        raise ValueError(
            f"algo={cfg.algo!r} needs Box (continuous) actions; {cfg.task} has {space}: use "
            "ppo for discrete actions"
        )
    run = Run(cfg.folder, cfg.model_dump(), resume=resume, **run_options(cfg), callbacks=callbacks)
    torch.manual_seed(cfg.seed)
    obs_dim, act_dim = collector.obs.shape[-1], int(np.prod(space.shape))
    low, high = torch.as_tensor(space.low).reshape(-1), torch.as_tensor(space.high).reshape(-1)
    agent = Agent.build(obs_dim, low, high, obs_dim, act_dim, cfg.hidden, cfg.lr)
    replay = ReplayBuffer(
        cfg.buffer_size,
        {
            "obs_0": (obs_dim,),
            "action_0": (act_dim,),
            "reward_0": (),
            "next_obs_0": (obs_dim,),
            "terminated": (),
        },
    )
    noise = ExplorationNoise(
        cfg.noise, cfg.exploration_noise, (1, act_dim), cfg.ou_theta, cfg.ou_dt
    )
    generator = torch.Generator().manual_seed(cfg.seed)

    done, start = ControlProgress(), 0
    restored = run.load_checkpoint() if resume else None
    if restored is not None:
        _, state = restored
        agent.load_state_dict(state["agent"])
        replay.load_state_dict(state["replay"])
        generator.set_state(state["generator"])
        noise.state = state["noise"].clone()
        collector.load_state_dict(state["collector"])
        start = state["step"]
        done = ControlProgress(state["evals"], state["solved_at"], state["elapsed_s"])
        log.info("resumed %s at step %d", run.dir, start)

    run.open_trackers()
    done.started = time.perf_counter()
    if start == 0:
        evaluation(agent.actor, cfg, run, done, 0, 1)  # env steps = steps
    window: list[tuple[float, dict[str, float]]] = []
    episodes: list[tuple[float, int]] = []
    shown_return, t_window = "-", time.perf_counter()
    fields = {"ret": "return", "eval": "eval", "sps": "steps/s"}
    with progress_bar(f"{cfg.algo} on {cfg.task}", cfg.total_steps, fields, cfg.progress) as bar:
        job = bar.add_task(
            f"{cfg.algo} · {cfg.task}",
            total=cfg.total_steps,
            completed=start,
            ret="-",
            eval=f"{done.evals[-1]['eval/return_mean']:.1f}",
            sps="-",
        )
        for step in range(start + 1, cfg.total_steps + 1):
            if run.stopping:
                break
            # 1. act: uniform before learning_starts, then clip(μ(s) + noise·scale)
            obs = collector.obs
            if step <= cfg.learning_starts:
                action = low + (high - low) * torch.rand((1, act_dim), generator=generator)
            else:
                with torch.no_grad():
                    action = agent.actor(obs) + noise(generator) * agent.actor.action_scale
                action = action.clamp(low, high)
            raw, reward, term, trunc, info = collector.envs.step(
                action.reshape(1, *space.shape).numpy()
            )
            # 2. store: s' is the episode's last observation when it ended (autoreset)
            next_obs = encode(collector.space, raw)
            real_next = next_obs.clone()
            for i in np.nonzero(term | trunc)[0]:
                real_next[i] = encode_one(collector.space, info["final_obs"][i])
            replay.add(
                obs_0=obs,
                action_0=action,
                reward_0=torch.as_tensor(reward, dtype=torch.float32),
                next_obs_0=real_next,
                terminated=torch.as_tensor(term, dtype=torch.float32),
            )
            collector.obs = next_obs
            collector.episode_return += reward
            collector.episode_length += 1
            for i in np.nonzero(term | trunc)[0]:
                episodes.append(
                    (float(collector.episode_return[i]), int(collector.episode_length[i]))
                )
                collector.episode_return[i], collector.episode_length[i] = 0.0, 0
            noise.reset(term | trunc)
            # 3. learn: a critic step; the actor and the targets every policy_frequency steps
            if step > cfg.learning_starts:
                batch = replay.sample(cfg.batch_size, generator)
                update_actor = step % cfg.policy_frequency == 0
                window.append(
                    (1.0, maddpg_update([agent], batch, cfg.gamma, cfg.tau, update_actor))
                )
            # 4. metrics, evaluation, checkpoint
            last = step == cfg.total_steps
            if step % cfg.log_every == 0 or last:
                now = time.perf_counter()
                metrics = {
                    "env_steps": step,
                    "replay/size": len(replay),
                    "perf/steps_per_s": (step - max(start, step - cfg.log_every))
                    / (now - t_window),
                    **mean_metrics(window),
                }
                if episodes:
                    metrics["rollout/episode_return"] = sum(r for r, _ in episodes) / len(episodes)
                    metrics["rollout/episode_length"] = sum(n for _, n in episodes) / len(episodes)
                    metrics["rollout/episodes"] = len(episodes)
                    shown_return = f"{metrics['rollout/episode_return']:.1f}"
                run.log(step, metrics)
                window, episodes, t_window = [], [], now
                bar.update(
                    job, completed=step, ret=shown_return, sps=f"{metrics['perf/steps_per_s']:.0f}"
                )
            if last or run.stopping or (cfg.eval_every and step % cfg.eval_every == 0):
                evaluation(agent.actor, cfg, run, done, step, 1)
                bar.update(job, eval=f"{done.evals[-1]['eval/return_mean']:.1f}")
                last = last or done.solved_at is not None or run.stopping
            if last or (cfg.save_every and step % cfg.save_every == 0):
                run.save_checkpoint(
                    step,
                    {
                        "step": step,
                        "env_steps": step,
                        "agent": agent.state_dict(),
                        "policy": agent.actor.state_dict(),
                        "replay": replay.state_dict(),
                        "generator": generator.get_state(),
                        "noise": noise.state.clone(),
                        "collector": collector.state_dict(),
                        "evals": done.evals,
                        "elapsed_s": done.elapsed,
                        "solved_at": done.solved_at,
                        "config": cfg.model_dump(),
                    },
                )
            if done.solved_at is not None:
                break

    seconds, solved_at = done.elapsed, done.solved_at
    collector.close()
    env_steps = done.evals[-1]["env_steps"]
    run.write_curves(CURVES, title=f"{cfg.algo} on {cfg.task} (seed {cfg.seed})")
    run.write_summary(summary_table(cfg, done.evals, env_steps, seconds, solved_at))
    run.close()
    return ControlResult(str(run.dir), done.evals, env_steps, seconds, solved_at)


def load_actor(run_dir: str | Path) -> DeterministicActor:
    """The actor μ of an off-policy run folder's latest checkpoint, for `evaluate_policy`."""
    path = latest_checkpoint(run_dir)
    if path is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint to load an actor from")
    state = load_state(path / "state.pt")
    cfg = load(OffPolicyConfig, None, state["config"])
    obs_dim = state["agent"]["critic"]["net.0.weight"].shape[1]
    scale, bias = state["policy"]["action_scale"], state["policy"]["action_bias"]
    obs_dim -= len(scale)
    actor = DeterministicActor(obs_dim, bias - scale, bias + scale, cfg.hidden)
    actor.load_state_dict(state["policy"])
    return actor


def recipe_defaults(algo: str) -> dict:
    """The recipe's `training` values that are OffPolicyConfig fields (a test keeps them
    equal to the config's defaults)."""
    training = recipes.get(algo).training
    return {k: s.value for k, s in training.items() if k in OffPolicyConfig.model_fields}
