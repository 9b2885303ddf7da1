"""Prompt samplers: which prompts the next step trains on.

The contract (DESIGN.md, selection): `sample(n) -> indices` and `update(indices,
outcomes)`, `metrics() -> {name: value}` for the log, plus `state_dict()` /
`load_state_dict()` so a resumed run draws exactly the prompts the uninterrupted run would
have drawn. `UniformSampler` is the default; VADE learns from the training groups; VAS
also has `needs_refresh(step)` / `refresh(...)`, a scoring pass its stage runs. The
trainer reaches them through their stages (stages/prompts.py), which name their options.
"""

from __future__ import annotations

import math
import random
from typing import Any, NamedTuple

import numpy as np

from policylab.diversity import DIVERSITY


class UniformSampler:
    """Epochs over a pool of `size` prompts, each epoch in a fresh seeded order."""

    def __init__(self, size: int, seed: int = 0) -> None:
        if size < 1:
            raise ValueError("the prompt pool is empty")
        self.size = size
        self._rng = random.Random(seed)
        self._order: list[int] = []
        self._position = 0
        self.epoch = 0

    def sample(self, n: int) -> list[int]:
        out = []
        while len(out) < n:
            if self._position >= len(self._order):
                self._order = list(range(self.size))
                self._rng.shuffle(self._order)
                self._position = 0
                self.epoch += 1
            out.append(self._order[self._position])
            self._position += 1
        return out

    def update(self, indices: list[int], outcomes: Any) -> None:
        """Uniform sampling learns nothing from outcomes."""

    def metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self._rng.getstate(),
            "order": list(self._order),
            "position": self._position,
            "epoch": self.epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._rng.setstate(state["rng"])
        self._order, self._position, self.epoch = (
            list(state["order"]),
            state["position"],
            state["epoch"],
        )


class VADESampler:
    """VADE (Hu et al., arXiv:2511.18902; papers/seed_llm_algorithms.md §8): a rollout-free
    prompt sampler. Every prompt j keeps a Beta(α_j, β_j) posterior of its success
    probability; each step takes the n prompts whose Thompson draw p̃_j ~ Beta(α_j, β_j)
    scores highest on p̃(1 − p̃) (the reward variance a group of it would show).

    Only the abstract was readable; every formula here is [ours] (§8 "Math"):
      long-scale decay, once per step (so ρ_L^Δ after Δ steps): α ← α₀ + ρ_L (α − α₀);
      short-scale decay when observed again:          α ← α₀ + ρ_S (α − α₀), β likewise;
      evidence from a group of G rewards r ∈ [0, 1]:  α ← α + Σr, β ← β + G − Σr.
    `thompson=False` ranks by the posterior mean instead of a draw (deterministic)."""

    def __init__(
        self,
        size: int,
        seed: int = 0,
        *,
        alpha0: float = 1.0,
        beta0: float = 1.0,
        rho_long: float = 0.99,
        rho_short: float = 0.5,
        thompson: bool = True,
    ) -> None:
        if size < 1:
            raise ValueError("the prompt pool is empty")
        if not (alpha0 > 0 and beta0 > 0 and 0 <= rho_long <= 1 and 0 <= rho_short <= 1):
            raise ValueError("VADE needs α₀, β₀ > 0 and decays ρ in [0, 1]")
        self.size, self.alpha0, self.beta0 = size, alpha0, beta0
        self.rho_long, self.rho_short, self.thompson = rho_long, rho_short, thompson
        self.alpha = np.full(size, alpha0)
        self.beta = np.full(size, beta0)
        self.seen = np.zeros(size, dtype=bool)  # updated at least once
        self.step = 0
        self._rng = np.random.default_rng(seed)
        self._last_batch_score: float | None = None

    def _decay(self, idx, rho) -> None:
        self.alpha[idx] = self.alpha0 + rho * (self.alpha[idx] - self.alpha0)
        self.beta[idx] = self.beta0 + rho * (self.beta[idx] - self.beta0)

    def scores(self) -> Any:
        """p̃(1 − p̃) of every prompt, p̃ a Thompson draw (or the posterior mean)."""
        if self.thompson:
            p = self._rng.beta(self.alpha, self.beta)
        else:
            p = self.alpha / (self.alpha + self.beta)
        return p * (1 - p)

    def sample(self, n: int) -> list[int]:
        """The n best-scoring prompts (ties by index); more than the pool wraps around."""
        if self.step > 0:  # the policy has moved since the last draw
            self._decay(slice(None), self.rho_long)
        self.step += 1
        scores = self.scores()
        order = np.argsort(-scores, kind="stable")
        chosen = [int(order[i % self.size]) for i in range(n)]
        self._last_batch_score = float(scores[chosen].mean()) if chosen else None
        return chosen

    def update(self, indices: list[int], outcomes: Any) -> None:
        """Evidence from the groups of `indices` (prompt-major rows of `outcomes`, G per
        prompt; rewards clipped to [0, 1], unscored NaN rows left out)."""
        if not indices:
            return
        r = np.asarray(outcomes, dtype=np.float64).reshape(len(indices), -1)
        seen = ~np.isnan(r)
        successes = np.where(seen, np.clip(r, 0.0, 1.0), 0.0).sum(1)
        for j, s, g in zip(indices, successes, seen.sum(1), strict=True):
            if g == 0:
                continue
            self._decay(j, self.rho_short)
            self.alpha[j] += s
            self.beta[j] += g - s
            self.seen[j] = True

    def metrics(self) -> dict[str, float]:
        """Posterior means α/(α + β) over all prompts, the share of prompts ever updated,
        and the mean score p̃(1 − p̃) of the last batch drawn (once there is one)."""
        mean = self.alpha / (self.alpha + self.beta)
        out = {
            "vade/posterior_mean_mean": float(mean.mean()),
            "vade/posterior_mean_std": float(mean.std()),
            "vade/seen_frac": float(self.seen.mean()),
        }
        if self._last_batch_score is not None:
            out["vade/last_batch_score_mean"] = self._last_batch_score
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha.copy(),
            "beta": self.beta.copy(),
            "seen": self.seen.copy(),
            "step": self.step,
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.alpha, self.beta = state["alpha"].copy(), state["beta"].copy()
        if "seen" in state:
            self.seen = state["seen"].copy()
        else:  # a checkpoint from before `seen` existed: a posterior off the prior was updated
            self.seen = (self.alpha != self.alpha0) | (self.beta != self.beta0)
        self.step = state["step"]
        self._rng.bit_generator.state = state["rng"]


