"""DPG-T2I on a digits personalisation testbed (papers/seed_generative.md G5): the lab task
`lab/digits_personal` and the methods `dpg_t2i`, `dpg_t2i_similarity` and `dreambooth`.

Testbed [ours, G5.2]. The class-conditional digits flow (lab/digits, 50 % label noise)
gets an 11th condition "sks": its first layer gains one zero-initialised input column, so
on the 10 labels (sks = 0) the model is the base model exactly, and at initialisation
"sks 3" is "3". The subject is 5 training images of class 3: an exemplar and its 4
nearest neighbours (one writing style); knob `subject` ∈ {0, 1, 2} picks the exemplar by
farthest-point sampling over the class-3 training images (subject 0: the first one in the
fixed split). Instance rows carry the condition e_3 + e_sks ("a sks 3", DreamBooth's
"a [V] dog" keeps the class word); prior rows carry e_3 and are `prior_images` class-3
samples of the frozen model (DreamBooth's prior preservation).

Metrics (`extras["metrics"]`, on `eval_samples` fixed-noise ODE samples of "sks 3"):
`fid/subject` = mean_{x, r} cos(f_B(x), f_B(r)) over samples x and references r with
classifier B's features (the held-out model, never trained on: the DINO-score analogue);
`align/p3` = p_A(3 | x); `div/pair_dist`; `copy/nn_ref` = mean L2 to the nearest reference
(small = copying); `prior/p3` and `prior/pair_dist` on "3" samples (language drift).
`value` = `fid/subject`, `optimum` = 1. Budget unit: training rows (instance + prior)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from policylab.algebra import dpg
from policylab.algebra.options import check_range, option
from policylab.lab import add_method, lab_tasks
from policylab.lab.dgpo import _learn
from policylab.lab.dgpo import policy_of as _policy
from policylab.lab.digits import base_digits_flow, classifier_a, classifier_b, pair_dist
from policylab.lab.digits_data import CLASSES, DIM, load_digits_split
from policylab.lab.generator_task import GeneratorTask, ode_samples
from policylab.policies.diffusion import DiffusionPolicy
from policylab.policies.residual_critic import CriticOnResidual
from policylab.recipes.base import S
from policylab.rewards.generated import digit_prob, digit_similarity
from policylab.tabular.methods import Problem, TabularMethod

SKS = CLASSES  # index of the added condition "sks"
SUBJECT_CLASS, SUBJECT_SIZE, SUBJECTS = 3, 5, 3  # G5.2
EVAL_SEED_OFFSET = 1_000_003  # as lab/ring and lab/digits
PRIOR_SEED = 424_242  # the prior images' noise, fixed per base model [ours]


def add_sks_condition(base: DiffusionPolicy) -> DiffusionPolicy:
    """A copy of a C-label flow with a (C+1)-th condition input whose first-layer weight
    column is zero, so its velocity equals the base's for every input; the copy's frozen
    reference is the extended base."""
    linears = [m for m in base.velocity_net if isinstance(m, torch.nn.Linear)]
    hidden = tuple(m.out_features for m in linears[:-1])
    policy = DiffusionPolicy(base.dim, cond_dim=base.cond_dim + 1, hidden=hidden, steps=base.steps)
    state = {k: v.clone() for k, v in base.velocity_net.state_dict().items()}
    first = "0.weight"  # inputs are [c, x, time embedding]: the new column sits after c
    w = state[first]
    state[first] = torch.cat(
        [w[:, : base.cond_dim], w.new_zeros(w.shape[0], 1), w[:, base.cond_dim :]], 1
    )
    policy.velocity_net.load_state_dict(state)
    policy.freeze_reference()
    return policy


def condition(n: int, *, sks: bool) -> torch.Tensor:
    """[n, 11]: e_3 (+ e_sks)."""
    c = torch.zeros(n, CLASSES + 1)
    c[:, SUBJECT_CLASS] = 1.0
    if sks:
        c[:, SKS] = 1.0
    return c


def subject_images(subject: int) -> torch.Tensor:
    """[5, 64]: exemplar `subject` (farthest-point order over the class-3 training images,
    starting at the first) and its 4 nearest class-3 neighbours (L2)."""
    data = load_digits_split()
    threes = data.x_train[data.y_train == SUBJECT_CLASS]
    chosen = [0]
    while len(chosen) <= subject:
        d = torch.cdist(threes, threes[chosen]).min(-1).values
        chosen.append(int(d.argmax()))
    exemplar = threes[chosen[subject]]
    order = torch.cdist(exemplar[None], threes)[0].argsort()
    return threes[order[:SUBJECT_SIZE]].clone()  # order[0] is the exemplar itself


@torch.no_grad()
def fidelity(samples, refs, clf_b) -> float:
    """mean_{x, r} cos(f_B(clamp(x)), f_B(r)): classifier B's features, all pairs."""
    fx, fr = clf_b.features(samples.clamp(-1, 1)), clf_b.features(refs)
    return float((F.normalize(fx, dim=-1) @ F.normalize(fr, dim=-1).T).mean())


