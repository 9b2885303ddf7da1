"""The core language-model and PPO recipes: PPO (with GAE), GRPO, Dr. GRPO, DAPO, GSPO,
CISPO, RLOO, REINFORCE++ and REINFORCE++ with a group baseline."""

from __future__ import annotations

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add

add(
    Recipe(
        name="ppo",
        title="Proximal Policy Optimization with GAE",
        paper="Schulman et al. 2017, arXiv:1707.06347 (GAE: arXiv:1506.02438)",
        formula=(
            "δ_t = ρ_t + γ·V_{t+1} − V_t;  Â_t = δ_t + γλ·Â_{t+1};  A = whiten(Â)\n"
            f"{PPO_CLIP_FORMULA}\n"
            "L_v = ½·max((V − ret)², (clip(V, V_old ± ε_v) − ret)²),  ret = Â + V"
        ),
        advantage="gae",
        loss="ppo_clip",
        advantage_options={
            "gamma": S(
                0.99,
                "[paper App. A, Table 3] discount 0.99 (MuJoCo); language models use 1.0 [code verl]",
            ),
            "lam": S(
                0.95,
                "[paper App. A, Table 3] GAE parameter 0.95; language models use 1.0 [code verl]",
            ),
            "whiten": S(
                True, "[code verl masked_whiten, OpenRLHF] advantages standardised over the batch"
            ),
        },
        loss_options={
            "eps_low": S(0.2, "[paper §6.1] ε = 0.2 scored best among the clip settings compared"),
            "eps_high": S(0.2, "[paper §6.1] symmetric clip"),
            "loss_agg_mode": S(
                "token-mean",
                "[code verl] default aggregation; one token = one time step in control",
            ),
        },
        value_loss="value_clip",
        value_options={
            "clip": S(
                0.5,
                "[code verl cliprange_value, OpenRLHF value_clip] from OpenAI baselines; not in the paper",
            ),
        },
        training={
            "epochs": S(10, "[paper App. A, Table 3] 10 epochs per batch (MuJoCo)"),
            "minibatch_size": S(64, "[paper App. A, Table 3] minibatch 64 (MuJoCo)"),
            "lr": S(3e-4, "[paper App. A, Table 3] Adam step size 3e-4 (MuJoCo)"),
            "horizon": S(2048, "[paper App. A, Table 3] 2048 steps per rollout (MuJoCo)"),
        },
    )
)

