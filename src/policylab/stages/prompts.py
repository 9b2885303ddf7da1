"""Prompt stages: which prompts each generation round draws (samplers.py holds the
samplers' formulas; here they become stages), and offline data, which replaces generation
by groups stored before the first step (workflows/offline.py)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from policylab.algebra.options import option
from policylab.samplers import UniformSampler, VADESampler, VASSampler
from policylab.stages.base import Stage, StageContext, register
from policylab.workflows.offline import offline_set


class PromptStage(Stage):
    """A `prompts` stage: `sample(n)` prompt indices for a round; `update(indices,
    outcomes)` after the step with every generated row's reward; `stored(indices)` a
    round of stored rollouts instead of generating (None: generate)."""

    kind = "prompts"
    spends = "samples"  # the rounds it draws are generated and charged

    def __init__(self, options: Any, pool_size: int, seed: int) -> None:
        super().__init__(options)
        self.sampler = self.build(pool_size, seed)

    def build(self, pool_size: int, seed: int):
        raise NotImplementedError

    def sample(self, n: int) -> list[int]:
        return self.sampler.sample(n)

    def stored(self, indices: list[int]):
        return None

    def update(self, indices: list[int], outcomes) -> None:
        self.sampler.update(indices, outcomes)

    def metrics(self) -> dict[str, float]:
        return self.sampler.metrics()

    def state_dict(self) -> dict[str, Any]:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state)


@dataclass(frozen=True)
class UniformOptions:
    pass


@register
class Uniform(PromptStage):
    """Epochs over the training prompts, each in a fresh seeded order."""

    name = "uniform"
    Options = UniformOptions

    def build(self, pool_size: int, seed: int):
        return UniformSampler(pool_size, seed=seed)


@dataclass(frozen=True)
class VADEOptions:
    alpha0: float = option(1.0, "α₀ of every prompt's Beta prior [ours]")
    beta0: float = option(1.0, "β₀ of every prompt's Beta prior [ours]")
    rho_long: float = option(0.99, "long-scale decay per step [ours]")
    rho_short: float = option(0.5, "short-scale decay when a prompt is seen again [ours]")
    thompson: bool = option(True, "rank by a Thompson draw (False: the posterior mean)")


@register
class VADE(PromptStage):
    """VADE (arXiv:2511.18902): Beta posteriors of each prompt's success, Thompson draws
    ranked by p̃(1 − p̃) (samplers.VADESampler)."""

    name = "vade"
    Options = VADEOptions

    def build(self, pool_size: int, seed: int):
        return VADESampler(pool_size, seed=seed, **dataclasses.asdict(self.options))


@dataclass(frozen=True)
class VASOptions:
    alpha: float = option(0.8, "α, weight of the outcome variance [paper §6.1]")
    beta: float = option(0.2, "β, weight of the trajectory diversity [paper §6.1]")
    fraction: float = option(0.5, "λ, share of each batch drawn by weight [paper §6.1]")
    n_score: int = option(8, "responses per prompt in a scoring pass [code mmr1.yaml]")
    every: int = option(35, "T_update, steps between scoring passes [paper §6.1]")
    momentum: float = option(0.0, "μ, EMA of the weights over refreshes [code]")
    diversity: str = option("inv_self_bleu", "trajectory diversity measure [code]")
    normalize: str = option("minmax", "minmax (code) or none (the paper's wording)")
    score_prompts: int = option(0, "prompts scored per pass (0 = every prompt) [ours]")


@register
class VAS(PromptStage):
    """VAS (MMR1, arXiv:2509.21268 Alg. 1): a share λ of each batch drawn in proportion to
    the Variance Promotion Score, refreshed by a scoring pass every `every` steps that
    generates `n_score` fresh completions per scored prompt, charged to the budget."""

    name = "vas"
    Options = VASOptions
    reads = ("rewards",)

    def build(self, pool_size: int, seed: int):
        self._refreshed: dict[str, float] = {}
        return VASSampler(pool_size, seed=seed, **dataclasses.asdict(self.options))

    def prepare(self, step: int, ctx: StageContext) -> None:
        """The scoring pass when due (`step` = steps done)."""
        self._refreshed = {}
        if not self.sampler.needs_refresh(step):
            return
        t = time.perf_counter()
        chosen = self.sampler.to_score()
        correct, responses, info = ctx.workflow.score(
            [ctx.pool[i] for i in chosen], self.options.n_score, chunk=ctx.prompts_per_step
        )
        self.sampler.refresh(chosen, correct, responses)
        ctx.budget.charge(correct.numel(), info.generated_tokens)
        self._refreshed = {
            "perf/vas_refresh_s": time.perf_counter() - t,
            "vas/refresh_samples": float(correct.numel()),
        }

    def metrics(self) -> dict[str, float]:
        return {**self.sampler.metrics(), **self._refreshed}


@dataclass(frozen=True)
class OfflineOptions:
    prompts: int = option(0, "N: prompts sampled once from the initial policy")


@register
class Offline(PromptStage):
    """Offline data (BCPG-NSA, papers §15.3): before the first step, G completions of the
    first N prompts from the initial policy, kept where outcomes are mixed, saved in the
    run folder; each round then draws stored groups in seeded epochs. Only that sampling
    pass is charged: training rounds generate nothing."""

    name = "offline"
    Options = OfflineOptions
    spends = ""

    def build(self, pool_size: int, seed: int):
        self.seed, self.data = seed, None
        return None  # the sampler over the stored groups exists once they do

    def setup(self, ctx: StageContext) -> None:
        """Read the set back from the run folder, or sample it now (and charge it)."""
        self.data = offline_set(
            self.options.prompts, ctx.prompts_per_step, ctx.folder, ctx.pool, ctx.workflow
        )
        # charged whether sampled now or read back (a run that died before its first
        # checkpoint sampled it all the same); a resumed run's budget is its checkpoint's
        ctx.budget.charge(self.data.samples, self.data.tokens)
        self.sampler = UniformSampler(self.data.groups, seed=self.seed)

    def stored(self, indices: list[int]):
        return self.data.draw(indices)
