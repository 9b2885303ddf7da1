"""SPARK (seed_agents.md §A7): one model as policy and generative reward model, trained on
its own recycled rollouts. The learner is GRPO's; what SPARK adds is the rollout source
(workflows/spark.py, the `recycle` hook of workflows/rounds.py), whose defaults are this
recipe's `training["recycle.*"]` and the run's `recycle` field overrides."""

from __future__ import annotations

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add

_SCRIPT = "[code InternLM/Spark XC/scripts/spark_training/Qwen2.5-VL-7B-grpo-virl-19k-iar-reflection-hyb-diverse.sh]"

SPARK = add(
    Recipe(
        name="spark",
        title="SPARK: one model as policy and generative reward model on recycled rollouts",
        paper="Liu et al. 2025, arXiv:2509.22624 (code InternLM/Spark)",
        formula=(
            "infer period: GRPO on the task's prompts; each group (G answers, verifier "
            "rewards) → a judge item\n"
            "  (uniform group: pointwise on answer 0; mixed: pointwise w.p. 0.3, else "
            "pairwise correct vs wrong, random order)\n"
            "  + reflection items (wrong answer or trace → gold answer, ≤ 32 per step)\n"
            "reward period (once the cache holds a batch): GRPO on cached items, reward "
            "judge_label = 1[<answer> = label]\n"
            "A_i = (r_i − mean_g r) / (std_g r + eps);  "
            f"{PPO_CLIP_FORMULA};  + β·k3(logp, ref_logp)"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options={
            "scale": S("group", f"{_SCRIPT} advantage_estimator group_norm"),
            "eps": S(1e-6, "[ours] as grpo; the script states none"),
        },
        loss_options={
            "eps_low": S(0.2, "[ours] PPO's usual ε; the script sets none"),
            "eps_high": S(0.2, "[ours] symmetric clip"),
            "loss_agg_mode": S("token-mean", "[ours] the script sets no aggregation"),
            "kl_estimator": S("k3", f"{_SCRIPT} kl_estimator k3, use_kl_loss"),
            "kl_coef": S(0.001, f"{_SCRIPT} init_kl_coef 0.001, in the loss"),
        },
        training={
            "recycle.reflection": S(True, f"{_SCRIPT} iar-reflection: reflection data on"),
            "recycle.pointwise_prob": S(
                0.3, "[code ppo_utils/new_data_gen.py] mixed group: pointwise w.p. 0.3"
            ),
            "recycle.reflect_max": S(32, "[code new_data_gen.py] at most 32 reflection items"),
            "recycle.capacity": S(1024, "[ours] cache bound, oldest dropped"),
            "recycle.max_answer_chars": S(12, "[ours] tiny model's context of 128"),
            "samples_per_prompt": S(8, f"{_SCRIPT} n_samples_per_prompt 8"),
            "prompts_per_step": S(64, f"{_SCRIPT} rollout_batch_size 64 = reward period 64"),
            "lr": S(5e-7, f"{_SCRIPT} actor_learning_rate 5e-7 (7B)"),
            "temperature": S(1.0, f"{_SCRIPT} temperature 1.0"),
            "max_new_tokens": S(768, f"{_SCRIPT} generate_max_len 768"),
            "gamma_lambda": S((1.0, 1.0), f"{_SCRIPT} γ = λ = 1"),
            "episodes": S(2, f"{_SCRIPT} num_episodes 2"),
        },
        notes=(
            "A reward period is one trainer step (it counts in `steps`); its samples and "
            "tokens are charged to budget/samples and budget/tokens like an infer period's.",
            "Without reflection items: recycle={reflection: false} (arena label "
            "'spark@recycle={reflection: false}'); recycling on another recipe: any "
            "recycle={...} key, e.g. grpo@recycle={reflection: true}.",
            "The recycled formats are ours, in the tiny model's character set: 17+25=42? → "
            "Y/N, 17+25=42|43? → 1/2, 17+25=43! → 42 (the code's are chat prompts with "
            "\\boxed answers).",
            "Reward normalisation (on in the script) is GRPO's group standardisation here.",
        ),
    )
)