def personal_metrics(samples, prior_samples, refs, clf_a, clf_b) -> dict[str, float]:
    """fid/subject, align/p3, div/pair_dist, copy/nn_ref on "sks 3" samples; prior/p3 and
    prior/pair_dist on "3" samples (see the module docstring)."""
    label = F.one_hot(torch.full((samples.shape[0],), SUBJECT_CLASS), CLASSES).float()
    with torch.no_grad():
        p3 = digit_prob(samples, label, classifier=clf_a)
        p3_prior = digit_prob(prior_samples, label[: prior_samples.shape[0]], classifier=clf_a)
    return {
        "fid/subject": fidelity(samples, refs, clf_b),
        "align/p3": float(p3.mean()),
        "div/pair_dist": pair_dist(samples),
        "copy/nn_ref": float(torch.cdist(samples, refs).min(-1).values.mean()),
        "prior/p3": float(p3_prior.mean()),
        "prior/pair_dist": pair_dist(prior_samples),
    }


def digits_personal(
    seed: int,
    subject: int = 0,
    prior_images: int = 8,
    base_seed: int = 0,
    base_steps: int = 2000,
    classifier_steps: int = 2000,
    eval_samples: int = 200,
) -> Problem:
    """Knobs: subject (0, 1, 2 [G5.2: 3 subjects]), prior_images (8 class images [code
    DPG-T2I train_dpg.sh]), base_seed / base_steps / classifier_steps (lab/digits' models
    [G0.7]), eval_samples (200 fixed-noise samples per evaluation [ours: G0.8's pair-distance
    sample size])."""
    check_range("lab/digits_personal", "subject", subject, low=0, high=SUBJECTS - 1)
    for name, value in (
        ("prior_images", prior_images),
        ("base_steps", base_steps),
        ("classifier_steps", classifier_steps),
        ("eval_samples", eval_samples),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"lab/digits_personal knob {name} = {value!r}; must be an integer >= 1"
            )
    if not isinstance(subject, int) or not isinstance(base_seed, int) or base_seed < 0:
        raise ValueError(
            f"lab/digits_personal knobs subject = {subject!r}, base_seed = {base_seed!r}; "
            "must be integers (subject in 0..2, base_seed >= 0)"
        )
    clf_a, clf_b = (
        classifier_a(base_seed, classifier_steps),
        classifier_b(base_seed, classifier_steps),
    )
    base = add_sks_condition(base_digits_flow(base_seed, base_steps))
    refs = subject_images(subject)
    g_prior = torch.Generator().manual_seed(PRIOR_SEED + base_seed)
    prior = ode_samples(
        base, torch.randn(prior_images, DIM, generator=g_prior), condition(prior_images, sks=False)
    )
    g = torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)
    noise = torch.randn(eval_samples, DIM, generator=g)
    cond_sks, cond_3 = condition(eval_samples, sks=True), condition(eval_samples, sks=False)

    def metrics(policy) -> dict[str, float]:
        x, x_prior = ode_samples(policy, noise, cond_sks), ode_samples(policy, noise, cond_3)
        return personal_metrics(x, x_prior, refs, clf_a, clf_b)

    def value(policy) -> float:
        return fidelity(ode_samples(policy, noise, cond_sks), refs, clf_b)

    def similarity(samples, cond=None) -> torch.Tensor:
        """cos(f_A(x), mean_r f_A(r)) per row: `digit_similarity` to the subject [G0.6]."""
        return digit_similarity(samples, None, refs=refs, classifier=clf_a)

    def batch_metrics(samples, cond=None) -> dict[str, float]:
        return personal_metrics(samples, samples, refs, clf_a, clf_b)

    return Problem(
        mdp=base,
        value=value,
        optimum=1.0,
        initial_policy=base,
        budget_unit="training rows",
        extras={
            "metrics": metrics,
            "refs": refs,
            "prior_images": prior,
            "instance_cond": condition(1, sks=True)[0],
            "prior_cond": condition(1, sks=False)[0],
            "classifiers": (clf_a, clf_b),
            "generator": GeneratorTask(
                dim=DIM,
                reward=similarity,
                batch_metrics=batch_metrics,
                conditions=lambda n, g: condition(n, sks=True),
            ),
        },
    )


lab_tasks.add("digits_personal", digits_personal)


# ---- the methods: dpg_t2i, dpg_t2i_similarity, dreambooth ----------------------------------
DPG_CODE = "[code wfanyue/DPG-T2I-Personalization:train_dreambooth_dpg.py]"
DPG_SH = "[code wfanyue/DPG-T2I-Personalization:train_dpg.sh]"


