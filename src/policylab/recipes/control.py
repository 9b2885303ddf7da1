"""Recipes for control only: FPO (a flow-matching action policy) and PG-Rainbow (an IQN
return distribution under PPO's value baseline). PPO itself is in core.py."""

from __future__ import annotations

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add

# a control batch holds one row per environment step
ONE_ROW_PER_STEP = S("token-mean", "[ours] one row per step, mean over steps")

add(
    Recipe(
        name="fpo",
        title="Flow Policy Optimization (PPO-clip for a flow-matching action policy)",
        paper="McAllister et al. 2025, Flow Matching Policy Gradients, arXiv:2507.21053",
        formula=(
            "x^τ = τ·a + (1 − τ)·ε,  u = a − ε;  ℓ[k] = w(τ_k)·mean_d (v̂(x^τ_k, τ_k, o) − u_k)²\n"
            "logp := −mean_k ℓ_θ[k],  old_logp := −mean_k ℓ_old[k]  (draws stored at rollout)\n"
            f"{PPO_CLIP_FORMULA}  = clip of exp(L̂_old − L̂_θ)\n"
            "A = GAE(γ, λ), standardised;  L_v = ½·(V − ret)²;  no entropy bonus"
        ),
        advantage="gae",
        loss="ppo_clip",
        policy="flow",
        advantage_options={
            "gamma": S(0.99, "[code fpo:gridworld] γ = 0.99 (playground 0.995)"),
            "lam": S(0.95, "[code fpo:playground] GAE λ = 0.95"),
            "whiten": S(True, "[code fpo:playground, gridworld] advantages standardised"),
        },
        loss_options={
            "eps_low": S(0.05, "[code fpo:playground] clip 0.05 (its Gaussian PPO uses 0.3)"),
            "eps_high": S(0.05, "[code fpo:playground] symmetric clip"),
            "loss_agg_mode": ONE_ROW_PER_STEP,
        },
        value_loss="value_clip",
        value_options={
            "clip": S(None, "[code fpo:playground] unclipped value regression"),
        },
        training={
            "n_mc": S(8, "[code fpo:playground n_samples_per_action] 8 (τ, ε) draws per action"),
            "flow_steps": S(10, "[code fpo:playground flow_steps] 10 Euler steps"),
            "cfm_reduce": S("mean", "[code fpo:playground, gridworld] mean over action dims"),
            "cfm_weight": S(
                "tau_sq", "[code fpo:playground] noise supervision = velocity loss × τ² (§16.2)"
            ),
            "tau_sampling": S("grid", "[code fpo:playground discretize_t_for_training]"),
            "cfm_scale": S(1.0, "[code fpo:playground] no scale (PHC's σ = 0.05 ≙ 200)"),
            "ratio": S(
                "avg_before_exp",
                "[paper §3; code fpo:playground average_losses_before_exp=True]",
            ),
        },
        notes=(
            "Control only (`policylab train --algo fpo --task Pendulum-v1`): the ratio "
            "exp(L̂_old − L̂_θ) is `ppo_clip`'s exp(logp − old_logp) with logp = −L̂.",
            "Per-draw ratio mode and the optional ±3 log-ratio clamp (§16.2) are not built.",
        ),
    )
)

