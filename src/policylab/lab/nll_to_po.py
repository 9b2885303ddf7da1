"""NLL-to-PO on the lab (papers/seed_generative.md G6.2): three likelihood tasks and two
methods. Benechehab et al., arXiv:2510.07624; code abenechehab/nll_to_po.

Tasks (budget unit: policy updates; value = −test NLL, so higher is better):
- `gaussian_fit` — y ~ N(μ, S) with one constant input, a free Gaussian policy; 1-D S = 0.25,
  2-D S = [[2, 0.5], [0.5, 1]] [G6.3]; optimum = −H(N(μ, S)), the NLL of the truth.
- `po_mse` — the regression of the code's scripts/po_mse.py: x ~ N(0, I₄) drawn once and
  repeated, y ~ N(loc·1₂, 0.5²I); a Gaussian MLP policy [64, 64] ReLU; optimum as above.
- `digits_classify` — the 8×8 digits (lab/digits_data.py), a categorical MLP over 10 classes
  from the 64 pixels; optimum 0 (an NLL is >= 0).

Methods (each reads the task only through `problem.extras["likelihood"]`):
- `nll` — Adam on −mean log π(y | x), the maximum-likelihood baseline.
- `nll_to_po` — PG (algebra/nll_po.py `pg_loss`) under the reward r_U (rewards/parametric.py);
  U from workflows/bilevel.py: `heuristic` ((λ/2)·C⁻¹ from the residual covariance of the
  constant predictor; with one input this is U* of the training data), `implicit` (the
  first `outer_steps` steps are outer steps of the bilevel solver, then PG from a fresh
  policy), or `fixed` (U = reward_init·I)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from policylab.algebra.nll_po import pg_loss
from policylab.algebra.options import check_choice, check_range, option
from policylab.lab import add_method, lab_tasks
from policylab.policies.likelihood import (
    CategoricalMLP,
    FreeGaussian,
    GaussianMLP,
    draw,
    moments,
)
from policylab.recipes.base import S
from policylab.rewards.parametric import MahalanobisReward, OneHotMahalanobis
from policylab.tabular.methods import Problem, TabularMethod
from policylab.workflows.bilevel import (
    ImplicitOptions,
    heuristic_reward,
    implicit_outer_step,
    plateau,
)

TASKS = ("gaussian_fit", "po_mse", "digits_classify")
CODE_LOSS = "[code nll_to_po:training/loss.py]"
CODE_MSE = "[code nll_to_po:scripts/po_mse.py]"
CODE_BILEVEL = "[code nll_to_po:bilevel/torchopt.py run_bilevel_optimization_implicit]"


@dataclass(frozen=True)
class LikelihoodTask:
    kind: str  # "gaussian" or "categorical"
    x_train: torch.Tensor
    y_train: torch.Tensor  # [N, D] floats or [N] class indices
    x_test: torch.Tensor
    y_test: torch.Tensor
    out_dim: int  # D or the number of classes
    build_policy: Callable[[], nn.Module]  # under the caller's torch seed

    def make_policy(self, seed: int) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self.build_policy()


def likelihood_task(problem) -> LikelihoodTask:
    task = problem.extras.get("likelihood")
    if not isinstance(task, LikelihoodTask):
        raise TypeError("this method needs a lab likelihood task (extras['likelihood'])")
    return task


# ---- metrics -------------------------------------------------------------------------------
@torch.no_grad()
def evaluate(task: LikelihoodTask, policy: nn.Module) -> dict[str, float]:
    """test/nll; accuracy (categorical); moment errors ‖μ̂ − ȳ‖ and ‖Σ̂ − S‖_F against the
    training data's mean and covariance (Gaussian) [G6.2]."""
    dist = policy(task.x_test)
    out = {"test/nll": float(-dist.log_prob(task.y_test).mean())}
    if task.kind == "categorical":
        out["test/accuracy"] = float((dist.probs.argmax(-1) == task.y_test).double().mean())
        return out
    mu, cov = moments(policy(task.x_train))
    ybar = task.y_train.mean(0)
    S_data = torch.cov(task.y_train.T, correction=0).reshape(len(ybar), len(ybar))
    out["moment/mean_err"] = float(torch.linalg.norm(mu - ybar))
    out["moment/cov_err"] = float(torch.linalg.norm(cov - S_data))
    return out


def _problem(task: LikelihoodTask, seed: int, optimum: float) -> Problem:
    def value(policy: nn.Module) -> float:
        return -evaluate(task, policy)["test/nll"]

    return Problem(
        mdp=task,
        value=value,
        optimum=optimum,
        initial_policy=task.make_policy(seed),
        budget_unit="policy updates",
        extras={"likelihood": task, "metrics": lambda p: evaluate(task, p)},
    )


