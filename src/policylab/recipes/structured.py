"""Structured-output recipes: RL-Struct, GRPO with a multi-dimensional reward for JSON
(papers/seed_agents.md §A8). The reward lives in rewards/json_struct.py and the task in
tasks/json_extract.py; this module names the learner and its defaults.
"""

from __future__ import annotations

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add
from policylab.rewards.json_struct import MULTI

RL_STRUCT_REWARDS = (
    "rewards={json_valid: 1, json_struct: 1, json_format: 1, json_content: 2, json_length: -0.5}"
)

RL_STRUCT = add(
    Recipe(
        name="rl_struct_provisional",
        title="RL-Struct: GRPO with a hierarchical JSON reward (validity, structure, format, "
        "content, length)",
        paper="Hu & Wu 2025, RL-Struct, arXiv:2512.00319 (model card Freakz3z/Qwen-JSON)",
        formula=(
            "R = 1·valid + 1·struct + 1·fmt + 2·content − 0.5·len   (R = 0 when y is not a "
            "JSON object)\n"
            "struct = |K∩S|/|K∪S|,  fmt = share of S's keys with S's type,  content = share "
            "equal to gold,\nlen = min(1, max(0, |y| − 40)/40)\n"
            "A_i = (R_i − mean_g R) / (std_g R + eps),  G = 8\n"
            f"{PPO_CLIP_FORMULA}"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options={
            "scale": S("group", "[ours, after the model card's TRL GRPO] group mean and std"),
            "eps": S(1e-6, "[code verl compute_grpo_outcome_advantage] epsilon 1e-6"),
        },
        loss_options={
            "eps_low": S(
                0.2, "[code TRL GRPOConfig epsilon] ε 0.2 (the model card trains with TRL GRPO)"
            ),
            "eps_high": S(0.2, "[code TRL GRPOConfig] symmetric clip (epsilon_high = epsilon)"),
            "loss_agg_mode": S(
                "token-mean", "[ours] token-mean, as TRL's length-normalised losses"
            ),
            "kl_coef": S(0.0, "[ours; TRL GRPOConfig beta defaults to 0] no KL, no reference"),
        },
        training={
            "samples_per_prompt": S(8, "[ours, seed_agents.md §A8] G = 8"),
            "model": S(
                "Qwen3-4B-Instruct-2507 + LoRA",
                "[ours, from the model card Freakz3z/Qwen-JSON (secondary)] (Unsloth)",
            ),
        },
        rewards={
            name: S(weight, "[ours, seed_agents.md §A8] the multi reward's weight; L = 40")
            for name, weight in MULTI.items()
        },
        notes=(
            "Provisional: RL-Struct's paper text and training code were not available; the "
            "reward's weights, its gate on invalid JSON, L = 40 and G = 8 are ours "
            "(seed_agents.md §A8, §B), from the abstract and the model card's list of reward "
            "components (structure, format, validity, correctness, length).",
            f"The recipe trains on {RL_STRUCT_REWARDS} when the data has schema and gold "
            "columns (json_extract's); every part is logged as reward/json_*. A run's own "
            "rewards= replaces them.",
            "Alternatives of the paper's arena: rewards={json_exact: 1} (1 iff the object "
            "equals gold) and rewards={json_content: 1}; a part with weight 0 is logged but "
            "not trained on.",
        ),
    )
)
