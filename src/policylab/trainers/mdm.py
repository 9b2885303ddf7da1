"""The masked-diffusion-LM trainer: d1 / d2 (papers/seed_generative.md G1.3, G1.4, G1.7),
one loop read top to bottom.

Per step: prompts_per_step training prompts, G completions each, decoded by G1.2 (the
reveal step of every token kept as `segment_ids` and `extras["reveal"]`) → the task's
verifier → advantages (the recipe's estimator: `grpo` with scale none) → μ mask seeds
(drawn from {0, …, 4095}, or all 42 without `random_masking`) and, before any update,
the old and reference log-probs under each seed from the recipe's `mdm_logprob` estimator
→ μ inner iterations, iteration j scoring with seed j so r = 1 at θ = θ_old [code d1:
_generate_and_score_completions, compute_loss] → the recipe's policy loss (`ppo_clip` +
k3, token-mean over the completion mask) → clip grad norm → AdamW step → metrics, held-out
greedy accuracy, checkpoint. `estimator/gap` = mean |one_step − exact_steps| per token on
the step's rows (every `GAP_EVERY` steps, whatever the recipe's estimator).

Co-GRPO (G1.5, a table with `learn_schedule`; trainers/mdm_schedule.py): the rollouts are
decoded with schedule actions drawn from π_φ, tokens are scored at their step's τ_s, and
each row holds its L token columns then S schedule columns (log π_φ(a_s)) in one
`ppo_clip`; φ has its own Adam, kept by the checkpoint.

The run goes here when `--model` is a folder written by `python -m policylab.pretrain_mdm`
(routing.py). The recipe's `training` table sets what TrainConfig has no field for (the
estimator, its segments N, p_prompt, random_masking, decoding steps, block, remasking,
score_temperature); μ (`epochs`), G (`samples_per_prompt`), lr, grad_clip and τ_s
(`temperature`) are the config's, as in every language-model run — the table records the
papers' values for them (`policylab describe diffu_grpo`).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from policylab import recipes, tasks
from policylab.algebra.aggregate import global_normaliser
from policylab.config import ConfigError, TrainConfig
from policylab.engines.base import Sampling
from policylab.engines.mdm import MDMEngine
from policylab.models import build_tokenizer
from policylab.policies.masked_lm import MaskedDiffusionLM, MDMSampling, is_mdm_folder, left_pad
from policylab.policies.mdm_logprob import MDMLogprobConfig, mdm_logprob, score_temperature
from policylab.pretrain_mdm import encode
from policylab.recipes.compose import components
from policylab.rollouts import Rollouts
from policylab.trainers.llm import TrainResult
from policylab.trainers.mdm_schedule import Schedule, ScheduleRun, cat_columns
from policylab.trainers.run import Run, lr_lambda, run_options

log = logging.getLogger(__name__)

GAP_EVERY = 20  # [G1.8] estimator/gap every 20 steps
MASK_SEEDS = 4096  # [code d1] mask seeds drawn from {0, …, 4095}
FIXED_SEED = 42  # [code d1] the seed of every iteration without random_masking


@dataclass(frozen=True)
class MDMRun:
    """The settings of one MDM run, resolved from the recipe's table and the config."""

    estimator: str
    logprob: MDMLogprobConfig
    sampling: MDMSampling
    random_masking: bool
    epochs: int
    samples_per_prompt: int
    lr: float
    grad_clip: float
    schedule: ScheduleRun | None = None  # Co-GRPO's π_φ (a table with `learn_schedule`)


def is_mdm_run(cfg) -> bool:
    """A language-model run whose model is a saved masked diffusion LM."""
    return isinstance(getattr(cfg, "model", None), str) and is_mdm_folder(cfg.model)


# the TrainConfig fields this trainer reads; another one set by the user is refused (it
# would be silently ignored: selection, lora, rewards, top_p, max_samples, ...)
READS = {
    "algo", "task", "task_knobs", "model", "seed", "steps", "prompts_per_step",
    "samples_per_prompt", "epochs", "lr", "weight_decay", "grad_clip", "temperature",
    "advantage", "loss", "train_pool", "eval_every", "eval_n", "eval_seed", "save_every",
    "run_dir", "progress", "report_to", "max_samples", "keep_checkpoints",
}  # fmt: skip


