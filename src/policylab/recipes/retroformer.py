"""Retroformer (papers/seed_agents.md §A4): a retrospective model M_r, trained by policy
gradient from the environment's returns, writes reflections that a frozen actor M_a reads
in its next attempt; and the two baselines its arena compares against.

The workflow (workflows/agents.py) plays attempt 1 with the frozen actor
(`agent.actor`), branches a failed attempt into G reflections by M_r (the trained model),
each followed by its own actor retry, and keeps the reflect turns only as rows, rated
G_{i+1} − G_i (workflows/retro.py) and grouped by (instance, attempt).
"""

from __future__ import annotations

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add

PAPER = "Yao et al. 2023, arXiv:2308.02151 (ICLR 2024; code weirayao/Retroformer)"
_ACTOR = {
    "actor": S(
        "tiny",
        "[ours] the frozen actor M_a (an API LLM in the paper): a model folder; the shipped "
        "tiny model only so that a fresh clone runs — use the actor warm start of "
        "docs/agents.md (agent={actor: runs/sft-actor})",
    ),
    "actor_temperature": S(
        0.0, "[ours] a greedy actor: the rating then depends on the reflection alone"
    ),
    "attempts": S(2, "[ours, spec §A4 testbed] 2 attempts"),
    "eval_attempts": S(2, "[ours, spec §A4 arena] held-out success after attempt 2"),
}
_WORKFLOW = {
    **_ACTOR,
    "reflect": S(True, "[paper §4] a reflection prepended to the actor's next attempt"),
    "reflections": S(
        4, "[ours, spec §A4] G = 4 reflections per failed attempt, each with its own retry"
    ),
    "train_phase": S("reflect", "[paper §4] only M_r is trained: rows = reflect turns"),
    "row_reward": S("rating", "[paper §4 via 2nd agentwiki] r = G_{i+1} − G_i"),
    "rating_return": S("success", "[ours, spec §A4] G = 1 for success, 0 otherwise"),
    "grouping": S("instance,attempt", "[ours, spec §A4] the G reflections of one failure"),
}
_BASELINE_NOTE = (
    "A baseline of retroformer_online's arena (seed_agents.md §A4): the same frozen "
    "actor, attempts and budget; M_r is never updated (train_phase = none)."
)

RETROFORMER = add(
    Recipe(
        name="retroformer_online",
        title="Retroformer (online): policy gradient on a retrospective model, frozen actor",
        paper=PAPER,
        formula=(
            "attempt 1 by the frozen actor M_a; after a failure, G reflections y_g ~ M_r(x), "
            "each followed by its own retry of M_a with y_g prepended\n"
            "rating r_g = G_{i+1,g} − G_i  (G = success);  groups = (instance, attempt)\n"
            "A_g = (r_g − mean) / (std + eps) over the group\n"
            f"{PPO_CLIP_FORMULA}\n"
            "+ β·k1 per token,  k1_t = log M_r(y_t) − log M_r^warm(y_t)\n"
            "(M_r's reflect tokens only; M_a is never updated)"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options={
            "scale": S("group", "[ours] GRPO over the G reflections of one failure"),
            "eps": S(1e-6, "[code verl compute_grpo_outcome_advantage] 1e-6"),
        },
        loss_options={
            "eps_low": S(0.2, "[code TRL PPOConfig cliprange default] 0.2"),
            "eps_high": S(0.2, "[code TRL PPOConfig] symmetric"),
            "loss_agg_mode": S("token-mean", "[code TRL PPOTrainer] masked mean over tokens"),
            "kl_coef": S(
                0.2,
                "[code Retroformer trainer/args.py init_kl_coef 0.2] fixed, not adaptive "
                "[ours]; to the warm-start M_r",
            ),
            "kl_estimator": S("k1", "[code TRL kl_penalty='kl'] k1 = log M_r − log M_r^warm"),
        },
        workflow_options=_WORKFLOW,
        training={
            "lr": S(1e-5, "[code Retroformer trainer/args.py] lr 1e-5"),
            "batch": S(8, "[code trainer/args.py] batch 8, mini-batch 1, grad accumulation 2"),
            "ppo_epochs": S(50, "[code trainer/args.py] ppo_epochs 50"),
            "max_new_tokens": S("32–256", "[code trainer/args.py]; ≤ 6 characters here"),
        },
        notes=(
            "Online variant [spec §A4, ours]: the learned reward model of the released "
            "code (a classifier on (x, y), label 1 iff rating > 0.25) is dropped; the "
            "environment's rating is the reward. retro/positive_frac logs the share the "
            "RM would label 1.",
            "The sign convention of the rating (G_{i+1} − G_i) comes from a secondary "
            "summary and is unchecked against the paper's §4 text.",
            "The KL (β 0.2, k1) sits in the loss, fixed rather than adaptive (target_kl "
            "0.1 in the code) [ours]. TRL's PPO puts k1 in the reward instead "
            "(advantage_options={kl_coef: 0.2}); under GRPO's per-group std that turns the "
            "tiny KL differences of tied ratings into full-size advantages, so it is not "
            "the default. k1 in the loss has zero expected gradient on-policy: it acts "
            "only through the PPO epochs' off-policy steps.",
            "Baselines: frozen_retro (M_r never trained) and no_reflection (retry with "
            "an empty memo).",
        ),
    )
)

add(
    Recipe(
        name="frozen_retro",
        title="Frozen retrospective model: reflections of the warm-start M_r, never trained",
        paper=PAPER + " — the Reflexion-like baseline",
        formula="as retroformer_online with no update: the warm-start M_r writes the memos",
        advantage="grpo",
        loss="ppo_clip",
        workflow_options={**_WORKFLOW, "train_phase": S("none", "[ours, spec §A4] untrained M_r")},
        notes=(_BASELINE_NOTE,),
    )
)

add(
    Recipe(
        name="no_reflection",
        title="No reflection: the frozen actor retries with an empty memo",
        paper=PAPER + " — baseline",
        formula="attempt 2 = attempt 1 replayed from the initial state, no memo",
        advantage="grpo",
        loss="ppo_clip",
        workflow_options={
            **_ACTOR,
            "reflect": S(False, "[ours, spec §A4] retry with the memo empty"),
            "train_phase": S("none", "[ours, spec §A4] nothing to train"),
        },
        notes=(_BASELINE_NOTE,),
    )
)
