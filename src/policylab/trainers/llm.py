"""The language-model trainer: one loop, read top to bottom.

Per step: rounds of (draw prompts → G samples each → rewards → selection) until
prompts_per_step groups are kept (one round unless the selection drops groups, as DAPO's
dynamic sampling does) → advantages on the kept groups (the recipe's estimator) → μ epochs
over minibatches of whole groups, each minibatch accumulated over micro-batches with the
minibatch's global normaliser → clip grad norm → AdamW step → metrics. A reference model
is loaded only when a KL term needs one. Held-out evaluation before training, every
`eval_every` steps and at the end; the run ends after `steps` steps, or earlier once
`max_samples` samples were generated.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass

import torch

from policylab import rewards, tasks
from policylab.algebra.advantages import group_stats
from policylab.algebra.capo import CurvatureState
from policylab.algebra.selection import AllOptions, Selection, select_all
from policylab.algebra.shaping import shape_rewards
from policylab.config import ConfigError, TrainConfig
from policylab.engines import HFEngine, Sampling
from policylab.evaluate import evaluate
from policylab.models import load_model, sequence_logprobs
from policylab.recipes.compose import components
from policylab.samplers import UniformSampler, sampler_for
from policylab.trainers.llm_update import update
from policylab.trainers.run import Run, lr_lambda, progress_bar
from policylab.workflows.augment import DifficultyAugmenter, augment_round
from policylab.workflows.offline import label_steps, offline_set
from policylab.workflows.rounds import collect_groups
from policylab.workflows.single_turn import rollout, score_prompts

log = logging.getLogger(__name__)

CURVES = [
    "reward/mean",
    "eval/greedy_accuracy",
    "eval/sampled_reward",
    "kl/ref",
    "entropy",
    "response/length",
]


@dataclass
class TrainResult:
    run_dir: str
    before: dict[str, float]
    after: dict[str, float]
    steps: int
    seconds: float


def train(cfg: TrainConfig, *, resume: bool = False) -> TrainResult:
    """Train `cfg.model` on `cfg.task` with the algorithm `cfg.algo`."""
    parts = components(
        cfg.algo,
        max_new_tokens=cfg.max_new_tokens,
        advantage_overrides=cfg.advantage,
        loss_overrides=cfg.loss,
        selection=cfg.selection,
        selection_overrides=cfg.selection_options,
        shaping_overrides=cfg.reward_shaping,
    )
    if parts.value is not None:
        raise ConfigError(
            f"{cfg.algo!r} needs a critic; language-model critics are not "
            "supported yet (use it on control tasks)"
        )
    task = tasks.get(cfg.task, **cfg.task_knobs)
    # the task's own verifier, built with this run's knobs, answers to the task's name
    default_reward = task.name if cfg.task in tasks.names() else task.reward_name
    reward_fn = rewards.combine(
        cfg.rewards or {default_reward: 1.0},
        failure_reward=cfg.failure_reward,
        functions={task.name: task.reward},
    )
    resolved = {
        "advantage": {"name": parts.advantage.name, **asdict(parts.advantage.options)},
        "loss": {"name": parts.loss.name, **asdict(parts.loss.options)},
        "selection": {"name": parts.selection.name, **asdict(parts.selection.options)},
    }
    pool = task.examples(
        "train",
        min(cfg.train_pool, getattr(task, "rows", {}).get("train", cfg.train_pool)),
        seed=cfg.seed,
    )
    if cfg.offline_prompts > len(pool):
        raise ConfigError(
            f"offline_prompts = {cfg.offline_prompts} exceeds the {len(pool)} training prompts "
            f"of {task.name} (train_pool = {cfg.train_pool})"
        )
    # the sampler's options are checked before any model loads or any folder is made
    sampler_name, sampler_options, sampler = sampler_for(
        cfg.algo, cfg.sampler, cfg.sampler_options, len(pool), cfg.seed
    )
    resolved["sampler"] = {"name": sampler_name, **sampler_options}
    augmenter = None
    if cfg.augment == "difficulty":
        augmenter = DifficultyAugmenter.from_options(cfg.augment_options, seed=cfg.seed)
    run = Run(cfg.folder, {**cfg.model_dump(), "resolved": resolved}, resume=resume)
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_model(cfg.model)
    needs_ref = parts.loss.options.needs_reference or parts.advantage.options.kl_coef > 0
    reference = load_model(cfg.model)[0].eval().requires_grad_(False) if needs_ref else None
    engine = HFEngine(model, tokenizer)
    sampling = Sampling(
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        max_new_tokens=cfg.max_new_tokens,
        stop_strings=tuple(cfg.stop_strings),
    )
    generator = torch.Generator().manual_seed(cfg.seed)
    # BCPG-NSA's step labels (β ≠ 1): the task's step judge, if it has one
    judge = getattr(task, "step_labels", None)
    needs_labels = getattr(parts.loss.options, "needs_step_labels", False)
    if needs_labels and judge is None:
        log.warning("%s has no step judge: no step is labelled, so NSA weights nothing", task)

    def sample_round(examples):
        """G completions of each example → rewards (→ step labels, when the loss reads them)."""
        batch, info = rollout(
            examples,
            engine,
            tokenizer,
            sampling,
            cfg.samples_per_prompt,
            reward_fn,
            generator=generator,
            mask_truncated=cfg.mask_truncated,
        )
        if needs_labels:
            batch = label_steps(batch, examples, tokenizer, judge)
        return batch, info

    # CAPO's model of the optimiser: Adam moments of the LM head rows, checkpointed
    capo = parts.selection.name == "capo"
    curvature = CurvatureState.from_options(parts.selection.options) if capo else None
    optimiser = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    updates = cfg.steps * cfg.epochs * cfg.minibatches
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lr_lambda(cfg, updates))

    # what the run has spent: every generated sample and token counts, kept or not (the
    # arena's budget); wall-clock carried over a resume
    start_step, evals, spent, elapsed = 0, [], {"samples": 0, "tokens": 0}, 0.0
    offline = offline_set(cfg, run.dir, pool, sample_round, spent) if cfg.offline_prompts else None
    if offline is not None:  # the run draws stored groups, in seeded epochs
        sampler = UniformSampler(offline.groups, seed=cfg.seed)
    restored = run.load_checkpoint() if resume else None
    if restored is not None:
        path, state = restored
        model.load_state_dict(load_model(str(path / "model"))[0].state_dict())  # exact fp32
        optimiser.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        sampler.load_state_dict(state["sampler"])
        generator.set_state(state["generator"])
        if curvature is not None:
            curvature.load_state_dict(state["curvature"])
        if augmenter is not None:
            augmenter.load_state_dict(state["augmenter"])
        start_step, evals = state["step"], state["evals"]
        spent, elapsed = state.get("spent", spent), state.get("elapsed_s", 0.0)
        log.info("resumed %s at step %d", run.dir, start_step)

    def held_out(step: int) -> dict[str, float]:
        scores = evaluate(
            model,
            tokenizer,
            task,
            n=cfg.eval_n,
            seed=cfg.eval_seed,
            max_new_tokens=cfg.max_new_tokens,
        ).as_dict()
        scores["budget/samples"] = spent["samples"]
        scores["budget/tokens"] = spent["tokens"]
        scores["time/elapsed_s"] = elapsed + time.perf_counter() - started
        run.log(step, scores, kind="eval")
        evals.append({"step": step, **scores})
        return scores

    def generate_round():
        """One round: prompts_per_step prompts → G completions each → rewards (or, with
        offline data, prompts_per_step stored groups)."""
        indices = sampler.sample(cfg.prompts_per_step)
        if offline is not None:
            return offline.draw(indices)
        examples = [pool[i] for i in indices]
        batch, info = sample_round(examples)
        if augmenter is not None:  # Reg-GRPO: too easy → harder variant, too hard → easier
            batch, info, extra = augment_round(examples, batch, info, augmenter, task, sample_round)
            spent["samples"] += extra
        return indices, batch, info

    def refresh_sampler(done: int) -> dict[str, float]:
        """VAS's scoring pass when due: n_score fresh completions of the prompts it asks
        for, charged to the budget like any other sample."""
        if not getattr(sampler, "needs_refresh", None) or not sampler.needs_refresh(done):
            return {}
        t = time.perf_counter()
        chosen = sampler.to_score()
        correct, responses, info = score_prompts(
            [pool[i] for i in chosen],
            engine,
            tokenizer,
            sampling,
            sampler.n_score,
            reward_fn,
            generator=generator,
            chunk=cfg.prompts_per_step,
        )
        sampler.refresh(chosen, correct, responses)
        spent["samples"] += correct.numel()
        spent["tokens"] += info.generated_tokens
        return {
            "perf/vas_refresh_s": time.perf_counter() - t,
            "vas/refresh_samples": float(correct.numel()),
        }

    def out_of_samples() -> bool:  # a run on offline data generates nothing more
        return bool(cfg.max_samples) and spent["samples"] >= cfg.max_samples and not offline

    started = time.perf_counter()
    if start_step == 0:
        held_out(0)
        log.info(
            "with one inner epoch the policy loss is ~0 at every step (ratio 1, centred "
            "advantages) while its gradient is not: watch reward, grad_norm and "
            "adv/zero_std_frac instead"
        )
    fields = {"reward": "reward", "acc": "held-out", "tps": "tok/s", "split": "gen/score/learn"}
    with progress_bar(f"{cfg.algo} on {task.name}", cfg.steps, fields, cfg.progress) as bar:
        job = bar.add_task(
            f"{cfg.algo} · {task.name}",
            total=cfg.steps,
            completed=start_step,
            reward="-",
            acc=f"{evals[-1]['eval/greedy_accuracy']:.2f}",
            tps="-",
            split="-",
        )
        step = start_step
        while step < cfg.steps and not out_of_samples():
            step += 1
            # 1. rollouts: VAS's scoring pass when due; then rounds of prompts → G
            # completions → rewards → selection, until prompts_per_step groups are kept
            t0 = time.perf_counter()
            refreshed = refresh_sampler(step - 1)
            collected = collect_groups(
                generate_round,
                parts.selection if parts.selection.stage == "rollouts" else _keep_all,
                cfg.prompts_per_step,
                max_rounds=cfg.max_gen_rounds,
                on_exhaust=cfg.on_exhaust,
            )
            batch, info = collected.batch, collected.info
            t1 = time.perf_counter()
            spent["samples"] += collected.samples if offline is None else 0
            spent["tokens"] += info.generated_tokens
            batch = shape_rewards(batch, parts.shaping, cfg.max_new_tokens)
            if reference is not None and len(batch) > 0:
                with torch.no_grad():
                    ref, _ = sequence_logprobs(
                        reference,
                        batch.extras["prompt_ids"],
                        batch.response_ids,
                        batch.response_mask,
                        pad_id=tokenizer.pad_token_id,
                        temperature=cfg.temperature,
                    )
                batch = batch.replace(ref_logprobs=ref)
            # 2. advantages on the kept groups (the reference forward is timed with them);
            # a step that kept no group (on_exhaust=train_partial) makes no update
            kept = len(batch) > 0
            advantages = parts.advantage(batch) if kept else batch.response_mask.float()
            adv_metrics = parts.advantage.metrics(batch) if kept else {}
            scored, chosen = (batch, advantages), None
            if kept and parts.selection.stage == "advantages":  # D³S: rows and tokens
                chosen = parts.selection(
                    batch, advantages, {"step": step - 1, "total_steps": cfg.steps}
                )
                advantages = advantages[chosen.row_keep]
                batch = chosen.apply(batch)
            t2 = time.perf_counter()
            # 3. learn: μ epochs × minibatches of whole groups × micro-batches
            learn = {}
            if kept:
                learn = update(
                    model,
                    optimiser,
                    scheduler,
                    parts.loss,
                    batch,
                    advantages,
                    cfg,
                    tokenizer.pad_token_id,
                    generator,
                    mask_tokens=parts.selection if parts.selection.stage == "learn" else None,
                    mask_state={"curvature": curvature},
                )
            t3 = time.perf_counter()
            sampler.update(collected.indices, collected.outcomes)
            # 4. metrics, samples, evaluation, checkpoint
            metrics = _step_metrics(*scored, info, learn, scheduler, t0, t1, t2, t3)
            if parts.selection.stage == "rollouts" and parts.selection.name != "all":
                metrics.update(collected.metrics)
            metrics.update({**adv_metrics, **(chosen.metrics if chosen else {})})
            metrics.update({**sampler.metrics(), **refreshed})
            metrics.update(augmenter.metrics() if augmenter else {})
            metrics.update({"budget/samples": spent["samples"], "budget/tokens": spent["tokens"]})
            run.log(step, metrics)
            run.log_samples(
                step,
                [
                    {
                        "prompt": info.prompts[i],
                        "completion": info.completions[i],
                        "reward": float(collected.outcomes[i]),
                    }
                    for i in range(min(cfg.samples_per_log, len(info.completions)))
                ],
            )
            last = step == cfg.steps or out_of_samples()
            if last or (cfg.eval_every and step % cfg.eval_every == 0):
                held_out(step)
            if last or (cfg.save_every and step % cfg.save_every == 0):
                run.save_checkpoint(
                    step,
                    {
                        "step": step,
                        "optimizer": optimiser.state_dict(),
                        "scheduler": scheduler.state_dict(),
                        "sampler": sampler.state_dict(),
                        "generator": generator.get_state(),
                        "curvature": curvature.state_dict() if curvature else None,
                        "augmenter": augmenter.state_dict() if augmenter else None,
                        "evals": evals,
                        "spent": spent,
                        "elapsed_s": elapsed + time.perf_counter() - started,
                    },
                    model=model,
                    tokenizer=tokenizer,
                )
            bar.update(
                job,
                completed=step,
                reward=f"{metrics['reward/mean']:.3f}",
                acc=f"{evals[-1]['eval/greedy_accuracy']:.2f}",
                tps=f"{metrics['perf/tokens_per_s']:.0f}",
                split=f"{metrics['perf/generate_frac']:.0%}/"
                f"{metrics['perf/score_frac']:.0%}/{metrics['perf/learn_frac']:.0%}",
            )

    seconds = elapsed + time.perf_counter() - started
    before, after = evals[0], evals[-1]
    run.write_curves(CURVES, title=f"{cfg.algo} on {task.name} (seed {cfg.seed})")
    rows = run.metrics("train")
    run.write_summary(summary_table(cfg, before, after, rows, seconds, step, spent["samples"]))
    run.close()
    return TrainResult(str(run.dir), before, after, step, seconds)


def _keep_all(batch) -> Selection:
    """The rounds' selection when the configured one runs later (D³S, CAPO)."""
    return select_all(batch, None, AllOptions())