@dataclass
class PersonalOptions:
    batch: int = option(5, "instance rows per step (as many prior rows beside them)")
    prior_weight: float = option(1.0, "w_prior of the prior-preservation denoising MSE")
    lr: float = option(1e-4, "AdamW learning rate")
    weight_decay: float = option(1e-2, "AdamW weight decay")
    grad_clip: float = option(1.0, "gradient-norm clip on the generator")

    NAME = "dreambooth"

    def __post_init__(self) -> None:
        check_range(self.NAME, "batch", self.batch, low=1)
        check_range(self.NAME, "prior_weight", self.prior_weight, low=0.0, finite=True)
        check_range(self.NAME, "lr", self.lr, low=0.0, low_open=True, finite=True)
        check_range(self.NAME, "weight_decay", self.weight_decay, low=0.0, finite=True)
        check_range(self.NAME, "grad_clip", self.grad_clip, low=0.0, low_open=True)


@dataclass
class DPGOptions(PersonalOptions):
    gamma: float = option(dpg.GAMMA, "γ of the γ^t weight on the critic term")
    per_row_gamma: bool = option(False, "γ^{t_i} per row (False: γ^{t_0}, the code's quirk)")
    critic_lr: float = option(0.01, "SGD learning rate of the critic")
    critic_hidden: int = option(64, "hidden width of CriticOnResidual")

    NAME = "dpg_t2i"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range(self.NAME, "gamma", self.gamma, low=0.0, high=1.0, low_open=True)
        check_range(self.NAME, "critic_lr", self.critic_lr, low=0.0, low_open=True, finite=True)
        check_range(self.NAME, "critic_hidden", self.critic_hidden, low=1)


@dataclass
class DPGSimilarityOptions(DPGOptions):
    NAME = "dpg_t2i_similarity"


def _personal(problem) -> dict:
    if "refs" not in problem.extras:
        raise TypeError("this method needs the lab task lab/digits_personal")
    return problem.extras


def _init(problem, options, generator) -> dict:
    policy = copy.deepcopy(problem.mdp)  # the sks-extended base with its frozen reference
    opt = torch.optim.AdamW(
        policy.trainable(),
        lr=options.lr,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=options.weight_decay,
    )
    state = {"policy": policy, "opt": opt, "step": 0}
    if isinstance(options, DPGOptions):
        seed = 0 if generator is None else int(torch.randint(2**31, (1,), generator=generator))
        with torch.random.fork_rng(devices=[]):  # the critic's init from the run's generator
            torch.manual_seed(seed)
            critic = CriticOnResidual(hidden=options.critic_hidden)
        state.update(critic=critic, critic_opt=critic.optimizer(options.critic_lr))
    return state


def _checkpoint(state: dict) -> dict:
    saved = {
        k: state[k].state_dict() for k in ("policy", "opt", "critic", "critic_opt") if k in state
    }
    return {**saved, "step": state["step"]}


def _restore(problem, options, saved) -> dict:
    state = _init(problem, options, None)  # its fresh critic is overwritten below
    for key in ("policy", "opt", "critic", "critic_opt"):
        if key in state:
            state[key].load_state_dict(saved[key])
    state["step"] = saved["step"]
    return state


def _rows(problem, options, generator):
    """A batch of `batch` instance rows (references drawn with replacement) and as many
    prior rows: x_0 [2b, 64], conditions [2b, 11], τ ~ U[0, 1] [2b, 1], ε [2b, 64]."""
    extras, b = _personal(problem), options.batch
    refs, prior = extras["refs"], extras["prior_images"]
    x0 = torch.cat(
        [
            refs[torch.randint(refs.shape[0], (b,), generator=generator)],
            prior[torch.randint(prior.shape[0], (b,), generator=generator)],
        ]
    )
    cond = torch.cat([extras["instance_cond"].expand(b, -1), extras["prior_cond"].expand(b, -1)])
    tau = torch.rand(2 * b, 1, generator=generator)
    eps = torch.randn(2 * b, DIM, generator=generator)
    return x0, cond, tau, eps


def dreambooth_step(problem, state, options, generator):
    """Instance CFM MSE + w_prior·prior CFM MSE (DreamBooth with prior preservation)."""
    x0, cond, tau, eps = _rows(problem, options, generator)
    ell = state["policy"].cfm_loss(x0, tau, eps, cond)[0]
    b = options.batch
    instance, prior = ell[:b].mean(), ell[b:].mean()
    loss = instance + options.prior_weight * prior
    norm = _learn(state, loss, options.grad_clip)
    return state, {
        "cost": 2 * b,
        "loss": float(loss.detach()),
        "grad/norm": norm,
        "loss/instance": float(instance.detach()),
        "loss/prior": float(prior.detach()),
    }