add(
    Recipe(
        name="pg_rainbow",
        title="PG-Rainbow (PPO whose value baseline reads an IQN return distribution)",
        paper="Jeon, Lee, Lee 2024, PG-Rainbow, arXiv:2407.13146 (IQN: arXiv:1806.06923)",
        formula=(
            "Z_τ(s, a) = g(ψ(s) ⊙ ReLU(Σ_i cos(π·i·τ)·W_i + b))_a;  "
            "ρ_ij = |τ_i − 1{δ_ij < 0}|·L_κ(δ_ij)/κ\n"
            "δ_ij = r + γ(1 − done)·Z'_{τ'_j}(s', a*) − Z_{τ_i}(s, a);  "
            "L_IQN = mean_b (1/N')·Σ_ij ρ_ij  (replay, target net)\n"
            "q_j(s) = Σ_a π(a|s)·Z_{τ̂_j}(s, a), τ̂_j = (2j − 1)/2N;  V_ψ = f_ψ([V_θ(s), q(s)])\n"
            f"A = GAE(γ, λ) on V_ψ;  {PPO_CLIP_FORMULA};  L_v = ½·(V_ψ − ret)²"
        ),
        advantage="gae",
        loss="ppo_clip",
        policy="pg_rainbow",
        advantage_options={
            "gamma": S(
                0.99, "[ours] Atari PPO γ (papers §17.5); the paper's values were not retrieved"
            ),
            "lam": S(0.95, "[ours] Atari PPO λ (papers §17.5)"),
            "whiten": S(True, "[ours] as ppo"),
        },
        loss_options={
            "eps_low": S(0.2, "[ours] ppo's ε so a comparison isolates the critic (§17.5: 0.1)"),
            "eps_high": S(0.2, "[ours] symmetric clip"),
            "loss_agg_mode": ONE_ROW_PER_STEP,
        },
        value_loss="value_clip",
        value_options={"clip": S(None, "[ours] unclipped regression of V_ψ and V_θ")},
        training={
            "pgr_quantiles": S(
                32, "[ours] N fed to PPO (papers §17.2, §17.5; ablated in the paper)"
            ),
            "pgr_input": S(
                "concat",
                "[ours] [V_θ, q] into a linear f_ψ started at V_θ; §17.2 defaults to scaled "
                "V_θ·q, whose scale is the return squared",
            ),
            "iqn_cosines": S(64, "[code dopamine quantile_embedding_dim=64] IQN §3"),
            "iqn_kappa": S(1.0, "[code dopamine] κ = 1 (IQN)"),
            "iqn_n_tau": S(32, "[code dopamine default agent] N = 32"),
            "iqn_n_tau_target": S(32, "[code dopamine default agent] N' = 32"),
            "iqn_n_tau_select": S(32, "[code dopamine default agent] K = 32"),
            "iqn_lr": S(5e-4, "[ours] Dopamine's 5e-5 is for 50M-frame Atari runs"),
            "iqn_adam_eps": S(3.125e-4, "[code dopamine] Adam ε"),
            "iqn_steps": S(16, "[ours] IQN steps per PPO iteration (M of §17.4)"),
            "iqn_batch": S(64, "[ours] replay minibatch"),
            "iqn_target_every": S(100, "[ours] target sync in IQN steps (Dopamine: 10k)"),
            "replay_capacity": S(100_000, "[ours] a CartPole run's length (Dopamine: 1e6)"),
            "replay_min": S(1_000, "[ours] V_θ alone until this many transitions (papers §17.7)"),
        },
        notes=(
            "Control only, discrete actions (`policylab train --algo pg_rainbow --task "
            "CartPole-v1`). The IQN target uses the greedy a*, so it models the greedy "
            "policy's return; f_ψ learns how much of it to use (§17.2 caveat).",
            "The IQN trains after each iteration's PPO epochs, so V_ψ in GAE reads an IQN "
            "trained on all earlier batches (§17.4 trains it before GAE, on this one too).",
        ),
    )
)

add(
    Recipe(
        name="a2c",
        title="A2C (advantage actor-critic: REINFORCE on GAE advantages, one update per batch)",
        paper="Mnih et al. 2016, Asynchronous methods for deep RL, arXiv:1602.01783 "
        "(synchronous form as in stable-baselines; DRLMM arXiv:1911.08647 trains A2C and PPO)",
        formula=(
            "δ_t = r_t + γ·V_{t+1} − V_t;  Â_t = δ_t + γλ·Â_{t+1}  (GAE, not standardised)\n"
            "L = −mean_t Â_t·log π(a_t | s_t) + vf_coef·½(V − ret)² − ent_coef·H\n"
            "one gradient step per batch of rollouts (epochs 1, the whole batch)"
        ),
        advantage="gae",
        loss="reinforce",
        advantage_options={
            "gamma": S(0.99, "[code stable-baselines3:A2C gamma] 0.99"),
            "lam": S(1.0, "[code stable-baselines3:A2C gae_lambda] 1.0 (n-step returns)"),
            "whiten": S(False, "[code stable-baselines3:A2C normalize_advantage] False"),
        },
        loss_options={"loss_agg_mode": ONE_ROW_PER_STEP},
        value_loss="value_clip",
        value_options={"clip": S(None, "[code stable-baselines3:A2C] unclipped value loss")},
        training={
            "epochs": S(1, "[paper Alg. S3; code stable-baselines3:A2C] one update per batch"),
            "minibatch_size": S("batch", "[code stable-baselines3:A2C] the whole batch"),
            "norm_adv": S(False, "[code stable-baselines3:A2C normalize_advantage] False"),
            "num_steps": S(5, "[code stable-baselines3:A2C n_steps] 5 steps per environment"),
            "lr": S(7e-4, "[code stable-baselines3:A2C learning_rate] 7e-4 (RMSprop there)"),
        },
        notes=(
            "Control only. `policylab train --algo a2c --task <gym id>` sets num_steps=5, "
            "lr=7e-4, epochs=1, minibatch_size = num_envs × num_steps and norm_adv=false "
            "over the task's defaults and under your fields (config.CONTROL_ALGO_DEFAULTS).",
            "Adam, not stable-baselines' RMSprop; the gamma/lam fields of the run (the "
            "task's defaults, e.g. Pendulum's 0.9) are what the trainer uses.",
        ),
    )
)