def needs_mdm(algo: str | None) -> bool:
    """Whether `algo` is a masked-diffusion recipe (its training table names an estimator)."""
    return algo in recipes.recipes and bool(recipes.get(algo).training.get("estimator"))


def settings(cfg: TrainConfig) -> MDMRun:
    """The run's settings, checked before the model loads: the recipe must name an
    `mdm_logprob` estimator; decoding, scoring and τ_s must be valid (τ_s > 0, G1.9); no
    field the trainer does not read may be set."""
    unread = sorted(  # set away from its default (a resumed run's config sets every field)
        name
        for name, field in type(cfg).model_fields.items()
        if name not in READS and getattr(cfg, name) != field.get_default(call_default_factory=True)
    )
    if unread:
        raise ConfigError(
            f"a masked diffusion LM run does not use {', '.join(unread)}; its fields: "
            f"{', '.join(sorted(READS))}"
        )
    recipe = recipes.get(cfg.algo)
    table = {k: s.value for k, s in recipe.training.items()}
    if table.get("estimator") not in mdm_logprob:
        raise ConfigError(
            f"algorithm {cfg.algo!r} does not train a masked diffusion LM (--model "
            f"{cfg.model!r} is one); accepted: {', '.join(mdm_recipes())}"
        )
    try:
        sampling = MDMSampling(
            length=cfg_length(cfg),
            steps=table["decode_steps"],
            block=table["block"],
            temperature=cfg.temperature,
            remasking=table["remasking"],
        )
        logprob = MDMLogprobConfig(
            prompt_mask_p=table["prompt_mask_p"],
            segments=table["segments"],
            steps=sampling.steps,
            temperature=score_temperature(table["score_temperature"], sampling.temperature),
        )
        schedule = None
        if table.get("learn_schedule"):
            at_sampling = table["score_temperature"] == "sampling"
            schedule = ScheduleRun.from_table(table, at_sampling)
    except ValueError as err:
        raise ConfigError(f"algorithm {cfg.algo!r}: {err}") from None
    return MDMRun(
        table["estimator"],
        logprob,
        sampling,
        bool(table["random_masking"]),
        cfg.epochs,
        cfg.samples_per_prompt,
        cfg.lr,
        cfg.grad_clip,
        schedule,
    )


def mdm_recipes() -> list[str]:
    return [n for n in recipes.names() if recipes.get(n).training.get("estimator")]


def cfg_length(cfg: TrainConfig) -> int:
    return MaskedDiffusionLM.load_config(cfg.model).completion_length


