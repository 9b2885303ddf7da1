"""The softmax bandit: every named algorithm, end to end, on pure tensors.

One state, K arms with Bernoulli rewards, a softmax policy over K logits. Each step draws
`prompts_per_step` groups of `samples_per_prompt` actions (a group plays the role of a
prompt's G samples; each action is a one-token response), scores them, computes the
recipe's advantages and minimises the recipe's loss over minibatches, exactly as the
language-model trainer will. An algorithm works here before it is trusted on a model:
`policylab bandit` (part of `make demo`) prints the probability each algorithm puts on the
best arm, and tests/test_bandit.py requires at least 0.9 within the default budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import torch

from policylab.algebra.advantages import GAEOptions, value_targets
from policylab.recipes.compose import components
from policylab.rollouts import Rollouts


@dataclass(frozen=True)
class BanditConfig:
    arm_probs: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)  # success probability of each arm
    prompts_per_step: int = 8  # groups per step
    samples_per_prompt: int = 8  # G
    steps: int = 300
    minibatches: int = 2  # optimiser steps per batch; the second one is off-policy
    epochs: int = 1
    lr: float = 0.05  # Adam, on the logits (and the critic's value)
    value_coef: float = 0.5  # weight of the value loss for algorithms with a critic
    target: float = 0.9  # probability of the best arm that counts as solved
    seed: int = 0


@dataclass
class BanditResult:
    algorithm: str
    seed: int
    best_arm_prob: float  # final probability of the best arm
    steps_to_target: int | None  # first step at which it reached cfg.target
    seconds: float
    history: list[float] = field(default_factory=list)  # best-arm probability after each step


def run_bandit(algorithm: str, config: BanditConfig | None = None, **changes) -> BanditResult:
    """Train a softmax policy on the bandit with the named algorithm's components."""
    cfg = replace(config or BanditConfig(), **changes)
    parts = components(algorithm, max_new_tokens=1)
    gen = torch.Generator().manual_seed(cfg.seed)
    arm_probs = torch.tensor(cfg.arm_probs)
    best = int(arm_probs.argmax())
    K, P, G = len(cfg.arm_probs), cfg.prompts_per_step, cfg.samples_per_prompt
    B = P * G

    logits = torch.zeros(K, requires_grad=True)
    value = torch.zeros((), requires_grad=True)  # the critic of a one-state problem
    reference = torch.log_softmax(torch.zeros(K), dim=0)  # frozen initial (uniform) policy
    params = [logits, value] if parts.value is not None else [logits]
    optimiser = torch.optim.Adam(params, lr=cfg.lr)
    group_ids = torch.arange(P).repeat_interleave(G)
    mask = torch.ones(B, 1)

    history: list[float] = []
    start = time.perf_counter()
    for _ in range(cfg.steps):
        with torch.no_grad():
            log_pi = torch.log_softmax(logits, dim=0)
            actions = torch.multinomial(log_pi.exp(), B, replacement=True, generator=gen)
            rewards = torch.bernoulli(arm_probs[actions], generator=gen)
            batch = Rollouts(
                rewards=rewards,
                response_mask=mask,
                group_ids=group_ids,
                response_ids=actions.unsqueeze(-1),
                logprobs=log_pi[actions].unsqueeze(-1),
                ref_logprobs=reference[actions].unsqueeze(-1),
                values=value.detach().expand(B, 1).clone(),
                # what EMPG and COPO read: the policy's entropy, and the arm as the "answer";
                # an action is one step-less token, so BCPG-NSA weights nothing
                entropy=(-(log_pi.exp() * log_pi).sum()).expand(B, 1).clone(),
                segment_ids=torch.full((B, 1), -1),
                extras={"answers": [str(int(a)) for a in actions], "step_correct": [[]] * B},
            )
            adv = parts.advantage(batch)
            returns = None
            if parts.value is not None:
                returns = value_targets(batch, _gae_options(parts.advantage.options))
        for _ in range(cfg.epochs):
            # minibatches of whole groups, as the language-model trainer: a loss that
            # reads its group (P3O, PACS) sees all of it
            order = torch.randperm(P, generator=gen)
            for groups in order.chunk(cfg.minibatches):
                rows = torch.isin(group_ids, groups).nonzero(as_tuple=True)[0]
                logp = torch.log_softmax(logits, dim=0)[actions[rows]].unsqueeze(-1)
                loss, _ = parts.loss(
                    logprobs=logp,
                    old_logprobs=batch.logprobs[rows],
                    advantages=adv[rows],
                    response_mask=mask[rows],
                    ref_logprobs=batch.ref_logprobs[rows],
                    rollouts=batch.select(rows),
                )
                if parts.value is not None:
                    v_loss, _ = parts.value(
                        value.expand(len(rows), 1), batch.values[rows], returns[rows], mask[rows]
                    )
                    loss = loss + cfg.value_coef * v_loss
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        history.append(float(torch.softmax(logits.detach(), dim=0)[best]))

    reached = next((i + 1 for i, p in enumerate(history) if p >= cfg.target), None)
    return BanditResult(
        algorithm, cfg.seed, history[-1], reached, time.perf_counter() - start, history
    )


def _gae_options(options) -> GAEOptions:
    if not isinstance(options, GAEOptions):
        raise ValueError("an algorithm with a value loss needs the gae advantage estimator")
    return options
