"""Recipes of the selection methods (issue #7; papers/seed_llm_algorithms.md §6–9, §14):
GRPO with one choice of what to train on. Each keeps the `grpo` recipe's advantage, loss
and their defaults, so `policylab arena --algos grpo,d3s,...` isolates the selection; the
component words (`selection=d3s`, `sampler=vas`, ...) put the same method under any
other algorithm. DAPO's dynamic sampling is part of the `dapo` recipe (core.py)."""

from __future__ import annotations

import dataclasses

from policylab.recipes.base import S, add
from policylab.recipes.core import GRPO


def _on_grpo(**fields) -> None:
    """A recipe on GRPO's; GRPO's run settings keep their source, named as GRPO's (so
    `describe vade` does not cite DeepSeekMath's sections under VADE's paper)."""
    inherited = {
        key: S(setting.value, setting.source.replace("[paper", "[paper of grpo, DeepSeekMath,", 1))
        for key, setting in GRPO.training.items()
    }
    add(dataclasses.replace(GRPO, training=inherited, **fields))


_on_grpo(
    name="vade",
    title="GRPO with VADE prompt sampling",
    paper="Hu et al. 2025, VADE, arXiv:2511.18902",
    formula=(
        "per prompt j: Beta(α_j, β_j) posterior of its success probability;\n"
        "each step: p̃_j ~ Beta(α_j, β_j), train on the n prompts with the largest p̃(1 − p̃);\n"
        "after a group: α += Σr, β += G − Σr; decay toward (α₀, β₀) on two scales\n"
        "then GRPO (advantage and loss unchanged)"
    ),
    sampler="vade",
    sampler_options={
        "rho_long": S(0.99, "[ours] per-step decay; VADE's values were not readable (§8)"),
        "rho_short": S(0.5, "[ours] decay when a prompt is seen again (§8)"),
    },
)

_on_grpo(
    name="vas",
    title="GRPO with Variance-Aware Sampling (MMR1)",
    paper="Leng et al. 2025, MMR1, arXiv:2509.21268",
    formula=(
        "every T steps score prompts with N fresh samples: P = pass rate,\n"
        "VPS = α·P(1 − P) + β·(1 − self-BLEU); w = minmax(VPS)\n"
        "each batch: ⌊λn⌋ prompts drawn ∝ w (with replacement), the rest uniformly\n"
        "then GRPO (advantage and loss unchanged); scoring samples count against the budget"
    ),
    sampler="vas",
    sampler_options={
        "alpha": S(0.8, "[paper §6.1] α = 0.8"),
        "beta": S(0.2, "[paper §6.1] β = 0.2"),
        "fraction": S(0.5, "[paper §6.1, Table 4] λ = 0.5"),
        "n_score": S(8, "[code MMR1 examples/mmr1.yaml; paper ablations] N = 8 (main runs 32)"),
        "every": S(35, "[paper §6.1] T_update = 35 steps"),
        "score_prompts": S(
            64,
            "[ours] prompts scored per refresh; the paper scores its whole dataset, which at "
            "our pool of 4,000 prompts would cost more samples than a CPU run's budget",
        ),
    },
)

_on_grpo(
    name="d3s",
    title="GRPO with D³S dual-level down-sampling",
    paper="Wang et al. 2025, D³S, arXiv:2509.22115",
    formula=(
        "p = step / total;  f(p) = (1 − p)·f_init + p·f_final\n"
        "rows: the ⌈f_s·B⌉ rows maximising Var(Â) (k largest ∪ rest smallest)\n"
        "tokens: the top ⌈f_k·n_tok⌉ of |A|·H over the kept rows\n"
        "then GRPO's loss on the kept tokens, advantages not renormalised"
    ),
    selection="d3s",
    selection_options={
        "sample_init": S(0.5, "[ours] the paper's N_init was not retrieved (§9)"),
        "sample_final": S(1.0, "[paper §3.3] relaxes to no down-sampling"),
        "token_init": S(0.2, "[ours; paper reports < 20 % of GRPO's tokens used] K_init"),
        "token_final": S(1.0, "[paper §3.3] relaxes to every token"),
        "mode": S("cross", "[paper §3.1] D³S selects across the batch"),
    },
)

_on_grpo(
    name="capo",
    title="GRPO with CAPO curvature-aware token masking",
    paper="Melo, Abate, Gal 2025, CAPO, arXiv:2510.00819",
    formula=(
        "per token: g = A·(e_a − π_K) ⊗ h (LM head, top-K), G = Adam model of g, Δψ = η·G\n"
        "m_H = η⟨g, G⟩ + ½η²A[(vᵀu)² − uᵀFu],  m_F = ½η²(vᵀu)²,  u = G h\n"
        "train on tokens with −τ_H < m_H < τ_H and m_F < τ_F; then GRPO's loss"
    ),
    selection="capo",
    selection_options={
        "tau_fisher": S(1e-4, "[code stable-pg-llm CAPO recipe] fisher_token_mask_tau 1e-4"),
        "tau_hessian": S(1e-2, "[code stable-pg-llm CAPO recipe] hessian_token_mask_tau 1e-2"),
        "symmetric": S(True, "[code] hessian_symmetric_clipping=true"),
        "optimizer_model": S("adam", "[paper ablation] the Adam model"),
        "top_k": S(50, "[ours] the HF generation default top-k, the recipe sets none"),
    },
)