def train(cfg: TrainConfig, *, resume: bool = False, callbacks=()) -> TrainResult:
    """Train the MDM in `cfg.model` on `cfg.task` with `cfg.algo` (see the module doc)."""
    run_cfg = settings(cfg)
    parts = components(
        cfg.algo,
        max_new_tokens=run_cfg.sampling.length,
        advantage_overrides=cfg.advantage,
        loss_overrides=cfg.loss,
    )
    task = tasks.get(cfg.task, **cfg.task_knobs)
    pool = task.examples("train", cfg.train_pool, seed=cfg.seed)
    heldout = task.examples("test", tasks.eval_size(task, cfg.eval_n), seed=cfg.eval_seed)
    tokenizer = build_tokenizer()
    torch.manual_seed(cfg.seed)
    model = MaskedDiffusionLM.load(cfg.model)
    sampling = run_cfg.sampling
    engine = MDMEngine(
        model, tokenizer, steps=sampling.steps, block=sampling.block, remasking=sampling.remasking
    )
    reference = None
    if parts.loss.options.needs_reference:  # the initial model, frozen [code d1: adapters off]
        reference = copy.deepcopy(model).eval().requires_grad_(False)
    schedule = None
    if run_cfg.schedule is not None:  # Co-GRPO: π_φ at the hand schedule, its reference π_φ0
        schedule = Schedule(run_cfg.schedule, sampling.steps, cfg.temperature, bool(reference))
    optimiser = torch.optim.AdamW(model.parameters(), lr=run_cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lr_lambda(cfg, cfg.steps * run_cfg.epochs)
    )
    resolved = {"mdm": {k: str(v) for k, v in run_cfg.__dict__.items()}}
    # the starting weights (the KL reference): a resume must start from the same ones
    resolved["mdm"]["model_sha256"] = weights_digest(cfg.model)
    if resume:
        check_same_start(cfg.folder, resolved["mdm"]["model_sha256"], cfg.model)
    run = Run(
        cfg.folder,
        {**cfg.model_dump(), "resolved": resolved},
        resume=resume,
        **run_options(cfg),
        callbacks=callbacks,
    )
    generator = torch.Generator().manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    step, evals, started = 0, [], time.perf_counter()
    rows_per_step = cfg.prompts_per_step * run_cfg.samples_per_prompt

    def spent(at: int) -> dict:
        return {
            "budget/samples": at * rows_per_step,
            "time/elapsed_s": time.perf_counter() - started,
        }

    if resume and (restored := run.load_checkpoint()) is not None:
        state = restored[1]
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        generator.set_state(state["generator"])
        rng.setstate(state["rng"])
        step, evals = state["step"], state["evals"]
        if schedule is not None:
            schedule.load(state["schedule"])
    if step == 0:
        evals.append(
            held_out(engine, tokenizer, task, heldout, run_cfg, run, 0, spent(0), schedule)
        )

    def spent_all(at: int) -> bool:  # the arena's sample budget (max_samples), if set
        return bool(cfg.max_samples) and at * rows_per_step >= cfg.max_samples  # 0: no cap

    while step < cfg.steps and not run.stopping and not spent_all(step):
        step += 1
        t0 = time.perf_counter()
        # 1. rollouts: G decoded completions per prompt, scored by the task's verifier
        examples = [pool[rng.randrange(len(pool))] for _ in range(cfg.prompts_per_step)]
        batch = rollout(engine, tokenizer, task, examples, run_cfg, generator, schedule)
        tau = schedule.token_temperature(batch) if schedule else None  # τ_s per token
        t1 = time.perf_counter()
        # 2. advantages (grpo, scale none: A = R − mean_g R)
        estimate = parts.advantage.estimate(batch)
        advantages = estimate.advantages
        # 3. μ mask seeds; old and reference log-probs under each, before any update
        seeds = mask_seeds(run_cfg, generator)
        old = [score(model, batch, run_cfg, s, no_grad=True, temperature=tau)[0] for s in seeds]
        ref = (
            [score(reference, batch, run_cfg, s, no_grad=True, temperature=tau)[0] for s in seeds]
            if reference
            else None
        )
        old_phi, ref_phi = schedule.old(batch) if schedule else (None, None)
        t2 = time.perf_counter()
        # 4. learn: iteration j scores with seed j, one minibatch of every row
        mask = batch.response_mask
        update_theta, update_phi = schedule.steps_now(step) if schedule else (True, True)
        history = []
        for j, seed in enumerate(seeds):
            logp, passes = score(model, batch, run_cfg, seed, temperature=tau)
            old_j, ref_j = old[j], None if ref is None else ref[j]
            adv_j, mask_j = advantages, mask
            if schedule:  # Co-GRPO's row: L token columns, then S schedule columns (G0.2)
                logp, mask_j, adv_j = schedule.row(logp, batch, advantages, mask)
                old_j, ref_j = cat_columns(old_j, old_phi), cat_columns(ref_j, ref_phi)
            loss, m = parts.loss(
                logprobs=logp,
                old_logprobs=old_j,
                advantages=adv_j,
                response_mask=mask_j,
                ref_logprobs=ref_j,
                rollouts=batch,
                normaliser=global_normaliser(mask_j, parts.loss.options.loss_agg_mode),
            )
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), run_cfg.grad_clip or 1e9)
            if update_theta:
                optimiser.step()
            scheduler.step()
            if schedule:
                schedule.update(run_cfg.grad_clip, update_phi)
            history.append({**m, "loss": float(loss.detach()), "grad_norm": float(norm)})
        t3 = time.perf_counter()
        # 5. metrics, evaluation, checkpoint
        metrics = {k: sum(h[k] for h in history) / len(history) for k in history[0]}
        metrics.update(estimate.metrics)
        if schedule:
            metrics.update(schedule.metrics())
        metrics.update(
            {
                "reward/mean": float(batch.rewards.mean()),
                "response/length": float(mask.sum(1).float().mean()),
                "estimator/passes_per_row": passes,
                "lr": scheduler.get_last_lr()[0],
                "budget/samples": step * len(batch),
                "time/rollout_s": t1 - t0,
                "time/score_s": t2 - t1,
                "time/learn_s": t3 - t2,
            }
        )
        if step % GAP_EVERY == 0 or step == 1:
            metrics["estimator/gap"] = estimator_gap(model, batch, run_cfg, seeds[0], tau)
        run.log(step, metrics)
        last = step == cfg.steps or run.stopping or spent_all(step)
        if last or (cfg.eval_every and step % cfg.eval_every == 0):
            evals.append(
                held_out(
                    engine, tokenizer, task, heldout, run_cfg, run, step, spent(step), schedule
                )
            )
        if last or (cfg.save_every and step % cfg.save_every == 0):
            state = {
                "step": step,
                "model": model.state_dict(),
                "optimizer": optimiser.state_dict(),
                "scheduler": scheduler.state_dict(),
                "generator": generator.get_state(),
                "rng": rng.getstate(),
                "evals": evals,
            }
            if schedule:
                state["schedule"] = schedule.state()
            run.save_checkpoint(step, state)
    model.save(run.dir / "model", {"algo": cfg.algo, "task": cfg.task, "steps": step})
    if schedule:
        torch.save(schedule.policy.state_dict(), run.dir / "model" / "schedule.pt")
    run.close()
    return TrainResult(str(run.dir), evals[0], evals[-1], step, time.perf_counter() - started)