def _gaussian_entropy(cov: torch.Tensor) -> float:
    return float(0.5 * torch.logdet(2 * torch.pi * torch.e * cov))


# ---- tasks ---------------------------------------------------------------------------------
def gaussian_fit(seed: int, dim: int = 1, n_train: int = 256, n_test: int = 2000) -> Problem:
    """Knobs: dim (1 or 2 [G6.2]), n_train (256 [ours]), n_test (2,000 [ours])."""
    check_choice("lab/gaussian_fit", "dim", dim, (1, 2))
    check_range("lab/gaussian_fit", "n_train", n_train, low=2)
    check_range("lab/gaussian_fit", "n_test", n_test, low=1)
    mean = torch.tensor([1.0]) if dim == 1 else torch.tensor([1.0, -1.0])  # [ours]
    cov = torch.tensor([[0.25]]) if dim == 1 else torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    g = torch.Generator().manual_seed(seed)
    L = torch.linalg.cholesky(cov)

    def ys(n: int) -> torch.Tensor:
        return mean + torch.randn(n, dim, generator=g) @ L.T

    task = LikelihoodTask(
        "gaussian",
        torch.zeros(n_train, 1),
        ys(n_train),
        torch.zeros(n_test, 1),
        ys(n_test),
        dim,
        lambda: FreeGaussian(dim, full=dim > 1),
    )
    return _problem(task, seed, -_gaussian_entropy(cov))


def po_mse(
    seed: int, n_train: int = 25, loc: float = 1.0, scale: float = 0.5, n_test: int = 2000
) -> Problem:
    """Knobs: n_train (25 repeats of one x) and loc (1.0) and scale (0.5) [code po_mse.py:
    init_dist_n_samples 25, init_dist_loc 1.0, init_dist_scale 0.5], n_test [ours]."""
    check_range("lab/po_mse", "n_train", n_train, low=2)
    check_range("lab/po_mse", "scale", scale, low=0.0, low_open=True)
    check_range("lab/po_mse", "n_test", n_test, low=1)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 4, generator=g)
    y_train = loc + scale * torch.randn(n_train, 2, generator=g)
    y_test = loc + scale * torch.randn(n_test, 2, generator=g)
    task = LikelihoodTask(
        "gaussian",
        x.repeat(n_train, 1),
        y_train,
        x.repeat(n_test, 1),
        y_test,
        2,
        lambda: GaussianMLP(4, 2, (64, 64)),
    )
    return _problem(task, seed, -_gaussian_entropy(scale**2 * torch.eye(2)))


def digits_classify(seed: int) -> Problem:
    """The fixed 1,500/297 digits split [G0.6]; the policy's initial weights from `seed`."""
    from policylab.lab.digits_data import CLASSES, DIM, load_digits_split

    data = load_digits_split()
    task = LikelihoodTask(
        "categorical",
        data.x_train,
        data.y_train,
        data.x_test,
        data.y_test,
        CLASSES,
        lambda: CategoricalMLP(DIM, CLASSES, (64, 64)),
    )
    return _problem(task, seed, 0.0)


lab_tasks.add("gaussian_fit", gaussian_fit)
lab_tasks.add("po_mse", po_mse)
lab_tasks.add("digits_classify", digits_classify)


# ---- shared state --------------------------------------------------------------------------
def _seed(generator: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=generator))