GRPO = add(
    Recipe(
        name="grpo",
        title="Group Relative Policy Optimization",
        paper="Shao et al. 2024, DeepSeekMath, arXiv:2402.03300",
        formula=(
            "A_i = (R_i − mean_g R) / (std_g R + eps)   (broadcast to the row's tokens)\n"
            f"{PPO_CLIP_FORMULA}\n"
            "loss = seq-mean-token-mean(L + β·k3(logp, ref_logp))"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options={
            "scale": S("group", "[paper §4.1.2] rewards normalised by the group's mean and std"),
            "eps": S(
                1e-6, "[code verl compute_grpo_outcome_advantage] epsilon=1e-6; the paper has none"
            ),
        },
        loss_options={
            "eps_low": S(0.2, "[code verl clip_ratio, TRL epsilon] the paper states no ε"),
            "eps_high": S(0.2, "[code verl, TRL] symmetric clip"),
            "loss_agg_mode": S("seq-mean-token-mean", "[paper eq. 3] (1/G)Σ_i (1/|o_i|)Σ_t"),
            "kl_estimator": S("k3", "[paper eq. 4] unbiased estimator π_ref/π − log(π_ref/π) − 1"),
            "kl_coef": S(0.04, "[paper §4.2] KL coefficient 0.04"),
        },
        training={
            "samples_per_prompt": S(64, "[paper §4.2] 64 outputs sampled per question"),
            "lr": S(1e-6, "[paper §4.2] policy learning rate 1e-6 (7B model)"),
            "epochs": S(1, "[paper §4.2] a single update per exploration stage"),
            "max_new_tokens": S(1024, "[paper §4.2] max length 1024"),
        },
    )
)

add(
    Recipe(
        name="dr_grpo",
        title="Dr. GRPO (GRPO done right)",
        paper="Liu et al. 2025, Understanding R1-Zero-Like Training, arXiv:2503.20783",
        formula=(
            "A_i = R_i − mean_g R   (no std division)\n"
            f"{PPO_CLIP_FORMULA}\n"
            "loss = Σ_{i,t} m·L / (B · L_max)   (a constant, not the response length)"
        ),
        advantage="dr_grpo",
        loss="ppo_clip",
        loss_options={
            "eps_low": S(0.2, "[ours] PPO default; the paper does not restate ε"),
            "eps_high": S(0.2, "[ours] symmetric clip"),
            "loss_agg_mode": S(
                "seq-mean-token-sum-norm",
                "[paper Listing 1] masked sum ÷ MAX_TOKENS, then mean over rows",
            ),
            "L_max": S(
                None,
                "[paper Listing 1] the generation budget: the trainer sets it to max_new_tokens; direct callers must pass L_max",
            ),
            "kl_coef": S(0.0, "[paper §3, after eq. 1] no KL term (β = 0)"),
        },
        training={
            "samples_per_prompt": S(8, "[code understand-r1-zero examples] 8 samples per prompt"),
            "lr": S(1e-6, "[code understand-r1-zero examples] lr 1e-6"),
            "epochs": S(1, "[code understand-r1-zero examples] one PPO epoch"),
        },
    )
)

add(
    Recipe(
        name="dapo",
        title="Decoupled Clip and Dynamic sAmpling Policy Optimization",
        paper="Yu et al. 2025, DAPO, arXiv:2503.14476",
        formula=(
            "keep group g iff 0 < #correct_g < G (std_g acc > 0); refill until N groups (eq. 11)\n"
            "A_i = (R_i − mean_g R) / (std_g R + eps);  R_i += overlong penalty (eq. 13)\n"
            f"{PPO_CLIP_FORMULA}  with ε_low=0.2, ε_high=0.28\n"
            "loss = token-mean(L) over all tokens of the batch (eq. 12)"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options={
            "scale": S("group", "[paper eq. 9] group-normalised advantage as in GRPO"),
            "eps": S(1e-6, "[code verl] epsilon=1e-6"),
        },
        loss_options={
            "eps_low": S(0.2, "[paper §4.1] ε_low = 0.2"),
            "eps_high": S(0.28, "[paper §4.1] ε_high = 0.28 (clip-higher, §3.1)"),
            "loss_agg_mode": S("token-mean", "[paper eq. 12] token-level policy gradient loss"),
            "dual_clip_c": S(
                10.0,
                "[code verl recipe/dapo script clip_ratio_c=10.0] not in the paper; inactive unless r > 10",
            ),
            "kl_coef": S(0.0, "[paper §2.3] KL penalty removed"),
        },
        selection="dynamic_sampling",
        selection_options={
            "metric": S(
                None,
                "[code verl filter_groups.metric=acc] filter on accuracy, not the shaped score (paper eq. 11); our verifiers' unshaped total reward unless a reward part is named 'acc' [ours]",
            ),
        },
        reward_shaping={
            "overlong": {
                "L_max": S(20480, "[paper §4.1] maximum generation length 20480"),
                "L_cache": S(4096, "[paper §4.1] 4096 tokens of soft-punishment cache"),
                "factor": S(1.0, "[code verl overlong_penalty_factor] 1.0; eq. 13 implies 1"),
            }
        },
        training={
            "samples_per_prompt": S(16, "[paper §4.1] 16 responses per prompt"),
            "prompts_per_step": S(512, "[paper §4.1] prompt batch 512"),
            "minibatch_size": S(
                512, "[paper §4.1] mini-batch 512 responses, 16 updates per rollout"
            ),
            "lr": S(1e-6, "[paper §4.1] constant lr 1e-6"),
            "warmup_steps": S(20, "[paper §4.1] linear warm-up over 20 rollout steps"),
            "max_gen_rounds": S(
                10, "[code verl max_num_gen_batches=10] ≤ 0 unlimited; the paper is silent"
            ),
            "gen_prompts_per_round": S(
                1536,
                "[code verl gen_prompt_bsz = 3·512] paper silent; policylab draws prompts_per_step prompts per round [ours]",
            ),
            "on_exhaust": S("raise", "[code verl] an error when the rounds run out"),
        },
        notes=(
            "Dynamic sampling: each step generates rounds of prompts_per_step prompts × G, "
            "drops groups whose accuracy is all equal, and stops once prompts_per_step groups "
            "are kept (TrainConfig max_gen_rounds, on_exhaust); every generated sample is "
            "charged to the run's budget. `selection=dynamic_sampling` adds it to any algorithm.",
            "Overlong shaping is added to the kept rows' rewards after the filter (which reads "
            "the unshaped accuracy) and before the advantage. With the paper's L_max = 20480 "
            "it is 0 at CPU lengths; scale it to the run, e.g. "
            "reward_shaping='{overlong: {L_max: 64, L_cache: 16}}' for max_new_tokens=64.",
        ),
    )
)

add(
    Recipe(
        name="gspo",
        title="Group Sequence Policy Optimization",
        paper="Zheng et al. 2025, GSPO, arXiv:2507.18071",
        formula=(
            "A_i = (R_i − mean_g R) / (std_g R + eps)\n"
            "s_i = exp( (1/|o_i|) Σ_t (logp − old_logp) )\n"
            "L_i = max(−A_i·s_i, −A_i·clip(s_i, 1−ε_low, 1+ε_high));  loss = mean_i L_i"
        ),
        advantage="grpo",
        loss="gspo",
        advantage_options={"scale": S("group", "[paper §4.1] group-based advantage as in GRPO")},
        loss_options={
            "eps_low": S(3e-4, "[paper §5.1] left clipping range 3e-4"),
            "eps_high": S(4e-4, "[paper §5.1] right clipping range 4e-4"),
            "loss_agg_mode": S(
                "seq-mean-token-mean", "[paper eq. 5] (1/G)Σ_i over sequence ratios; verl, OpenRLHF"
            ),
            "kl_coef": S(0.0, "[code TRL paper index, citing the authors] no KL term"),
        },
        training={"minibatches": S(4, "[paper §5.1] each rollout batch split into 4 mini-batches")},
    )
)

add(
    Recipe(
        name="cispo",
        title="Clipped IS-weight Policy Optimization",
        paper="MiniMax 2025, MiniMax-M1, arXiv:2506.13585",
        formula=(
            "A_i = (R_i − mean_g R) / (std_g R + eps)\n"
            "w = sg[clip(r, 1−ε_low, 1+ε_high)];  L = −w·A·logp;  loss = token-mean(L)"
        ),
        advantage="grpo",
        loss="cispo",
        advantage_options={"scale": S("group", "[paper §3.1] group-relative advantage as in GRPO")},
        loss_options={
            "eps_low": S(
                None, "[paper §3.1] the lower bound is effectively disabled (large ε_low)"
            ),
            "eps_high": S(0.2, "[ours] the paper gives no number; matches verl's cispo example"),
            "loss_agg_mode": S("token-mean", "[paper §3.1] normalised by the total token count"),
            "kl_coef": S(0.0, "[paper §3.1] no KL term"),
        },
    )
)

add(
    Recipe(
        name="rloo",
        title="REINFORCE Leave-One-Out",
        paper="Ahmadian et al. 2024, Back to Basics, arXiv:2402.14740",
        formula=(
            "R_i ← R_i − β·Σ_t k1(old_logp, ref_logp)\n"
            "A_i = R_i − (1/(G−1))·Σ_{j≠i} R_j\n"
            f"{PPO_CLIP_FORMULA}"
        ),
        advantage="rloo",
        loss="ppo_clip",
        advantage_options={
            "kl_coef": S(
                0.05,
                "[code TRL RLOOTrainer beta=0.05] sequence-level KL subtracted from the reward",
            ),
            "kl_estimator": S("k1", "[code TRL] Σ_t (old_logp − ref_logp)"),
        },
        loss_options={
            "eps_low": S(0.2, "[code TRL epsilon, OpenRLHF eps_clip] 0.2"),
            "eps_high": S(0.2, "[code TRL, OpenRLHF] symmetric clip"),
            "loss_agg_mode": S("token-mean", "[ours] token-mean as verl's default"),
        },
        training={
            "samples_per_prompt": S(
                4, "[ours] the paper runs RLOO with k = 2 and k = 4 samples; we take 4"
            )
        },
    )
)

# OpenRLHF's PPO loss settings, shared by both REINFORCE++ recipes
OPENRLHF_PPO_CLIP = {
    "eps_low": S(0.2, "[code OpenRLHF PolicyLoss] clip 0.2"),
    "eps_high": S(0.2, "[code OpenRLHF] symmetric clip"),
    "loss_agg_mode": S("token-mean", "[code OpenRLHF PolicyLoss] token-mean"),
}

add(
    Recipe(
        name="reinforce_pp",
        title="REINFORCE++",
        paper="Hu et al. 2025, REINFORCE++, arXiv:2501.03262",
        formula=(
            "ρ_t = −β·k1_t + R·[t = last];  G_t = Σ_{s≥t} γ^{s−t} ρ_s\n"
            "A = (G − mean) / std over every valid token of the batch\n"
            f"{PPO_CLIP_FORMULA}"
        ),
        advantage="reinforce_pp",
        loss="ppo_clip",
        advantage_options={
            "kl_coef": S(0.01, "[code OpenRLHF --init_kl_coef default] paper value not verified"),
            "kl_estimator": S("k1", "[paper; code OpenRLHF default k1] per-token KL in the reward"),
            "gamma": S(1.0, "[code OpenRLHF, verl] γ = 1"),
            "unbiased": S(
                False, "[code OpenRLHF] population variance; verl uses Bessel (unbiased=True)"
            ),
        },
        loss_options={
            **OPENRLHF_PPO_CLIP,
        },
    )
)

add(
    Recipe(
        name="reinforce_pp_baseline",
        title="REINFORCE++ with group baseline",
        paper="Hu et al. 2025, REINFORCE++, arXiv:2501.03262",
        formula=(
            "c_i = R_i − mean_g R;  A = (c − mean) / std over every valid token of the batch\n"
            f"{PPO_CLIP_FORMULA}\n"
            "loss = token-mean(L + β·k2(logp, ref_logp))"
        ),
        advantage="reinforce_pp_baseline",
        loss="ppo_clip",
        advantage_options={
            "unbiased": S(False, "[code OpenRLHF] population variance"),
        },
        loss_options={
            **OPENRLHF_PPO_CLIP,
            "kl_estimator": S(
                "k2", "[code OpenRLHF train_reinforce_baseline script] KL in the loss, k2"
            ),
            "kl_coef": S(1e-5, "[code OpenRLHF train_reinforce_baseline script] init_kl_coef 1e-5"),
        },
    )
)