class VarianceScores(NamedTuple):
    """Per-prompt scores of one VAS scoring pass, each `[P]` float64."""

    vps: np.ndarray  # Variance Promotion Score α·OVS + β·TDS
    ovs: np.ndarray  # Outcome Variance Score
    tds: np.ndarray  # Trajectory Diversity Score
    pass_rate: np.ndarray  # P_j, the mean of the N rewards


def variance_promotion_score(
    correct: Any,
    responses: list[list[list[int]]],
    alpha: float = 0.8,
    beta: float = 0.2,
    diversity: str = "inv_self_bleu",
) -> VarianceScores:
    """VAS's Variance Promotion Score (MMR1, Leng et al., arXiv:2509.21268 §3.1; papers §7):

        P_j   = (1/N) Σ_n V_jn
        OVS_j = (1/N) Σ_n (V_jn − P_j)²   (= P_j (1 − P_j) for V ∈ {0, 1})
        VPS_j = α·OVS_j + β·TDS_j

    `correct: [P, N]` verifier outcomes (array or tensor); `responses`: P lists of N
    token-id lists. For rewards that are not 0/1 the same formula is their population
    variance [ours]; they are not clipped. TDS (`policylab.diversity`): "inv_self_bleu" =
    1 − self-BLEU-123 (default, the paper's "inverse self-BLEU"; the released code adds
    self-BLEU un-inverted, which favours alike responses — we follow the paper),
    "distinct_n" (n = 3), "edit_sq" (App. A.3). α = 0.8, β = 0.2: paper §6.1 and Table 6."""
    if diversity not in DIVERSITY:
        raise ValueError(f"unknown VAS diversity {diversity!r}; choices: {', '.join(DIVERSITY)}")
    if hasattr(correct, "detach"):  # a torch tensor, possibly on an accelerator
        correct = correct.detach().cpu().numpy()
    v = np.asarray(correct, dtype=np.float64)
    if v.ndim != 2 or len(responses) != v.shape[0]:
        raise ValueError(
            f"VAS scoring wants correct [P, N] and P response lists; got correct of shape "
            f"{v.shape} and {len(responses)} response lists"
        )
    if any(len(group) != v.shape[1] for group in responses):
        raise ValueError(f"every prompt needs N = {v.shape[1]} responses, as `correct` has")
    ovs = v.var(axis=1)
    tds = np.array([DIVERSITY[diversity](group) for group in responses], dtype=np.float64)
    return VarianceScores(alpha * ovs + beta * tds, ovs, tds, v.mean(axis=1))


