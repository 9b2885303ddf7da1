"""Agent recipes: multi-turn and multi-agent language-model RL (papers/seed_agents.md
§A1 AT-GRPO, §A2 StepTool, §A3 LaMer) and the baselines their arenas compare against.

Each recipe is the shared learner plus `workflow_options` for the agent workflow
(workflows/agents.py): how episodes branch, how per-turn rewards become credit, which
rows form a group, one policy or one per role, attempts and reflection, the packer. They
run on interactive tasks (plan_path_moves, countdown_calc, plan_path_fog, or a user's
task with an `env` method; docs/agents.md).
"""

from __future__ import annotations

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add

_CLIP = {
    "eps_low": S(0.2, "[code PettingLLMs config/ppo_trainer/base.yaml clip_ratio] ε 0.2"),
    "eps_high": S(0.2, "[code PettingLLMs] symmetric clip"),
    "loss_agg_mode": S("token-mean", "[code PettingLLMs / verl] token-mean aggregation"),
    "kl_coef": S(0.0, "[code PettingLLMs use_kl_loss False] no KL"),
}
_GRPO = {
    "scale": S("group", "[code PettingLLMs trainer config] rewards standardised per group"),
    "eps": S(1e-6, "[code verl compute_grpo_outcome_advantage] epsilon 1e-6"),
}
_AT_TREE = {
    "branching": S(
        "tree", "[paper §3, code PettingLLMs] K branches per turn, continue from the best"
    ),
    "branches": S(4, "[ours, CPU] K = 4 (code train_sample_num 8)"),
    "credit": S(
        "immediate",
        "[code multi_agent_env/stateful/agents/plan_agent.py:step] the acting agent's "
        "reward for its own action at that turn, not a return",
    ),
    "regime": S("shared", "[paper §3] one model for every role (role sharing)"),
}
_AT_TRAINING = {
    "lr": S(1e-6, "[code config/ppo_trainer/base.yaml] lr 1e-6 (Qwen3 models)"),
    "max_turns": S(5, "[code config/stateful/stateful_L2_lora.yaml] max_turns 5"),
    "train_batch_size": S(32, "[code stateful_L2_lora.yaml] 32 instances per step"),
    "lora": S("rank 16, α 32 per role", "[code stateful_L2_lora.yaml]"),
}

