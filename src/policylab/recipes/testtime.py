"""Test-time algorithms (papers/seed_agents.md §A9): LatentSeek and DMLR-text. They train
no weights: each optimises latent vectors for one input at a time (policylab/testtime.py).
`training["testtime"]` names the method; `policylab train --algo NAME --task T` runs it over
T's held-out instances into a run folder (testtime_run.train), and `policylab eval
--testtime NAME` / `policylab solve --testtime NAME` run it on a set or one input.

The advantage and loss columns name the nearest registered algebra, for `policylab list`
and the bandit: LatentSeek's step is REINFORCE on the decoded prefix with the reward as
its weight (no baseline), DMLR-text's a score-function estimator with the mean of its M
perturbations as baseline (Dr. GRPO's centring, no std division).
"""

from __future__ import annotations

from policylab.recipes.base import Recipe, S, add

_REINFORCE = {
    "loss_agg_mode": S("token-sum", "[code LatentSeek opt_generation.py] Σ_j over the ℓ positions"),
}

add(
    Recipe(
        name="latentseek",
        title="LatentSeek: test-time policy gradient on the latent states of one answer",
        paper="Li et al. 2025, arXiv:2505.13308 (code bigai-nlco/LatentSeek)",
        formula=(
            "z = (h_s .. h_{s+ℓ−1}) last-layer states of the greedy answer, ℓ = min(⌊ρL⌋, 300)\n"
            "while R ≤ threshold (≤ steps times): loss = −R · Σ_j log softmax(W z_j)[argmax_j]\n"
            "  Adam step on z only; prefix = argmax(W z); greedy continuation; R = verifier\n"
            "R = −(Σ_{failed} w + 2·[format failed]) / Σ w,  w = (2, 1, 2, 1)"
        ),
        advantage="dr_grpo",
        loss="reinforce",
        loss_options=_REINFORCE,
        training={
            "testtime": S("latentseek", "[paper] a test-time method: policylab/testtime.py"),
            "rho": S(0.1, "[code src/main.py --k] update length ratio 0.1 (0.2 in example.sh)"),
            "lr": S(0.03, "[code src/main.py --lr] Adam lr 0.03 (0.05 in example.sh)"),
            "steps": S(10, "[code src/main.py --max_num_steps] 10 iterations"),
            "threshold": S(-0.2, "[code src/main.py --reward_threshold] stop once R > −0.2"),
            "start": S(0, "[code opt_generation.py] the first optimised position s = 0"),
            "reward": S(
                "oracle",
                "[ours, seed_agents.md §A9] the tiny model cannot verify itself: the task's "
                "verifier stands in (0 right, −1 wrong)",
            ),
            "flip": S(0.2, "[ours, seed_agents.md §A9] noisy_oracle flips labels w.p. 0.2"),
        },
        notes=(
            "Test-time: no weights are trained. `policylab train --algo latentseek --task T` "
            "runs it over T's held-out set into a run folder; `policylab solve --testtime "
            "latentseek` on one input.",
            "Self-reward replaced by an oracle (reward=oracle) or a noisy oracle "
            "(reward=noisy_oracle, flip=0.2): the paper's perfect-verifier setting.",
            "With the tiny model's short answers (`<answer>` and `</answer>` are one token "
            "each, L ≈ 5) ρ = 0.1 gives ℓ = 0 and the answer is the greedy one; "
            "start=answer rho=0.5 optimises the answer's leading digits (docs/agents.md).",
            "advantage/loss name the nearest registered algebra (for `policylab list` and "
            "the bandit); the update itself runs on latent vectors in "
            "policylab/testtime.py:latentseek, never through the trainer.",
        ),
    )
)

add(
    Recipe(
        name="dmlr_text_provisional",
        title="DMLR, text only: confidence-guided policy gradient on latent pause tokens",
        paper="DMLR, arXiv:2512.12623 (Findings of CVPR 2026; no code found)",
        formula=(
            "z ∈ R^{K×H} replaces the K pause embeddings; ε_m ~ N(0, I), m = 1..M\n"
            "C_m = −mean_j H_k(j) over the answer greedily decoded from z + σε_m\n"
            "z ← z + η·(1/M) Σ_m (C_m − C̄) ε_m / σ   (steps times), answer = greedy(z)"
        ),
        advantage="dr_grpo",
        loss="reinforce",
        loss_options={
            "loss_agg_mode": S("token-mean", "[ours] C averages H_k over answer positions"),
        },
        training={
            "testtime": S("latent_conf_pg", "[paper] a test-time method: policylab/testtime.py"),
            "K": S(4, "[ours, seed_agents.md §A9] 4 pause characters `~` (the paper's K unknown)"),
            "M": S(8, "[ours, seed_agents.md §A9] 8 perturbations per step"),
            "sigma": S(0.1, "[ours, seed_agents.md §A9] exploration noise σ = 0.1"),
            "lr": S(0.1, "[ours] step size η (not retrieved from the paper)"),
            "steps": S(10, "[ours, seed_agents.md §A9] 10 iterations"),
            "topk": S(5, "[ours, seed_agents.md §A9] truncated entropy over the top 5"),
            "pause": S(4, "[ours] prompts end with the K pauses the DMLR-text model saw in SFT"),
        },
        notes=(
            "Provisional: sourced from the abstract, the project page and a review; the noise "
            "scale, K, k, the step size and the update form were not retrieved, so every "
            "constant is ours (seed_agents.md §A9, §B).",
            "Text only: DMLR's dynamic visual injection needs a vision-language model and is "
            "not reproduced; no claim about its benchmarks follows.",
            "Needs a model SFT'd with 4 pauses between prompt and answer (docs/agents.md, "
            "`python benchmarks/testtime.py pause-data`).",
            "advantage/loss name the nearest registered algebra (for `policylab list` and "
            "the bandit); the update itself runs on latent vectors in "
            "policylab/testtime.py:latent_confidence_pg, never through the trainer.",
        ),
    )
)