def minmax_weights(vps: Any) -> np.ndarray:
    """w_j = (VPS_j − min_k VPS_k) / (max_k VPS_k − min_k VPS_k + 1e-8), `[D] -> [D]`
    (code ray_trainer.py:_compute_curriculum_weights). A NaN VPS (never scored) gets
    weight 0 and takes no part in the min and max [ours]."""
    vps = np.asarray(vps, dtype=np.float64)
    w = np.zeros_like(vps)
    scored = ~np.isnan(vps)
    if scored.any():
        lo, hi = vps[scored].min(), vps[scored].max()
        w[scored] = (vps[scored] - lo) / (hi - lo + 1e-8)
    return w


class VASSampler:
    """VAS, Variance-Aware Sampling (MMR1, Leng et al., arXiv:2509.21268 Alg. 1; papers §7):
    a share λ of every batch is drawn with replacement in proportion to weights from the
    Variance Promotion Score (`variance_promotion_score`), the rest uniformly.

        B_w = ⌊λB⌋ draws with Pr(j) = w_j / Σ_k w_k,   B_r = B − B_w uniform
        w = minmax(VPS) (normalize="minmax", code) or VPS ("none", the paper's wording)
        EMA from the second refresh on: w ← μ·w_old + (1 − μ)·w_new

    The uniform part walks seeded shuffled epochs (a `UniformSampler`, as the code walks
    one permutation); `sample` returns the weighted draws first, then the uniform ones
    [ours; the code interleaves them]. While no prompt has weight (never refreshed, or all
    VPS equal under min-max) the whole batch comes from the uniform walk [ours].

    The trainer runs the scoring pass: when `needs_refresh(step)` it generates `n_score`
    responses for (some or all) prompts and calls `refresh`; VAS learns nothing from the
    training groups. Defaults: α = 0.8, β = 0.2, λ = 0.5, T_update (`every`) = 35 (paper
    §6.1); n_score = 8 (paper ablations, code examples/mmr1.yaml; the main runs use 32);
    μ = 0 (code); normalize = "minmax" (code); score_prompts = 0, every prompt (paper)."""

    def __init__(
        self,
        size: int,
        seed: int = 0,
        *,
        alpha: float = 0.8,
        beta: float = 0.2,
        fraction: float = 0.5,
        n_score: int = 8,
        every: int = 35,
        momentum: float = 0.0,
        diversity: str = "inv_self_bleu",
        normalize: str = "minmax",
        score_prompts: int = 0,
    ) -> None:
        if size < 1:
            raise ValueError("the prompt pool is empty")
        checks = [
            (
                "score_prompts",
                score_prompts,
                isinstance(score_prompts, int) and score_prompts >= 0,
                "an integer >= 0 (0 = every prompt)",
            ),
            ("fraction", fraction, 0 <= fraction <= 1, "in [0, 1]"),
            ("every", every, isinstance(every, int) and every >= 1, "an integer >= 1"),
            ("n_score", n_score, isinstance(n_score, int) and n_score >= 1, "an integer >= 1"),
            ("alpha", alpha, alpha >= 0, ">= 0"),
            ("beta", beta, beta >= 0, ">= 0"),
            ("momentum", momentum, 0 <= momentum <= 1, "in [0, 1]"),
            ("diversity", diversity, diversity in DIVERSITY, f"one of {', '.join(DIVERSITY)}"),
            ("normalize", normalize, normalize in ("minmax", "none"), "'minmax' or 'none'"),
        ]
        for field, value, ok, wanted in checks:
            if not ok:
                raise ValueError(f"VAS {field} = {value!r}; it must be {wanted}")
        self.size, self.alpha, self.beta, self.fraction = size, alpha, beta, fraction
        self.n_score, self.every, self.momentum = n_score, every, momentum
        self.diversity, self.normalize, self.score_prompts = diversity, normalize, score_prompts
        self.vps = np.full(size, np.nan)  # NaN = never scored
        self.ovs, self.tds, self.pass_rate = (np.full(size, np.nan) for _ in range(3))
        self.weights = np.zeros(size)
        self.refreshes = 0
        self._rng = np.random.default_rng(seed)
        self._uniform = UniformSampler(size, seed=seed)

    def probabilities(self) -> np.ndarray | None:
        """Pr(j) of one weighted draw, w_j / Σ_k w_k; None while no prompt has weight."""
        total = self.weights.sum()
        return self.weights / total if total > 0 else None

    def sample(self, n: int) -> list[int]:
        p = self.probabilities()
        if p is None:
            return self._uniform.sample(n)
        k = math.floor(self.fraction * n + 1e-9)  # so 0.29·100 is 29, not 28.999…
        weighted = self._rng.choice(self.size, size=k, p=p).tolist()
        return weighted + self._uniform.sample(n - k)

    def update(self, indices: list[int], outcomes: Any) -> None:
        """VAS scores prompts only in its own scoring pass (`refresh`)."""

    def needs_refresh(self, step: int) -> bool:
        """Before the first step (never refreshed), then whenever step mod T_update = 0."""
        return self.refreshes == 0 or step % self.every == 0

    def to_score(self) -> list[int]:
        """The prompts the next scoring pass scores: all of them (the paper), or with
        `score_prompts` > 0 a fresh seeded draw of that many without replacement [ours: a
        pool too large to score whole within a run's budget]."""
        if not self.score_prompts or self.score_prompts >= self.size:
            return list(range(self.size))
        return sorted(self._rng.choice(self.size, self.score_prompts, replace=False).tolist())

    def refresh(self, indices: list[int], correct: Any, responses: list[list[list[int]]]) -> None:
        """Rescore the prompts `indices` (`correct: [P, N]`, `responses`: P lists of N
        token-id lists, as `variance_promotion_score`) and recompute the weights of the
        whole pool. Prompts left out keep their last VPS; a never-scored one has none and
        weight 0 [ours; the paper rescores every prompt]."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            raise ValueError(f"VAS refresh got prompt indices outside [0, {self.size})")
        scores = variance_promotion_score(correct, responses, self.alpha, self.beta, self.diversity)
        if len(scores.vps) != idx.size:
            raise ValueError(f"VAS refresh got {idx.size} indices for {len(scores.vps)} prompts")
        self.vps[idx], self.ovs[idx] = scores.vps, scores.ovs
        self.tds[idx], self.pass_rate[idx] = scores.tds, scores.pass_rate
        new = minmax_weights(self.vps) if self.normalize == "minmax" else np.nan_to_num(self.vps)
        first = self.refreshes == 0
        self.weights = new if first else self.momentum * self.weights + (1 - self.momentum) * new
        self.refreshes += 1

    def metrics(self) -> dict[str, float]:
        """Weights and scores over the prompts scored so far; {} before the first refresh."""
        scored = ~np.isnan(self.vps)
        if not scored.any():
            return {}
        w, p = self.weights[scored], self.pass_rate[scored]
        return {
            "vas/w_mean": float(w.mean()),
            "vas/w_std": float(w.std()),
            "vas/w_min": float(w.min()),
            "vas/w_max": float(w.max()),
            "vas/ovs_mean": float(self.ovs[scored].mean()),
            "vas/tds_mean": float(self.tds[scored].mean()),
            "vas/frac_pass0": float((p == 0).mean()),
            "vas/frac_pass1": float((p == 1).mean()),
            "vas/frac_w_zero": float((w == 0).mean()),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "vps": self.vps.copy(),
            "ovs": self.ovs.copy(),
            "tds": self.tds.copy(),
            "pass_rate": self.pass_rate.copy(),
            "weights": self.weights.copy(),
            "refreshes": self.refreshes,
            "rng": self._rng.bit_generator.state,
            "uniform": self._uniform.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.vps, self.ovs = state["vps"].copy(), state["ovs"].copy()
        self.tds, self.pass_rate = state["tds"].copy(), state["pass_rate"].copy()
        self.weights, self.refreshes = state["weights"].copy(), state["refreshes"]
        self._rng.bit_generator.state = state["rng"]
        self._uniform.load_state_dict(state["uniform"])
