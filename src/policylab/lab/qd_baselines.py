"""The baselines PPGA is compared with on `lab/noisy_point_mass`
(papers/seed_control_theory.md §9.3), both over the actor's flat parameters, budget in
env steps, every candidate evaluated by its mean action:

- `map_elites` (Mouret & Clune, arXiv:1504.04909; pyribs `GaussianEmitter`): per step,
  `batch` elites drawn uniformly, θ' = θ + σ_mut·N(0, I), inserted with α_A = 1 (plain
  MAP-Elites); the first step draws fresh actors instead.
- `cma_mae` (Fontaine & Nikolaidis, arXiv:2205.10752, Alg. 1), gradient-free: an
  evolution strategy over θ ranked by the archive improvement Δ = f − t_e, thresholds
  annealed with α_A, restart from a random elite when a generation adds nothing. The ES
  is the full-covariance xNES of search/xnes.py in place of CMA-ES (our choice: one ES in
  the code base; both adapt a full covariance by ranks)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.options import option
from policylab.envs.noisy_point_mass import rollout
from policylab.lab import add_method
from policylab.lab.noisy_point_mass import HIGH, LOW, archive_metrics, archive_policy
from policylab.qd.archive import GridArchive
from policylab.recipes.base import S
from policylab.search import xnes
from policylab.search.reprl import mlp_init
from policylab.tabular.methods import TabularMethod

DTYPE = torch.float64


def _archive(problem, alpha: float, threshold_min: float) -> GridArchive:
    cells, dim = problem.extras["cells"], problem.initial_policy.shape[1] - 2
    return GridArchive((cells, cells), LOW, HIGH, dim, alpha, threshold_min)


def _evaluate(problem, candidates: torch.Tensor, episodes: int, archive, generator):
    """Insert candidates [n, D] by their mean f and m: (Δ, inserted, env steps)."""
    env = problem.extras["env"]
    data = rollout(env, candidates, episodes, generator)
    deltas, inserted = archive.add(candidates, data["f"].mean(1), data["m"].mean(1))
    return deltas, inserted, candidates.shape[0] * episodes * env.horizon


def _positive(owner: str, **values) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{owner}.{name} = {value!r} is not valid; need > 0")


# --- MAP-Elites ------------------------------------------------------------------------


@dataclass(frozen=True)
class MapElitesOptions:
    batch: int = option(32, help="candidates per step")
    mutation_sigma: float = option(0.1, help="σ_mut of the Gaussian mutation")
    eval_episodes: int = option(1, help="episodes per candidate")

    def __post_init__(self) -> None:
        _positive("map_elites", **vars(self))


def me_init(problem, options: MapElitesOptions, generator):
    return {"archive": _archive(problem, 1.0, float("-inf"))}


def me_step(problem, state, options: MapElitesOptions, generator):
    archive, env = state["archive"], problem.extras["env"]
    if bool(archive.occupied.any()):
        parents = archive.sample_elites(options.batch, generator)
        noise = torch.randn(parents.shape, generator=generator, dtype=DTYPE)
        candidates = parents + options.mutation_sigma * noise
    else:
        candidates = torch.stack([mlp_init(env.sizes, generator) for _ in range(options.batch)])
    _, inserted, cost = _evaluate(problem, candidates, options.eval_episodes, archive, generator)
    return state, {"cost": cost, **archive_metrics(archive), "qd/inserted": float(inserted.sum())}


# --- CMA-MAE (xNES) ----------------------------------------------------------------------


@dataclass(frozen=True)
class CmaMaeOptions:
    archive_lr: float = option(0.1, help="α_A, the archive learning rate")
    threshold_min: float = option(0.0, help="initial cell threshold t_e")
    sigma0: float = option(0.5, help="the ES's initial step size σ₀")
    population: int = option(0, help="candidates per generation (0: xNES's 4 + ⌊3 ln D⌋)")
    eval_episodes: int = option(1, help="episodes per candidate")

    def __post_init__(self) -> None:
        _positive("cma_mae", sigma0=self.sigma0, eval_episodes=self.eval_episodes)
        if self.population < 0 or not 0 < self.archive_lr <= 1:
            raise ValueError(
                f"cma_mae: population = {self.population!r} (need ≥ 0) or archive_lr = "
                f"{self.archive_lr!r} (need (0, 1]) is not valid"
            )


def _reset(state: dict, mean: torch.Tensor, options: CmaMaeOptions) -> None:
    state["mu"], state["sigma"] = mean, float(options.sigma0)
    state["B"] = torch.eye(mean.numel(), dtype=DTYPE)


def cma_init(problem, options: CmaMaeOptions, generator):
    state = {"archive": _archive(problem, options.archive_lr, options.threshold_min), "restarts": 0}
    _reset(state, mlp_init(problem.extras["env"].sizes, generator), options)
    return state


def cma_step(problem, state, options: CmaMaeOptions, generator):
    archive = state["archive"]
    n = options.population or xnes.default_population(state["mu"].numel())
    z, candidates = xnes.sample(state["mu"], state["sigma"], state["B"], n, generator)
    deltas, inserted, cost = _evaluate(
        problem, candidates, options.eval_episodes, archive, generator
    )
    state["mu"], state["sigma"], state["B"] = xnes.update(
        state["mu"], state["sigma"], state["B"], z, deltas
    )
    if not bool(inserted.any()):  # restart rule "no_improvement" [code pyribs]
        _reset(state, archive.sample_elites(1, generator)[0], options)
        state["restarts"] += 1
    metrics = {
        "cost": cost,
        **archive_metrics(archive),
        "qd/mean_delta": float(deltas.clamp(min=0).mean()),
        "qd/restarts": float(state["restarts"]),
        "es/sigma": state["sigma"],
    }
    return state, metrics


# --- shared: the archive is the policy; checkpoints hold its tensors -------------------


def policy(problem, state) -> torch.Tensor:
    return archive_policy(state["archive"])


def checkpoint(state) -> dict:
    return {**state, "archive": state["archive"].state()}


def _restorer(alpha_of):
    def restore(problem, options, saved) -> dict:
        alpha, tmin = alpha_of(options)
        template = _archive(problem, alpha, tmin)
        archive = GridArchive.from_state(
            saved["archive"],
            cells=template.cells,
            low=LOW,
            high=HIGH,
            solution_dim=template.solution_dim,
            alpha=alpha,
            threshold_min=tmin,
        )
        return {**saved, "archive": archive}

    return restore


add_method(
    TabularMethod(
        tasks=("noisy_point_mass",),
        name="map_elites",
        title="MAP-Elites with Gaussian mutation over actor parameters",
        paper="Mouret & Clune, arXiv:1504.04909",
        formula="θ' = θ_elite + σ_mut·N(0, I); insert if f > f_elite(cell(m))",
        options=MapElitesOptions,
        defaults={
            "batch": S(32, "[ours]"),
            "mutation_sigma": S(0.1, "[ours] (pyribs GaussianEmitter: sigma set by the user)"),
            "eval_episodes": S(1, "[ours]"),
        },
        init=me_init,
        step=me_step,
        policy=policy,
        checkpoint=checkpoint,
        restore=_restorer(lambda o: (1.0, float("-inf"))),
    )
)

add_method(
    TabularMethod(
        tasks=("noisy_point_mass",),
        name="cma_mae",
        title="CMA-MAE, gradient-free (xNES as the ES)",
        paper="Fontaine & Nikolaidis, arXiv:2205.10752",
        formula="θ⁽ⁱ⁾ ∼ N(μ, σ²BBᵀ); Δ = f − t_e, t_e ← (1 − α_A)t_e + α_A f; xNES by rank of Δ",
        options=CmaMaeOptions,
        defaults={
            "archive_lr": S(0.1, "[code sumeetbatra/PPGA:train_ppga_*.sh] (PPGA's α_A)"),
            "threshold_min": S(0.0, "[ours] (as ppga_provisional)"),
            "sigma0": S(0.5, "[ours]"),
            "population": S(0, "[paper xNES, JMLR 2014 Table 1] (0: 4 + ⌊3 ln D⌋)"),
            "eval_episodes": S(1, "[ours]"),
        },
        init=cma_init,
        step=cma_step,
        policy=policy,
        checkpoint=checkpoint,
        restore=_restorer(lambda o: (o.archive_lr, o.threshold_min)),
        notes=("The ES is xNES (search/xnes.py), not CMA-ES: our choice.",),
    )
)
