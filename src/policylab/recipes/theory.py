"""Recipes of the theory systems (issue #18; papers/seed_control_theory.md): risk-seeking
policy gradient for symbolic search (§6, Lyapunov functions), and its vanilla-PG
comparison arm.

DSO's objective: J_risk(θ; ε) = E[R | R ≥ R_ε(θ)], estimated on a batch of n samples by
(1/(εn))·Σ_i (R_i − R_ε)·1[R_i ≥ R_ε]·∇log p(τ_i) (Petersen et al., arXiv:1912.04871
eq. 3). In policylab: advantage `quantile_baseline`, selection `top_quantile`, loss
`reinforce` summed over a row's tokens (log p(τ) = Σ_t log π) and averaged over the kept
rows. DSO's entropy bonus (λ_H 0.005, γ_H 0.8 [code config_3d_trig.py controller]) has
no counterpart in the language-model trainer's losses, which see only the sampled
tokens' log-probs: both recipes here run without it (noted in `notes`).
"""

from __future__ import annotations

from policylab.recipes.base import Recipe, S, add

_PAPER = "Zou, Feng, Zhao, Shi 2025, Analytical Lyapunov Function Discovery, arXiv:2502.02014"
_NO_ENTROPY = (
    "DSO's entropy bonus λ_H = 0.005, γ_H = 0.8 [code config_3d_trig.py] is not applied: "
    "the language-model losses see only the sampled tokens' log-probs"
)
_TRAINING = {
    "batch_size": S(500, "[code config_3d_trig.py training.batch_size] 500 candidates"),
    "lr": S(3e-4, "[code config_3d_trig.py controller.learning_rate] 3e-4 (1-layer decoder)"),
    "n_samples": S(2_000_000, "[code config_3d_trig.py training.n_samples] 2·10⁶ candidates"),
    "epochs": S(1, "[code utils/train.py] one gradient step per batch"),
}

add(
    Recipe(
        name="risk_seeking_pg",
        title="Risk-seeking policy gradient (DSO) for symbolic search",
        paper=_PAPER,
        formula=(
            "R_ε = (1 − ε)-quantile of the batch's rewards (numpy 'higher')\n"
            "keep rows with R ≥ R_ε (ties kept);  A_i = R_i − R_ε\n"
            "loss = mean_kept[ A_i · (−Σ_t log π(y_t | ·)) ]"
        ),
        advantage="quantile_baseline",
        loss="reinforce",
        advantage_options={
            "epsilon": S(0.1, "[code config_3d_trig.py training.epsilon] ε = 0.1"),
        },
        loss_options={
            "loss_agg_mode": S(
                "seq-mean-token-sum",
                "[code utils/train.py] pg_loss = reduce_mean((r − b)·neglogp), neglogp the "
                "expression's summed token log-probs",
            ),
        },
        selection="top_quantile",
        selection_options={
            "epsilon": S(0.1, "[code config_3d_trig.py training.epsilon] ε = 0.1"),
        },
        training=_TRAINING,
        notes=(_NO_ENTROPY,),
    )
)

add(
    Recipe(
        name="vanilla_pg_batch_baseline",
        title="Vanilla PG with a batch-mean baseline (DSO's ewma_R at α = 1)",
        paper=_PAPER + " (vanilla-PG arm: Petersen et al., DSO, arXiv:1912.04871)",
        formula=(
            "b = mean_g R (the step's group; one system → the whole batch)\n"
            "A_i = R_i − b;  loss = mean_i[ A_i · (−Σ_t log π(y_t | ·)) ]"
        ),
        advantage="dr_grpo",
        loss="reinforce",
        loss_options={
            "loss_agg_mode": S(
                "seq-mean-token-sum",
                "[code utils/train.py] the same sequence-level loss as risk_seeking_pg",
            ),
        },
        training=_TRAINING,
        notes=(
            "DSO's vanilla arm uses b = EWMA(mean R) with α = 0.5 [code utils/train.py "
            "baseline 'ewma_R']; an EWMA needs state across steps, which policylab's "
            "advantage estimators (pure functions of one batch) do not keep, so this arm "
            "uses the closest stateless estimator, the batch mean (EWMA with α = 1) [ours]",
            _NO_ENTROPY,
        ),
    )
)