def weights_digest(folder: str) -> str:
    """sha256 of an MDM folder's weights file."""
    return hashlib.sha256((Path(folder) / "model.safetensors").read_bytes()).hexdigest()


def check_same_start(run_dir, digest: str, model: str) -> None:
    """A resumed run's model folder still holds the weights it started from: its reference
    for the KL (not in the checkpoint) is rebuilt from them."""
    path = Path(run_dir) / "config.yaml"
    saved = yaml.safe_load(path.read_text()) if path.is_file() else None
    before = ((saved or {}).get("resolved") or {}).get("mdm", {}).get("model_sha256")
    if before is not None and before != digest:
        raise ValueError(
            f"cannot resume {run_dir}: --model {model!r} holds other weights than the run "
            f"started from (sha256 {digest[:12]}… vs {before[:12]}…); its KL reference would "
            "change. Restore that folder or start a new run_dir"
        )


def rollout(
    engine: MDMEngine, tokenizer, task, examples, run_cfg: MDMRun, generator, schedule=None
) -> Rollouts:
    """G completions per example, decoded by G1.2 (`MDMEngine.generate`), scored by the
    task's verifier: rows with `segment_ids` = reveal and extras prompt_ids [B, P]
    (left-padded), reveal and, with a Co-GRPO schedule, schedule_actions [B, S, 2]."""
    n = run_cfg.samples_per_prompt
    model = engine.model
    prompts, _ = encode(tokenizer, examples, run_cfg.sampling.length, model.eos_id)
    policy = schedule.policy if schedule else None
    out = engine.generate(prompts, n, engine_sampling(run_cfg.sampling), generator, policy)
    columns = {c: [e[c] for e in examples for _ in range(n)] for c in task.columns}
    row_prompts = [e["prompt"] for e in examples for _ in range(n)]
    rewards = torch.tensor(task.reward(row_prompts, out.texts, **columns), dtype=torch.float32)
    padded = left_pad([p for p in prompts for _ in range(n)], model.pad_id)
    return Rollouts(
        rewards=rewards,
        response_mask=out.response_mask,
        group_ids=out.prompt_index,
        response_ids=out.response_ids,
        segment_ids=out.reveal,
        truncated=torch.tensor([r == "length" for r in out.finish_reason]),
        extras={
            "prompt_ids": padded,
            "reveal": out.reveal,
            "texts": out.texts,
            **({} if policy is None else {"schedule_actions": out.schedule_actions}),
        },
    )


