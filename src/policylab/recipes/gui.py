"""GUI agent recipes (papers/seed_agents.md §A6): GUI-R1's GRPO with rule-based action
rewards and SE-GUI's GRPO with a dense point reward for grounding. Both are single-turn
GRPO with a k3 KL in the loss; what sets them apart is the reward, chosen by the run's
`rewards` (a recipe names no reward): on `gui_text`,

    rewards={gui/format: 0.2, gui/acc: 0.8}   # GUI-R1 (logs both parts; = gui_r1)
    rewards={se_gui_point: 1}                 # SE-GUI's point reward
    rewards={gui_hit: 1}                      # the binary in-box baseline

(tasks/gui_rules.py has the formulas; without `rewards` a run trains on the task's exact
verifier, a binary hit.)
"""

from __future__ import annotations

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add

_GRPO = {
    "scale": S("group", "[code EasyR1 / TRL GRPO] rewards standardised per group"),
    "eps": S(1e-6, "[code verl compute_grpo_outcome_advantage] epsilon 1e-6"),
}

add(
    Recipe(
        name="gui_r1",
        title="GUI-R1: GRPO with rule-based rewards over a unified GUI action space",
        paper="GUI-R1 (2025), arXiv:2504.10458 (code ritzz-ai/GUI-R1)",
        formula=(
            "R = 0.8·acc + 0.2·format;  acc = 1[type = gold] · (click: point strictly in the "
            "box | type, scroll: token-F1 ≥ 0.5 | else 1)\n"
            "A_i = (R_i − mean_g R) / (std_g R + eps)\n"
            f"{PPO_CLIP_FORMULA}\n"
            "loss = token-mean(L + β·k3_low_var(logp, ref_logp))"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_GRPO,
        loss_options={
            "eps_low": S(0.2, "[ours] PPO's 0.2; the spec records no clip ratio for GUI-R1"),
            "eps_high": S(0.2, "[ours] symmetric clip; the spec records no clip_ratio_high"),
            "loss_agg_mode": S(
                "token-mean", "[ours] verl/EasyR1's token-level mean; the spec records none"
            ),
            "kl_estimator": S(
                "k3_low_var", "[code EasyR1 examples/config.yaml kl_penalty] low_var_kl"
            ),
            "kl_coef": S(1e-2, "[code EasyR1 examples/config.yaml kl_coef] 1e-2, in the loss"),
        },
        training={
            "samples_per_prompt": S(5, "[code examples/qwen2_5_vl_3b_gui_grpo.sh] n = 5"),
            "temperature": S(1.0, "[code examples/config.yaml] rollout temperature 1.0"),
            "lr": S(1e-6, "[code examples/config.yaml] lr 1e-6 (3B/7B VLMs)"),
            "weight_decay": S(1e-2, "[code examples/config.yaml] weight decay 1e-2"),
            "rollout_batch_size": S(512, "[code examples/config.yaml] 512 prompts per rollout"),
            "update_batch_size": S(128, "[code examples/config.yaml] global batch 128"),
            "episodes": S(15, "[code examples/config.yaml] 15 episodes"),
            "max_new_tokens": S(1024, "[code examples/config.yaml] response ≤ 1024 tokens"),
        },
        rewards={
            "gui/format": S(0.2, "[code verl/utils/reward_score/r1gui.py] 0.2·format"),
            "gui/acc": S(0.8, "[code verl/utils/reward_score/r1gui.py] 0.8·acc"),
        },
        notes=(
            "The recipe trains on rewards={gui/format: 0.2, gui/acc: 0.8} (both parts "
            "logged; {gui_r1: 1} is the same total as one part) when the data has gui_text's "
            "columns; a run's own rewards= replaces them.",
            "The click rule is GUI-R1's strict inequality; gui_text's knob edge=inclusive "
            "switches it to SE-GUI's edges-included rule (the two codes disagree on edges).",
            "The paper's <think>…</think><answer>[{action, point, input_text}]</answer> schema "
            "is gui_text's compact action language here (c x,y | t x,y T | s d | b).",
        ),
    )
)

add(
    Recipe(
        name="se_gui",
        title="SE-GUI: GRPO with a dense point reward for GUI grounding",
        paper="SE-GUI (2025), arXiv:2505.12370 (code YXB-NKU/SE-GUI)",
        formula=(
            "R = 1[x0 ≤ x ≤ x1 ∧ y0 ≤ y ≤ y1] + (1 − (d/d_max)²)·1[d ≤ 1]   (normalised "
            "coordinates; d to the box centre, d_max to the farthest screen corner)\n"
            "A_i = (R_i − mean_g R) / (std_g R + eps)\n"
            f"{PPO_CLIP_FORMULA}\n"
            "loss = L + β·k3(logp, ref_logp)"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_GRPO,
        loss_options={
            "eps_low": S(0.2, "[code TRL (SE-GUI trains with it) GRPOConfig epsilon default] 0.2"),
            "eps_high": S(
                0.2,
                "[code TRL (SE-GUI trains with it) GRPOConfig] symmetric (epsilon_high = epsilon)",
            ),
            "loss_agg_mode": S(
                "seq-mean-token-mean",
                "[ours] TRL GRPO's per-sequence mean then mean over rows; the spec records "
                "no loss_type",
            ),
            "kl_estimator": S(
                "k3", "[code TRL (SE-GUI trains with it) GRPOTrainer] per-token k3 KL in the loss"
            ),
            "kl_coef": S(
                0.004,
                "[code SE-GUI trainer/grpo_config.py beta field default] 0.004 (its "
                "docstring says 0.04)",
            ),
        },
        training={
            "samples_per_prompt": S(8, "[code run_scripts/run_grpo_gui_grounding.sh] G = 8"),
            "epochs": S(10, "[code run_grpo_gui_grounding.sh] 10 data epochs"),
        },
        rewards={
            "se_gui_point": S(1.0, "[code vlm_modules/qwen_module.py:point_reward] point reward"),
        },
        notes=(
            "The recipe trains on rewards={se_gui_point: 1} when the data has gui_text's "
            "columns; SE-GUI's code also adds a format reward (TRL sums the two): "
            "rewards={se_gui_point: 1, format: 1} adds policylab's `format`.",
            "Self-evolution by attention maps (the attention_0.2_filtered runs) is not built: "
            "its selection rule is not specified in the code read (seed_agents.md §A6).",
            "Edges count as inside (SE-GUI's rule); gui_text's knob edge=strict switches it.",
        ),
    )
)
