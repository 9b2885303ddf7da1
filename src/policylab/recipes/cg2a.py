"""CG2A on PPO, our reading (papers/seed_control_theory.md §10): PPO whose minibatch
gradient is the agreement-solved, soft-surgered combination of one gradient per image
augmentation. The paper (off-policy visual RL) gives only the two component names; the
formulas, the PPO host and every default are ours, hence `_provisional`."""

from __future__ import annotations

from policylab.recipes import core  # noqa: F401  (registers ppo, whose options we reuse)
from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add, get

PPO = get("ppo")

add(
    Recipe(
        name="cg2a_ppo_provisional",
        title="CG2A on PPO (our reading): per-augmentation gradients, equal norms, soft surgery",
        paper=(
            "Liu et al. 2023, Improving Generalization in Visual RL via Conflict-aware Gradient "
            "Agreement Augmentation, ICCV 2023, arXiv:2308.01194 (abstract only)"
        ),
        formula=(
            "g_k = ∇_θ L_PPO(τ_k(o)),  k = 1..K  (same minibatch; old logp, A, ret unaugmented)\n"
            "ĝ_k = g_k·mean_j‖g_j‖/‖g_k‖  (solver: equal_norm; or MGDA min_norm)\n"
            "if ĝ_i·g_j < 0:  ĝ_i ← ĝ_i − κ·(ĝ_i·g_j/‖g_j‖²)·g_j  (j ≠ i, random order)\n"
            f"θ ← Adam(Σ_k ĝ_k / K);  {PPO_CLIP_FORMULA};  A = GAE(γ, λ)"
        ),
        advantage="gae",
        loss="ppo_clip",
        advantage_options=PPO.advantage_options,
        loss_options=PPO.loss_options,
        value_loss="value_clip",
        value_options=PPO.value_options,
        training={
            "augment": S(
                ["shift", "colour_jitter", "random_conv", "grayscale"],
                "[ours] §10.2's four; the paper's DMControl set is not known",
            ),
            "gradient_combine": S(
                "cg2a_provisional", "[ours] agreement solver, then soft surgery (§10.1)"
            ),
            "gradient_combine_options": S(
                {"kappa": 0.5, "solver": "equal_norm"},
                "[ours] κ = 0.5 between no surgery and PCGrad; equal-norm balance (§10.1)",
            ),
        },
        notes=(
            "Control on image observations (`policylab train --algo cg2a_ppo_provisional "
            "--task policylab/VisualReach-v0`); every trained parameter's gradient is "
            "combined (actor, critic and the shared CNN) [ours].",
            "A result of this recipe is a result for our reading, never for the paper "
            "(seed_control_theory.md A.2).",
        ),
    )
)
