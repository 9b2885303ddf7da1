"""Difficulty-aware augmentation (DeepVideo-R1, Park et al., arXiv 2506.07464 §3.3, Eq. 9,
Fig. 2, App. C.1; papers/seed_llm_algorithms.md §5.2): a prompt whose group did better than
recent groups is replaced by a harder variant, one that did worse by an easier variant.

Per step, for each group x with rewards R(x, y_1..G) [P Eq. 9]:

    ΔR(x) = mean_{x' ∈ B_W} R̄(x') − R̄(x),    R̄(x) = (1/G) Σ_j R(x, y_j)
    ΔR < 0 (easier than usual) → harder variant;  ΔR > 0 (harder) → easier variant
    ℓ = clip(|ΔR| / reward_range, 0, 1)                                     [ours, §5.2]

B_W holds the group means of the last W groups. `DifficultyAugmenter.plan` decides which
groups to vary; `augment_examples` asks the task for the variants (`Task.vary`: on text
tasks a fresh instance with shifted difficulty knobs, our reading of the paper's noise and
hints). The trainer rolls the variants out and trains on them in place of the originals
[ours: "replace, not add"]; the buffer keeps the originals' means [ours, §5.2].
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import deque
from collections.abc import Sequence
from typing import Any

import torch

from policylab.rollouts import Rollouts
from policylab.workflows.single_turn import RolloutInfo

# (group index, harder, level ℓ): one planned variant
Planned = tuple[int, bool, float]


class DifficultyAugmenter:
    """The replay buffer B_W of recent group mean rewards and the rule of Eq. 9.

    Defaults and sources:
    - `window` W = 100 groups [P App. C.1 "W = 100 samples"; §3.3 says "W steps"; we
      count prompt groups, §5.2];
    - `tol` = 0.0 [ours]: vary a group when |ΔR| > tol (strict), so with 0 every group
      whose mean differs from the buffer's, as the paper's sign rule states;
    - `reward_range` = 1.0 [ours]: R_max − R_min of the rewards, the scale of ℓ (1 for the
      embedded tasks' 0/1 verifiers; 2 for the paper's format + accuracy rewards);
    - `only_uniform_groups` = False [ours]: True varies only groups whose rewards are all
      equal (zero variance, no GRPO signal), the vanishing-advantage case of P Fig. 3;
    - `seed` = 0: of `rng`, the generator to hand to `augment_examples`, kept here so
      that a resumed run draws the same variants.

    An empty buffer gives no plan (ΔR := 0 at the start) [ours, §5.3]. A group mean that
    is not finite (e.g. unscored) is neither varied nor pushed [ours]."""

    def __init__(
        self,
        window: int = 100,
        tol: float = 0.0,
        reward_range: float = 1.0,
        only_uniform_groups: bool = False,
        seed: int = 0,
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window={window!r} is invalid; accepted: an integer >= 1")
        if not (isinstance(tol, (int, float)) and tol >= 0):
            raise ValueError(f"tol={tol!r} is invalid; accepted: a number >= 0")
        if not (isinstance(reward_range, (int, float)) and reward_range > 0):
            raise ValueError(f"reward_range={reward_range!r} is invalid; accepted: a number > 0")
        self.window, self.tol, self.reward_range = window, float(tol), float(reward_range)
        self.only_uniform_groups = only_uniform_groups
        self.buffer: deque[float] = deque(maxlen=window)
        self.rng = random.Random(seed)
        self._last: dict[str, float] = {}

    @classmethod
    def from_options(cls, options: dict[str, Any], seed: int = 0) -> DifficultyAugmenter:
        """From a config's `augment_options`, naming any unknown key."""
        accepted = ("window", "tol", "reward_range", "only_uniform_groups")
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise ValueError(
                f"augment_options: unknown option(s) {', '.join(unknown)}; accepted: "
                f"{', '.join(accepted)}"
            )
        return cls(**options, seed=seed)

    def plan(self, group_means: Sequence[float], uniform: Sequence[bool]) -> list[Planned]:
        """(index, harder, ℓ) for each group to vary, in index order, then the groups'
        means join the buffer (the oldest leave beyond `window`).

        `group_means[i]` is R̄ of group i; `uniform[i]` whether its rewards are all equal
        (read only with `only_uniform_groups`). harder = ΔR < 0; ℓ as in the module
        docstring."""
        if len(uniform) != len(group_means):
            raise ValueError(
                f"plan: {len(group_means)} group means but {len(uniform)} uniform flags"
            )
        means = [float(m) for m in group_means]
        out: list[Planned] = []
        if self.buffer:
            reference = sum(self.buffer) / len(self.buffer)
            for i, mean in enumerate(means):
                delta = reference - mean
                if not math.isfinite(mean) or abs(delta) <= self.tol:
                    continue
                if self.only_uniform_groups and not uniform[i]:
                    continue
                out.append((i, delta < 0, min(abs(delta) / self.reward_range, 1.0)))
        self.buffer.extend(m for m in means if math.isfinite(m))
        n = len(means)
        harder = sum(h for _, h, _ in out)
        self._last = {
            "aug/frac_harder": harder / n if n else 0.0,
            "aug/frac_easier": (len(out) - harder) / n if n else 0.0,
            "aug/level_mean": sum(level for _, _, level in out) / len(out) if out else 0.0,
        }
        return out

    def metrics(self) -> dict[str, float]:
        """Of the last plan: the shares of its groups planned harder and easier, the mean ℓ
        of the planned ones (0 when none); and `aug/buffer_mean`, the buffer's mean now
        (the reference of the next plan; absent while the buffer is empty)."""
        out = dict(self._last)
        if self.buffer:
            out["aug/buffer_mean"] = sum(self.buffer) / len(self.buffer)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": list(self.buffer), "rng": self.rng.getstate(), "last": dict(self._last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = deque(state["buffer"], maxlen=self.window)
        self.rng.setstate(state["rng"])
        self._last = dict(state["last"])


