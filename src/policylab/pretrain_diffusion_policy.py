"""The behaviour-cloned start of DPPO / ADPO on a control task (papers/seed_generative.md
G7.3): a short `ppo` run, transitions collected with its (sampled) actions, DDPM
ε-prediction behaviour cloning of the dppo recipe's DiffusionChainPolicy on them, and one
policy file (ControlPolicy.save) that `init_policy=` starts a dppo or adpo_provisional run
from:

    python -m policylab.pretrain_diffusion_policy --task Pendulum-v1 --out runs/bc/pendulum.pt
    policylab train --algo dppo --task Pendulum-v1 init_policy=runs/bc/pendulum.pt

Defaults [ours: G7.3]: 20,480 ppo steps (Pendulum's return is then about −600 to −1,000,
leaving headroom), 50,000 transitions, 4,000 BC steps of 256 at lr 1e-3. The chain's
observation statistics are the ppo run's; its frozen first K − K′ steps are the cloned net."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from policylab.config import load_control
from policylab.control_policy import ControlPolicy, evaluate_policy, load_policy
from policylab.envs.user import make_env
from policylab.trainers.control import policy_for_spaces
from policylab.trainers.control import train as train_control


def collect(policy: ControlPolicy, task: str, transitions: int, seed: int, envs: int = 8):
    """(observations [N, obs_dim], actions [N, D]) from `policy`'s sampled actions, clipped
    to the action space, in `envs` environments stepped together."""
    import gymnasium as gym

    vec = gym.vector.SyncVectorEnv([lambda: make_env(task) for _ in range(envs)])
    obs, _ = vec.reset(seed=seed)
    observations, actions = [], []
    while len(observations) * envs < transitions:
        action, _ = policy.predict(obs, deterministic=False)
        observations.append(np.asarray(obs, dtype=np.float32))
        actions.append(np.asarray(action, dtype=np.float32))
        obs, *_ = vec.step(action)
    vec.close()
    o = torch.as_tensor(np.concatenate(observations))[:transitions]
    a = torch.as_tensor(np.concatenate(actions))[:transitions]
    return o, a.reshape(len(a), -1)


def pretrain(
    task: str = "Pendulum-v1",
    out: str | Path = "runs/bc/pendulum.pt",
    *,
    ppo_steps: int = 20_480,
    transitions: int = 50_000,
    bc_steps: int = 4_000,
    batch: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    algo: str = "dppo",
    eval_episodes: int = 10,
    ppo_overrides: dict | None = None,
) -> dict:
    """Run the three stages; returns the path and the returns measured on the way."""
    out = Path(out)
    for name, value in (("ppo_steps", ppo_steps), ("transitions", transitions)):
        if value < 1:
            raise ValueError(f"{name} = {value}; accepted: >= 1")
    if bc_steps < 0 or batch < 1 or not lr > 0:
        raise ValueError(f"bc_steps = {bc_steps}, batch = {batch}, lr = {lr}; need >= 0, >= 1, > 0")
    torch.manual_seed(seed)
    ppo_dir = out.with_suffix("").with_name(out.stem + "-ppo")
    ppo_cfg = load_control(
        None,
        {
            "algo": "ppo",
            "task": task,
            "total_steps": ppo_steps,
            "seed": seed,
            "run_dir": str(ppo_dir),
            "progress": False,
            "report_to": [],
            "eval_episodes": eval_episodes,
            **(ppo_overrides or {}),
        },
    )
    ppo_result = train_control(ppo_cfg)
    teacher = load_policy(ppo_dir)
    obs, actions = collect(teacher, task, transitions, seed)

    cfg = load_control(None, {"algo": algo, "task": task, "seed": seed})
    network, _ = policy_for_spaces(cfg, teacher.observation_space, teacher.action_space)
    if network.obs_norm is not None and teacher.network.obs_norm is not None:
        network.obs_norm.load_state_dict(teacher.network.obs_norm.state_dict())
    x = network.normalize(obs)
    optimiser = torch.optim.Adam(network.eps_net.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(bc_steps):
        idx = torch.randint(len(x), (batch,), generator=generator)
        loss = network.bc_loss(x[idx], actions[idx], generator)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    network.freeze_reference()
    policy = ControlPolicy(network, cfg, teacher.observation_space, teacher.action_space)
    policy.save(out)
    bc_return, _ = evaluate_policy(policy, task, eval_episodes, seed=cfg.eval_seed)
    return {
        "path": str(out),
        "ppo_return": ppo_result.evals[-1]["eval/return_mean"],
        "bc_return": bc_return,
        "bc_loss_first": losses[0] if losses else None,
        "bc_loss_last": float(np.mean(losses[-100:])) if losses else None,
        "transitions": len(x),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m policylab.pretrain_diffusion_policy", description=__doc__
    )
    parser.add_argument("--task", default="Pendulum-v1")
    parser.add_argument("--out", default="runs/bc/pendulum.pt")
    parser.add_argument("--ppo-steps", type=int, default=20_480)
    parser.add_argument("--transitions", type=int, default=50_000)
    parser.add_argument("--bc-steps", type=int, default=4_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=10)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result = pretrain(
        args.task,
        args.out,
        ppo_steps=args.ppo_steps,
        transitions=args.transitions,
        bc_steps=args.bc_steps,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        eval_episodes=args.eval_episodes,
    )
    print(  # the command's report (a CLI, not library code)
        f"saved {result['path']}: ppo return {result['ppo_return']:.1f}, behaviour-cloned "
        f"return {result['bc_return']:.1f} ({result['transitions']} transitions, BC loss "
        f"{result['bc_loss_first']} → {result['bc_loss_last']})"
    )
    return result


if __name__ == "__main__":
    main()