def _batch(task: LikelihoodTask, batch: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole training set when batch >= N [code po_mse: one full batch], else a draw."""
    n = task.x_train.shape[0]
    if batch >= n:
        return task.x_train, task.y_train
    idx = torch.randint(0, n, (batch,), generator=generator)
    return task.x_train[idx], task.y_train[idx]


def _learn(state: dict, loss: torch.Tensor) -> None:
    state["opt"].zero_grad()
    loss.backward()
    state["opt"].step()


def policy_of(problem, state) -> nn.Module:
    return state["policy"]


def _fresh_policy(problem, state: dict, lr: float) -> None:
    state["policy"] = likelihood_task(problem).make_policy(state["policy_seed"])
    state["opt"] = torch.optim.Adam(state["policy"].parameters(), lr=lr)


def _checkpoint(state: dict) -> dict:
    saved = {k: v for k, v in state.items() if k not in ("policy", "opt", "reward")}
    saved["policy"] = state["policy"].state_dict()
    saved["opt"] = state["opt"].state_dict()
    if "reward" in state:
        saved["reward"] = state["reward"].state_dict()
    return saved


# ---- nll -----------------------------------------------------------------------------------
@dataclass
class NLLOptions:
    lr: float = option(1e-3, "Adam learning rate")
    batch: int = option(128, "inputs per update (>= N: the whole training set)")

    def __post_init__(self) -> None:
        check_range("nll", "lr", self.lr, low=0.0, low_open=True, finite=True)
        check_range("nll", "batch", self.batch, low=1)


def nll_init(problem, options: NLLOptions, generator) -> dict:
    state = {"policy_seed": _seed(generator), "step": 0}
    _fresh_policy(problem, state, options.lr)
    return state


def nll_step(problem, state, options: NLLOptions, generator):
    x, y = _batch(likelihood_task(problem), options.batch, generator)
    loss = -state["policy"](x).log_prob(y).mean()
    _learn(state, loss)
    state["step"] += 1
    return state, {"cost": 1, "loss": float(loss.detach())}


def nll_restore(problem, options: NLLOptions, saved) -> dict:
    state = {k: v for k, v in saved.items() if k not in ("policy", "opt")}
    _fresh_policy(problem, state, options.lr)
    state["policy"].load_state_dict(saved["policy"])
    state["opt"].load_state_dict(saved["opt"])
    return state


add_method(
    TabularMethod(
        tasks=TASKS,
        name="nll",
        title="NLL — maximum-likelihood training (the baseline of NLL-to-PO)",
        paper="Benechehab et al., arXiv:2510.07624 (baseline); code abenechehab/nll_to_po",
        formula="loss = −mean_b log π_θ(y_b | x_b)",
        options=NLLOptions,
        defaults={
            "lr": S(1e-3, CODE_MSE + " learning_rate"),
            "batch": S(128, "[ours: po_mse's 25 fit in one batch; digits in draws of 128]"),
        },
        init=nll_init,
        step=nll_step,
        policy=policy_of,
        checkpoint=_checkpoint,
        restore=nll_restore,
    )
)


# ---- nll_to_po -----------------------------------------------------------------------------
@dataclass
class NLLToPOOptions:
    solver: str = option("implicit", "how U is found: implicit, heuristic or fixed")
    reward_kind: str = option("full", "U: full, diag or iso (digits: diag)")
    reward_init: float = option(1.0, "U starts at (fixed: stays at) reward_init·I")
    lam: float = option(0.01, "λ, the entropy weight")
    samples: int = option(5, "M samples ŷ per input")
    transform: str = option("normalize", "reward transform of the PG phase")
    lr: float = option(1e-3, "Adam learning rate of the PG phase")
    batch: int = option(128, "inputs per update (>= N: the whole training set)")
    outer_steps: int = option(20, "implicit: outer steps before the PG phase")
    n_inner: int = option(5, "implicit: inner Adam steps per outer step")
    inner_lr: float = option(1e-3, "implicit: inner Adam learning rate")
    outer_lr: float = option(1e-3, "implicit: outer Adam learning rate")
    cg_maxiter: int = option(1, "implicit: CG iterations")
    outer_patience: int = option(
        0, "implicit: outer lr × 0.75 after this many steps without a better outer NLL (0: off)"
    )

    def __post_init__(self) -> None:
        check_choice("nll_to_po", "solver", self.solver, ("implicit", "heuristic", "fixed"))
        check_choice("nll_to_po", "reward_kind", self.reward_kind, ("full", "diag", "iso"))
        check_choice("nll_to_po", "transform", self.transform, ("none", "normalize", "loo"))
        for name in ("reward_init", "lam", "lr", "inner_lr", "outer_lr"):
            check_range("nll_to_po", name, getattr(self, name), low=0.0, low_open=True, finite=True)
        for name in ("samples", "batch", "n_inner", "cg_maxiter"):
            check_range("nll_to_po", name, getattr(self, name), low=1)
        check_range("nll_to_po", "outer_steps", self.outer_steps, low=0)
        check_range("nll_to_po", "outer_patience", self.outer_patience, low=0)
        if self.transform == "loo":
            check_range("nll_to_po", "samples", self.samples, low=2)

    def implicit(self) -> ImplicitOptions:
        return ImplicitOptions(
            n_inner=self.n_inner,
            inner_lr=self.inner_lr,
            outer_lr=self.outer_lr,
            lam=self.lam,
            samples=max(self.samples, 2),
            cg_maxiter=self.cg_maxiter,
        )


def _reward(task: LikelihoodTask, options: NLLToPOOptions) -> nn.Module:
    if task.kind == "categorical":
        return OneHotMahalanobis(task.out_dim, options.reward_kind, options.reward_init)
    return MahalanobisReward(task.out_dim, options.reward_kind, options.reward_init)


def _residuals(task: LikelihoodTask) -> torch.Tensor:
    """y − ȳ (one-hot for classes): the residuals of the constant predictor [ours]."""
    y = task.y_train
    if task.kind == "categorical":
        y = nn.functional.one_hot(y, task.out_dim).double()
    return (y - y.mean(0)).float()


def po_init(problem, options: NLLToPOOptions, generator) -> dict:
    task = likelihood_task(problem)
    state = {"policy_seed": _seed(generator), "step": 0, "outer": 0}
    state.update({"outer_lr": options.outer_lr, "best": float("inf"), "waited": 0})
    _fresh_policy(problem, state, options.lr)
    state["reward"] = _reward(task, options)
    if options.solver == "heuristic":
        U = heuristic_reward(_residuals(task), options.lam, options.reward_kind)
        inner = state["reward"].inner if task.kind == "categorical" else state["reward"]
        inner.set_matrix(U)
    return state


def po_step(problem, state, options: NLLToPOOptions, generator):
    task = likelihood_task(problem)
    x, y = _batch(task, options.batch, generator)
    if options.solver == "implicit" and state["outer"] < options.outer_steps:
        metrics = implicit_outer_step(
            lambda: task.make_policy(state["policy_seed"]),
            state["reward"],
            x,
            y,
            options.implicit(),
            generator,
            state["outer_lr"],
        )
        metrics["bilevel/outer_lr"] = state["outer_lr"]
        if options.outer_patience:
            state["outer_lr"], state["best"], state["waited"] = plateau(
                metrics["bilevel/outer_nll"],
                state["outer_lr"],
                state["best"],
                state["waited"],
                options.outer_patience,
            )
        state["outer"] += 1
        if state["outer"] == options.outer_steps:  # the PG phase starts from a fresh policy
            _fresh_policy(problem, state, options.lr)
        metrics["cost"] = options.n_inner
        metrics.update(_u_metrics(state["reward"]))
        return state, metrics
    dist = state["policy"](x)
    y_hat = draw(dist, options.samples, generator)
    with torch.no_grad():
        rewards = state["reward"](y_hat, y)
    loss = pg_loss(
        dist.log_prob(y_hat), rewards, dist.entropy(), lam=options.lam, transform=options.transform
    )
    _learn(state, loss)
    state["step"] += 1
    return state, {"cost": 1, "loss": float(loss.detach()), "reward/mean": float(rewards.mean())}


def _u_metrics(reward: nn.Module) -> dict[str, float]:
    U = reward.matrix().detach()
    return {"reward/u_trace": float(torch.trace(U)), "reward/u_00": float(U[0, 0])}


def po_restore(problem, options: NLLToPOOptions, saved) -> dict:
    task = likelihood_task(problem)
    state = {k: v for k, v in saved.items() if k not in ("policy", "opt", "reward")}
    _fresh_policy(problem, state, options.lr)
    state["policy"].load_state_dict(saved["policy"])
    state["opt"].load_state_dict(saved["opt"])
    state["reward"] = _reward(task, options)
    state["reward"].load_state_dict(saved["reward"])
    return state


add_method(
    TabularMethod(
        tasks=TASKS,
        name="nll_to_po",
        title="NLL-to-PO — policy gradient under a learned Mahalanobis reward",
        paper="Benechehab et al., arXiv:2510.07624; code abenechehab/nll_to_po",
        formula="loss = mean_{m,b}[−log π_θ(ŷ_mb|x_b)·T(r_U(ŷ_mb, y_b))] − λ·mean_b H(π_θ(·|x_b)), "
        "U = argmin_U −mean log π_{θ*(U)}(y|x)",
        options=NLLToPOOptions,
        defaults={
            "solver": S("implicit", CODE_BILEVEL),
            "reward_kind": S("full", "[code reward_network: RewardMLPMahalanobis]"),
            "reward_init": S(1.0, "[ours: U = I, the start of G6.3 N3]"),
            "lam": S(0.01, CODE_LOSS + " PG entropy_weight"),
            "samples": S(5, CODE_LOSS + " n_generations"),
            "transform": S("normalize", CODE_LOSS + " reward_transform"),
            "lr": S(1e-3, CODE_MSE + " learning_rate"),
            "batch": S(128, "[ours: as nll]"),
            "outer_steps": S(20, "[ours: the code's n_outer_epochs = 10 passes over all batches]"),
            "n_inner": S(5, CODE_BILEVEL + " n_inner_epochs"),
            "inner_lr": S(1e-3, CODE_BILEVEL),
            "outer_lr": S(1e-3, CODE_BILEVEL),
            "cg_maxiter": S(1, CODE_BILEVEL + " solve_normal_cg(maxiter=1)"),
            "outer_patience": S(0, CODE_BILEVEL + " outer_scheduler_patience"),
        },
        init=po_init,
        step=po_step,
        policy=policy_of,
        notes=(
            "heuristic: U = (λ/2)·C⁻¹ from the residual covariance of the constant predictor "
            "(our reading of the paper's heuristic solver)",
            "implicit: one training batch per outer step (the code averages hypergradients "
            "over all batches of an epoch) [ours]; inner transform loo [ours]",
        ),
        checkpoint=_checkpoint,
        restore=po_restore,
    )
)
