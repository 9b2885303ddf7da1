"""A frozen policy for a role that is never trained (papers/seed_agents.md §A0.6, §A4):
Retroformer's actor M_a, an API model in the paper, a fixed tiny model here.

`frozen_actor(name, tokenizer, precision, sampling)` loads `name`, switches off every
gradient, places it like the learner and gives it its own generation engine. It is no
member of the `PolicySet` (no optimiser, no rows), so no update can reach it; the
workflow plays act turns with it (`PolicySet.actor`)."""

from __future__ import annotations

from policylab.devices import Precision, place
from policylab.engines import HFEngine, Sampling
from policylab.models import load_model
from policylab.policies.language_model import LanguageModelPolicy


def frozen_actor(name: str, tokenizer, precision: Precision, sampling: Sampling):
    """The frozen LanguageModelPolicy of model `name`; its tokenizer must equal the
    learner's (the actor reads contexts the learner's tokenizer wrote)."""
    model, own = load_model(name)
    if own.get_vocab() != tokenizer.get_vocab():
        raise ValueError(
            f"agent.actor = {name!r} has a different vocabulary from the trained model's; "
            "the actor must share the tokenizer (SFT it from the same base model)"
        )
    model = place(model.eval().requires_grad_(False), precision)
    policy = LanguageModelPolicy(
        model, tokenizer, sampling=sampling, engine=HFEngine(model, tokenizer)
    )
    return policy.to(precision.device).requires_grad_(False)