def augment_examples(
    examples: Sequence[dict], plan: Sequence[Planned], task: Any, rng: random.Random
) -> tuple[list[dict], list[int]]:
    """The examples with each planned one replaced by `task.vary(example, harder, ℓ, rng)`,
    and the indices replaced, in plan order. A None from `vary` (the task cannot move its
    knobs that way) keeps the original. Variants are drawn in plan order from `rng`."""
    vary = getattr(task, "vary", None)
    if vary is None:
        raise TypeError(
            f"difficulty-aware augmentation needs a task with difficulty knobs (an embedded "
            f"task); {getattr(task, 'name', task)!r} has no vary()"
        )
    out = list(examples)
    replaced = []
    for i, harder, level in plan:
        variant = vary(examples[i], harder, level, rng)
        if variant is not None:
            out[i] = variant
            replaced.append(i)
    return out, replaced


def augment_round(
    examples: list[dict],
    batch: Rollouts,
    info: RolloutInfo,
    augmenter: DifficultyAugmenter,
    task: Any,
    sample_round,
) -> tuple[Rollouts, RolloutInfo, int]:
    """One generation round with difficulty-aware augmentation: plan on the round's group
    means, vary the planned prompts, roll the variants out (`sample_round(examples) ->
    (Rollouts, RolloutInfo)`) and put their groups in place of the originals (rows
    prompt-major, G per prompt). Returns the batch, its info (generation time and tokens of
    both passes) and the number of extra samples generated, which the caller charges."""
    G = len(batch) // len(examples)
    rewards = batch.rewards.view(len(examples), G)
    means = [
        float(r[torch.isfinite(r)].mean()) if torch.isfinite(r).any() else math.nan for r in rewards
    ]
    uniform = [bool((r == r[0]).all()) for r in rewards]
    plan = augmenter.plan(means, uniform)
    varied, replaced = augment_examples(examples, plan, task, augmenter.rng)
    if not replaced:
        return batch, info, 0
    new_batch, new_info = sample_round([varied[i] for i in replaced])
    # each prompt's G rows: from the variants' batch where replaced, else from the round's
    sources = {i: (new_batch, new_info, k) for k, i in enumerate(replaced)}
    parts, completions, prompts = [], [], []
    for i in range(len(examples)):
        src_batch, src_info, k = sources.get(i, (batch, info, i))
        rows = torch.arange(k * G, (k + 1) * G)
        parts.append(src_batch.select(rows).replace(group_ids=torch.full((G,), i)))
        completions += [src_info.completions[r] for r in rows.tolist()]
        prompts += [src_info.prompts[r] for r in rows.tolist()]
    merged = Rollouts.concat(parts)
    merged_info = dataclasses.replace(
        RolloutInfo.concat([info, new_info]), completions=completions, prompts=prompts
    )
    return merged, merged_info, len(new_batch)
