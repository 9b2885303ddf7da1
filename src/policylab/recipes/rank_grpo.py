"""Rank-GRPO for a language model writing a ranked list, one item per line
(papers/seed_llm_algorithms.md §19): per-rank rewards and group advantages (the advantage
estimator `rank_grpo`, fed by the `rank_items` stage) and the rank-level ratio (the loss
`rank_ppo_clip`). `policylab train --algo rank_grpo --task ranked_list` (a task with
`relevance(completion, example)`)."""

from policylab.recipes.base import Recipe, S, add

CODE = "[code yaochenzhu/Rank-GRPO:train_rank_grpo.py]"

add(
    Recipe(
        name="rank_grpo",
        title="Rank-GRPO — rank-level rewards, advantages and ratios",
        paper="Zhu et al. 2025, Rank-GRPO (ConvRec-R1), arXiv:2510.20150",
        formula=(
            "R[i,k] = rel[i,k] (exp_inf) or Σ_{j≥k} rel[i,j]·d_j (log_decay)\n"
            "Â[i,k] = (R[i,k] − mean_g R[·,k]) / (std_g R[·,k] + 1e-4);  A[i,t] = Â[i, seg[i,t]]\n"
            "ρ[i,k] = exp(mean_{t∈rank k}(logp − old_logp));  "
            "L = max(−A·ρ, −A·clip(ρ, 1−ε_low, 1+ε_high)) + β·k3"
        ),
        advantage="rank_grpo",
        loss="rank_ppo_clip",
        advantage_options={
            "eps": S(
                1e-4, "[code rank_grpo_trainer.py:_generate_and_score_completions] std + 1e-4"
            ),
            "scale": S(True, "[code] scale_rewards=True"),
        },
        loss_options={
            "eps_low": S(0.06, f"{CODE} GRPOConfig epsilon 0.06"),
            "eps_high": S(0.08, f"{CODE} GRPOConfig epsilon_high 0.08"),
            "loss_agg_mode": S(
                "token-mean", "[ours] our reading of TRL 0.21's default loss_type bnpo"
            ),
            "kl_estimator": S("k3", "[code TRL GRPO] k3 to the reference"),
            "kl_coef": S(1e-3, f"{CODE} --kl_beta 1e-3"),
            "rank_list_length": S(20, f"{CODE} rec_num = 20; tokens past it share one bin"),
        },
        training={
            "samples_per_prompt": S(8, f"{CODE} num_generations = 8"),
            "lr": S(1e-6, f"{CODE} 1e-6 constant (Qwen2.5-0.5B)"),
            "epochs": S(1, f"{CODE} num_iterations = 1"),
        },
        notes=(
            "The `rank_items` stage (chosen automatically) numbers each completion's lines as "
            "its items and turns the task's per-rank relevance into rank rewards (exp_inf; "
            "stage option reward=log_decay). The code's length shaping (±0.1 on EOS and "
            "overflow tokens) is not applied [ours].",
        ),
    )
)
