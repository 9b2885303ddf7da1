"""The softmax bandit: every named algorithm, end to end, on pure tensors.

K arms with Bernoulli rewards in S states (one by default), a softmax table over them (a
`TablePolicy`, policies/table.py, sampled and evaluated through the policy protocol).
Each step the rollout source draws `prompts_per_step` states with the recipe's prompt
stage and `samples_per_prompt` actions for each (a group plays the role of a prompt's G
samples; each action is a one-token response), scores them, filters and refills as the
recipe's stages say; then the recipe's advantages, its advantage-time stages, and its
loss over minibatches of whole groups (with its learn-time stage), exactly as the
language-model trainer does. An algorithm works here before it is trusted on a model:
`policylab bandit` (part of `make demo`) prints the probability each algorithm puts on the
best arm, and tests/test_bandit.py requires at least 0.9 within the default budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from policylab import recipes as recipe_book
from policylab.algebra.advantages import GAEOptions, value_targets
from policylab.algebra.aggregate import global_normaliser
from policylab.algebra.bcpg import STEP_LABELS
from policylab.algebra.copo import ANSWERS
from policylab.policies.table import TablePolicy
from policylab.recipes.compose import components
from policylab.rollouts import Rollouts
from policylab.stages import Budget, RolloutSource, StageContext, build_pipeline
from policylab.stages.pipeline import WORKFLOW_COLUMNS
from policylab.workflows.single_turn import RolloutInfo


@dataclass(frozen=True)
class BanditConfig:
    arm_probs: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)  # success probability of each arm
    # S states ("prompts"): state s scales every arm's success by 1 − spread·s/(S − 1), so
    # later states are harder; one state is the classic bandit
    states: int = 1
    spread: float = 0.75
    prompts_per_step: int = 8  # groups per step (each a state drawn by the prompt stage)
    samples_per_prompt: int = 8  # G
    steps: int = 300
    minibatches: int = 2  # optimiser steps per batch; the second one is off-policy
    epochs: int = 1
    lr: float = 0.05  # Adam, on the logits (and the critic's value)
    value_coef: float = 0.5  # weight of the value loss for algorithms with a critic
    target: float = 0.9  # probability of the best arm that counts as solved
    # stages, as in TrainConfig: None = the recipe's
    sampler: str | None = None
    sampler_options: dict[str, Any] = field(default_factory=dict)
    selection: str | None = None
    selection_options: dict[str, Any] = field(default_factory=dict)
    max_gen_rounds: int = 10  # filter rounds per step (dynamic sampling)
    on_exhaust: str = "train_partial"  # near the optimum every group is all-correct
    seed: int = 0


@dataclass
class BanditResult:
    algorithm: str
    seed: int
    best_arm_prob: float  # final probability of the best arm (mean over states)
    steps_to_target: int | None  # first step at which it reached cfg.target
    seconds: float
    history: list[float] = field(default_factory=list)  # best-arm probability after each step
    samples: int = 0  # actions drawn, kept or not (the budget)


# what a bandit round carries beyond a plain rollout (so no annotator is needed)
BANDIT_COLUMNS = WORKFLOW_COLUMNS | {"values", "segment_ids", ANSWERS, STEP_LABELS, "states"}


def run_bandit(algorithm: str, config: BanditConfig | None = None, **changes) -> BanditResult:
    """Train a softmax table on the bandit with the named algorithm's components and
    stages, through the same rollout source and stages as the language-model trainer."""
    cfg = replace(config or BanditConfig(), **changes)
    if recipe_book.get(algorithm).workflow_options:
        raise ValueError(
            f"{algorithm} is an agent recipe: it plays multi-turn environments "
            "(docs/agents.md), and a bandit is one step"
        )
    from policylab.config_offpolicy import is_off_policy

    if is_off_policy(algorithm):
        raise ValueError(
            f"{algorithm} trains a deterministic actor and a Q critic from replay on a "
            "gymnasium task with Box actions (docs/control.md); the bandit's softmax table "
            "has no continuous action"
        )
    parts = components(
        algorithm,
        max_new_tokens=1,
        selection=cfg.selection,
        selection_overrides=cfg.selection_options,
    )
    pool = [{"state": s} for s in range(cfg.states)]
    pipeline = build_pipeline(cfg, parts, len(pool), provided=BANDIT_COLUMNS)
    gen = torch.Generator().manual_seed(cfg.seed)
    success = arm_success(cfg)
    best = int(torch.tensor(cfg.arm_probs).argmax())
    policy = TablePolicy(cfg.states, len(cfg.arm_probs))
    value = torch.zeros(cfg.states, requires_grad=True)  # V(s): the critic of each state
    params = [policy.logits, value] if parts.value is not None else [policy.logits]
    optimiser = torch.optim.Adam(params, lr=cfg.lr)
    workflow = TableRounds(policy, value, success, cfg.samples_per_prompt, gen)
    budget = Budget()
    ctx = StageContext(pool, workflow, budget, None, cfg.prompts_per_step)
    pipeline.setup(ctx)
    source = RolloutSource(pool, pipeline, workflow, budget, cfg)

    history: list[float] = []
    start = time.perf_counter()
    for step in range(cfg.steps):
        pipeline.prepare(step, ctx)
        collected = source.next()
        batch = collected.batch
        if len(batch):
            with torch.no_grad():
                estimate = parts.advantage.estimate(batch)
                adv, batch = estimate.advantages, batch.with_extras(estimate.columns)
                returns = None
                if parts.value is not None:
                    returns = value_targets(batch, _gae_options(parts.advantage.options))
                    batch = batch.replace(extras={**batch.extras, "returns": returns})
            batch, adv = pipeline.select(batch, adv, step, cfg.steps)
            _learn(policy, value, optimiser, parts, pipeline, batch, adv, cfg, gen)
        source.update(collected)
        history.append(float(policy.probs()[:, best].mean()))

    reached = next((i + 1 for i, p in enumerate(history) if p >= cfg.target), None)
    seconds = time.perf_counter() - start
    return BanditResult(algorithm, cfg.seed, history[-1], reached, seconds, history, budget.samples)


def arm_success(cfg: BanditConfig) -> torch.Tensor:
    """[S, K] success probability of each arm in each state."""
    arms = torch.tensor(cfg.arm_probs)
    if cfg.states == 1:
        return arms.unsqueeze(0)
    scale = 1 - cfg.spread * torch.arange(cfg.states) / (cfg.states - 1)
    return scale.unsqueeze(-1) * arms


class TableRounds:
    """The bandit's workflow: each example is a state; G actions per state from the
    table, Bernoulli rewards, one-token rows (`workflow(examples)`), and a scoring pass
    (`score`, VAS's)."""

    def __init__(self, policy: TablePolicy, value, success, G: int, generator) -> None:
        self.policy, self.value, self.success, self.G = policy, value, success, G
        self.generator = generator
        self.reference = torch.log_softmax(torch.zeros_like(policy.logits), dim=-1)  # uniform

    @torch.no_grad()
    def __call__(self, examples: list[dict], n: int | None = None) -> tuple[Rollouts, RolloutInfo]:
        G = n or self.G
        states = torch.tensor([e["state"] for e in examples]).repeat_interleave(G)
        B = len(states)
        drawn = self.policy.sample(states, generator=self.generator)
        actions = drawn.actions
        rewards = torch.bernoulli(self.success[states, actions], generator=self.generator)
        batch = Rollouts(
            rewards=rewards,
            response_mask=torch.ones(B, 1),
            group_ids=torch.arange(len(examples)).repeat_interleave(G),
            response_ids=actions.unsqueeze(-1),
            logprobs=drawn.logprobs.unsqueeze(-1),
            ref_logprobs=self.reference[states, actions].unsqueeze(-1),
            values=self.value.detach()[states].unsqueeze(-1).clone(),
            # what EMPG and COPO read: the policy's entropy, and the arm as the "answer";
            # an action is one step-less token, so BCPG-NSA weights nothing
            entropy=drawn.entropy.unsqueeze(-1),
            segment_ids=torch.full((B, 1), -1),
            extras={
                ANSWERS: [str(int(a)) for a in actions],
                STEP_LABELS: [[]] * B,
                "states": states,
            },
        )
        texts = [str(int(a)) for a in actions]
        info = RolloutInfo(texts, [str(int(s)) for s in states], {}, B, 0.0, 0.0)
        return batch, info

    def score(self, examples: list[dict], n: int, *, chunk: int = 16):
        """n fresh actions per state: accuracy [P, n], each action as a one-token response."""
        batch, info = self(examples, n)
        ids = batch.response_ids.view(len(examples), n).tolist()
        responses = [[[a] for a in row] for row in ids]
        return batch.rewards.view(len(examples), n), responses, info


def _learn(policy, value, optimiser, parts, pipeline, batch, adv, cfg, gen) -> None:
    """μ epochs over minibatches of whole groups (a loss that reads its group, P3O's or
    PACS's, sees all of it), as the language-model trainer; a learn-time stage (CAPO)
    masks tokens from the table's logits, the head of a one-hot state input."""
    states = batch.extras["states"]
    groups = torch.unique(batch.group_ids)
    token_mask = pipeline.token_mask
    for _ in range(cfg.epochs):
        order = groups[torch.randperm(len(groups), generator=gen)]
        for chosen in order.chunk(cfg.minibatches):
            rows = torch.isin(batch.group_ids, chosen).nonzero(as_tuple=True)[0]
            part = batch.select(rows)
            logp = policy.evaluate(states[rows], part.response_ids[:, 0]).logprobs.unsqueeze(-1)
            mask, normaliser = part.response_mask, None
            if token_mask is not None:
                head = table_head(policy, states[rows])
                kept = token_mask.mask(part, adv[rows], head, optimiser.param_groups[0]["lr"])
                options = parts.loss.options
                normaliser = global_normaliser(mask, options.loss_agg_mode, L_max=options.L_max)
                mask = mask * kept.token_weight
            loss, _ = parts.loss(
                logprobs=logp,
                old_logprobs=part.logprobs,
                advantages=adv[rows],
                response_mask=mask,
                ref_logprobs=part.ref_logprobs,
                rollouts=part,
                normaliser=normaliser,
            )
            if parts.value is not None:
                v = value[states[rows]].unsqueeze(-1)
                returns = part.extras["returns"]
                v_loss, _ = parts.value(v, part.values, returns, part.response_mask)
                loss = loss + cfg.value_coef * v_loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()


def table_head(policy: TablePolicy, states: torch.Tensor) -> dict[str, torch.Tensor]:
    """A table as a language model's head: logits = W·h with h the one-hot state, so a
    learn-time stage that models the head (CAPO) sees "head_input" [B, 1, S] and "logits"
    [B, 1, K] exactly as from a language model's forward pass."""
    S = policy.logits.shape[0]
    return {
        "head_input": torch.nn.functional.one_hot(states, S).float().unsqueeze(1),
        "logits": policy.logits.detach()[states].unsqueeze(1),
    }


def _gae_options(options) -> GAEOptions:
    if not isinstance(options, GAEOptions):
        raise ValueError("an algorithm with a value loss needs the gae advantage estimator")
    return options
