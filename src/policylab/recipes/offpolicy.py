"""Off-policy recipes: DDPG (deterministic actor, Q critic, replay, target networks,
exploration noise), trained by trainers/offpolicy.py. MADDPG is the same update looped over
agents with centralised critics (trainers/offpolicy.py `maddpg_update`)."""

from __future__ import annotations

from policylab.recipes.base import Recipe, S, add

_CLEANRL = "code cleanrl:ddpg_continuous_action.py"

add(
    Recipe(
        name="ddpg",
        title="DDPG (deterministic policy gradient with replay and target networks)",
        paper="Lillicrap et al. 2015, Continuous control with deep RL, arXiv:1509.02971",
        formula=(
            "a = clip(μ(s) + ε, low, high),  ε ~ N(0, (σ·scale)²)  (or OU)\n"
            "y = r + γ·(1 − terminated)·Q'(s', μ'(s'))   (a truncation bootstraps)\n"
            "L_Q = mean_b (Q(s, a) − y)²;  every d steps: L_μ = −mean_b Q(s, μ(s))\n"
            "θ' ← τ·θ + (1 − τ)·θ'  (actor and critic targets, with the actor step)"
        ),
        advantage="td_target",
        loss="deterministic_pg",
        advantage_options={"gamma": S(0.99, f"[{_CLEANRL} gamma] γ = 0.99 (SB3 DDPG: 0.99)")},
        policy="deterministic",
        training={
            "lr": S(3e-4, f"[{_CLEANRL} learning_rate] actor and critic Adam"),
            "buffer_size": S(1_000_000, f"[{_CLEANRL} buffer_size] 1e6"),
            "tau": S(0.005, f"[{_CLEANRL} tau] 0.005 (SB3 DDPG: 0.005)"),
            "batch_size": S(256, f"[{_CLEANRL} batch_size] 256 (SB3 DDPG: 256)"),
            "exploration_noise": S(
                0.1, f"[{_CLEANRL} exploration_noise] σ = 0.1 × the action scale"
            ),
            "learning_starts": S(
                100,
                "[code stable-baselines3:DDPG learning_starts] 100 random steps; CleanRL's "
                "25e3 is for 1M-step MuJoCo runs and would leave a 20k Pendulum run untrained",
            ),
            "policy_frequency": S(
                2, f"[{_CLEANRL} policy_frequency] actor and target update every 2nd step"
            ),
            "hidden": S([256, 256], f"[{_CLEANRL} QNetwork, Actor] two 256-wide ReLU layers"),
            "ou_theta": S(0.15, "[code stable-baselines3:OrnsteinUhlenbeckActionNoise] θ"),
            "ou_dt": S(1e-2, "[code stable-baselines3:OrnsteinUhlenbeckActionNoise] dt"),
        },
        notes=(
            "Control only, Box actions (`policylab train --algo ddpg --task Pendulum-v1`); "
            "one environment, one gradient step per environment step (CleanRL).",
            "Random uniform actions for the first learning_starts steps, drawn from the run's "
            "torch generator so a resumed run repeats them.",
        ),
    )
)