AT_GRPO = add(
    Recipe(
        name="at_grpo",
        title="AT-GRPO: agent- and turn-wise grouped GRPO for multi-agent systems",
        paper="Zhao et al. 2025, arXiv:2510.11062 (code pettingllms-ai/PettingLLMs)",
        formula=(
            "tree: at each (turn t, agent k) K candidates from one context, the best is played\n"
            "group g = (instance e, turn t, agent k);  A_i = (r_i − mean_g r) / (std_g r + eps)\n"
            f"{PPO_CLIP_FORMULA}"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_GRPO,
        loss_options=_CLIP,
        selection="group_filter",
        selection_options={
            "method": S("mean", "[code stateful_L2_lora.yaml] group filter 'mean'"),
            "ratio": S(0.5, "[code stateful_L2_lora.yaml] filter_ratio 0.5"),
        },
        workflow_options={
            **_AT_TREE,
            "grouping": S(
                "instance,turn,agent", "[paper §3.2] groups keyed by environment, turn and agent"
            ),
        },
        training=_AT_TRAINING,
        notes=(
            "The official engine adds the environment reward twice to a plan agent's reward "
            "(seed_agents.md §A1); policylab does not double it (with std-normalised groups "
            "it only rescales against the fixed −2 penalty).",
            "Per-role policies: at_grpo_per_role, or agent={regime: per_role}.",
        ),
    )
)

add(
    Recipe(
        name="at_grpo_per_role",
        title="AT-GRPO with one policy (and optimiser) per role",
        paper=AT_GRPO.paper,
        formula=AT_GRPO.formula + "\npolicy k trains on the rows of role k only",
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_GRPO,
        loss_options=_CLIP,
        selection="group_filter",
        selection_options=AT_GRPO.selection_options,
        workflow_options={
            **AT_GRPO.workflow_options,
            "regime": S("per_role", "[paper §3.3] role-specialised policies"),
        },
        training=_AT_TRAINING,
    )
)

add(
    Recipe(
        name="mas_grpo",
        title="Multi-agent GRPO grouped by instance only (AT-GRPO's grouping ablation)",
        paper=AT_GRPO.paper + " — ablation",
        formula=(
            "as at_grpo, but one group per instance: rows of every turn and agent share "
            "mean and std"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_GRPO,
        loss_options=_CLIP,
        workflow_options={
            **_AT_TREE,
            "grouping": S("instance", "[paper §5 ablation] GRPO grouping by prompt"),
        },
        training=_AT_TRAINING,
    )
)

add(
    Recipe(
        name="mt_grpo",
        title="Multi-turn GRPO over whole trajectories (outcome credit)",
        paper="Shao et al. 2024, arXiv:2402.03300 (GRPO) over episodes; AT-GRPO's baseline",
        formula=(
            "G independent episodes per instance; every turn of episode τ gets R(τ) = "
            "success;\nA_i = (R_i − mean_e R) / (std_e R + eps) per instance e\n"
            f"{PPO_CLIP_FORMULA}"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options=_GRPO,
        loss_options=_CLIP,
        workflow_options={
            "branching": S("independent", "[paper §5] trajectories sampled independently"),
            "credit": S("outcome", "[paper §5] the trajectory's outcome on each of its turns"),
            "grouping": S("instance", "[paper §5] one group per instance"),
        },
    )
)

_STEPTOOL_CLIP = {
    "eps_low": S(0.2, "[code StepTool step_ppo.py runs TRL PPOConfig: cliprange default] 0.2"),
    "eps_high": S(0.2, "[code TRL PPOConfig] symmetric"),
    "loss_agg_mode": S("token-mean", "[code TRL PPOTrainer] masked mean over tokens"),
}
_STEPTOOL_WORKFLOW = {
    "branching": S("independent", "[paper §3] one trajectory per query"),
    "credit": S("immediate", "[paper §3.1] each call's step reward at its last token"),
    "packing": S("trajectories", "[code step_ppo.py] one row per episode, tool text masked"),
    "grouping": S("instance", "[ours] (the advantages are whitened over the batch)"),
}
_STEPTOOL_TRAINING = {
    "lr": S(1e-5, "[code StepTool_ppo.json] lr 1e-5"),
    "batch": S(8, "[code StepTool_ppo.json] batch 8, mini-batch 2, grad accumulation 4"),
    "ppo_epochs": S(4, "[code TRL PPOConfig default] 4 PPO epochs"),
}
_STEPTOOL_FORMULA = (
    "r_s = (α·SuccCalling(a_s) + Contribution(a_s)) / (α + 1) at the end of call s, "
    "r_T = IsSolved (paper placement)\n"
)

add(
    Recipe(
        name="steptool",
        title="StepTool: step-grained rewards and step-grained PPO for tool use",
        paper="Yu et al. 2024, arXiv:2410.07745 (code yuyq18/StepTool)",
        formula=(
            _STEPTOOL_FORMULA + "ρ_t = r_t − β·k1_t;  δ_t = ρ_t + γ·V_{t+1} − V_t over generated "
            "tokens (tool text neither discounts nor is credited);  A = whiten(GAE(δ))\n"
            f"{PPO_CLIP_FORMULA}\n"
            "+ vf_coef · ½·max((V − ret)², (clip(V, V_old ± ε_v) − ret)²), V = value head"
        ),
        advantage="gae",
        loss="ppo_clip",
        advantage_options={
            "gamma": S(0.99, "[code StepTool_ppo.json] γ 0.99"),
            "lam": S(0.95, "[code TRL PPOConfig default] λ 0.95"),
            "whiten": S(True, "[code TRL PPOTrainer whiten advantages]"),
            "kl_coef": S(
                0.3,
                "[code step_ppotrainer compute_rewards, TRL init_kl_coef] β₀ 0.3, k1 per token",
            ),
            "kl_estimator": S("k1", "[code TRL kl_penalty='kl'] log π − log π_ref"),
        },
        loss_options=_STEPTOOL_CLIP,
        value_loss="value_clip",
        value_options={"clip": S(0.2, "[code TRL PPOConfig cliprange_value] 0.2")},
        workflow_options=_STEPTOOL_WORKFLOW,
        training=_STEPTOOL_TRAINING,
        notes=(
            "β is fixed at 0.3: TRL's adaptive controller (target 6, horizon 10,000; "
            "algebra/steptool.py AdaptiveKL) moves β by at most 0.2·n/10,000 per update, "
            "under 2 % over runs of our length, so it is not wired in [ours].",
            "vf_coef (config, default 0.1) is TRL's PPOConfig default.",
            "The final-reward ablation is agent={credit: final}; the critic-free variant "
            "steptool_rpp.",
        ),
    )
)

add(
    Recipe(
        name="steptool_rpp",
        title="StepTool's step-grained rewards without a critic (REINFORCE++ returns)",
        paper="Yu et al. 2024, arXiv:2410.07745; seed_agents.md §A2's CPU-first variant",
        formula=(
            _STEPTOOL_FORMULA + "G[t] = Σ_{s≥t} γ^{s−t} m[s]·r[s] over generated tokens;  "
            f"A = whiten(G)\n{PPO_CLIP_FORMULA}"
        ),
        advantage="reinforce_pp",
        loss="ppo_clip",
        advantage_options={"gamma": S(0.99, "[code StepTool_ppo.json] γ 0.99")},
        loss_options=_STEPTOOL_CLIP,
        workflow_options=_STEPTOOL_WORKFLOW,
        training=_STEPTOOL_TRAINING,
    )
)

_LAMER_CLIP = {
    "eps_low": S(0.2, "[code mlbio-epfl/LaMer, verl default clip_ratio] 0.2"),
    "eps_high": S(0.2, "[code verl] symmetric"),
    "loss_agg_mode": S("token-mean", "[code verl] token-mean"),
    "kl_coef": S(0.0, "[code LaMer scripts use_kl_loss False] no KL"),
}

add(
    Recipe(
        name="lamer",
        title="LaMer: meta-RL across episodes with in-context reflection",
        paper="Jiang et al. 2025, arXiv:2512.16848 (code mlbio-epfl/LaMer)",
        formula=(
            "N attempts per trial, a reflection turn before each new one (memory: reflections)\n"
            "G_t^(n) = g_t^(n) + Σ_{m>n} γ_traj^(m−n)·g_0^(m),  g the γ_step-discounted "
            "return within an attempt (paper form)\n"
            "A = (score − mean_e score) + (G − mean_{e, anchor} G)   (GiGPO mean_norm)\n"
            f"{PPO_CLIP_FORMULA}"
        ),
        advantage="gigpo",
        loss="ppo_clip",
        advantage_options={
            "mode": S("mean_norm", "[code verl-agent core_gigpo, LaMer scripts] no std"),
            "step_w": S(1.0, "[code LaMer scripts step_advantage_w] 1"),
        },
        loss_options=_LAMER_CLIP,
        workflow_options={
            "attempts": S(3, "[code examples/*/lamer_*.sh num_attempts] 3"),
            "reflect": S(True, "[paper §3] a reflection between attempts"),
            "credit": S("cross_episode", "[paper §3.2] cross-episode return"),
            "credit_options": S(
                {"gamma_step": 0.95, "gamma_traj": 0.6, "form": "paper"},
                "[code lamer_*.sh] γ_step 0.95, γ_traj 0.6 (0.9 Sokoban); [paper §3.2] the "
                "paper's cross-episode return (form=code: the code's running return)",
            ),
            "row_reward": S("attempt_score", "[code reward_manager/episode.py] episode term"),
            "grouping": S("instance", "[code core_gigpo] episode groups per instance"),
        },
        training={
            "lr": S(1e-6, "[code lamer_*.sh] lr 1e-6 (Qwen3-4B)"),
            "group_size": S(8, "[code lamer_*.sh] 8"),
        },
        notes=(
            "The code's cross-episode return (one running return, r + γ_traj·G at an "
            "attempt boundary) also discounts later attempts by γ_step per remaining turn; "
            "agent={credit_options: {form: code, gamma_step: 0.95, gamma_traj: 0.6}} "
            "reproduces what the official runs trained with.",
        ),
    )
)

add(
    Recipe(
        name="gigpo",
        title="GiGPO: group-in-group advantages (episode and anchor-state step groups)",
        paper="Feng et al. 2025, arXiv:2505.10978 (code verl-agent); LaMer's baseline",
        formula=(
            "A = (R − mean_e R) + (G − mean_{e, anchor} G),  G the discounted return "
            "within the episode"
        ),
        advantage="gigpo",
        loss="ppo_clip",
        advantage_options={
            "mode": S("mean_norm", "[code LaMer gigpo_*.sh] mean_norm"),
            "step_w": S(1.0, "[code gigpo_*.sh] 1"),
        },
        loss_options=_LAMER_CLIP,
        workflow_options={
            "credit": S("discounted", "[code verl-agent] discounted step return"),
            "credit_options": S({"gamma": 0.95}, "[code gigpo_*.sh] γ 0.95"),
            "row_reward": S("attempt_score", "[code verl-agent] episode score"),
        },
    )
)