def _step_metrics(batch, advantages, info, learn, scheduler, t0, t1, t2, t3) -> dict[str, float]:
    rewards = batch.rewards
    finite = rewards[torch.isfinite(rewards)]
    stats = group_stats(rewards, batch.group_ids)
    valid = batch.response_mask > 0
    total = t3 - t0
    metrics = {
        "reward/mean": float(finite.mean()) if len(finite) else math.nan,
        "reward/std": float(finite.std()) if len(finite) > 1 else 0.0,
        "reward/solved_frac": float((finite >= 1.0).float().mean()) if len(finite) else 0.0,
        **{f"reward/{k}": float(v.mean()) for k, v in batch.reward_parts.items()},
        "reward/failures": float(sum(info.failures.values())),
        "adv/zero_std_frac": stats.zero_std_frac,
        "adv/abs_mean": float(advantages[valid].abs().mean()) if valid.any() else 0.0,
        "response/length": float(batch.response_mask.sum(-1).float().mean()),
        "response/truncated_frac": float(batch.truncated.float().mean()),
        "lr": scheduler.get_last_lr()[0],
        "perf/step_s": total,
        "perf/tokens_per_s": info.generated_tokens / max(total, 1e-9),
        "perf/generate_frac": info.generate_s / total,
        "perf/score_frac": info.score_s / total,
        "perf/reference_frac": (t2 - t1) / total,
        "perf/learn_frac": (t3 - t2) / total,
        **learn,
    }
    return metrics


