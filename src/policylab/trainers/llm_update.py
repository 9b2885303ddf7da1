"""The learn phase of the language-model trainer: μ epochs over minibatches of whole
groups, each minibatch one optimiser step accumulated over micro-batches with the
minibatch's global normaliser (algebra/aggregate.py), so micro-batching never changes the
gradient. A "learn" stage (CAPO) masks tokens of each micro-batch here, from the
micro-batch's own forward pass."""

from __future__ import annotations

import math
import time

import torch

from policylab.algebra.aggregate import global_normaliser
from policylab.algebra.tis import logprob_gap, truncated_is_weights
from policylab.config import TrainConfig
from policylab.distributed.ddp import learner_sync
from policylab.trainers.run import mean_metrics


def update(
    policy,
    optimiser,
    scheduler,
    loss_fn,
    batch,
    advantages,
    cfg: TrainConfig,
    generator: torch.Generator,
    token_mask=None,
    value_loss=None,
    scaler: torch.amp.GradScaler | None = None,
) -> dict[str, float]:
    """μ epochs; each splits the batch into `minibatches` of whole groups (one optimiser
    step each) and accumulates micro-batches with the minibatch's global normaliser.

    `token_mask`: a "learn" stage (stages/rollouts.py TokenMask: CAPO), called on each
    micro-batch with its forward pass (head input and logits) and the current lr; masked
    tokens leave the loss. The normaliser still counts them (it is fixed per minibatch before any
    forward, so that micro-batching stays exact) [ours]; under seq-mean-token-mean each
    row averages over its kept tokens, as CAPO's code does.

    `value_loss` (recipes with a critic, e.g. PPO with GAE): the policy's value head is fit
    to `batch.extras["returns"]` [B, T] against the rollout-time `batch.values`, added as
    `cfg.vf_coef` · L_v (the loss's own aggregation over the minibatch).

    `scaler` (float16, devices.py): each micro-batch's loss is multiplied by the loss scale
    before backward, the gradients divided by it before clipping, and a step whose
    gradients overflowed is skipped (torch.amp.GradScaler); None = no scaling.

    `cfg.distributed="ddp"` (distributed/ddp.py): every rank holds the whole batch and
    fixes the minibatch's normaliser from all of it, forwards its own share of the
    minibatch's groups, and the ranks' gradients are summed before clipping."""
    options = loss_fn.options
    sync = learner_sync(cfg)  # one process: all rows are ours, nothing is exchanged
    scaling = scaler if scaler is not None else torch.amp.GradScaler("cpu", enabled=False)
    groups = torch.unique(batch.group_ids)
    history: list[dict[str, float]] = []
    mismatch = None
    gaps: list[tuple[int, float, float]] = []  # (tokens, mean, max) before the first step
    optimiser_s = 0.0  # clip + optimiser step + schedule: the learn phase's last part
    for _ in range(cfg.epochs):
        order = groups[torch.randperm(len(groups), generator=generator)]
        for chosen in order.chunk(cfg.minibatches):
            rows = torch.isin(batch.group_ids, chosen).nonzero(as_tuple=True)[0]
            minibatch = batch.select(rows)
            normaliser = global_normaliser(
                minibatch.response_mask, options.loss_agg_mode, L_max=options.L_max
            )
            if value_loss is not None:
                v_norm = global_normaliser(
                    minibatch.response_mask, value_loss.options.loss_agg_mode
                )
            minibatch, minibatch_adv = sync.share(minibatch, advantages[rows])
            optimiser.zero_grad(set_to_none=True)
            metrics: list[tuple[int, dict[str, float]]] = []
            for micro in micro_batches(minibatch.group_ids, cfg.micro_batch_rows):
                part = minibatch.select(micro)
                part_adv = minibatch_adv[micro]
                forward = policy.evaluate(
                    part.extras["prompt_ids"],
                    part.response_ids,
                    mask=part.response_mask,
                    with_head=token_mask is not None,
                    observation_mask=part.observation_mask,
                )
                logp, entropy, kept = forward.logprobs, forward.entropy, part.response_mask
                masked = {}
                if token_mask is not None:
                    lr = scheduler.get_last_lr()[0]
                    chosen = token_mask.mask(part, part_adv, forward.head, lr)
                    kept, masked = kept * chosen.token_weight, chosen.metrics
                sampler = part.extras.get("sampler_logprobs", part.logprobs)
                if not history:  # policy unchanged yet: the engine's log-probs vs the learner's
                    real = part.response_mask
                    gaps.append((int(real.sum()), *logprob_gap(logp, sampler, real)))
                if cfg.tis_cap:  # each token's term × min(π_θ_old / π_sampler, C), detached
                    part_adv = part_adv * truncated_is_weights(
                        part.logprobs, sampler, part.response_mask, cfg.tis_cap
                    )
                loss, m = loss_fn(
                    logprobs=logp,
                    old_logprobs=part.logprobs,
                    advantages=part_adv,
                    response_mask=kept,
                    ref_logprobs=part.ref_logprobs,
                    rollouts=part,
                    normaliser=normaliser,
                )
                m.update(masked)
                if value_loss is not None:
                    v_loss, vf = value_loss(
                        forward.values,
                        part.values,
                        part.extras["returns"],
                        part.response_mask,
                        normaliser=v_norm,
                    )
                    loss = loss + cfg.vf_coef * v_loss
                    m.update(vf)
                scaling.scale(loss).backward()
                tokens = int(part.response_mask.sum())
                valid = part.response_mask > 0
                m["entropy"] = float(entropy[valid].mean()) if tokens else 0.0
                if mismatch is None and tokens:  # policy unchanged yet: sampler vs learner
                    mismatch = float((logp.detach() - part.logprobs)[valid].abs().mean())
                m["loss"] = float(loss.detach())
                metrics.append((tokens, m))
            sync.gradients(policy.parameters())  # DDP: Σ over ranks of the partial gradients
            metrics = sync.metrics(metrics)
            started = time.perf_counter()
            scaling.unscale_(optimiser)  # (no-op without a scaler)
            norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grad_clip or math.inf)
            scaling.step(optimiser)  # optimiser.step(), skipped when a gradient overflowed
            scaling.update()
            scheduler.step()
            optimiser_s += time.perf_counter() - started
            step = {**mean_metrics(metrics), "grad_norm": float(norm)}
            if scaling.is_enabled():
                step["loss_scale"] = scaling.get_scale()
            history.append(step)
    out = mean_metrics([(1, h) for h in history])
    out["engine/logprob_abs_diff"] = mismatch or 0.0
    counted = sum(t for t, _, _ in gaps)
    out["engine/logprob_gap_mean"] = sum(t * g for t, g, _ in gaps) / max(counted, 1)
    out["engine/logprob_gap_max"] = max((g for _, _, g in gaps), default=0.0)
    out["perf/optimiser_s"] = optimiser_s
    return out


def micro_batches(group_ids: torch.Tensor, rows: int) -> list[torch.Tensor]:
    """Row indices of each micro-batch: whole groups, in order, each micro-batch at most
    `rows` rows unless one group is larger (0 = everything at once). Whole groups let a
    loss that reads its group (P3O's pairs, PACS's leave-one-out score) see all of it."""
    if not rows:  # (a DDP rank may hold no group of a small minibatch)
        return [torch.arange(len(group_ids))] if len(group_ids) else []
    members_of: dict[int, list[int]] = {}
    for i, g in enumerate(group_ids.tolist()):
        members_of.setdefault(g, []).append(i)
    out, current = [], []
    for members in members_of.values():
        if current and len(current) + len(members) > rows:
            out.append(torch.tensor(current))
            current = []
        current += members
    if current:
        out.append(torch.tensor(current))
    return out
