"""Recipes for a diffusion-chain control policy: DPPO (Adam) and ADPO (the `adapg`
optimiser, provisional) — papers/seed_generative.md G7. The control trainer runs them:
the policy's K′ fine-tuned denoising steps are the token axis (policies/diffusion_chain.py),
and the loss is algebra/dppo.py's."""

from __future__ import annotations

from policylab.recipes.base import Recipe, S, add

YAML = "[code dppo:cfg/gym/finetune/hopper-v2/ft_ppo_diffusion_mlp.yaml]"

FORMULA = (
    "x_{t−1} = μ_θ(x_t, t, o) + max(s_t, s_min)·clip(z, ±z_clip);  first K − K′ steps frozen\n"
    "ℓp[k] = clamp(mean_d log N(x_{t−1}; μ_θ, max(s_t, s_min)²), −5, 2),  k over the last K′\n"
    "A = GAE(γ, λ), normalised per minibatch, clipped to [q_lo, q_hi] quantiles;  "
    "A[k] = A·γ_d^(K′−1−k)\n"
    "L = mean_{i,k} max(−A[k]·r[k], −A[k]·clip(r[k], 1 ± ε_k)),  r[k] = exp(ℓp_θ[k] − ℓp_old[k])\n"
    "ε_k = base + (ε − base)·(e^{ρ·k/(K′−1)} − 1)/(e^ρ − 1);  L_v = ½·(V − ret)²;  no entropy"
)

CHAIN_TRAINING = {
    "denoising_steps": S(10, "[ours: G7.3 Pendulum testbed] K = 10 (hopper 20)"),
    "fine_tuned_steps": S(5, "[ours: G7.3 Pendulum testbed] K′ = 5 (hopper 10)"),
    "chain_hidden": S((256, 256), "[ours: G7.3] ε-net MLP 2 × 256 (hopper 3 × 512, residual)"),
    "std_min": S(0.1, f"{YAML} min_sampling_denoising_std = min_logprob_denoising_std = 0.1"),
    "z_clip": S(3.0, f"{YAML} randn_clip_value 3"),
    "denoised_clip": S(1.0, "[code dppo: DiffusionModel denoised_clip_value 1.0]"),
    "gamma_denoise": S(0.99, f"{YAML} gamma_denoising 0.99"),
    "clip_base": S(0.01, f"{YAML} clip_ploss_coef_base 0.01"),
    "clip_rate": S(3.0, f"{YAML} clip_ploss_coef_rate 3"),
    "adv_quantiles": S(
        (0.0, 1.0), "[code dppo: PPODiffusion clip_advantage_*_quantile 0, 1; yaml unset]"
    ),
    "critic_lr": S(1e-3, f"{YAML} critic_lr 1e-3 (the actor's is the run's lr)"),
}

COMMON = {
    "advantage": "gae",
    "loss": "ppo_clip",
    "policy": "diffusion_chain",
    "formula": FORMULA,
    "advantage_options": {
        "gamma": S(0.99, f"{YAML} gamma 0.99 (the task's γ is used: Pendulum 0.9)"),
        "lam": S(0.95, f"{YAML} gae_lambda 0.95"),
        "whiten": S(True, "[code dppo: norm_adv True] (per minibatch in the trainer)"),
    },
    "loss_options": {
        "eps_low": S(0.01, f"{YAML} clip_ploss_coef 0.01 (the final ε of the schedule)"),
        "eps_high": S(0.01, f"{YAML} clip_ploss_coef 0.01"),
        "loss_agg_mode": S("token-mean", "[code dppo] mean over (row, denoising step)"),
    },
    "value_loss": "value_clip",
    "value_options": {"clip": S(None, f"{YAML} clip_vloss_coef unset: ½·MSE")},
}

add(
    Recipe(
        name="dppo",
        title="DPPO (PPO over the fine-tuned denoising steps of a diffusion policy)",
        paper="Ren et al. 2024, Diffusion Policy Policy Optimization, arXiv:2409.00588",
        training={**CHAIN_TRAINING, "optimiser": S("adam", f"{YAML} Adam(W), weight decay 0")},
        notes=(
            "Control only (`policylab train --algo dppo --task Pendulum-v1`); start it from a "
            "behaviour-cloned chain with init_policy= (python -m "
            "policylab.pretrain_diffusion_policy).",
            "T_a = 1 (no action chunk); the final action is not clipped inside the chain (the "
            "environment clips), ours.",
        ),
        **COMMON,
    )
)

add(
    Recipe(
        name="adpo_provisional",
        title="ADPO, provisional (DPPO with the adapg optimiser, λ between Adam and RMSProp)",
        paper="Jiang, Yang 2025, ADPO, arXiv:2505.08376 (update inferred, G7.2)",
        training={
            **CHAIN_TRAINING,
            "optimiser": S("adapg", "[ours: G7.2 reading] d = λ·m̂ + (1 − λ)·g over √v̂"),
        },
        notes=(
            "λ is the run field adapg_lam (default 0.5; `lam` is GAE's λ): "
            "`--algos adpo_provisional@adapg_lam=0.5`. λ = 1 is dppo exactly.",
        ),
        **COMMON,
    )
)