def summary_table(
    cfg: TrainConfig,
    before: dict,
    after: dict,
    rows: list[dict],
    seconds: float,
    steps: int,
    samples: int,
) -> str:
    """summary.md: the held-out scores before and after, and the run's throughput."""
    tokens = sum(r.get("perf/tokens_per_s", 0) * r.get("perf/step_s", 0) for r in rows)
    lines = [
        f"# {cfg.algo} on {cfg.task} (model {cfg.model}, seed {cfg.seed})",
        "",
        "| held-out (test split) | before | after | change |",
        "|---|---|---|---|",
    ]
    for key, label in (
        ("eval/greedy_accuracy", "greedy accuracy"),
        ("eval/greedy_reward", "greedy reward"),
        ("eval/sampled_reward", "sampled reward (T=1)"),
    ):
        lines.append(
            f"| {label} | {before[key]:.3f} | {after[key]:.3f} | {after[key] - before[key]:+.3f} |"
        )
    lines += [
        "",
        f"{steps} steps of {cfg.prompts_per_step} prompts × "
        f"{cfg.samples_per_prompt} samples ({samples} samples generated) in {seconds:.0f} s "
        f"({seconds / max(steps, 1):.2f} s/step, "
        f"{tokens / max(seconds, 1e-9):.0f} generated tokens/s overall).",
        "",
    ]
    return "\n".join(lines)