def engine_sampling(sampling: MDMSampling, temperature: float | None = None) -> Sampling:
    """The engine's request for `sampling`'s canvas at τ_s (or `temperature`)."""
    tau = sampling.temperature if temperature is None else temperature
    return Sampling(temperature=tau, max_new_tokens=sampling.length)


def mask_seeds(run_cfg: MDMRun, generator: torch.Generator) -> list[int]:
    """μ prompt-mask seeds: drawn from {0, …, 4095}, or all 42 [code d1]."""
    if not run_cfg.random_masking:
        return [FIXED_SEED] * run_cfg.epochs
    return torch.randint(MASK_SEEDS, (run_cfg.epochs,), generator=generator).tolist()


def score(
    model,
    batch: Rollouts,
    run_cfg: MDMRun,
    seed: int,
    *,
    no_grad: bool = False,
    estimator=None,
    temperature=None,
):
    """(logp [B, L], passes) of the batch's completions by `estimator` (the run's by
    default), with the prompt mask drawn from `seed` (equal seeds, equal masks);
    `temperature` [B, L]: a τ per token (Co-GRPO's step τ_s), else the run's."""
    fn = mdm_logprob.entry(estimator or run_cfg.estimator).fn
    with torch.set_grad_enabled(not no_grad):
        return fn(
            model,
            batch.extras["prompt_ids"],
            batch.response_ids,
            batch.extras["reveal"],
            run_cfg.logprob,
            generator=torch.Generator().manual_seed(int(seed)),
            **({} if temperature is None else {"temperature": temperature}),
        )


def estimator_gap(model, batch: Rollouts, run_cfg: MDMRun, seed: int, tau=None) -> float:
    """Mean |one_step − exact_steps| per completion token on the batch (same mask seed)."""
    values = [
        score(model, batch, run_cfg, seed, no_grad=True, estimator=name, temperature=tau)[0]
        for name in ("one_step", "exact_steps")
    ]
    mask = batch.response_mask.bool()
    return float((values[0] - values[1]).abs()[mask].mean())


def held_out(
    engine: MDMEngine,
    tokenizer,
    task,
    examples,
    run_cfg: MDMRun,
    run: Run,
    step: int,
    spent: dict,
    schedule=None,
) -> dict:
    """Held-out greedy accuracy (full reward) and reward (τ_s = 0), and the sampled
    reward at τ_s, as evaluate.py names them; logged with `spent` (budget/samples,
    time/elapsed_s: the arena's x axis and run time)."""
    scores = {}
    prompts, _ = encode(tokenizer, examples, run_cfg.sampling.length, engine.model.eos_id)
    for name, temperature in (("greedy", 0.0), ("sampled", None)):
        request = engine_sampling(run_cfg.sampling, temperature)
        policy = schedule.policy if schedule else None  # greedy: its mean schedule
        out = engine.generate(prompts, 1, request, torch.Generator().manual_seed(step), policy)
        columns = {c: [e[c] for e in examples] for c in task.columns}
        rewards = task.reward([e["prompt"] for e in examples], out.texts, **columns)
        if name == "greedy":
            scores["eval/greedy_accuracy"] = sum(r >= 1.0 for r in rewards) / len(rewards)
        scores[f"eval/{name}_reward"] = sum(rewards) / len(rewards)
    scores.update(spent)
    run.log(step, scores, kind="eval")
    return {"step": step, **scores}