def dpg_step(problem, state, options: DPGOptions, generator):
    """Actor: w_prior·prior CFM MSE + γ^t·Q_φ(ρ(θ)) with ρ = (x̂ − x_0)², x̂ = x^τ + (1 − τ)·v̂
    on the instance rows; then the critic: one SGD step of (Q_φ(ρ) − target)² on the
    detached ρ, target = rec (dpg_t2i) or −digit_similarity(x̂) (dpg_t2i_similarity)."""
    policy, critic, b = state["policy"], state["critic"], options.batch
    x0, cond, tau, eps = _rows(problem, options, generator)
    ell, v, xt = policy.cfm_loss(x0, tau, eps, cond)
    prior = ell[b:].mean()
    x_hat = dpg.clean_estimate_velocity(xt[:b], tau[:b], v[:b])
    rho = dpg.residual(x_hat, x0[:b])
    weights = dpg.discount(
        dpg.ddpm_timestep(tau[:b]), options.gamma, per_row_gamma=options.per_row_gamma
    )
    q = critic(rho)
    loss = dpg.actor_loss(prior, q, weights, options.prior_weight)
    norm = _learn(state, loss, options.grad_clip)  # the critic's grads from it are dropped
    with torch.no_grad():
        rec = dpg.look_forward_cost(x_hat, x0[:b])
        if options.NAME == "dpg_t2i_similarity":  # a non-differentiable use: a number per row
            target = -_personal(problem)["generator"].reward(x_hat, None)
        else:
            target = rec
    critic_loss = critic.fit_step(state["critic_opt"], rho, target)
    return state, {
        "cost": 2 * b,
        "loss": float(loss.detach()),
        "grad/norm": norm,
        "loss/prior": float(prior.detach()),
        "dpg/rec": float(rec.mean()),
        "dpg/q": float(q.detach().mean()),
        "dpg/critic_loss": critic_loss,
        "dpg/target": float(target.mean()),
        "dpg/gamma_t": float(weights.mean()),
    }


COMMON = {
    "batch": S(5, "[ours: the 5 references per step; code batch 1 + 1 prior]"),
    "prior_weight": S(1.0, DPG_SH + " --prior_loss_weight=1.0"),
    "lr": S(1e-4, "[ours: the code's 1e-6 is for SD 1.4; full fine-tuning of a 170k net]"),
    "weight_decay": S(1e-2, DPG_CODE + " adam_weight_decay default"),
    "grad_clip": S(1.0, DPG_CODE + " max_grad_norm default"),
}
DPG_DEFAULTS = {
    **COMMON,
    "gamma": S(dpg.GAMMA, DPG_CODE + " gamma = 0.9986"),
    "per_row_gamma": S(False, DPG_CODE + " gamma ** timesteps[0]"),
    "critic_lr": S(0.01, DPG_CODE + " q_optimizer SGD lr 0.01"),
    "critic_hidden": S(64, "[code reward_model.py FC 4096→64→1]"),
}
NOTES = (
    "AdamW (0.9, 0.999, 1e-8) [code argument defaults]; constant lr [code train_dpg.sh]",
    "flow time τ maps to the code's t = 999·(1 − τ) for γ^t [ours]",
)
for name, title, options, step, defaults, formula in (
    (
        "dpg_t2i",
        "DPG-T2I — look-forward critic on the clean estimate's residual",
        DPGOptions,
        dpg_step,
        DPG_DEFAULTS,
        "L = w_prior·ℓ_prior + γ^{t_0}·mean_i Q_φ((x̂_i − x_0,i)²), "
        "x̂ = x^τ + (1 − τ)·v̂; Q_φ regresses rec = mean_d (x̂ − x_0)²",
    ),
    (
        "dpg_t2i_similarity",
        "DPG-T2I — critic regresses −digit_similarity (no reward gradient)",
        DPGSimilarityOptions,
        dpg_step,
        DPG_DEFAULTS,
        "as dpg_t2i; Q_φ(ρ) regresses −cos(f_A(x̂), mean_r f_A(r)), read only as a number",
    ),
    (
        "dreambooth",
        "DreamBooth — instance denoising MSE + prior preservation",
        PersonalOptions,
        dreambooth_step,
        COMMON,
        "L = mean_inst ℓ_θ + w_prior·mean_prior ℓ_θ (CFM losses)",
    ),
):
    add_method(
        TabularMethod(
            tasks=("digits_personal",),
            name=name,
            title=title,
            paper="Wei et al., arXiv:2407.06642 (ECCV 2024); code wfanyue/DPG-T2I-Personalization"
            if name != "dreambooth"
            else "Ruiz et al., arXiv:2208.12242 (baseline of G5.2)",
            formula=formula,
            options=options,
            defaults=defaults,
            init=_init,
            step=step,
            policy=_policy,
            notes=NOTES,
            checkpoint=_checkpoint,
            restore=_restore,
        )
    )
