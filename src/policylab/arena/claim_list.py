"""The claims registry: every wave-1 method's claim and the arena that tests it.

Arenas are sized (seeds) to detect a difference of 5 % of the score's range at 80 %
power from a 5-seed pilot's variance (`policylab.arena.power`); docs/claims.md gives each
arena's power line as measured. Claim texts are one-line readings of the papers (see
../shared/papers/seed_llm_algorithms.md for the sources and what was inferred).
"""

from __future__ import annotations

from policylab.arena.claims import Claim, ClaimArena

LLM_FIELDS = {"lr": "3e-5", "eval_every": 20, "eval_n": 200, "minibatches": 4}

ARENAS = {
    a.name: a
    for a in (
        ClaimArena(
            name="arithmetic",
            task="arithmetic",
            algos=(
                "grpo",
                "dr_grpo",
                "rloo",
                "reinforce_pp",
                "gspo",
                "cispo",
                "dapo",
                "vas",
                "vade",
                "d3s",
                "capo",
                "rpg",
                "reg_grpo",
                "pacs",
                "p3o",
                "empg",
                "copo",
                "bcpg_nsa",
            ),
            seeds=10,
            budget=10240,
            min_effect=0.05,
            overrides=LLM_FIELDS,
        ),
        ClaimArena(
            name="cartpole",
            task="CartPole-v1",
            algos=("ppo", "pg_rainbow"),
            seeds=10,
            budget=100_000,
            min_effect=25.0,  # 5 % of the return's range [0, 500]
            threshold=475.0,
            score="mean return of the policy's mode over 10 fixed-seed episodes",
        ),
        ClaimArena(
            name="pendulum",
            task="Pendulum-v1",
            algos=("ppo", "fpo"),
            seeds=10,
            budget=100_000,
            min_effect=80.0,  # 5 % of the return's range, about [-1600, 0]
            score="mean return of the policy's mode over 10 fixed-seed episodes",
        ),
    )
}

_ONE_UPDATE = "four updates per batch (minibatches=4), so ratios and clips act"

CLAIMS = [
    # classic baselines, against GRPO
    Claim(
        "dr_grpo",
        "2503.20783",
        "removing GRPO's length and std normalisation removes a bias without costing accuracy",
        "arithmetic",
        "grpo",
        direction="not_worse",
    ),
    Claim(
        "rloo",
        "2402.14740",
        "a leave-one-out baseline (no critic) does as well as GRPO-style baselines",
        "arithmetic",
        "grpo",
        direction="not_worse",
    ),
    Claim(
        "reinforce_pp",
        "2501.03262",
        "global advantage whitening is more stable than "
        "per-group normalisation, at least as accurate",
        "arithmetic",
        "grpo",
        direction="not_worse",
    ),
    Claim(
        "gspo",
        "2507.18071",
        "a sequence-level ratio trains more efficiently than GRPO's token ratios",
        "arithmetic",
        "grpo",
        metric="auc",
        note=_ONE_UPDATE,
    ),
    Claim(
        "cispo",
        "2506.13585",
        "clipping the IS weight instead of the update keeps every "
        "token's gradient and learns faster",
        "arithmetic",
        "grpo",
        metric="auc",
        note=_ONE_UPDATE,
    ),
    # wave-1 seed methods
    Claim(
        "dapo",
        "2503.14476",
        "clip-higher, dynamic sampling, token-mean loss and overlong shaping beat GRPO",
        "arithmetic",
        "grpo",
        note="dynamic sampling is charged for every sample it draws",
    ),
    Claim(
        "vas",
        "2509.21268",
        "sampling prompts by outcome variance and diversity raises accuracy",
        "arithmetic",
        "grpo",
        note="its scoring passes are charged to the budget",
    ),
    Claim(
        "vade",
        "2511.18902",
        "Thompson-sampled p(1−p) prompt choice gives more informative groups and higher accuracy",
        "arithmetic",
        "grpo",
    ),
    Claim(
        "d3s",
        "2509.22115",
        "down-sampling rows by Var(Â) and tokens by |A|·H trains faster",
        "arithmetic",
        "grpo",
        metric="auc",
    ),
    Claim(
        "capo",
        "2510.00819",
        "masking tokens that break a curvature trust region keeps "
        "training stable without losing accuracy",
        "arithmetic",
        "grpo",
        direction="not_worse",
        note="at lr 3e-5, where GRPO itself is stable; the high-lr regime is in docs/arena.md",
    ),
    Claim(
        "rpg",
        "2505.17508",
        "KL-regularised PG with exact gradients scores higher than GRPO",
        "arithmetic",
        "grpo",
    ),
    Claim(
        "reg_grpo",
        "2506.07464",
        "regressing the log-ratio onto the advantage beats GRPO",
        "arithmetic",
        "grpo",
        note="difficulty-aware augmentation off (the recipe's default)",
    ),
    Claim(
        "pacs",
        "2509.02522",
        "coupling actor and critic by supervised learning beats GRPO on verifiable rewards",
        "arithmetic",
        "grpo",
    ),
    Claim(
        "p3o",
        "2310.00212",
        "a pairwise, reward-shift-invariant trust region beats PPO-style clipping",
        "arithmetic",
        "grpo",
    ),
    Claim(
        "empg",
        "2509.09265",
        "entropy-modulated advantages help long-horizon agents",
        "arithmetic",
        "grpo",
        why_not="its claim is about many-step agent trajectories; "
        "arithmetic answers are one step, so only the per-step rescaling acts",
    ),
    Claim(
        "copo",
        "2508.04138",
        "a global consistency reward rescues groups whose rewards are all equal",
        "arithmetic",
        "grpo",
    ),
    Claim(
        "bcpg_nsa",
        "2505.14403",
        "offline PG with a behaviour constraint and credit for "
        "correct steps of wrong answers beats offline baselines",
        "arithmetic",
        "grpo",
        why_not="the claim is against offline baselines on long chains of thought; here "
        "the baseline is online GRPO and answers have no steps for NSA to credit",
    ),
    Claim(
        "pg_rainbow",
        "2407.13146",
        "an IQN critic inside PPO's value improves PPO's sample efficiency",
        "cartpole",
        "ppo",
        metric="auc",
    ),
    Claim(
        "fpo",
        "2507.21053",
        "a flow policy trained by FPO does at least as well as Gaussian PPO",
        "pendulum",
        "ppo",
        direction="not_worse",
    ),
]
