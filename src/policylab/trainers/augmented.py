"""The control trainer's augmented learning step (opt-in: `augment`, `gradient_combine`).

With augmentations τ_1..τ_K (policies/image_augment.py) the PPO loss of a minibatch is
computed on augmented observations; the rollout's old log-probabilities, advantages and
returns stay those of the unaugmented observation (RAD, Laskin et al. 2020,
arXiv:2004.14990). Two ways to use K augmentations:

- `per_row`: one backward pass, each row augmented by one τ_k drawn uniformly (the naive
  combination of papers/seed_control_theory.md §10.2; with K = 1, plain RAD);
- a registered combiner (algebra/gradient_combine.py: mean, equal_norm, min_norm,
  soft_surgery, cg2a_provisional): K backward passes, g_k = ∇_θ L(τ_k(o)) over every trained
  parameter, combined into one update written to `.grad` (CG2A, our reading, §10.1).
  Each K-pass minibatch logs the mechanism check: pairwise cosines of the g_k, the share of
  conflicting pairs and the norm ratio max‖g‖/min‖g‖ (`combine/...`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.algebra.gradient_combine import CombineOptions, combine, conflict_metrics
from policylab.policies.image_augment import augment_observations, augment_per_row
from policylab.policies.spaces import channels_first, is_image_space

PER_ROW = "per_row"

# (loss, entropy mean, approx KL, policy-loss metrics, value-loss metrics) of one pass
PassResult = tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict, dict]


@dataclass(frozen=True)
class Augmenter:
    """The resolved augmentation settings of a run and the image layout they act on."""

    names: tuple[str, ...]
    combine: str
    options: CombineOptions
    shape: tuple[int, ...]
    channels_first: bool

    def describe(self) -> dict:
        return {
            "augment": list(self.names),
            "gradient_combine": self.combine,
            "gradient_combine_options": vars(self.options),
        }


def resolve(cfg, recipe) -> tuple[list[str], str, dict]:
    """(augmentations, combine mode, combiner options): the config's, else the recipe's
    `training` settings `augment`, `gradient_combine`, `gradient_combine_options`, else none."""

    def setting(key, default):
        own = getattr(cfg, key)
        if own is not None:
            return own
        return recipe.training[key].value if key in recipe.training else default

    options = dict(setting("gradient_combine_options", {}))
    return list(setting("augment", [])), setting("gradient_combine", PER_ROW), options


def make_augmenter(cfg, recipe, observation_space) -> Augmenter | None:
    """The run's Augmenter, or None when it augments nothing (the plain PPO step)."""
    names, mode, options = resolve(cfg, recipe)
    if not names:
        return None
    if not is_image_space(observation_space):
        raise ValueError(
            f"augment={names} needs an image observation space (a 3-D uint8 Box on "
            f"[0, 255]); {cfg.task} has {observation_space}. Accepted: augment=[] for it"
        )
    return Augmenter(
        tuple(names),
        mode,
        CombineOptions(**options),
        tuple(observation_space.shape),
        channels_first(observation_space),
    )


def augmented_backward(
    augmenter: Augmenter,
    pass_loss: Callable[[torch.Tensor], PassResult],
    obs: torch.Tensor,
    params: list[torch.nn.Parameter],
    generator: torch.Generator,
) -> PassResult:
    """Fill `params`' .grad with the augmented update of one minibatch `obs` [B, D];
    `pass_loss(obs)` is the minibatch's PPO loss on those observations. Returns the pass
    results (means over the K passes) with the combine metrics in the policy metrics."""
    a = augmenter
    if a.combine == PER_ROW:
        augmented = augment_per_row(list(a.names), obs, a.shape, a.channels_first, generator)
        result = pass_loss(augmented)
        for p in params:
            p.grad = None
        result[0].backward()
        return result
    results, grads = [], []
    for name in a.names:
        result = pass_loss(augment_observations(name, obs, a.shape, a.channels_first, generator))
        parts = torch.autograd.grad(result[0], params, allow_unused=True)
        grads.append(torch.cat([_flat(g, p) for g, p in zip(parts, params, strict=True)]))
        results.append(result)
    stacked = torch.stack(grads)
    update = combine(a.combine, stacked, a.options, generator)
    start = 0
    for p in params:
        p.grad = update[start : start + p.numel()].view_as(p).clone()
        start += p.numel()
    k = len(results)
    loss, entropy, kl = (sum(r[i].detach() for r in results) / k for i in range(3))
    pg = {key: sum(r[3][key] for r in results) / k for key in results[0][3]}
    vf = {key: sum(r[4][key] for r in results) / k for key in results[0][4]}
    pg.update(conflict_metrics(stacked))
    return loss, entropy, kl, pg, vf


def _flat(grad: torch.Tensor | None, param: torch.Tensor) -> torch.Tensor:
    return torch.zeros(param.numel(), dtype=param.dtype) if grad is None else grad.reshape(-1)


def check_augment(cfg) -> None:
    """A ValueError naming the field, the value and what is accepted, for augmentation
    settings (the config's, with the recipe's filling the unset ones)."""
    from policylab import recipes
    from policylab.algebra.gradient_combine import gradient_combiners
    from policylab.policies.image_augment import image_augmentations

    names, mode, options = resolve(cfg, recipes.get(cfg.algo))
    for name in names:
        if name not in image_augmentations:
            raise ValueError(
                f"augment: unknown augmentation {name!r}; accepted: "
                f"{', '.join(image_augmentations.names())}"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"augment={names} names an augmentation twice")
    if mode != PER_ROW and mode not in gradient_combiners:
        raise ValueError(
            f"gradient_combine={mode!r}; accepted: {PER_ROW}, "
            f"{', '.join(gradient_combiners.names())}"
        )
    if not names and (cfg.gradient_combine is not None or cfg.gradient_combine_options):
        given = (
            "gradient_combine" if cfg.gradient_combine is not None else "gradient_combine_options"
        )
        value = cfg.gradient_combine if cfg.gradient_combine is not None else options
        raise ValueError(
            f"{given}={value!r} acts only with augmentations; set augment (e.g. [shift, "
            f"colour_jitter]) or leave {given} unset"
        )
    unknown = set(options) - set(CombineOptions.__dataclass_fields__)
    if unknown:
        raise ValueError(
            f"gradient_combine_options: unknown {sorted(unknown)}; accepted: "
            f"{', '.join(CombineOptions.__dataclass_fields__)}"
        )
    CombineOptions(**options)  # its own range checks name the field
    if cfg.gradient_combine_options and mode in (PER_ROW, "mean"):  # given, not the recipe's
        raise ValueError(
            f"gradient_combine_options={options} has no effect with gradient_combine={mode}; "
            f"they are for {', '.join(n for n in gradient_combiners.names() if n != 'mean')}"
        )
    if names and cfg.normalize_obs:
        raise ValueError(
            f"augment={names} with normalize_obs=true: the augmentations act on raw pixels; "
            "set normalize_obs=false (images are scaled by 1/255 in the CNN)"
        )
