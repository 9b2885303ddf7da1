"""Masked-diffusion-LM recipes (papers/seed_generative.md G1.3, G1.4, G1.7): d1's diffu-GRPO
and d2's StepMerge and exact per-step estimators. They differ only in the `mdm_logprob`
estimator (`training.estimator`); trainers/mdm.py runs them on a model saved by
`python -m policylab.pretrain_mdm` (`policylab train --algo diffu_grpo --task arithmetic
--model runs/tiny-mdm`)."""

from __future__ import annotations

import dataclasses

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add

_D1 = "Zhao, Gupta, Zheng, Grover 2025, d1, arXiv:2504.12216"
_D2 = "Wang, Schiff, Turok, Kuleshov 2025, d2, arXiv:2509.21474"

_ADVANTAGE = {
    "scale": S(
        "none",
        "[code d1:diffu_grpo_trainer.py:_generate_and_score_completions] A = R − mean_g R, "
        "no division by the std (it is only logged)",
    ),
}
_LOSS = {
    "eps_low": S(0.5, "[code d1:train.yaml] epsilon 0.5 (config default 0.2)"),
    "eps_high": S(0.5, "[code d1:train.yaml] symmetric clip"),
    "loss_agg_mode": S(
        "token-mean", "[code d1:compute_loss] mean over the completion mask (to the first EOS)"
    ),
    "kl_estimator": S("k3", "[code d1:compute_loss] k3 to the adapters-off base model"),
    "kl_coef": S(0.04, "[code d1:train.yaml] beta 0.04"),
}


def _training(estimator: str, source: str, segments: int = 1) -> dict:
    return {
        "estimator": S(estimator, source),
        "segments": S(segments, "[ours] StepMerge N at the toy's S = 6 (d2 uses 8–16 at S = 64+)"),
        "prompt_mask_p": S(0.15, "[code d1:train.yaml] p_mask_prompt 0.15 (config default 0.3)"),
        "random_masking": S(
            True, "[code d1:train.yaml] random_masking: μ mask seeds drawn from {0, …, 4095}"
        ),
        "decode_steps": S(6, "[ours] S = L = 6 on the toy (d1: L 256, S 128)"),
        "block": S(0, "[ours] one block of L = 6 (d1: 32)"),
        "remasking": S("low_confidence", "[code d1:generate] remasking low_confidence"),
        "score_temperature": S(
            "sampling",
            "[ours] score at the sampling τ_s so r compares the behaviour policy with itself; "
            "`one` is what both codes do (G0.4)",
        ),
        "epochs": S(12, "[code d1:train.yaml] num_iterations μ = 12 (GSM8K, MATH500)"),
        "samples_per_prompt": S(6, "[code d1:train.yaml] num_generations 6"),
        "lr": S(3e-5, "[ours] the toy's G0.7 calibration (1e-4 collapsed it); d1: 3e-6 at 8B"),
        "grad_clip": S(0.2, "[code d1:train.yaml] max_grad_norm 0.2"),
        "temperature": S(0.9, "[code d1:*_base.sbatch] τ_s 0.9 (TRL default; see G1.3)"),
    }


_FORMULA = (
    "A_i = R_i − mean_g R;  logp from the mdm_logprob estimator (with μ prompt-mask seeds)\n"
    f"{PPO_CLIP_FORMULA}\n"
    "loss = token-mean(L + β·k3(logp, ref_logp))"
)

DIFFU_GRPO = add(
    Recipe(
        name="diffu_grpo",
        title="diffu-GRPO (d1): GRPO on a masked diffusion LM with the one-step estimate",
        paper=_D1,
        formula=_FORMULA + "\nlogp[i,t] = log p_θ(y_t | prompt re-masked w.p. p, all L masked)",
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_ADVANTAGE,
        loss_options=_LOSS,
        training=_training("one_step", "[code d1:_get_per_token_logps] one masked forward pass"),
    )
)

# the paper's name: the same recipe under `d1` (as selection.py registers recipe variants:
# one Recipe copied with dataclasses.replace), so `policylab describe d1` works
add(
    dataclasses.replace(
        DIFFU_GRPO,
        name="d1",
        title="alias of diffu_grpo: " + DIFFU_GRPO.title,
        notes=("d1 is the paper's name; `diffu_grpo` is the same recipe, defaults and sources",),
    )
)

add(
    Recipe(
        name="d2_stepmerge",
        title="d2 StepMerge: the trajectory likelihood from N snapshots",
        paper=_D2,
        formula=_FORMULA + "\nlogp[i,t] = log p_θ(y_t | snapshot at the start of ρ_t's segment)",
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_ADVANTAGE,
        loss_options=_LOSS,
        training=_training(
            "step_merge", "[code d2:d2StepMergeTrainer._get_per_token_logps_oldandref]", 2
        ),
    )
)

add(
    Recipe(
        name="d2_exact",
        title="d2 exact per-step likelihood (StepMerge with N = S; toy only)",
        paper=_D2,
        formula=_FORMULA + "\nlogp[i,t] = log p_θ(y_t | z_{ρ_t})  (S forward passes)",
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_ADVANTAGE,
        loss_options=_LOSS,
        training=_training("exact_steps", "[code d2] StepMerge's limit N = S (G0.4)"),
    )
)

_CO = "Zhou, Ni, Chen, Liu, Yue, Wang, Wang, Liu, Huang 2025, Co-GRPO, arXiv:2512.22288"
_CO_TRAINING = {
    **_training(
        "exact_steps", "[ours, G1.7] co_grpo = d2_exact + a schedule head (tokens scored exactly)"
    ),
    "decode_steps": S(3, "[ours, G1.6] S = L/2 = 3, so how many tokens each step reveals matters"),
    "learn_schedule": S(True, "[paper abstract] one MDP over tokens and schedule actions"),
    "schedule_coef": S(1.0, "[ours, G1.5] weight of the S schedule columns in the token-mean"),
    "schedule_lr": S(1e-2, "[ours] Adam step of φ (2S + 2 numbers; θ's 3e-5 would not move them)"),
    "schedule_std": S((0.25, 0.5), "[ours, G1.10 D5] initial σ of log τ_s and of logit q_s"),
    "alternate": S(False, "[ours, G1.5] θ then φ on alternate steps; not retrieved from the paper"),
}

add(
    Recipe(
        name="co_grpo_provisional",
        title="Co-GRPO (provisional): GRPO over the tokens and a learned decoding schedule",
        paper=_CO,
        formula=(
            "a_s = (log τ_s, logit q_s) ~ N(μ_s, σ²) per step s (π_φ, μ at the hand schedule\n"
            "τ_s = τ_0, q_s = 1/(S − s)); step s samples at τ_s and reveals\n"
            "n_s = max(1, round(q_s·masked)), the last step all\n"
            "row = [log p_θ(y_t | z_{ρ_t}, τ_{ρ_t}) for t < L] ++ [log π_φ(a_s) for s < S]\n"
            "A_i = R_i − mean_g R (schedule columns: c·A_i);  "
            f"{PPO_CLIP_FORMULA}\n"
            "loss = token-mean over the row (L + β·k3 to θ_0 and φ_0)"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_ADVANTAGE,
        loss_options=_LOSS,
        training=_CO_TRAINING,
        notes=(
            "Provisional: the parameterisation of the schedule is ours (G1.5); the paper's "
            "knobs (re-mask ratio, temperatures, CFG scale) were read from its abstract and "
            "project page only, and no code was found.",
        ),
    )
)
